#include "model.hpp"

#include <algorithm>

#include "common.hpp"
#include "domain_xml.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"

namespace pvc::cli {

using schema::path;

bool lenient(const std::string& s) { return zk::lenient_bool(s).value_or(false); }

std::vector<std::string> node_names() { return children(path("base.node")); }
std::vector<std::string> vm_uuids() { return children(path("base.domain")); }

NodeView read_node(const std::string& n) {
    NodeView v;
    v.name = n;
    v.mode = read(path("node.mode", {n}));
    v.daemon_state = read_opt(path("node.state.daemon", {n})).value_or("stop");
    v.router_state = read_opt(path("node.state.router", {n})).value_or("client");
    v.domain_state = read_opt(path("node.state.domain", {n})).value_or("unknown");
    v.pvc_version = read(path("node.data.pvc_version", {n}));
    auto st = split(read(path("node.data.static", {n})), ' ');
    if (st.size() > 0) v.cpu_count = st[0];
    if (st.size() > 1) v.kernel = st[1];
    if (st.size() > 2) v.os = st[2];
    if (st.size() > 3) v.arch = st[3];
    v.health = to_long(read(path("node.monitoring.health", {n})));
    v.health_plugins = split(read(path("node.monitoring.plugins", {n})), ' ');
    v.load = to_double(read(path("node.cpu.load", {n}))).value_or(0);
    v.domains_count = to_long(read(path("node.count.provisioned_domains", {n}))).value_or(0);
    v.vcpu_alloc = to_long(read(path("node.vcpu.allocated", {n}))).value_or(0);
    v.mem_total = to_long(read(path("node.memory.total", {n}))).value_or(0);
    v.mem_used = to_long(read(path("node.memory.used", {n}))).value_or(0);
    v.mem_free = to_long(read(path("node.memory.free", {n}))).value_or(0);
    v.mem_alloc = to_long(read(path("node.memory.allocated", {n}))).value_or(0);
    v.mem_prov = to_long(read(path("node.memory.provisioned", {n}))).value_or(0);
    v.keepalive = to_long(read(path("node.keepalive", {n}))).value_or(0);
    for (auto& d : split(read(path("node.running_domains", {n})), ' '))
        if (is_uuid(d)) v.running_domains.push_back(d);  // skips the registration quirk "0"
    return v;
}

nlohmann::json NodeView::to_json() const {
    return {
        {"name", name},
        {"daemon_mode", mode},
        {"daemon_state", daemon_state},
        {"coordinator_state", router_state},
        {"domain_state", domain_state},
        {"pvc_version", pvc_version},
        {"cpu_count", to_long(cpu_count) ? nlohmann::json(*to_long(cpu_count)) : nlohmann::json(nullptr)},
        {"kernel", kernel},
        {"os", os},
        {"arch", arch},
        {"health", health ? nlohmann::json(*health) : nlohmann::json("N/A")},
        {"health_plugins", health_plugins},
        {"load", load},
        {"domains_count", domains_count},
        {"running_domains", running_domains},
        {"vcpu", {{"total", to_long(cpu_count).value_or(0)}, {"allocated", vcpu_alloc}}},
        {"memory",
         {{"total", mem_total}, {"used", mem_used}, {"free", mem_free}, {"allocated", mem_alloc},
          {"provisioned", mem_prov}}},
        {"keepalive", keepalive},
    };
}

VmView read_vm(const std::string& u) {
    VmView v;
    v.uuid = u;
    v.name = read(path("domain.name", {u}));
    v.state = read(path("domain.state", {u}));
    v.node = read(path("domain.node", {u}));
    v.last_node = read(path("domain.last_node", {u}));
    v.failed_reason = read(path("domain.failed_reason", {u}));
    v.node_limit = split(read(path("domain.meta.node_limit", {u})), ',');
    v.node_selector = read_opt(path("domain.meta.node_selector", {u})).value_or("none");
    v.migration_method = read_opt(path("domain.meta.migrate_method", {u})).value_or("none");
    v.profile = read(path("domain.profile", {u}));
    v.vnc = read(path("domain.console.vnc", {u}));
    v.autostart = read(path("domain.meta.autostart", {u})) == "True";
    v.rbd_list = split(read(path("domain.storage.volumes", {u})), ',');
    for (const auto& t : children(path("domain.meta.tags", {u}))) {
        VmTag tag;
        tag.name = read(path("tag.name", {u, t}));
        if (tag.name.empty()) tag.name = t;
        tag.type = read(path("tag.type", {u, t}));
        tag.is_protected = lenient(read(path("tag.protected", {u, t})));
        v.tags.push_back(tag);
    }
    v.xml = read(path("domain.xml", {u}));
    try {
        DomainXml x = parse_domain_xml(v.xml);
        v.memory_mib = x.memory_mib();
        v.vcpus = x.vcpus;
        v.description = x.description;
        for (const auto& i : x.interfaces)
            v.interfaces.push_back({{"type", i.type}, {"mac", i.mac}, {"source", i.source}, {"model", i.model}});
        // A network disk shows as its protocol (rbd), as the reference client does.
        for (const auto& d : x.disks)
            v.disks.push_back(
                {{"type", d.type == "network" ? d.protocol : d.type}, {"name", d.source}, {"target", d.target}});
    } catch (const DomainXmlError&) {
        // Bad XML in the cluster: show what the keys say.
    }
    return v;
}

nlohmann::json VmView::to_json(bool with_xml) const {
    nlohmann::json tags_json = nlohmann::json::array();
    for (const auto& t : tags) tags_json.push_back({{"name", t.name}, {"type", t.type}, {"protected", t.is_protected}});
    auto vnc_parts = split(vnc, ':');
    nlohmann::json j = {
        {"name", name},
        {"uuid", uuid},
        {"state", state},
        {"node", node},
        {"last_node", last_node},
        {"migrated", last_node.empty() ? "no" : "from " + last_node},
        {"failed_reason", failed_reason},
        {"node_limit", node_limit},
        {"node_selector", node_selector},
        {"node_autostart", autostart},
        {"migration_method", migration_method},
        {"profile", profile},
        {"tags", tags_json},
        {"rbd_list", rbd_list},
        {"memory", memory_mib ? nlohmann::json(*memory_mib) : nlohmann::json(nullptr)},
        {"vcpu", vcpus ? nlohmann::json(*vcpus) : nlohmann::json(nullptr)},
        {"description", description},
        {"vnc", {{"listen", vnc_parts.size() > 0 ? vnc_parts[0] : ""}, {"port", vnc_parts.size() > 1 ? vnc_parts[1] : ""}}},
        {"networks", interfaces},
        {"disks", disks},
    };
    if (with_xml) j["xml"] = xml;
    return j;
}

void require_node(const std::string& name) {
    if (name.empty() || name.find('/') != std::string::npos || !session()->exists(path("node.name", {name})))
        throw Failure("no node named '" + name + "' in the cluster");
}

std::optional<std::string> vm_by_name(const std::string& name) { return client::vm_by_name(*session(), name); }

std::string find_vm(const std::string& id) {
    if (is_uuid(id)) {
        std::string lower = id;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
        if (session()->exists(path("domain.name", {lower}))) return lower;
    }
    if (!id.empty() && id.find('/') == std::string::npos)
        if (auto u = vm_by_name(id)) return *u;
    throw Failure("no VM named or with UUID '" + id + "' in the cluster");
}

}  // namespace pvc::cli
