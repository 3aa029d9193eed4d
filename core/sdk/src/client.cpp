#include "pvc/client.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <thread>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"

#include <spdlog/spdlog.h>

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

// The versions a read-modify-write read, by path: its transaction sets (or
// checks) each at that version, so a concurrent change in between fails it
// with bad_version and the whole operation is redone from fresh reads
// (write_guarded). -1: the key was absent (it is created then).
using Expected = std::map<std::string, int32_t>;

// Appends to `kvs` the claim of each VF registered on `node`; throws VfInUse,
// writing nothing, when one is used by another VM. The VF's `used` and
// `used_by` as read go into `expected`: two VMs claiming one VF at once
// cannot both succeed.
void claim_vfs(zk::Session& session, const std::string& uuid, const std::string& node, const std::vector<VfNic>& nics,
               std::vector<zk::KeyValue>& kvs, Expected& expected) {
    if (!is_safe_name(node)) return;
    std::vector<zk::KeyValue> claims;
    for (const auto& n : nics) {
        if (!session.exists(path("sriov_vf.phy", {node, n.vf}))) continue;  // no such VF on the node: nothing to track
        zk::Stat used_st, by_st;
        auto used = session.get(path("sriov_vf.used", {node, n.vf}), &used_st);
        auto owner = session.get(path("sriov_vf.used_by", {node, n.vf}), &by_st).value_or("");
        if (used.value_or("") == "True" && owner != uuid) {
            std::string owner_name = owner.empty() ? "" : session.get(path("domain.name", {owner})).value_or("");
            throw VfInUse("Attempted to use SR-IOV network \"" + n.vf + "\" which is already used by VM \"" +
                          (owner_name.empty() ? owner : owner_name) + "\" on node \"" + node + "\".");
        }
        expected[path("sriov_vf.used", {node, n.vf})] = used ? used_st.version : -1;
        expected[path("sriov_vf.used_by", {node, n.vf})] = by_st.version;
        claims.push_back({path("sriov_vf.used", {node, n.vf}), "True"});
        claims.push_back({path("sriov_vf.used_by", {node, n.vf}), uuid});
        if (!n.mac.empty()) claims.push_back({path("sriov_vf.mac", {node, n.vf}), n.mac});
    }
    kvs.insert(kvs.end(), claims.begin(), claims.end());
}

// Appends to `kvs` the release of each VF on `node` that this VM holds (a VF
// another VM holds, or none, is left alone); `used_by` as read goes into
// `expected`, so a release never undoes another VM's claim made meanwhile.
void release_vfs(zk::Session& session, const std::string& uuid, const std::string& node,
                 const std::vector<VfNic>& nics, std::vector<zk::KeyValue>& kvs, Expected& expected) {
    if (!is_safe_name(node)) return;
    for (const auto& n : nics) {
        if (!session.exists(path("sriov_vf.phy", {node, n.vf}))) continue;
        zk::Stat by_st;
        if (session.get(path("sriov_vf.used_by", {node, n.vf}), &by_st).value_or("") != uuid) continue;
        expected[path("sriov_vf.used_by", {node, n.vf})] = by_st.version;
        kvs.push_back({path("sriov_vf.used", {node, n.vf}), "False"});
        kvs.push_back({path("sriov_vf.used_by", {node, n.vf}), ""});
        kvs.push_back({path("sriov_vf.mac", {node, n.vf}), session.get(path("sriov_vf.phy_mac", {node, n.vf})).value_or("")});
    }
}

// One commit of `kvs` as Session::write builds it, except that a key in
// `expected` is set (or, not written, checked) at the version read.
zk::Status commit_expected(zk::Session& session, const std::vector<zk::KeyValue>& kvs, const Expected& expected) {
    zk::Transaction tx(session);
    for (const auto& [p, data] : kvs) {
        if (auto it = expected.find(p); it != expected.end()) {
            if (it->second < 0) tx.create(p, data);
            else tx.set(p, data, it->second);
            continue;
        }
        zk::Stat st;
        if (session.exists(p, &st)) {
            tx.set(p, data, -1);
            tx.check(p, st.version + 1);
        } else {
            tx.create(p, data);
        }
    }
    for (const auto& [p, version] : expected) {
        // (An init-capture: clang 14 cannot capture a structured binding.)
        bool written = std::any_of(kvs.begin(), kvs.end(), [&path = p](const zk::KeyValue& kv) { return kv.first == path; });
        if (!written && version >= 0) tx.check(p, version);
    }
    return session.commit(tx);
}

// A read-modify-write: `build(kvs, expected)` reads what it needs and says
// what to write; committed with its versions; redone from fresh reads when
// another writer changed a key in between (bad_version, node_exists), so a
// lost race is never a failure and never overwrites the winner's change.
// False when a read or the write failed otherwise. `build` may throw
// (VfInUse) to write nothing.
template <class Build>
bool write_guarded(zk::Session& session, Build&& build) {
    constexpr int max_rounds = 100;
    for (int round = 0; round < max_rounds; ++round) {
        std::vector<zk::KeyValue> kvs;
        Expected expected;
        zk::Status st;
        try {
            build(kvs, expected);
            if (kvs.empty()) return true;
            if (expected.empty()) return session.write(kvs);  // blind: Session::write retries its own races
            st = commit_expected(session, kvs, expected);
        } catch (const zk::Error& e) {
            spdlog::error("ZooKeeper write failed: {}", e.what());
            return false;
        }
        if (st == zk::Status::ok) return true;
        if (st != zk::Status::bad_version && st != zk::Status::node_exists) {
            spdlog::error("ZooKeeper write of {} keys failed: {}", kvs.size(), zk::to_string(st));
            return false;
        }
        if (round >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(round, 20)));
    }
    spdlog::error("ZooKeeper write lost {} races in a row; giving up", max_rounds);
    return false;
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

namespace {

// The state lock held around a read-modify-write (write_guarded): a node
// daemon writes `state` without the lock (its results), so the write still
// retries a lost version race inside it.
template <class Build>
bool guarded_under_state_lock(const std::shared_ptr<zk::Session>& session, const std::string& uuid, Build&& build,
                              std::chrono::milliseconds hold, std::stop_token stop) {
    zk::Lock lock(session, path("domain.state", {uuid}), zk::LockKind::exclusive, new_uuid());
    if (!lock.acquire(std::nullopt, stop)) return false;
    bool ok = false;
    try {
        ok = write_guarded(*session, build);
    } catch (...) {
        lock.release();
        throw;
    }
    if (ok) std::this_thread::sleep_for(hold);
    lock.release();
    return ok;
}

}  // namespace

bool write_under_state_lock(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                            const std::vector<zk::KeyValue>& kvs, std::chrono::milliseconds hold, std::stop_token stop) {
    return guarded_under_state_lock(
        session, uuid, [&](std::vector<zk::KeyValue>& out, Expected&) { out = kvs; }, hold, stop);
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
    const auto nics = vf_nics(vm.xml);
    if (!write_guarded(session, [&](std::vector<zk::KeyValue>& kvs, Expected& expected) {
            kvs = vm_define_keys(vm);
            claim_vfs(session, vm.uuid, vm.node, nics, kvs, expected);
        }))
        return false;
    for (const auto& [tag, prot] : vm.tags)
        if (!session.write(vm_tag_keys(vm.uuid, tag, zk::py_bool(prot)))) return false;
    return true;
}

bool write_vm_xml(zk::Session& session, const std::string& uuid, const std::string& name,
                  const std::vector<std::string>& rbd_list, const std::string& xml) {
    std::string rbd;
    for (const auto& r : rbd_list) rbd += (rbd.empty() ? "" : ",") + r;
    const auto now = vf_nics(xml);
    return write_guarded(session, [&](std::vector<zk::KeyValue>& kvs, Expected& expected) {
        kvs = {{path("domain.name", {uuid}), name},
               {path("domain.storage.volumes", {uuid}), rbd},
               {path("domain.xml", {uuid}), xml}};
        zk::Stat xml_st;
        auto before = vf_nics(session.get(path("domain.xml", {uuid}), &xml_st).value_or(""));
        if (now.empty() && before.empty()) return;
        // The VFs claimed and released follow from the stored XML: replaced
        // meanwhile by another writer, it is read again.
        expected[path("domain.xml", {uuid})] = xml_st.version;
        std::string node = session.get(path("domain.node", {uuid})).value_or("");
        auto added = minus(now, before);
        claim_vfs(session, uuid, node, added, kvs, expected);
        release_vfs(session, uuid, node, minus(before, now), kvs, expected);
        if (has_hostdev(added)) kvs.push_back({path("domain.meta.migrate_method", {uuid}), "shutdown"});
    });
}

bool relocate_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 const std::string& target_state, const std::string& node, const std::string& last_node,
                 std::stop_token stop) {
    auto nics = vf_nics(session->get(path("domain.xml", {uuid})).value_or(""));
    return guarded_under_state_lock(
        session, uuid,
        [&](std::vector<zk::KeyValue>& kvs, Expected& expected) {
            kvs = {{path("domain.state", {uuid}), target_state},
                   {path("domain.node", {uuid}), node},
                   {path("domain.last_node", {uuid}), last_node}};
            if (nics.empty()) return;
            std::string source = session->get(path("domain.node", {uuid})).value_or("");
            if (source == node) return;
            claim_vfs(*session, uuid, node, nics, kvs, expected);
            release_vfs(*session, uuid, source, nics, kvs, expected);
        },
        500ms, stop);
}

bool undefine_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 std::chrono::milliseconds settle, std::stop_token stop) {
    if (session->get(path("domain.state", {uuid})).value_or("") != "stop") {
        if (!change_vm_state(session, uuid, "stop", stop)) return false;
        std::this_thread::sleep_for(settle);
    }
    if (!change_vm_state(session, uuid, "delete", stop)) return false;
    if (auto nics = vf_nics(session->get(path("domain.xml", {uuid})).value_or("")); !nics.empty()) {
        if (!write_guarded(*session, [&](std::vector<zk::KeyValue>& kvs, Expected& expected) {
                release_vfs(*session, uuid, session->get(path("domain.node", {uuid})).value_or(""), nics, kvs,
                            expected);
            }))
            return false;
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
