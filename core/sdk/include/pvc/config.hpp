// The node daemon's configuration: pvcnoded.yaml parsed into an immutable,
// typed value (docs/operations.md). Loading reports every problem at once,
// each with its YAML path and line.
//
// The types are the SDK's; the functions declared here (the YAML reader,
// flat(), the host identity) are pvcnoded's own and not exported by
// libpvc-sdk: a module gets its configuration from the daemon, it never reads it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/config_tree.hpp"

namespace pvc {

// Exit status for a configuration error (EX_CONFIG).
inline constexpr int exit_config_error = 78;

// Host identity, derived from the kernel hostname, never from the file.
struct HostIdentity {
    std::string fqdn;       // gethostname()
    std::string hostname;   // fqdn up to the first '.': the node's name in ZooKeeper
    std::string domain;     // after the first '.', "" if none
    std::string node_id;    // last run of digits in hostname, "0" if none ("01" stays "01")
    // [logical CPU count, uname -r, uname -o, uname -m]
    std::vector<std::string> static_data;

    static HostIdentity from_hostname(const std::string& fqdn);
    static HostIdentity of_this_host();
};

struct NetworkRole {                       // pvc.cluster.networks.<role> + networking.<role>
    std::optional<std::string> domain;
    std::optional<std::string> network;       // CIDR, strict
    std::optional<std::string> floating_ip;   // addr/prefix
    std::optional<std::string> gateway;       // upstream only
    std::optional<std::string> device;
    std::optional<int> mtu;
    std::optional<std::string> address;       // as written: "by-id" or addr/prefix
    std::optional<std::string> dev_ip;        // derived: addr/prefix of this node
};

struct DatabaseConfig {
    std::optional<std::string> host;
    std::optional<int> port;
    std::optional<std::string> name;
    std::optional<std::string> user;
    std::optional<std::string> pass;
};

struct SriovDevice {
    std::string phy;
    std::optional<int> mtu;
    int vfcount = 0;
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
    NetworkRole upstream, cluster, storage;
    DatabaseConfig dns_database, metadata_database;

    // pvc.system.intervals (also accepted under pvc.system.fencing.intervals).
    // fence_intervals and suicide_intervals are the fencing module's
    // (Module::configure; it adds them to the flat dictionary).
    int vm_shutdown_timeout = 60;
    int keepalive_interval = 5;
    std::optional<int> monitoring_interval;  // unset: a pass per keepalive
    int plugin_timeout = 30;

    // pvc.system.fencing.ipmi: this node's own BMC. The core's: it shows the
    // host in the banner, registers the three in ZooKeeper at every start
    // (with or without the fencing module: the
    // peers fence this node with them), checks the BMC (with the
    // extra ipmitool arguments) and gives them to legacy plugins (the `ipmi`
    // plugin). The rest of pvc.system.fencing (actions, ipmi.timeout,
    // saving_throws, suicide_command) is the fencing module's.
    std::string ipmi_hostname;
    std::string ipmi_username = "null";
    std::string ipmi_password = "null";
    // Ours (modules/fencing/README.md): extra arguments of every ipmitool call
    // this node makes, its own check and, in the fencing module, its fences.
    std::vector<std::string> ipmitool_args;

    // pvc.system.migration
    std::string migration_target_selector = "mem";

    // pvc.system.configuration.directories
    std::filesystem::path plugin_directory = "/usr/share/pvc/plugins";
    std::filesystem::path module_directory;  // default: the installed module dir
    std::filesystem::path dynamic_directory;
    std::filesystem::path log_directory;
    std::filesystem::path console_log_directory;

    // pvc.system.configuration.logging
    bool file_logging = false;
    bool stdout_logging = false;
    bool zookeeper_logging = false;
    bool log_colours = false;
    bool log_dates = false;
    bool log_keepalives = false;
    bool log_keepalive_cluster_details = false;
    bool log_keepalive_plugin_details = false;
    int console_log_lines = 0;
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

    // pvc.system.configuration.networking
    std::optional<std::string> bridge_dev;
    std::optional<int> bridge_mtu;
    bool enable_sriov = false;
    std::vector<SriovDevice> sriov_devices;

    // pvc.system.configuration.storage
    std::optional<std::string> ceph_config_file;
    std::optional<std::string> ceph_admin_keyring;

    std::string pvcnoded_version;

    // The whole document, for modules to read their own keys (Module::configure).
    ConfigNode document;
    // Keys the loaded modules add to the flat dictionary (Module::flat_keys).
    nlohmann::json module_keys = nlohmann::json::object();

    // The flat configuration dictionary legacy Python plugins see
    // (docs/sdk-guide.md), with the reference's key names.
    nlohmann::json flat() const;
};

class ConfigError : public std::runtime_error {
public:
    ConfigError(std::string file, std::vector<ConfigProblem> problems);
    const std::string file;
    const std::vector<ConfigProblem> problems;
};

// The document as a tree; throws ConfigError on a YAML syntax error only.
ConfigNode parse_config_tree(const std::string& yaml_text, const std::string& name_for_errors);
// The file's text; throws ConfigError if it cannot be read.
std::string read_config_file(const std::filesystem::path& file);
// Reads the core's keys from the tree; every problem goes to `problems`, nothing is thrown.
Config read_config(const ConfigNode& document, ConfigProblems& problems,
                   const std::optional<HostIdentity>& host = std::nullopt);

// Loads and validates the core's keys; throws ConfigError with every problem found.
// `host` overrides the host identity (tests).
Config load_config(const std::filesystem::path& file, const std::optional<HostIdentity>& host = std::nullopt);
Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::optional<HostIdentity>& host = std::nullopt);

// Where the config path comes from: --config, else PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml.
std::filesystem::path config_path(const std::optional<std::string>& cli_value);

}  // namespace pvc
