#include "pvc/schema.hpp"

#include <regex>
#include <stdexcept>

namespace pvc::schema {
namespace {

using C = Class;

// Schema version 10, expanded into full path templates (docs/wire-contract.md §3).
const std::vector<Key> kKeys = {
    // base
    {"base.root", C::base, "/", ""},
    {"base.schema", C::base, "/schema", ""},
    {"base.schema.version", C::base, "/schema/version", "10"},
    {"base.config", C::base, "/config", ""},
    {"base.config.maintenance", C::base, "/config/maintenance", ""},
    {"base.config.primary_node", C::base, "/config/primary_node", ""},
    {"base.config.primary_node.sync_lock", C::base, "/config/primary_node/sync_lock", ""},
    {"base.config.upstream_ip", C::base, "/config/upstream_ip", ""},
    {"base.config.migration_target_selector", C::base, "/config/migration_target_selector", ""},
    {"base.logs", C::base, "/logs", ""},
    {"base.node", C::base, "/nodes", ""},
    {"base.domain", C::base, "/domains", ""},
    {"base.network", C::base, "/networks", ""},
    {"base.storage", C::base, "/ceph", ""},
    {"base.storage.health", C::base, "/ceph/health", ""},
    {"base.storage.util", C::base, "/ceph/util", ""},
    {"base.osd", C::base, "/ceph/osds", ""},
    {"base.pool", C::base, "/ceph/pools", ""},
    {"base.volume", C::base, "/ceph/volumes", ""},
    {"base.snapshot", C::base, "/ceph/snapshots", ""},
    // logs
    {"logs.node", C::logs, "/logs/{}", ""},
    {"logs.messages", C::logs, "/logs/{}/messages", ""},
    // node
    {"node.name", C::node, "/nodes/{}", ""},
    {"node.keepalive", C::node, "/nodes/{}/keepalive", ""},
    {"node.mode", C::node, "/nodes/{}/daemonmode", ""},
    {"node.data.active_schema", C::node, "/nodes/{}/activeschema", ""},
    {"node.data.latest_schema", C::node, "/nodes/{}/latestschema", ""},
    {"node.data.static", C::node, "/nodes/{}/staticdata", ""},
    {"node.data.pvc_version", C::node, "/nodes/{}/pvcversion", ""},
    {"node.ipmi.hostname", C::node, "/nodes/{}/ipmihostname", ""},
    {"node.ipmi.username", C::node, "/nodes/{}/ipmiusername", ""},
    {"node.ipmi.password", C::node, "/nodes/{}/ipmipassword", ""},
    {"node.state.daemon", C::node, "/nodes/{}/daemonstate", ""},
    {"node.state.router", C::node, "/nodes/{}/routerstate", ""},
    {"node.state.domain", C::node, "/nodes/{}/domainstate", "", "flushed"},
    {"node.cpu.load", C::node, "/nodes/{}/cpuload", "", "0.0"},
    {"node.vcpu.allocated", C::node, "/nodes/{}/vcpualloc", "", "0"},
    {"node.memory.total", C::node, "/nodes/{}/memtotal", "", "0"},
    {"node.memory.used", C::node, "/nodes/{}/memused", "", "0"},
    {"node.memory.free", C::node, "/nodes/{}/memfree", "", "0"},
    {"node.memory.allocated", C::node, "/nodes/{}/memalloc", "", "0"},
    {"node.memory.provisioned", C::node, "/nodes/{}/memprov", "", "0"},
    {"node.running_domains", C::node, "/nodes/{}/runningdomains", ""},
    {"node.count.provisioned_domains", C::node, "/nodes/{}/domainscount", "", "0"},
    {"node.count.networks", C::node, "/nodes/{}/networkscount", "", "0"},
    {"node.sriov", C::node, "/nodes/{}/sriov", ""},
    {"node.sriov.pf", C::node, "/nodes/{}/sriov/pf", ""},
    {"node.sriov.vf", C::node, "/nodes/{}/sriov/vf", ""},
    {"node.monitoring.plugins", C::node, "/nodes/{}/monitoring_plugins", ""},
    {"node.monitoring.data", C::node, "/nodes/{}/monitoring_data", ""},
    {"node.monitoring.health", C::node, "/nodes/{}/monitoring_health", ""},
    // health plugin results (node, plugin)
    {"monitoring_plugin.name", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}", ""},
    {"monitoring_plugin.last_run", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}/last_run", ""},
    {"monitoring_plugin.health_delta", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}/health_delta", ""},
    {"monitoring_plugin.message", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}/message", ""},
    {"monitoring_plugin.data", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}/data", ""},
    {"monitoring_plugin.runtime", C::monitoring_plugin, "/nodes/{}/monitoring_data/{}/runtime", ""},
    // SR-IOV (node, pf) and (node, vf)
    {"sriov_pf.phy", C::sriov_pf, "/nodes/{}/sriov/pf/{}", ""},
    {"sriov_pf.mtu", C::sriov_pf, "/nodes/{}/sriov/pf/{}/mtu", ""},
    {"sriov_pf.vfcount", C::sriov_pf, "/nodes/{}/sriov/pf/{}/vfcount", ""},
    {"sriov_vf.phy", C::sriov_vf, "/nodes/{}/sriov/vf/{}", ""},
    {"sriov_vf.pf", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pf", ""},
    {"sriov_vf.mtu", C::sriov_vf, "/nodes/{}/sriov/vf/{}/mtu", ""},
    {"sriov_vf.mac", C::sriov_vf, "/nodes/{}/sriov/vf/{}/mac", ""},
    {"sriov_vf.phy_mac", C::sriov_vf, "/nodes/{}/sriov/vf/{}/phy_mac", ""},
    {"sriov_vf.config", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config", ""},
    {"sriov_vf.config.vlan_id", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/vlan_id", ""},
    {"sriov_vf.config.vlan_qos", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/vlan_qos", ""},
    {"sriov_vf.config.tx_rate_min", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/tx_rate_min", ""},
    {"sriov_vf.config.tx_rate_max", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/tx_rate_max", ""},
    {"sriov_vf.config.spoof_check", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/spoof_check", ""},
    {"sriov_vf.config.link_state", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/link_state", ""},
    {"sriov_vf.config.trust", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/trust", ""},
    {"sriov_vf.config.query_rss", C::sriov_vf, "/nodes/{}/sriov/vf/{}/config/query_rss", ""},
    {"sriov_vf.pci", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pci", ""},
    {"sriov_vf.pci.domain", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pci/domain", ""},
    {"sriov_vf.pci.bus", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pci/bus", ""},
    {"sriov_vf.pci.slot", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pci/slot", ""},
    {"sriov_vf.pci.function", C::sriov_vf, "/nodes/{}/sriov/vf/{}/pci/function", ""},
    {"sriov_vf.used", C::sriov_vf, "/nodes/{}/sriov/vf/{}/used", ""},
    {"sriov_vf.used_by", C::sriov_vf, "/nodes/{}/sriov/vf/{}/used_by", ""},
    // domain (uuid)
    {"domain.name", C::domain, "/domains/{}", ""},
    {"domain.xml", C::domain, "/domains/{}/xml", ""},
    {"domain.state", C::domain, "/domains/{}/state", ""},
    {"domain.profile", C::domain, "/domains/{}/profile", ""},
    {"domain.stats", C::domain, "/domains/{}/stats", ""},
    {"domain.node", C::domain, "/domains/{}/node", ""},
    {"domain.last_node", C::domain, "/domains/{}/lastnode", ""},
    {"domain.failed_reason", C::domain, "/domains/{}/failedreason", ""},
    {"domain.storage.volumes", C::domain, "/domains/{}/rbdlist", ""},
    {"domain.console.log", C::domain, "/domains/{}/consolelog", ""},
    {"domain.console.vnc", C::domain, "/domains/{}/vnc", ""},
    {"domain.meta.autostart", C::domain, "/domains/{}/node_autostart", ""},
    {"domain.meta.migrate_method", C::domain, "/domains/{}/migration_method", ""},
    {"domain.meta.node_selector", C::domain, "/domains/{}/node_selector", ""},
    {"domain.meta.node_limit", C::domain, "/domains/{}/node_limit", ""},
    {"domain.meta.tags", C::domain, "/domains/{}/tags", ""},
    {"domain.migrate.sync_lock", C::domain, "/domains/{}/migrate_sync_lock", ""},
    // tag (uuid, tag)
    {"tag.name", C::tag, "/domains/{}/tags/{}", ""},
    {"tag.type", C::tag, "/domains/{}/tags/{}/type", ""},
    {"tag.protected", C::tag, "/domains/{}/tags/{}/protected", ""},
    // network (vni)
    {"network.vni", C::network, "/networks/{}", ""},
    {"network.type", C::network, "/networks/{}/nettype", ""},
    {"network.mtu", C::network, "/networks/{}/mtu", ""},
    {"network.rule", C::network, "/networks/{}/firewall_rules", ""},
    {"network.rule.in", C::network, "/networks/{}/firewall_rules/in", ""},
    {"network.rule.out", C::network, "/networks/{}/firewall_rules/out", ""},
    {"network.nameservers", C::network, "/networks/{}/name_servers", ""},
    {"network.domain", C::network, "/networks/{}/domain", ""},
    {"network.reservation", C::network, "/networks/{}/dhcp4_reservations", ""},
    {"network.lease", C::network, "/networks/{}/dhcp4_leases", ""},
    {"network.ip4.network", C::network, "/networks/{}/ip4_network", ""},
    {"network.ip4.gateway", C::network, "/networks/{}/ip4_gateway", ""},
    {"network.ip4.dhcp", C::network, "/networks/{}/dhcp4_flag", ""},
    {"network.ip4.dhcp_start", C::network, "/networks/{}/dhcp4_start", ""},
    {"network.ip4.dhcp_end", C::network, "/networks/{}/dhcp4_end", ""},
    {"network.ip6.network", C::network, "/networks/{}/ip6_network", ""},
    {"network.ip6.gateway", C::network, "/networks/{}/ip6_gateway", ""},
    {"network.ip6.dhcp", C::network, "/networks/{}/dhcp6_flag", ""},
    // firewall rule (vni, in|out, acl)
    {"rule.description", C::rule, "/networks/{}/firewall_rules/{}/{}", ""},
    {"rule.rule", C::rule, "/networks/{}/firewall_rules/{}/{}/rule", ""},
    {"rule.order", C::rule, "/networks/{}/firewall_rules/{}/{}/order", ""},
    // DHCP reservation (vni, mac)
    {"reservation.mac", C::reservation, "/networks/{}/dhcp4_reservations/{}", ""},
    {"reservation.ip", C::reservation, "/networks/{}/dhcp4_reservations/{}/ipaddr", ""},
    {"reservation.hostname", C::reservation, "/networks/{}/dhcp4_reservations/{}/hostname", ""},
    // DHCP lease (vni, mac)
    {"lease.mac", C::lease, "/networks/{}/dhcp4_leases/{}", ""},
    {"lease.expiry", C::lease, "/networks/{}/dhcp4_leases/{}/expiry", ""},
    {"lease.ip", C::lease, "/networks/{}/dhcp4_leases/{}/ipaddr", ""},
    {"lease.hostname", C::lease, "/networks/{}/dhcp4_leases/{}/hostname", ""},
    {"lease.client_id", C::lease, "/networks/{}/dhcp4_leases/{}/clientid", ""},
    // OSD (id)
    {"osd.id", C::osd, "/ceph/osds/{}", ""},
    {"osd.node", C::osd, "/ceph/osds/{}/node", ""},
    {"osd.device", C::osd, "/ceph/osds/{}/device", ""},
    {"osd.db_device", C::osd, "/ceph/osds/{}/db_device", ""},
    {"osd.fsid", C::osd, "/ceph/osds/{}/fsid", ""},
    {"osd.ofsid", C::osd, "/ceph/osds/{}/fsid/osd", ""},
    {"osd.cfsid", C::osd, "/ceph/osds/{}/fsid/cluster", ""},
    {"osd.lvm", C::osd, "/ceph/osds/{}/lvm", ""},
    {"osd.vg", C::osd, "/ceph/osds/{}/lvm/vg", ""},
    {"osd.lv", C::osd, "/ceph/osds/{}/lvm/lv", ""},
    {"osd.is_split", C::osd, "/ceph/osds/{}/is_split", "False"},
    {"osd.stats", C::osd, "/ceph/osds/{}/stats", ""},
    // pool (name)
    {"pool.name", C::pool, "/ceph/pools/{}", ""},
    {"pool.pgs", C::pool, "/ceph/pools/{}/pgs", ""},
    {"pool.tier", C::pool, "/ceph/pools/{}/tier", "default"},
    {"pool.stats", C::pool, "/ceph/pools/{}/stats", ""},
    // volume (pool, vol)
    {"volume.name", C::volume, "/ceph/volumes/{}/{}", ""},
    {"volume.stats", C::volume, "/ceph/volumes/{}/{}/stats", ""},
    // snapshot (pool, vol, snap)
    {"snapshot.name", C::snapshot, "/ceph/snapshots/{}/{}/{}", ""},
    {"snapshot.stats", C::snapshot, "/ceph/snapshots/{}/{}/{}/stats", ""},
    // node tasks (ours, not the reference's; docs/wire-contract.md §3.10):
    // the runners' advertisements (node) and the queue (task id)
    {"task.root", C::task, "/tasks", ""},
    {"task.runners", C::task, "/tasks/runners", ""},
    {"task.runner", C::task, "/tasks/runners/{}", ""},
    {"task.queue", C::task, "/tasks/queue", ""},
    {"task.id", C::task, "/tasks/queue/{}", ""},
    {"task.state", C::task, "/tasks/queue/{}/state", ""},
    {"task.claim", C::task, "/tasks/queue/{}/claim", ""},
    {"task.active", C::task, "/tasks/queue/{}/active", ""},
};

const Key& find(std::string_view name) {
    for (const auto& k : kKeys)
        if (k.name == name) return k;
    throw std::invalid_argument("unknown schema key '" + std::string(name) + "'");
}

template <class Ids>
std::string expand(std::string_view name, const Ids& ids) {
    const Key& k = find(name);
    std::string out;
    out.reserve(k.tmpl.size() + 32);
    auto it = std::begin(ids);
    auto end = std::end(ids);
    for (size_t i = 0; i < k.tmpl.size(); ++i) {
        if (k.tmpl[i] == '{' && i + 1 < k.tmpl.size() && k.tmpl[i + 1] == '}') {
            if (it == end)
                throw std::invalid_argument("schema key '" + std::string(name) + "' needs more identifiers");
            std::string_view id(*it);
            if (id.empty() || id.find('/') != std::string_view::npos)
                throw std::invalid_argument("invalid identifier '" + std::string(id) + "' for schema key '" +
                                            std::string(name) + "'");
            out.append(id);
            ++it;
            ++i;
        } else {
            out.push_back(k.tmpl[i]);
        }
    }
    if (it != end)
        throw std::invalid_argument("schema key '" + std::string(name) + "' takes fewer identifiers");
    return out;
}

}  // namespace

std::string path(std::string_view key, std::initializer_list<std::string_view> ids) { return expand(key, ids); }
std::string path(std::string_view key, const std::vector<std::string>& ids) { return expand(key, ids); }

const std::vector<Key>& keys() { return kKeys; }

std::vector<Key> keys_of(Class cls) {
    std::vector<Key> out;
    for (const auto& k : kKeys)
        if (k.cls == cls) out.push_back(k);
    return out;
}

const Key& root_of(Class cls) {
    for (const auto& k : kKeys)
        if (k.cls == cls) return k;
    throw std::invalid_argument("schema class without keys");
}

bool is_lock_contender(std::string_view child) {
    static const std::regex re("(?:__lock__|__rlock__)(-?\\d{10})$");
    return std::regex_search(child.begin(), child.end(), re);
}

}  // namespace pvc::schema
