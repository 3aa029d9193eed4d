// The node daemon's configuration as the core reads it: pvcnoded.yaml's core
// keys as an immutable, typed value, and the whole document for the modules,
// which read and validate their own keys from it (Module::configure).
//
// Only the types are here: reading the file (the YAML reader, the problem
// list's exception, the flat dictionary of legacy plugins, the host identity)
// is pvcnoded's own (core/daemon/src/config_reader.hpp), not libpvc-sdk's: a
// module gets its configuration from the daemon, it never reads it.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/config_tree.hpp"

namespace pvc {

// This host's names, derived from the kernel hostname.
struct HostIdentity {
    std::string fqdn;       // gethostname()
    std::string hostname;   // fqdn up to the first '.': the node's name in ZooKeeper
    std::string domain;     // after the first '.', "" if none
    std::string node_id;    // last run of digits in hostname, "0" if none ("01" stays "01")
    // [logical CPU count, uname -r, uname -o, uname -m]
    std::vector<std::string> static_data;
};

struct Config {
    // identity
    HostIdentity host;
    std::string node;                   // pvc.node (default: host.hostname)
    std::string daemon_mode;            // "coordinator" | "hypervisor"
    bool debug = false;

    // pvc.functions
    bool enable_hypervisor = false;
    bool enable_networking = false;
    bool enable_storage = false;
    bool enable_api = false;
    // Every pvc.functions.enable_* flag as written, the ones above included:
    // the module host maps each to the module that serves it.
    std::map<std::string, bool> functions;
    bool function_enabled(const std::string& flag) const {
        auto it = functions.find(flag);
        return it != functions.end() && it->second;
    }

    // pvc.cluster
    std::vector<std::string> coordinators;  // as written ("host" or "host:port")
    std::string zookeeper_hosts;            // derived connect string

    // pvc.system.intervals (also accepted under pvc.system.fencing.intervals).
    // fence_intervals and suicide_intervals are the fencing module's.
    int vm_shutdown_timeout = 60;
    int keepalive_interval = 5;
    std::optional<int> monitoring_interval;  // unset: a pass per keepalive
    int plugin_timeout = 30;

    // pvc.system.configuration.directories
    std::filesystem::path plugin_directory = "/usr/share/pvc/plugins";
    std::filesystem::path module_directory;  // default: the installed module dir
    std::filesystem::path dynamic_directory;
    std::filesystem::path log_directory;

    // pvc.system.configuration.logging
    bool file_logging = false;
    bool stdout_logging = false;
    bool zookeeper_logging = false;
    bool log_colours = false;
    bool log_dates = false;
    bool log_keepalives = false;
    bool log_keepalive_cluster_details = false;
    bool log_keepalive_plugin_details = false;
    int node_log_lines = 0;
    // Not in the reference: at most one write of /logs/<node>/messages per
    // this many milliseconds (0: one write per line, as the reference, when
    // zookeeper_log_batch_ms is 0 too).
    int zookeeper_log_interval_ms = 1000;
    // Not in the reference: routine lines (all but warnings and errors) are
    // written at most this many milliseconds after they were logged, in one
    // write of the ring; a warning or error is written at once (within
    // zookeeper_log_interval_ms of the previous write) and takes them along.
    // 0 here (a Config built in code writes routine lines as warnings); the
    // file's default, when the key is absent, is 60000.
    int zookeeper_log_batch_ms = 0;

    std::string pvcnoded_version;

    // The whole document: each module reads and validates its own keys from
    // it (Module::configure); the core reads none of them.
    ConfigNode document;
    // Keys the loaded modules add to the flat dictionary of legacy plugins
    // (Module::flat_keys).
    nlohmann::json module_keys = nlohmann::json::object();
};

}  // namespace pvc
