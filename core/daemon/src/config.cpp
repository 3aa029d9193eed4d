// pvcnoded.yaml → pvc::Config (docs/operations.md). Every problem is
// collected with its YAML path and line before anything is thrown, so an
// operator fixes a file in one pass.
#include "pvc/config.hpp"

#include "config_address.hpp"

#include <arpa/inet.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
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

using namespace address;

using At = ConfigNode;

// The core's reads: ConfigNode's typed getters over one problem list.
class Reader {
public:
    ConfigProblems problems;

    void problem(const At& at, std::string message) { problems.add(at, std::move(message)); }
    void problem(const std::string& path, int line, std::string message) {
        problems.add(path, line, std::move(message));
    }
    At child(const At& parent, const std::string& key) { return parent.child(key, problems); }
    bool section(const At& at, const char* required_because = nullptr) { return at.section(problems, required_because); }
    std::optional<std::string> string(const At& at) { return at.string(problems); }
    std::optional<std::string> required_string(const At& at, const char* because = "") {
        return at.required_string(problems, because);
    }
    std::optional<long long> integer(const At& at, long long min, long long max) {
        return at.integer(problems, min, max);
    }
    std::optional<int> int_value(const At& at, int min, int max = INT_MAX) { return at.int_value(problems, min, max); }
    std::optional<int> required_int(const At& at, int min, int max, const char* because) {
        return at.required_int(problems, min, max, because);
    }
    std::optional<bool> boolean(const At& at) { return at.boolean(problems); }
    void read_bool(const At& at, bool& out) { at.read(problems, out); }
    void read_int(const At& at, int& out, int min, int max = INT_MAX) { at.read(problems, out, min, max); }
    void read_string(const At& at, std::string& out) { at.read(problems, out); }
    void read_path(const At& at, std::filesystem::path& out) {
        if (auto v = string(at)) out = *v;
    }
};

constexpr const char* because_networking = " (required when pvc.functions.enable_networking is true)";
constexpr const char* because_storage = " (required when pvc.functions.enable_storage is true)";

const std::array<const char*, 5> selectors = {"mem", "memprov", "load", "vcpus", "vms"};

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

// pvc.cluster.networks.<role> + pvc.system.configuration.networking.<role>
// With networking on, a side whose parent section is missing is skipped (the
// parent is reported once) while the other side is still validated.
void read_network_role(Reader& r, const std::string& role, const At& cluster_net, const At& sys_net,
                       bool networking, bool cluster_parent_ok, bool sys_parent_ok, const HostIdentity& host,
                       NetworkRole& out) {
    if (cluster_net.has_value()) {
        out.domain = r.string(r.child(cluster_net, "domain"));
        if (role == "upstream") out.gateway = r.string(r.child(cluster_net, "gateway"));
    }
    if (sys_net.has_value()) {
        out.device = r.string(r.child(sys_net, "device"));
        out.mtu = r.int_value(r.child(sys_net, "mtu"), 68, 65535);
    }
    // Without networking these keys are informative only and are not validated.
    if (!networking) {
        if (cluster_net.has_value()) {
            out.network = r.string(r.child(cluster_net, "network"));
            out.floating_ip = r.string(r.child(cluster_net, "floating_ip"));
        }
        if (sys_net.has_value()) out.address = r.string(r.child(sys_net, "address"));
        return;
    }

    bool have_cluster = cluster_parent_ok && r.section(cluster_net, because_networking);
    bool have_sys = sys_parent_ok && r.section(sys_net, because_networking);

    std::optional<IpNetwork> network;
    if (have_cluster) {
        At at = r.child(cluster_net, "network");
        out.network = r.required_string(at, because_networking);
        if (out.network) {
            std::string why;
            network = parse_network(*out.network, why);
            if (!network) r.problem(at, fmt::format("'{}' is {}", *out.network, why));
        }

        At fl = r.child(cluster_net, "floating_ip");
        out.floating_ip = r.required_string(fl, because_networking);
        if (out.floating_ip) {
            auto slash = out.floating_ip->find('/');
            auto addr = parse_ip(out.floating_ip->substr(0, slash));
            if (!addr) {
                r.problem(fl, fmt::format("'{}' is not a valid IP address", *out.floating_ip));
            } else if (slash != std::string::npos && !parse_prefix(out.floating_ip->substr(slash + 1), addr->bits())) {
                r.problem(fl, fmt::format("'{}' has an invalid prefix length", *out.floating_ip));
            } else if (network && !network->is_host(*addr)) {
                r.problem(fl, fmt::format("'{}' is not a usable host address of {}", *out.floating_ip,
                                          network->to_string()));
            }
        }

        if (out.gateway) {
            auto gw = parse_ip(*out.gateway);
            At g = r.child(cluster_net, "gateway");
            if (!gw)
                r.problem(g, fmt::format("'{}' is not a valid IP address", *out.gateway));
            else if (network && gw->family != network->address.family)
                r.problem(g, fmt::format("'{}' is not of the same address family as {}", *out.gateway,
                                         network->to_string()));
        }
    }

    if (have_sys) {
        At dev = r.child(sys_net, "device");
        if (!dev.has_value()) r.problem(dev, fmt::format("required key is missing{}", because_networking));

        At at = r.child(sys_net, "address");
        out.address = r.required_string(at, because_networking);
        if (out.address && network) {
            if (*out.address == "by-id") {
                // node_id counts usable hosts from 1. node_id 0 (no digits in
                // the hostname) is index -1: the last usable host, as the
                // reference does.
                u128 count = network->last_host() - network->first_host() + 1;
                u128 id = 0;
                bool overflow = false;
                for (char ch : host.node_id) {
                    if (id > (~u128{0} - 9) / 10) overflow = true;
                    id = id * 10 + static_cast<u128>(ch - '0');
                }
                if (!overflow && id == 0) {
                    out.dev_ip = fmt::format("{}/{}", format_ip({network->address.family, network->last_host()}),
                                             network->prefix);
                } else if (overflow || id > count) {
                    r.problem(at, fmt::format("by-id: node id {} of host '{}' is beyond the usable hosts of {}; "
                                              "use a static address",
                                              host.node_id, host.hostname, network->to_string()));
                } else {
                    IpAddress a{network->address.family, network->first_host() + (id - 1)};
                    out.dev_ip = fmt::format("{}/{}", format_ip(a), network->prefix);
                }
            } else {
                auto slash = out.address->find('/');
                auto addr = parse_ip(out.address->substr(0, slash));
                if (slash == std::string::npos) {
                    r.problem(at, fmt::format("'{}' must be 'by-id' or an address with its prefix (addr/prefix)",
                                              *out.address));
                } else if (!addr || !parse_prefix(out.address->substr(slash + 1), addr->bits())) {
                    r.problem(at, fmt::format("'{}' is not a valid address/prefix", *out.address));
                } else if (!network->is_host(*addr)) {
                    r.problem(at, fmt::format("'{}' is not a usable host address of {}", *out.address,
                                              network->to_string()));
                } else {
                    out.dev_ip = *out.address;
                }
            }
        }
    }
}

void read_database(Reader& r, const At& at, bool networking, DatabaseConfig& out) {
    if (!networking) {
        if (!at.has_value() || !at.is_map()) return;
        out.host = r.string(r.child(at, "host"));
        out.port = r.int_value(r.child(at, "port"), 1, 65535);
        out.name = r.string(r.child(at, "name"));
        out.user = r.string(r.child(at, "user"));
        out.pass = r.string(r.child(at, "pass"));
        return;
    }
    if (!r.section(at, because_networking)) return;
    out.host = r.required_string(r.child(at, "host"), because_networking);
    out.port = r.required_int(r.child(at, "port"), 1, 65535, because_networking);
    out.name = r.required_string(r.child(at, "name"), because_networking);
    out.user = r.required_string(r.child(at, "user"), because_networking);
    // Never echo the password: only its presence and type are checked.
    out.pass = r.required_string(r.child(at, "pass"), because_networking);
}

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

    // identity
    // pvc.node only names the log key /logs/<node>; the node's name everywhere
    // else is the short hostname, also pvc.node's default, as in the reference.
    c.node = host.hostname;
    r.read_string(r.child(pvc, "node"), c.node);
    r.read_bool(r.child(pvc, "debug"), c.debug);

    // pvc.functions
    At functions = r.child(pvc, "functions");
    if (r.section(functions, "")) {
        r.read_bool(r.child(functions, "enable_hypervisor"), c.enable_hypervisor);
        r.read_bool(r.child(functions, "enable_networking"), c.enable_networking);
        r.read_bool(r.child(functions, "enable_storage"), c.enable_storage);
        r.read_bool(r.child(functions, "enable_api"), c.enable_api);
        // Any other enable_* flag is a module's: the module host refuses to
        // start when no installed module serves a flag that is on.
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

    // pvc.cluster
    At cluster = r.child(pvc, "cluster");
    At networks;
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
                int line = item.line();
                const std::string& path = item.path();
                if (!item.is_scalar() || item.scalar().empty()) {
                    r.problem(path, line, "expected a hostname or host:port");
                    continue;
                }
                std::string h, port;
                if (!split_coordinator(item.scalar(), h, port)) {
                    r.problem(path, line,
                              fmt::format("'{}' is not a hostname or host:port (port 1..65535)", item.scalar()));
                    continue;
                }
                c.coordinators.push_back(item.scalar());
                connect.push_back(h + ":" + port);
                if (h == host.hostname) c.daemon_mode = "coordinator";
            }
            if (coords.size() == 0) r.problem(coords, "at least one coordinator is required");
            for (std::size_t i = 0; i < connect.size(); ++i) c.zookeeper_hosts += (i ? "," : "") + connect[i];
        }
        networks = r.child(cluster, "networks");
    }
    if (c.daemon_mode.empty()) c.daemon_mode = "hypervisor";

    // pvc.system
    At system = r.child(pvc, "system");
    bool have_system = r.section(system, "");
    At fencing = r.child(system, "fencing");
    bool have_fencing = have_system && r.section(fencing, "");

    // Intervals: under pvc.system (the reference) or pvc.system.fencing (the
    // seed's sample); both are read and must agree.
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

    // pvc.system.fencing: the core reads this node's own BMC (Config::ipmi_*);
    // actions, ipmi.timeout, saving_throws and suicide_command are the fencing
    // module's (its Module::configure reports their problems into this list).
    if (have_fencing) {
        At ipmi = r.child(fencing, "ipmi");
        if (r.section(ipmi, "")) {
            r.read_string(r.child(ipmi, "host"), c.ipmi_hostname);
            r.read_string(r.child(ipmi, "user"), c.ipmi_username);
            r.read_string(r.child(ipmi, "pass"), c.ipmi_password);
            At args = r.child(ipmi, "ipmitool_args");
            if (args.has_value() && !args.is_sequence()) {
                r.problem(args, "expected a list of ipmitool arguments, e.g. [\"-C\", \"3\"]");
            } else if (args.has_value()) {
                for (std::size_t i = 0; i < args.size(); ++i) {
                    At item = args.item(i);
                    if (!item.is_scalar() || item.scalar().empty())
                        r.problem(item, "expected a non-empty string");
                    else
                        c.ipmitool_args.push_back(item.scalar());
                }
            }
        }
    }
    if (c.ipmi_hostname.empty())
        c.ipmi_hostname = host.domain.empty() ? host.hostname + "-lom" : host.hostname + "-lom." + host.domain;

    // pvc.system.migration
    At migration = r.child(system, "migration");
    if (have_system && r.section(migration, "")) {
        At sel = r.child(migration, "target_selector");
        if (auto v = r.string(sel)) {
            if (std::find(selectors.begin(), selectors.end(), *v) == selectors.end())
                r.problem(sel, fmt::format("unknown migration target selector '{}': expected one of mem, memprov, "
                                           "load, vcpus, vms (stricter than the reference, which accepts any word)",
                                           *v));
            else
                c.migration_target_selector = *v;
        }
    }

    // pvc.system.configuration
    At configuration = r.child(system, "configuration");
    bool have_configuration = have_system && r.section(configuration, "");
    At sys_networking;
    if (have_configuration) {
        At dirs = r.child(configuration, "directories");
        if (r.section(dirs, "")) {
            r.read_path(r.child(dirs, "plugin_directory"), c.plugin_directory);
            r.read_path(r.child(dirs, "module_directory"), c.module_directory);
            if (auto v = r.required_string(r.child(dirs, "dynamic_directory"), " (runtime files, e.g. /run/pvc)"))
                c.dynamic_directory = *v;
            if (auto v = r.required_string(r.child(dirs, "log_directory"), " (log files, e.g. /var/log/pvc)"))
                c.log_directory = *v;
            // Required with the hypervisor: its module says so (Module::configure).
            r.read_path(r.child(dirs, "console_log_directory"), c.console_log_directory);
        }

        At logging = r.child(configuration, "logging");
        if (r.section(logging, "")) {
            r.read_bool(r.child(logging, "file_logging"), c.file_logging);
            r.read_bool(r.child(logging, "stdout_logging"), c.stdout_logging);
            r.read_bool(r.child(logging, "zookeeper_logging"), c.zookeeper_logging);
            r.read_bool(r.child(logging, "log_colours"), c.log_colours);
            r.read_bool(r.child(logging, "log_dates"), c.log_dates);
            r.read_bool(r.child(logging, "log_keepalives"), c.log_keepalives);
            r.read_bool(r.child(logging, "log_keepalive_cluster_details"), c.log_keepalive_cluster_details);
            r.read_bool(r.child(logging, "log_keepalive_plugin_details"), c.log_keepalive_plugin_details);
            r.read_int(r.child(logging, "console_log_lines"), c.console_log_lines, 0);
            At node_lines = r.child(logging, "node_log_lines");
            if (c.zookeeper_logging && !node_lines.has_value())
                r.problem(node_lines, "required key is missing (required when zookeeper_logging is true)");
            r.read_int(node_lines, c.node_log_lines, 0);
            r.read_int(r.child(logging, "zookeeper_log_interval_ms"), c.zookeeper_log_interval_ms, 0, 60000);
            c.zookeeper_log_batch_ms = 60000;  // when absent: a minute
            r.read_int(r.child(logging, "zookeeper_log_batch_ms"), c.zookeeper_log_batch_ms, 0, 600000);
        }

        sys_networking = r.child(configuration, "networking");
        if (c.enable_networking ? r.section(sys_networking, because_networking) : sys_networking.has_value() &&
                                                                                     r.section(sys_networking)) {
            c.bridge_dev = r.string(r.child(sys_networking, "bridge_device"));
            c.bridge_mtu = r.int_value(r.child(sys_networking, "bridge_mtu"), 68, 65535);
            r.read_bool(r.child(sys_networking, "sriov_enable"), c.enable_sriov);
            At devices = r.child(sys_networking, "sriov_device");
            if (devices.has_value()) {
                if (!devices.is_sequence()) {
                    r.problem(devices, "expected a list of {phy, mtu, vfcount} entries");
                } else {
                    for (std::size_t i = 0; i < devices.size(); ++i) {
                        At item = devices.item(i);
                        if (!item.is_map()) {
                            r.problem(item, "expected a mapping with phy, vfcount and optional mtu");
                            continue;
                        }
                        SriovDevice d;
                        if (auto v = r.required_string(r.child(item, "phy"))) d.phy = *v;
                        if (auto v = r.required_int(r.child(item, "vfcount"), 0, 4096, "")) d.vfcount = *v;
                        d.mtu = r.int_value(r.child(item, "mtu"), 68, 65535);
                        c.sriov_devices.push_back(std::move(d));
                    }
                }
            }
        }

        At storage = r.child(configuration, "storage");
        if (c.enable_storage ? r.section(storage, because_storage) : storage.has_value() && r.section(storage)) {
            At conf = r.child(storage, "ceph_config_file");
            At keyring = r.child(storage, "ceph_admin_keyring");
            c.ceph_config_file = c.enable_storage ? r.required_string(conf, because_storage) : r.string(conf);
            c.ceph_admin_keyring = c.enable_storage ? r.required_string(keyring, because_storage) : r.string(keyring);
        }
    }

    // Networks: only validated (and only required) with networking enabled.
    if (c.enable_networking && cluster.has_value()) r.section(networks, because_networking);
    bool networks_ok = networks.has_value() && networks.is_map();
    bool sys_ok = sys_networking.has_value() && sys_networking.is_map();
    for (const char* role : {"cluster", "storage", "upstream"}) {
        NetworkRole& out = std::string(role) == "cluster" ? c.cluster
                           : std::string(role) == "storage" ? c.storage
                                                            : c.upstream;
        read_network_role(r, role, r.child(networks, role), r.child(sys_networking, role), c.enable_networking,
                          networks_ok, sys_ok, host, out);
    }

    // pvc.coordinator (databases)
    At coordinator = r.child(pvc, "coordinator");
    if (c.enable_networking) {
        if (r.section(coordinator, because_networking)) {
            At dns = r.child(coordinator, "dns");
            At metadata = r.child(coordinator, "metadata");
            if (r.section(dns, because_networking)) read_database(r, r.child(dns, "database"), true, c.dns_database);
            if (r.section(metadata, because_networking))
                read_database(r, r.child(metadata, "database"), true, c.metadata_database);
        }
    } else if (coordinator.has_value() && coordinator.is_map()) {
        read_database(r, r.child(r.child(coordinator, "dns"), "database"), false, c.dns_database);
        read_database(r, r.child(r.child(coordinator, "metadata"), "database"), false, c.metadata_database);
    }

    return c;
}

}  // namespace

Config read_config(const ConfigNode& document, ConfigProblems& problems, const std::optional<HostIdentity>& host) {
    Reader r;
    Config c = build(document, host ? *host : HostIdentity::of_this_host(), r);
    for (const auto& p : r.problems.list()) problems.add(p.path, p.line, p.message);
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
