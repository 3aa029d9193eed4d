// pvcnoded.yaml → pvc::Config (docs/operations.md). Every problem is
// collected with its YAML path and line before anything is thrown, so an
// operator fixes a file in one pass.
#include "config_reader.hpp"

#include <cerrno>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "pvc/strings.hpp"

#ifndef PVC_VERSION
#define PVC_VERSION "unknown"
#endif

namespace pvc {

// ---------------------------------------------------------------------------
// Problems and errors

namespace {
std::string summarize(const std::string& file, const std::vector<ConfigProblem>& problems) {
    std::string out = fmt::format("{}: {} configuration problem{}", file, problems.size(),
                                  problems.size() == 1 ? "" : "s");
    for (const auto& p : problems) out += "\n" + p.to_string(file);
    return out;
}
}  // namespace

ConfigError::ConfigError(std::string file_, std::vector<ConfigProblem> problems_)
    : std::runtime_error(summarize(file_, problems_)), file(std::move(file_)), problems(std::move(problems_)) {}

std::filesystem::path config_path(const std::optional<std::string>& cli_value) {
    if (cli_value && !cli_value->empty()) return *cli_value;
    if (const char* env = std::getenv("PVCD_CONFIG_FILE"); env && *env) return env;
    return "/etc/pvc/pvcnoded.yaml";
}

// ---------------------------------------------------------------------------
// Reading the tree (pvc::ConfigNode) into the problem list

namespace {

using At = ConfigNode;

// The core's reads: ConfigNode's typed getters over one problem list. Every
// key the core looks up goes through child(), which records its path: the
// module-boundary test proves from it that the core reads no module's key.
class Reader {
public:
    ConfigProblems problems;
    std::set<std::string> keys_read;

    void problem(const At& at, std::string message) { problems.add(at, std::move(message)); }
    void problem(const std::string& path, int line, std::string message) {
        problems.add(path, line, std::move(message));
    }
    At child(const At& parent, const std::string& key) {
        At at = parent.child(key, problems);
        keys_read.insert(at.path());
        return at;
    }
    bool section(const At& at, const char* required_because = nullptr) { return at.section(problems, required_because); }
    std::optional<std::string> string(const At& at) { return at.string(problems); }
    std::optional<std::string> required_string(const At& at, const char* because = "") {
        return at.required_string(problems, because);
    }
    std::optional<long long> integer(const At& at, long long min, long long max) {
        return at.integer(problems, min, max);
    }
    void read_bool(const At& at, bool& out) { at.read(problems, out); }
    void read_int(const At& at, int& out, int min, int max = INT_MAX) { at.read(problems, out, min, max); }
    void read_string(const At& at, std::string& out) { at.read(problems, out); }
    void read_path(const At& at, std::filesystem::path& out) {
        if (auto v = string(at)) out = *v;
    }
};

// One `host` or `host:port` coordinator entry.
bool split_coordinator(const std::string& entry, std::string& host, std::string& port) {
    auto colon = entry.rfind(':');
    host = entry.substr(0, colon);
    port = colon == std::string::npos ? "2181" : entry.substr(colon + 1);
    if (host.empty() || host.find_first_of(" \t,/") != std::string::npos) return false;
    int p = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), p);
    return !port.empty() && ec == std::errc{} && ptr == port.data() + port.size() && p >= 1 && p <= 65535;
}

struct Intervals {
    At at;
    std::map<std::string, std::pair<long long, At>> values;
};

void read_intervals(Reader& r, const At& at, Intervals& out) {
    out.at = at;
    if (!r.section(at)) return;
    struct Spec {
        const char* key;
        long long min;
    };
    // The core's; fence_intervals and suicide_intervals are the fencing module's.
    static const Spec specs[] = {{"vm_shutdown_timeout", 1}, {"keepalive_interval", 1}, {"monitoring_interval", 1},
                                 {"plugin_timeout", 1}};
    for (const auto& s : specs) {
        At v = r.child(at, s.key);
        if (auto n = r.integer(v, s.min, INT_MAX)) out.values.emplace(s.key, std::make_pair(*n, v));
    }
}

// pvc.node, pvc.debug.
void read_identity(Reader& r, const At& pvc, const HostIdentity& host, Config& c) {
    // pvc.node only names the log key /logs/<node>; the node's name everywhere
    // else is the short hostname, also pvc.node's default.
    c.node = host.hostname;
    r.read_string(r.child(pvc, "node"), c.node);
    r.read_bool(r.child(pvc, "debug"), c.debug);
}

// pvc.functions: the four flags of the reference and any other enable_*
// flag, which is a module's (the module host refuses to start when no
// installed module serves a flag that is on).
void read_functions(Reader& r, const At& pvc, Config& c) {
    At functions = r.child(pvc, "functions");
    if (r.section(functions, "")) {
        r.read_bool(r.child(functions, "enable_hypervisor"), c.enable_hypervisor);
        r.read_bool(r.child(functions, "enable_networking"), c.enable_networking);
        r.read_bool(r.child(functions, "enable_storage"), c.enable_storage);
        r.read_bool(r.child(functions, "enable_api"), c.enable_api);
        for (const std::string& key : functions.keys()) {
            if (!key.starts_with("enable_") || c.functions.count(key)) continue;
            bool on = false;
            if (key != "enable_hypervisor" && key != "enable_networking" && key != "enable_storage" &&
                key != "enable_api")
                r.read_bool(r.child(functions, key), on);
            c.functions[key] = on;
        }
    }
    c.functions["enable_hypervisor"] = c.enable_hypervisor;
    c.functions["enable_networking"] = c.enable_networking;
    c.functions["enable_storage"] = c.enable_storage;
    c.functions["enable_api"] = c.enable_api;
}

// pvc.cluster.coordinators: the ZooKeeper connect string and the daemon mode.
// pvc.cluster.networks is the network module's.
void read_cluster(Reader& r, const At& pvc, const HostIdentity& host, Config& c) {
    At cluster = r.child(pvc, "cluster");
    if (r.section(cluster, "")) {
        At coords = r.child(cluster, "coordinators");
        if (!coords.has_value()) {
            r.problem(coords, "required key is missing (the list of coordinator hostnames)");
        } else if (!coords.is_sequence()) {
            r.problem(coords, "expected a list of coordinator hostnames");
        } else {
            std::vector<std::string> connect;
            for (std::size_t i = 0; i < coords.size(); ++i) {
                At item = coords.item(i);
                if (!item.is_scalar() || item.scalar().empty()) {
                    r.problem(item.path(), item.line(), "expected a hostname or host:port");
                    continue;
                }
                std::string h, port;
                if (!split_coordinator(item.scalar(), h, port)) {
                    r.problem(item.path(), item.line(),
                              fmt::format("'{}' is not a hostname or host:port (port 1..65535)", item.scalar()));
                    continue;
                }
                c.coordinators.push_back(item.scalar());
                connect.push_back(h + ":" + port);
                if (h == host.hostname) c.daemon_mode = "coordinator";
            }
            if (coords.size() == 0) r.problem(coords, "at least one coordinator is required");
            c.zookeeper_hosts = join(connect, ",");
        }
    }
    if (c.daemon_mode.empty()) c.daemon_mode = "hypervisor";
}

// The intervals: under pvc.system (the reference) or pvc.system.fencing (the
// seed's sample); both are read and must agree.
void read_all_intervals(Reader& r, const At& system, bool have_system, Config& c) {
    At fencing = r.child(system, "fencing");
    bool have_fencing = have_system && r.section(fencing, "");
    Intervals in_system, in_fencing;
    if (have_system) read_intervals(r, r.child(system, "intervals"), in_system);
    if (have_fencing) read_intervals(r, r.child(fencing, "intervals"), in_fencing);
    if (have_system && !in_system.at.exists() && !in_fencing.at.exists()) {
        r.problem(in_system.at, "required section is missing (pvc.system.fencing.intervals is also accepted)");
    }
    std::map<std::string, long long> intervals;
    for (const auto& [key, v] : in_system.values) intervals[key] = v.first;
    for (const auto& [key, v] : in_fencing.values) {
        auto other = in_system.values.find(key);
        if (other != in_system.values.end() && other->second.first != v.first) {
            r.problem(v.second, fmt::format("{} here conflicts with {} = {} (line {}); set it in one place",
                                            v.first, other->second.second.path(), other->second.first,
                                            other->second.second.line()));
        }
        intervals[key] = v.first;
    }
    auto interval = [&](const char* key, int& out) {
        if (auto it = intervals.find(key); it != intervals.end()) out = static_cast<int>(it->second);
    };
    interval("vm_shutdown_timeout", c.vm_shutdown_timeout);
    interval("keepalive_interval", c.keepalive_interval);
    interval("plugin_timeout", c.plugin_timeout);
    if (auto it = intervals.find("monitoring_interval"); it != intervals.end())
        c.monitoring_interval = static_cast<int>(it->second);
}

// pvc.system.configuration.directories: the core's four; console_log_directory
// is the hypervisor module's.
void read_directories(Reader& r, const At& configuration, Config& c) {
    At dirs = r.child(configuration, "directories");
    if (!r.section(dirs, "")) return;
    r.read_path(r.child(dirs, "plugin_directory"), c.plugin_directory);
    r.read_path(r.child(dirs, "module_directory"), c.module_directory);
    if (auto v = r.required_string(r.child(dirs, "dynamic_directory"), " (runtime files, e.g. /run/pvc)"))
        c.dynamic_directory = *v;
    if (auto v = r.required_string(r.child(dirs, "log_directory"), " (log files, e.g. /var/log/pvc)"))
        c.log_directory = *v;
}

// pvc.system.configuration.logging: console_log_lines is the hypervisor module's.
void read_logging(Reader& r, const At& configuration, Config& c) {
    At logging = r.child(configuration, "logging");
    if (!r.section(logging, "")) return;
    r.read_bool(r.child(logging, "file_logging"), c.file_logging);
    r.read_bool(r.child(logging, "stdout_logging"), c.stdout_logging);
    r.read_bool(r.child(logging, "zookeeper_logging"), c.zookeeper_logging);
    r.read_bool(r.child(logging, "log_colours"), c.log_colours);
    r.read_bool(r.child(logging, "log_dates"), c.log_dates);
    r.read_bool(r.child(logging, "log_keepalives"), c.log_keepalives);
    r.read_bool(r.child(logging, "log_keepalive_cluster_details"), c.log_keepalive_cluster_details);
    r.read_bool(r.child(logging, "log_keepalive_plugin_details"), c.log_keepalive_plugin_details);
    At node_lines = r.child(logging, "node_log_lines");
    if (c.zookeeper_logging && !node_lines.has_value())
        r.problem(node_lines, "required key is missing (required when zookeeper_logging is true)");
    r.read_int(node_lines, c.node_log_lines, 0);
    r.read_int(r.child(logging, "zookeeper_log_interval_ms"), c.zookeeper_log_interval_ms, 0, 60000);
    c.zookeeper_log_batch_ms = 60000;  // when absent: a minute
    r.read_int(r.child(logging, "zookeeper_log_batch_ms"), c.zookeeper_log_batch_ms, 0, 600000);
}

// The core's keys only. Every module's keys (networks, bridge, SR-IOV, Ceph,
// databases, this node's BMC, fencing actions, the migration selector, the
// console log...) are read and validated by its Module::configure.
Config build(const ConfigNode& root, const HostIdentity& host, Reader& r) {
    Config c;
    c.host = host;
    c.pvcnoded_version = PVC_VERSION;

    At pvc = r.child(root, "pvc");
    if (!root.is_map() && !root.is_null()) {
        r.problem("pvc", 1, "the document must be a mapping with a top-level 'pvc' section");
        return c;
    }
    if (!r.section(pvc, "")) return c;

    read_identity(r, pvc, host, c);
    read_functions(r, pvc, c);
    read_cluster(r, pvc, host, c);

    At system = r.child(pvc, "system");
    bool have_system = r.section(system, "");
    read_all_intervals(r, system, have_system, c);
    At configuration = r.child(system, "configuration");
    if (have_system && r.section(configuration, "")) {
        read_directories(r, configuration, c);
        read_logging(r, configuration, c);
    }
    return c;
}

}  // namespace

Config read_config(const ConfigNode& document, ConfigProblems& problems, const std::optional<HostIdentity>& host,
                   std::set<std::string>* keys_read) {
    Reader r;
    Config c = build(document, host ? *host : this_host_identity(), r);
    for (const auto& p : r.problems.list()) problems.add(p.path, p.line, p.message);
    if (keys_read) keys_read->insert(r.keys_read.begin(), r.keys_read.end());
    c.document = document;
    return c;
}

Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::optional<HostIdentity>& host) {
    ConfigProblems problems;
    Config c = read_config(parse_config_tree(yaml_text, name_for_errors), problems, host);
    if (!problems.empty()) throw ConfigError(name_for_errors, problems.sorted());
    return c;
}

std::string read_config_file(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        int err = errno;
        throw ConfigError(file.string(), {{"", 0, fmt::format("cannot read the configuration file: {}",
                                                                std::strerror(err))}});
    }
    std::ostringstream text;
    text << in.rdbuf();
    if (in.bad()) throw ConfigError(file.string(), {{"", 0, "cannot read the configuration file"}});
    return text.str();
}

Config load_config(const std::filesystem::path& file, const std::optional<HostIdentity>& host) {
    return parse_config(read_config_file(file), file.string(), host);
}

}  // namespace pvc
