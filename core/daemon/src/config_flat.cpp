// flat_config(): the configuration as the reference's flat dictionary for
// legacy health plugins.
#include "config_reader.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>

namespace pvc {

// The flat configuration dictionary the reference gives health plugins.
//
// The reference builds its dictionary in groups, and a group exists only when
// its function is enabled: the networking keys only with enable_networking,
// the Ceph keys only with enable_storage. A key of a disabled group is absent,
// not None: a legacy plugin reading it fails its run (KeyError) and changes
// nothing, as on a reference node, instead of running on None values.
// Keys of our own (libvirt_uri, plugin_timeout, ...) are not in it: no legacy
// plugin can know them.
//
// The core gives the keys of its own settings (identity, functions,
// coordinators, intervals, directories, logging). Every other key is a
// module's and comes from it (Module::flat_keys, as its configure read it):
// the network module gives the networking group, the storage module the Ceph
// keys, the fencing module (`always`) fence_intervals, suicide_intervals,
// successful_fence, failed_fence and ipmi_hostname/username/password, the
// hypervisor module migration_target_selector, console_log_directory and
// console_log_lines. A module that is not loaded gives nothing: for the
// networking and Ceph groups that is the reference's rule; the hypervisor's
// three keys, which the reference has on every node, are absent on a node
// without the hypervisor (no bundled plugin reads them).

namespace {

using nlohmann::json;

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

    j["plugin_directory"] = c.plugin_directory.string();
    j["dynamic_directory"] = path_or_null(c.dynamic_directory);
    j["log_directory"] = path_or_null(c.log_directory);
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
    j["node_log_lines"] = c.node_log_lines;

    // The reference adds static_data with the Ceph keys, but its start-up
    // banner reads it on every node: a reference node without storage does
    // not start at all. Every node of ours has it.
    j["static_data"] = c.host.static_data;
    j["pvcnoded_version"] = c.pvcnoded_version;
}

}  // namespace

nlohmann::json flat_config(const Config& c) {
    json j = json::object();
    general_keys(c, j);
    // The loaded modules' keys (Module::flat_keys).
    for (const auto& [key, value] : c.module_keys.items()) j[key] = value;
    return j;
}

}  // namespace pvc
