// What the client reads of nodes and VMs, and their JSON shape
// (`--format json`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pvc::cli {

struct NodeView {
    std::string name;
    std::string mode, daemon_state, router_state, domain_state, pvc_version;
    std::string cpu_count, kernel, os, arch;  // from staticdata
    std::optional<long> health;               // monitoring_health; nullopt = N/A
    std::vector<std::string> health_plugins;
    double load = 0;
    long domains_count = 0, vcpu_alloc = 0;
    long mem_total = 0, mem_used = 0, mem_free = 0, mem_alloc = 0, mem_prov = 0;
    long keepalive = 0;
    std::vector<std::string> running_domains;
    nlohmann::json to_json() const;
};

struct VmTag {
    std::string name, type;
    bool is_protected = false;
};

struct VmView {
    std::string uuid, name, state, node, last_node, failed_reason;
    std::vector<std::string> node_limit;
    std::string node_selector, migration_method, profile, vnc;
    bool autostart = false;
    std::vector<std::string> rbd_list;
    std::vector<VmTag> tags;
    // from the XML
    std::optional<long> memory_mib, vcpus;
    std::string description;
    nlohmann::json interfaces = nlohmann::json::array();
    nlohmann::json disks = nlohmann::json::array();
    std::string xml;
    nlohmann::json to_json(bool with_xml = false) const;
};

NodeView read_node(const std::string& name);
std::vector<std::string> node_names();
VmView read_vm(const std::string& uuid);
std::vector<std::string> vm_uuids();

// The node `name`; Failure naming it if it is not in the cluster.
void require_node(const std::string& name);
// The UUID of the VM named `name_or_uuid` (a UUID or a name); Failure if none.
std::string find_vm(const std::string& name_or_uuid);
// The UUID of a VM named `name`, if any.
std::optional<std::string> vm_by_name(const std::string& name);

// The reference's lenient boolean ("True"/"true"/"1"...), false when unparsable.
bool lenient(const std::string& s);

}  // namespace pvc::cli
