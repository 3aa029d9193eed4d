#include "pvc/client.hpp"

#include <cstdio>
#include <random>
#include <thread>

#include "pvc/schema.hpp"

namespace pvc::client {

using schema::path;

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
        {path("domain.meta.migrate_method", {u}), vm.migrate_method},
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
    if (!session.write(vm_define_keys(vm))) return false;
    for (const auto& [tag, prot] : vm.tags)
        if (!session.write(vm_tag_keys(vm.uuid, tag, zk::py_bool(prot)))) return false;
    return true;
}

bool write_vm_xml(zk::Session& session, const std::string& uuid, const std::string& name,
                  const std::vector<std::string>& rbd_list, const std::string& xml) {
    std::string rbd;
    for (const auto& r : rbd_list) rbd += (rbd.empty() ? "" : ",") + r;
    return session.write({{path("domain.name", {uuid}), name},
                          {path("domain.storage.volumes", {uuid}), rbd},
                          {path("domain.xml", {uuid}), xml}});
}

bool relocate_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 const std::string& target_state, const std::string& node, const std::string& last_node,
                 std::stop_token stop) {
    return write_under_state_lock(session, uuid,
                                  {{path("domain.state", {uuid}), target_state},
                                   {path("domain.node", {uuid}), node},
                                   {path("domain.last_node", {uuid}), last_node}},
                                  500ms, stop);
}

bool undefine_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                 std::chrono::milliseconds settle, std::stop_token stop) {
    if (session->get(path("domain.state", {uuid})).value_or("") != "stop") {
        if (!change_vm_state(session, uuid, "stop", stop)) return false;
        std::this_thread::sleep_for(settle);
    }
    if (!change_vm_state(session, uuid, "delete", stop)) return false;
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
