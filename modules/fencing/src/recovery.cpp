#include "recovery.hpp"

#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/target.hpp"

namespace pvc::fencing {
namespace {

std::vector<std::string> split(const std::string& s, char sep) {
    std::vector<std::string> out;
    std::string item;
    std::istringstream in(s);
    while (std::getline(in, item, sep))
        if (!item.empty()) out.push_back(item);
    return out;
}

std::vector<std::string> words(const std::string& s) {
    std::vector<std::string> out;
    std::istringstream in(s);
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

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

RecoveryResult recover_node(zk::Session& zk, const std::string& dead, RbdLockBreaker& locks, const Logger& log,
                            unsigned parallelism) {
    RecoveryResult result;
    std::vector<std::string> uuids;
    try {
        uuids = words(zk.get(schema::path("node.running_domains", {dead})).value_or(""));
    } catch (const std::exception& e) {
        log.error("Cannot read the VMs of dead node {}; none recovered: {}", dead, e.what());
        result.failed = 1;
        return result;
    }
    log.info("Moving {} VM(s) from dead node {} to new hosts", uuids.size(), dead);
    if (!zk.write(schema::path("node.state.domain", {dead}), "fence-flush"))
        log.warn("Could not write domainstate fence-flush for {}", dead);

    // One snapshot of the nodes for every choice: their figures change only
    // at their own keepalives, which a recovery of a few seconds outruns. So
    // the VMs already given a node in this recovery are booked on it in the
    // snapshot (a running tally): otherwise every VM would go to the one
    // node that looked best at the start.
    std::vector<target::NodeFigures> nodes;
    try {
        nodes = target::read_nodes(zk);
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
                auto volumes = split(zk.get(schema::path("domain.storage.volumes", {uuid})).value_or(""), ',');
                if (auto err = locks.free_all(uuid, volumes)) {
                    log.warn("Failed to migrate VM {}, continuing: {}", uuid, *err);
                } else {
                    auto request = target::read_request(zk, uuid);
                    request.exclude.push_back(dead);
                    const VmLoad load = vm_load(zk, uuid);
                    std::optional<std::string> target;
                    {
                        std::lock_guard g(m);
                        target = target::choose(nodes, request);
                        if (target) book(nodes, *target, load, +1);
                    }
                    bool ok;
                    if (target) {
                        ok = zk.write({{schema::path("domain.state", {uuid}), "start"},
                                       {schema::path("domain.node", {uuid}), *target},
                                       {schema::path("domain.last_node", {uuid}), dead}});
                        if (ok) log.info("VM {} goes to {}", uuid, *target);
                    } else {
                        ok = zk.write({{schema::path("domain.state", {uuid}), "stop"},
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
    std::vector<std::thread> workers;
    unsigned n = std::min<std::size_t>(std::max(1u, parallelism), uuids.size());
    for (unsigned i = 0; i < n; ++i) workers.emplace_back(work);
    for (auto& t : workers) t.join();

    if (!zk.write(schema::path("node.state.domain", {dead}), "flushed"))
        log.warn("Could not write domainstate flushed for {}", dead);
    log.ok("Recovered the VMs of {}: {} moved, {} stopped for autostart, {} left alone", dead, result.moved,
           result.stopped, result.failed);
    return result;
}

}  // namespace pvc::fencing
