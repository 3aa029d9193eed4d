#include "recovery.hpp"

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/target.hpp"

namespace pvc::fencing {
namespace {

// What one VM adds to its new node, as the node will report it once the VM
// runs there.
struct VmLoad {
    long memory_mib = 0;
    long vcpus = 1;
};

VmLoad vm_load(zk::Session& zk, const std::string& uuid) {
    VmLoad load;
    if (auto xml = try_parse_domain_xml(zk.get(schema::path("domain.xml", {uuid})).value_or(""))) {
        load.memory_mib = xml->memory_mib().value_or(0);
        load.vcpus = xml->vcpus.value_or(1);
    }
    return load;
}

// Runs `work` on `threads` threads (this one included) and waits for them.
template <class F>
void on_threads(std::size_t threads, F work) {
    std::vector<std::thread> extra;
    for (std::size_t i = 1; i < threads; ++i) extra.emplace_back(work);
    work();
    for (auto& t : extra) t.join();
}

// The keys read before the choices, served as a session to the core's
// readers (target::read_nodes, target::read_request) so that they make the
// same figures and requests from them as from ZooKeeper. A key that was not
// read before, or asked with its Stat, is read from the live session;
// a read that failed fails again here, with its own error.
class ReadSnapshot final : public zk::Session {
public:
    explicit ReadSnapshot(zk::Session& live) : live_(live) {}
    void add(const std::string& path, KeyRead r) { keys_[path] = std::move(r); }
    void add_children(const std::string& path, KeyRead r) { children_[path] = std::move(r); }

    std::optional<std::string> get(const std::string& path, zk::Stat* stat = nullptr) override {
        if (auto it = keys_.find(path); it != keys_.end() && !stat) {
            if (it->second.error) std::rethrow_exception(it->second.error);
            return it->second.value;
        }
        return live_.get(path, stat);
    }
    std::vector<std::optional<std::string>> get_many(const std::vector<std::string>& paths,
                                                     std::vector<zk::Stat>* stats = nullptr) override {
        if (stats) return live_.get_many(paths, stats);
        std::vector<std::optional<std::string>> out;
        for (const auto& p : paths) out.push_back(get(p));
        return out;
    }
    std::optional<std::vector<std::string>> children(const std::string& path) override {
        if (auto it = children_.find(path); it != children_.end()) {
            if (it->second.error) std::rethrow_exception(it->second.error);
            if (!it->second.value) return std::nullopt;
            return words(*it->second.value);
        }
        return live_.children(path);
    }

    void close() override { live_.close(); }
    bool connected() const override { return live_.connected(); }
    int64_t session_id() const override { return live_.session_id(); }
    const zk::SessionOptions& options() const override { return live_.options(); }
    bool exists(const std::string& path, zk::Stat* stat) override { return live_.exists(path, stat); }
    std::optional<std::vector<std::string>> raw_children(const std::string& path) override {
        return live_.raw_children(path);
    }
    bool write(const std::vector<zk::KeyValue>& kvs) override { return live_.write(kvs); }
    std::string create(const std::string& path, const std::string& data, bool ephemeral, bool sequential) override {
        return live_.create(path, data, ephemeral, sequential);
    }
    void ensure_path(const std::string& path) override { live_.ensure_path(path); }
    bool create_ephemeral(const std::string& path, const std::string& data) override {
        return live_.create_ephemeral(path, data);
    }
    void remove_ephemeral(const std::string& path) override { live_.remove_ephemeral(path); }
    bool remove_recursive(const std::string& path) override { return live_.remove_recursive(path); }
    zk::Status commit(const zk::Transaction& tx) override { return live_.commit(tx); }
    std::shared_ptr<zk::Watch> watch_data(const std::string& path, zk::DataCallback cb) override {
        return live_.watch_data(path, std::move(cb));
    }
    std::shared_ptr<zk::Watch> watch_children(const std::string& path, zk::ChildrenCallback cb) override {
        return live_.watch_children(path, std::move(cb));
    }
    std::shared_ptr<zk::Watch> on_session_event(zk::SessionCallback cb) override {
        return live_.on_session_event(std::move(cb));
    }

private:
    zk::Session& live_;
    std::map<std::string, KeyRead> keys_;
    std::map<std::string, KeyRead> children_;  // names joined by spaces
};

// Books (sign +1) or returns (-1) a VM on `node` in the snapshot, so the next
// choice sees the node as it will be: every selector's figure moves. The
// load figure is the load average; a running vCPU adds up to one to it.
void book(std::vector<target::NodeFigures>& nodes, const std::string& node, const VmLoad& vm, int sign) {
    for (auto& n : nodes) {
        if (n.name != node) continue;
        if (n.memfree) *n.memfree -= sign * vm.memory_mib;
        if (n.memused) *n.memused += sign * vm.memory_mib;
        if (n.memprov) *n.memprov += sign * vm.memory_mib;
        if (n.vcpualloc) *n.vcpualloc += sign * vm.vcpus;
        if (n.domainscount) *n.domainscount += sign;
        if (n.cpuload) *n.cpuload += sign * static_cast<double>(vm.vcpus);
    }
}

}  // namespace

bool set_keys(zk::Session& zk, const std::vector<zk::KeyValue>& kvs) {
    zk::Transaction tx(zk);
    for (const auto& [path, data] : kvs) tx.set(path, data);
    try {
        if (tx.commit() == zk::Status::ok) return true;
    } catch (const std::exception&) {
    }
    return zk.write(kvs);
}

std::vector<KeyRead> read_keys(zk::Session& zk, const std::vector<std::string>& paths, unsigned in_flight) {
    std::vector<KeyRead> out(paths.size());
    // All in one round trip; if any read fails, each key alone, so that only
    // the keys that cannot be read carry an error.
    try {
        auto values = zk.get_many(paths);
        for (std::size_t i = 0; i < paths.size() && i < values.size(); ++i) out[i].value = std::move(values[i]);
        if (values.size() == paths.size()) return out;
    } catch (const std::exception&) {
    }
    std::atomic<std::size_t> next{0};
    on_threads(std::min<std::size_t>(std::max(1u, in_flight), std::max<std::size_t>(1, paths.size())), [&] {
        for (std::size_t i = next++; i < paths.size(); i = next++) {
            try {
                out[i].value = zk.get(paths[i]);
            } catch (...) {
                out[i].error = std::current_exception();
            }
        }
    });
    return out;
}

RecoveryReads read_for_recovery(zk::Session& zk, const std::string& dead, unsigned parallelism) {
    RecoveryReads r;
    r.started = std::chrono::steady_clock::now();
    const std::string nodes_path = schema::path("base.node");
    // The dead node's VMs and the nodes' names at once.
    {
        std::thread children([&] {
            try {
                if (auto c = zk.children(nodes_path)) {
                    std::string joined;
                    for (const auto& n : *c) joined += n + " ";
                    r.node_names.value = joined;
                }
            } catch (...) {
                r.node_names.error = std::current_exception();
            }
        });
        try {
            r.uuids = words(zk.get(schema::path("node.running_domains", {dead})).value_or(""));
        } catch (...) {
            r.vms_error = std::current_exception();
        }
        children.join();
        if (r.vms_error) return r;
    }
    // Then everything the choices read, at once: the nodes' figures (what
    // target::read_nodes reads), the cluster's selector, and each VM's
    // volumes, limit, selector, node and XML. A key missed here is read from
    // ZooKeeper when asked, so this list only has to be complete to be fast.
    if (r.node_names.value)
        for (const auto& n : words(*r.node_names.value))
            for (const char* key : {"node.state.daemon", "node.state.domain", "node.memory.free", "node.memory.used",
                                    "node.memory.provisioned", "node.vcpu.allocated",
                                    "node.count.provisioned_domains", "node.cpu.load"})
                r.paths.push_back(schema::path(key, {n}));
    r.paths.push_back(schema::path("base.config.migration_target_selector"));
    for (const auto& uuid : r.uuids)
        for (const char* key : {"domain.storage.volumes", "domain.meta.node_limit", "domain.meta.node_selector",
                                "domain.node", "domain.xml"})
            r.paths.push_back(schema::path(key, {uuid}));
    r.values = read_keys(zk, r.paths, parallelism);
    return r;
}

RecoveryResult recover_node(zk::Session& zk, const std::string& dead, services::RbdLocks& locks, const Logger& log,
                            unsigned parallelism, const std::function<bool()>& before_writes,
                            std::optional<RecoveryReads> reads) {
    parallelism = std::max(1u, parallelism);
    RecoveryResult result;
    if (!reads) reads = read_for_recovery(zk, dead, parallelism);
    if (reads->vms_error) {
        try {
            std::rethrow_exception(reads->vms_error);
        } catch (const std::exception& e) {
            log.error("Cannot read the VMs of dead node {}; none recovered: {}", dead, e.what());
        }
        result.failed = 1;
        return result;
    }
    const std::vector<std::string>& uuids = reads->uuids;
    ReadSnapshot snapshot(zk);
    snapshot.add_children(schema::path("base.node"), reads->node_names);
    for (std::size_t i = 0; i < reads->paths.size(); ++i) snapshot.add(reads->paths[i], reads->values[i]);

    if (before_writes && !before_writes()) {
        log.error("The VMs of {} are not moved: its fence was not recorded", dead);
        result.failed = static_cast<int>(uuids.size());
        return result;
    }
    log.info("Moving {} VM(s) from dead node {} to new hosts", uuids.size(), dead);
    bool flush_written = false;
    try {
        flush_written = set_keys(zk, {{schema::path("node.state.domain", {dead}), "fence-flush"}});
    } catch (const std::exception&) {
    }
    if (!flush_written) log.warn("Could not write domainstate fence-flush for {}", dead);

    // One snapshot of the nodes for every choice: their figures change only
    // at their own keepalives, which a recovery of a few seconds outruns. So
    // the VMs already given a node in this recovery are booked on it in the
    // snapshot (a running tally): otherwise every VM would go to the one
    // node that looked best at the start.
    std::vector<target::NodeFigures> nodes;
    try {
        nodes = target::read_nodes(snapshot);
    } catch (const std::exception& e) {
        log.error("Cannot read the cluster's nodes: {}", e.what());
    }

    std::atomic<std::size_t> next{0};
    std::mutex m;
    auto work = [&] {
        for (std::size_t i = next++; i < uuids.size(); i = next++) {
            const std::string& uuid = uuids[i];
            enum { moved, stopped, failed } outcome = failed;
            try {
                auto volumes = split(snapshot.get(schema::path("domain.storage.volumes", {uuid})).value_or(""), ',');
                if (auto err = locks.free_all(uuid, volumes)) {
                    log.warn("Failed to migrate VM {}, continuing: {}", uuid, *err);
                } else {
                    auto request = target::read_request(snapshot, uuid);
                    request.exclude.push_back(dead);
                    const VmLoad load = vm_load(snapshot, uuid);
                    std::optional<std::string> target;
                    {
                        std::lock_guard g(m);
                        target = target::choose(nodes, request);
                        if (target) book(nodes, *target, load, +1);
                    }
                    bool ok;
                    if (target) {
                        ok = set_keys(zk, {{schema::path("domain.state", {uuid}), "start"},
                                           {schema::path("domain.node", {uuid}), *target},
                                           {schema::path("domain.last_node", {uuid}), dead}});
                        if (ok) log.info("VM {} goes to {}", uuid, *target);
                    } else {
                        ok = set_keys(zk, {{schema::path("domain.state", {uuid}), "stop"},
                                           {schema::path("domain.meta.autostart", {uuid}), "True"}});
                        if (ok) log.warn("No target for VM {}: stopped, it starts when {} is ready again", uuid, dead);
                    }
                    if (!ok) {
                        log.warn("Failed to migrate VM {}, continuing: write failed", uuid);
                        if (target) {
                            std::lock_guard g(m);
                            book(nodes, *target, load, -1);
                        }
                    } else {
                        outcome = target ? moved : stopped;
                    }
                }
            } catch (const std::exception& e) {
                log.warn("Failed to migrate VM {}, continuing: {}", uuid, e.what());
            }
            std::lock_guard g(m);
            if (outcome == moved) ++result.moved;
            else if (outcome == stopped) ++result.stopped;
            else ++result.failed;
        }
    };
    on_threads(std::min<std::size_t>(parallelism, uuids.size()), work);

    if (!set_keys(zk, {{schema::path("node.state.domain", {dead}), "flushed"}}))
        log.warn("Could not write domainstate flushed for {}", dead);
    log.ok("Recovered the VMs of {}: {} moved, {} stopped for autostart, {} left alone", dead, result.moved,
           result.stopped, result.failed);
    return result;
}

}  // namespace pvc::fencing
