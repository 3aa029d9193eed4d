// The embedded Python interpreter for legacy health plugins
// (health-plugins.md §5): one process-wide main interpreter, started on first
// use, never finalized (a hung plugin thread may still be inside it), with the
// compatibility modules pvcnoded.objects.MonitoringInstance and
// daemon_lib.common registered before any plugin runs. Internal to the core.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "health/loaded_plugin.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"

namespace pvc::health {

// Live view of this node for plugins' `this_node`.
struct NodeView {
    std::string name;
    std::function<std::string()> coordinator_state;
    std::function<std::optional<int>()> health;
};

struct PythonLoad {
    std::shared_ptr<LoadedPlugin> plugin;  // null on failure
    std::string error;                     // str(exception): the logged reason
    std::string traceback;
};

// Executes `file` as module `plugin_script`, constructs MonitoringPluginScript
// and calls setup(). Blocks while the plugin's code runs; thread-safe.
PythonLoad load_python_plugin(const std::filesystem::path& file, const nlohmann::json& flat_config, Logger log,
                              std::shared_ptr<zk::Session> zk, std::shared_ptr<const NodeView> node);

// Starts the interpreter now (idempotent); false (with a logged reason) if it cannot start.
bool start_python(const Logger& log);
// True once the interpreter has been started in this process.
bool python_started();

}  // namespace pvc::health
