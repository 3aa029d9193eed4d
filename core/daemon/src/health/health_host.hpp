// The health plugin host (docs/architecture.md §5): discovers and
// loads native (.so) and legacy Python plugins, runs passes off the keepalive
// with a per-plugin deadline and collectd-style back-off for failing plugins,
// and writes results and node health to ZooKeeper. It also publishes the
// modules' health items (KeepaliveReport::health) as plugin-like
// module-<name> entries counted in the node health (core/README.md, "Module
// health"). Internal to the core: the daemon's keepalive drives it.
//
// Threads: every plugin call (setup, run, cleanup) runs on its own worker
// thread, never on the io_context nor on the caller. A call that misses its
// deadline is abandoned (threads cannot be cancelled; a Python plugin cannot be
// killed in-process); the plugin is skipped until that call returns.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/config.hpp"
#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/zk.hpp"

namespace pvc {

class HealthHost {
public:
    HealthHost(const Config& cfg, Logger log, std::shared_ptr<zk::Session> zk, Executor& ex);
    ~HealthHost();
    HealthHost(const HealthHost&) = delete;
    HealthHost& operator=(const HealthHost&) = delete;

    // Discover and load plugins in cfg.plugin_directory, call setup() (bounded
    // by plugin_timeout each), write each plugin's initial keys,
    // monitoring_plugins, delete stale monitoring_data children (only if >= 1
    // loaded). Never runs a plugin's run().
    void load();
    // Called by every keepalive tick: starts a pass on a worker thread if the
    // previous pass finished and monitoring_interval (if set) has elapsed.
    // Returns immediately, never blocks.
    void on_keepalive(const std::string& router_state);
    // The modules' health items of one keepalive (KeepaliveReport::health),
    // by module name; a module absent from the map keeps its previous items
    // (e.g. its contribute() threw). Never blocks: a change is published by
    // the next pass, which runs even without plugins while a change waits
    // (core/README.md, "Module health").
    void set_module_health(std::map<std::string, std::vector<KeepaliveReport::HealthItem>> items);
    // Module entries are named <prefix><module>; no plugin may take such a name.
    static constexpr std::string_view module_entry_prefix = "module-";
    // Last node health (100 - sum of deltas, floor 0); nullopt before the first pass.
    std::optional<int> health() const;
    std::vector<std::string> plugin_names() const;
    // Bounded: cleanup() of every plugin with a total bound, then
    // monitoring_health = "None". Later on_keepalive() calls do nothing.
    void shutdown(std::chrono::milliseconds bound);

    // Observability for tests and the benchmark.
    struct PassStats {
        std::uint64_t passes = 0;                  // completed passes
        std::chrono::microseconds last_wall{0};    // wall time of the last pass
        std::chrono::microseconds last_cpu{0};     // process CPU time during the last pass
    };
    PassStats stats() const;
    bool pass_running() const;

    struct Core;  // implementation (shared with worker threads that may outlive the host)

private:
    std::shared_ptr<Core> core_;
};

}  // namespace pvc
