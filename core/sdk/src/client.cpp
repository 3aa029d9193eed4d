#include "pvc/client.hpp"

#include <algorithm>
#include <cstdio>
#include <random>
#include <thread>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"

namespace pvc::client {

using schema::path;

namespace {

// A NIC of the VM that uses an SR-IOV VF.
struct VfNic {
    std::string vf, mac;
    bool hostdev = false;
};

// The VM's VF NICs, one per VF name; none for an XML that does not parse
// (the caller checked the XML it writes; a stored one it cannot read names no VF).
std::vector<VfNic> vf_nics(std::string_view xml) {
    std::vector<VfNic> out;
    auto dom = try_parse_domain_xml(xml);
    if (!dom) return out;
    for (const auto& nic : dom->interfaces) {
        std::string vf = nic.sriov_vf();
        if (!is_safe_name(vf)) continue;
        if (std::any_of(out.begin(), out.end(), [&](const VfNic& n) { return n.vf == vf; })) continue;
        out.push_back({vf, nic.mac, nic.type == "hostdev"});
    }
    return out;
}

bool has_hostdev(const std::vector<VfNic>& nics) {
    return std::any_of(nics.begin(), nics.end(), [](const VfNic& n) { return n.hostdev; });
}

std::vector<VfNic> minus(const std::vector<VfNic>& a, const std::vector<VfNic>& b) {
    std::vector<VfNic> out;
    for (const auto& n : a)
        if (std::none_of(b.begin(), b.end(), [&](const VfNic& m) { return m.vf == n.vf; })) out.push_back(n);
    return out;
}

// Appends to `kvs` the claim of each VF registered on `node`; throws VfInUse,
// writing nothing, when one is used by another VM.
void claim_vfs(zk::Session& session, const std::string& uuid, const std::string& node, const std::vector<VfNic>& nics,
               std::vector<zk::KeyValue>& kvs) {
    if (!is_safe_name(node)) return;
    std::vector<zk::KeyValue> claims;
    for (const auto& n : nics) {
        if (!session.exists(path("sriov_vf.phy", {node, n.vf}))) continue;  // no such VF on the node: nothing to track
        if (session.get(path("sriov_vf.used", {node, n.vf})).value_or("") == "True") {
            std::string owner = session.get(path("sriov_vf.used_by", {node, n.vf})).value_or("");
            if (owner != uuid) {
                std::string owner_name = owner.empty() ? "" : session.get(path("domain.name", {owner})).value_or("");
                throw VfInUse("Attempted to use SR-IOV network \"" + n.vf + "\" which is already used by VM \"" +
                              (owner_name.empty() ? owner : owner_name) + "\" on node \"" + node + "\".");
            }
        }
        claims.push_back({path("sriov_vf.used", {node, n.vf}), "True"});
        claims.push_back({path("sriov_vf.used_by", {node, n.vf}), uuid});
        if (!n.mac.empty()) claims.push_back({path("sriov_vf.mac", {node, n.vf}), n.mac});
    }
    kvs.insert(kvs.end(), claims.begin(), claims.end());
}

// Appends to `kvs` the release of each VF on `node` that this VM holds (a VF
// another VM holds, or none, is left alone).
void release_vfs(zk::Session& session, const std::string& uuid, const std::string& node,
                 const std::vector<VfNic>& nics, std::vector<zk::KeyValue>& kvs) {
    if (!is_safe_name(node)) return;
    for (const auto& n : nics) {
        if (!session.exists(path("sriov_vf.phy", {node, n.vf}))) continue;
        if (session.get(path("sriov_vf.used_by", {node, n.vf})).value_or("") != uuid) continue;
        kvs.push_back({path("sriov_vf.used", {node, n.vf}), "False"});
        kvs.push_back({path("sriov_vf.used_by", {node, n.vf}), ""});
        kvs.push_back({path("sriov_vf.mac", {node, n.vf}), session.get(path("sriov_vf.phy_mac", {node, n.vf})).value_or("")});
    }
}

}  // namespace

std::string new_uuid() {
    thread_local std::mt19937_64 gen([] {
        std::random_device rd;
        return (static_cast<uint64_t>(rd()) << 32) ^ rd();
    }());
    uint64_t hi = gen(), lo = gen();
    hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
    lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
    char buf[37];
    std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                  static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                  static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffULL));
    return buf;
}

bool is_safe_name(std::string_view name) {
    if (name.empty() || name == "." || name == "..") return false;
    for (unsigned char c : name)
        if (c == '/' || c < 0x20 || c == 0x7f) return false;
    return true;
}

bool write_under_state_lock(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                            const std::vector<zk::KeyValue>& kvs, std::chrono::milliseconds hold, std::stop_token stop) {
    zk::Lock lock(session, path("domain.state", {uuid}), zk::LockKind::exclusive, new_uuid());
    if (!lock.acquire(std::nullopt, stop)) return false;
    bool ok = session->write(kvs);
    if (ok) std::this_thread::sleep_for(hold);
    lock.release();
    return ok;
}

bool change_vm_state(const std::shared_ptr<zk::Session>& session, const std::string& uuid, const std::string& state,
                     std::stop_token stop) {
    return write_under_state_lock(session, uuid, {{path("domain.state", {uuid}), state}}, 500ms, stop);
}

std::vector<zk::KeyValue> vm_define_keys(const VmDefinition& vm) {
    const std::string& u = vm.uuid;
    std::string rbd;
    for (const auto& r : vm.rbd_list) rbd += (rbd.empty() ? "" : ",") + r;
    return {
        {path("domain.name", {u}), vm.name},
        {path("domain.xml", {u}), vm.xml},
        {path("domain.state", {u}), "stop"},
        {path("domain.profile", {u}), vm.profile},
        {path("domain.stats", {u}), ""},
        {path("domain.node", {u}), vm.node},
        {path("domain.last_node", {u}), ""},
        {path("domain.failed_reason", {u}), ""},
        {path("domain.storage.volumes", {u}), rbd},
        {path("domain.console.log", {u}), ""},
        {path("domain.console.vnc", {u}), ""},
        {path("domain.meta.autostart", {u}), zk::py_bool(vm.autostart)},
        {path("domain.meta.migrate_method", {u}), has_hostdev(vf_nics(vm.xml)) ? "shutdown" : vm.migrate_method},
        {path("domain.meta.node_limit", {u}), vm.node_limit},
        {path("domain.meta.node_selector", {u}), vm.node_selector},
        {path("domain.meta.tags", {u}), ""},
        {path("domain.migrate.sync_lock", {u}), ""},
    };
}

std::vector<zk::KeyValue> vm_tag_keys(const std::string& uuid, const std::string& tag,
                                      const std::string& protected_value) {
    return {{path("tag.name", {uuid, tag}), tag},
            {path("tag.type", {uuid, tag}), "user"},
            {path("tag.protected", {uuid, tag}), protected_value}};
}

bool define_vm(zk::Session& session, const VmDefinition& vm) {
    auto kvs = vm_define_keys(vm);
    claim_vfs(session, vm.uuid, vm.node, vf_nics(vm.xml), kvs);
    if (!session.write(kvs)) return false;
    for (const auto& [tag, prot] : vm.tags)
        if (!session.write(vm_tag_keys(vm.uuid, tag, zk::py_bool(prot)))) return false;
    return true;
}

bool write_vm_xml(zk::Session& session, const std::string& uuid, const std::string& name,
                  const std::vector<std::string>& rbd_list, const std::string& xml) {
    std::string rbd;
    for (const auto& r : rbd_list) rbd += (rbd.empty() ? "" : ",") + r;
    std::vector<zk::KeyValue> kvs{{path("domain.name", {uuid}), name},
                                  {path("domain.storage.volumes", {uuid}), rbd},
                                  {path("domain.xml", {uuid}), xml}};
    auto now = vf_nics(xml), before = vf_nics(session.get(path("domain.xml", {uuid})).value_or(""));
    if (!now.empty() || !before.empty()) {
        std::string node = session.get(path("domain.node", {uuid})).value_or("");
        auto added = minus(now, before);
        claim_vfs(session, uuid, node, added, kvs);
        release_vfs(session, uuid, node, minus(before, now), kvs);
        if (has_hostdev(added)) kvs.push_back({path("domain.meta.migrate_method", {uuid}), "shutdown"});
    }
    return session.write(kvs);
}

bool relocate_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 const std::string& target_state, const std::string& node, const std::string& last_node,
                 std::stop_token stop) {
    std::vector<zk::KeyValue> kvs{{path("domain.state", {uuid}), target_state},
                                  {path("domain.node", {uuid}), node},
                                  {path("domain.last_node", {uuid}), last_node}};
    auto nics = vf_nics(session->get(path("domain.xml", {uuid})).value_or(""));
    if (!nics.empty()) {
        std::string source = session->get(path("domain.node", {uuid})).value_or("");
        if (source != node) {
            claim_vfs(*session, uuid, node, nics, kvs);
            release_vfs(*session, uuid, source, nics, kvs);
        }
    }
    return write_under_state_lock(session, uuid, kvs, 500ms, stop);
}

bool undefine_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 std::chrono::milliseconds settle, std::stop_token stop) {
    if (session->get(path("domain.state", {uuid})).value_or("") != "stop") {
        if (!change_vm_state(session, uuid, "stop", stop)) return false;
        std::this_thread::sleep_for(settle);
    }
    if (!change_vm_state(session, uuid, "delete", stop)) return false;
    if (auto nics = vf_nics(session->get(path("domain.xml", {uuid})).value_or("")); !nics.empty()) {
        std::vector<zk::KeyValue> kvs;
        release_vfs(*session, uuid, session->get(path("domain.node", {uuid})).value_or(""), nics, kvs);
        if (!kvs.empty() && !session->write(kvs)) return false;
    }
    session->remove_recursive(path("domain.name", {uuid}));
    return true;
}

bool set_node_domain_state(zk::Session& session, const std::string& node, const std::string& state) {
    return session.write(path("node.state.domain", {node}), state);
}

bool request_router_state(zk::Session& session, const std::string& node, bool primary) {
    return session.write(path("base.config.primary_node"), primary ? node : "none");
}

bool set_maintenance(zk::Session& session, bool on) {
    return session.write(path("base.config.maintenance"), on ? "true" : "false");
}

std::optional<std::string> vm_by_name(zk::Session& session, const std::string& name) {
    auto uuids = session.children(path("base.domain"));
    if (!uuids) return std::nullopt;
    for (const auto& u : *uuids)
        if (session.get(path("domain.name", {u})).value_or("") == name) return u;
    return std::nullopt;
}

}  // namespace pvc::client
