// The embedded Python interpreter for legacy health plugins
// (docs/sdk-guide.md §7.3): one process-wide main interpreter, started on first
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

// The interpreter lives in its own library, `pvcnoded-python.so` beside
// libpvc-sdk (python_host.cpp, linked with libpython), opened on the first
// Python plugin: a daemon without Python plugins never maps libpython (about
// 2.4 MiB of RSS). The functions below open it when called
// (python_host_loader.cpp); it is never closed.

// Executes `file` as module `plugin_script`, constructs MonitoringPluginScript
// and calls setup(). Blocks while the plugin's code runs; thread-safe.
PythonLoad load_python_plugin(const std::filesystem::path& file, const nlohmann::json& flat_config, Logger log,
                              std::shared_ptr<zk::Session> zk, std::shared_ptr<const NodeView> node);

// Starts the interpreter now (idempotent); false (with a logged reason) if it cannot start.
bool start_python(const Logger& log);
// True once the interpreter has been started in this process.
bool python_started();

// What the library exports, under the C name in python_host_entry: the
// library is built from the same sources as the daemon, so C++ types cross.
struct PythonHostApi {
    PythonLoad (*load_python_plugin)(const std::filesystem::path&, const nlohmann::json&, Logger,
                                     std::shared_ptr<zk::Session>, std::shared_ptr<const NodeView>);
    bool (*start_python)(const Logger&);
    bool (*python_started)();
};
inline constexpr const char* python_host_entry = "pvc_python_host_api_v1";
inline constexpr const char* python_host_library = "pvcnoded-python.so";

}  // namespace pvc::health
