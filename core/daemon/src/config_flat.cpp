// Config::flat(): the configuration as the reference's flat dictionary for
// legacy health plugins.
#include "pvc/config.hpp"

#include <filesystem>

namespace pvc {

// The flat configuration dictionary the reference gives health plugins.
//
// The reference builds its dictionary in groups, and a group exists only when
// its function is enabled: the networking keys (networks, devices, bridge,
// SR-IOV, the DNS and metadata databases) only with enable_networking, the
// Ceph keys only with enable_storage. A key of a disabled group is absent, not
// None: a legacy plugin reading it fails its run (KeyError) and changes
// nothing, as on a reference node, instead of running on None values.
// Keys of our own (libvirt_uri, plugin_timeout, ...) are not in it: no legacy
// plugin can know them.
//
// A module's keys come from the module (Module::flat_keys, read by its own
// configure): the fencing module gives the reference's fence_intervals,
// suicide_intervals, successful_fence and failed_fence, so the dictionary is
// the reference's whole on every node that has it installed (an `always`
// module); on a node without it they are absent, as keys of a function the
// node does not have.

namespace {

using nlohmann::json;

json opt(const auto& v) { return v ? json(*v) : json(nullptr); }
json path_or_null(const std::filesystem::path& p) { return p.empty() ? json(nullptr) : json(p.string()); }
json sub(const std::filesystem::path& p, const char* leaf) {
    return p.empty() ? json(nullptr) : json(p.string() + "/" + leaf);
}

// Keys every reference node has, whatever its functions.
void general_keys(const Config& c, json& j) {
    j["node"] = c.node;
    j["node_hostname"] = c.host.hostname;
    j["node_fqdn"] = c.host.fqdn;
    j["node_domain"] = c.host.domain;
    // The reference keeps the digits as text, and the integer 0 when the
    // hostname has none.
    bool has_digits = std::any_of(c.host.hostname.begin(), c.host.hostname.end(),
                                  [](unsigned char ch) { return std::isdigit(ch); });
    j["node_id"] = has_digits ? json(c.host.node_id) : json(0);
    j["debug"] = c.debug;
    j["daemon_mode"] = c.daemon_mode;
    j["coordinators"] = c.coordinators;

    j["enable_hypervisor"] = c.enable_hypervisor;
    j["enable_networking"] = c.enable_networking;
    j["enable_storage"] = c.enable_storage;
    j["enable_api"] = c.enable_api;

    j["vm_shutdown_timeout"] = c.vm_shutdown_timeout;
    j["keepalive_interval"] = c.keepalive_interval;
    // Passes follow the keepalive unless spaced further apart.
    j["monitoring_interval"] = c.monitoring_interval.value_or(c.keepalive_interval);
    // fence_intervals, suicide_intervals, successful_fence and failed_fence
    // are the fencing module's keys: its Module::flat_keys adds them.

    j["ipmi_hostname"] = c.ipmi_hostname;
    j["ipmi_username"] = c.ipmi_username;
    j["ipmi_password"] = c.ipmi_password;
    j["migration_target_selector"] = c.migration_target_selector;

    j["plugin_directory"] = c.plugin_directory.string();
    j["dynamic_directory"] = path_or_null(c.dynamic_directory);
    j["log_directory"] = path_or_null(c.log_directory);
    j["console_log_directory"] = path_or_null(c.console_log_directory);
    j["dnsmasq_dynamic_directory"] = sub(c.dynamic_directory, "dnsmasq");
    j["pdns_dynamic_directory"] = sub(c.dynamic_directory, "pdns");
    j["nft_dynamic_directory"] = sub(c.dynamic_directory, "nft");
    j["dnsmasq_log_directory"] = sub(c.log_directory, "dnsmasq");
    j["pdns_log_directory"] = sub(c.log_directory, "pdns");
    j["nft_log_directory"] = sub(c.log_directory, "nft");

    j["file_logging"] = c.file_logging;
    j["stdout_logging"] = c.stdout_logging;
    j["zookeeper_logging"] = c.zookeeper_logging;
    j["log_colours"] = c.log_colours;
    j["log_dates"] = c.log_dates;
    j["log_keepalives"] = c.log_keepalives;
    j["log_keepalive_cluster_details"] = c.log_keepalive_cluster_details;
    j["log_keepalive_plugin_details"] = c.log_keepalive_plugin_details;
    j["console_log_lines"] = c.console_log_lines;
    j["node_log_lines"] = c.node_log_lines;

    // The reference adds static_data with the Ceph keys, but its start-up
    // banner reads it on every node: a reference node without storage does
    // not start at all. Every node of ours has it.
    j["static_data"] = c.host.static_data;
    j["pvcnoded_version"] = c.pvcnoded_version;
}

// enable_networking: the three networks, this node's devices and addresses,
// the bridge and SR-IOV settings, the coordinators' databases.
void networking_keys(const Config& c, json& j) {
    for (const auto& [role, n] : {std::pair<const char*, const NetworkRole*>{"upstream", &c.upstream},
                                  {"cluster", &c.cluster},
                                  {"storage", &c.storage}}) {
        std::string p = role;
        j[p + "_domain"] = opt(n->domain);
        j[p + "_network"] = opt(n->network);
        j[p + "_floating_ip"] = opt(n->floating_ip);
        if (p == "upstream") j[p + "_gateway"] = opt(n->gateway);
        j[p + "_dev"] = opt(n->device);
        j[p + "_mtu"] = opt(n->mtu);
        j[p + "_dev_ip"] = n->dev_ip ? json(*n->dev_ip) : opt(n->address);
    }

    j["bridge_dev"] = opt(c.bridge_dev);
    j["bridge_mtu"] = opt(c.bridge_mtu);
    j["enable_sriov"] = c.enable_sriov;
    json devices = json::array();
    for (const auto& d : c.sriov_devices) {
        devices.push_back({{"phy", d.phy}, {"mtu", opt(d.mtu)}, {"vfcount", d.vfcount}});
    }
    j["sriov_device"] = std::move(devices);

    for (const auto& [prefix, db] : {std::pair<const char*, const DatabaseConfig*>{"pdns", &c.dns_database},
                                     {"metadata", &c.metadata_database}}) {
        std::string p = std::string(prefix) + "_postgresql_";
        j[p + "host"] = opt(db->host);
        j[p + "port"] = opt(db->port);
        j[p + "dbname"] = opt(db->name);
        j[p + "user"] = opt(db->user);
        j[p + "password"] = opt(db->pass);
    }
}

// enable_storage: the Ceph client files.
void storage_keys(const Config& c, json& j) {
    j["ceph_config_file"] = opt(c.ceph_config_file);
    j["ceph_admin_keyring"] = opt(c.ceph_admin_keyring);
}

// One row per group of the reference's dictionary: the function that enables
// it (none: always present) and the keys it adds.
struct FlatGroup {
    bool Config::*enabled;
    void (*add)(const Config&, json&);
};
constexpr FlatGroup flat_groups[] = {
    {nullptr, general_keys},
    {&Config::enable_networking, networking_keys},
    {&Config::enable_storage, storage_keys},
};

}  // namespace

nlohmann::json Config::flat() const {
    json j = json::object();
    for (const auto& g : flat_groups)
        if (!g.enabled || this->*g.enabled) g.add(*this, j);
    // The loaded modules' reference keys (Module::flat_keys): present when their function is.
    for (const auto& [key, value] : module_keys.items()) j[key] = value;
    return j;
}

}  // namespace pvc
