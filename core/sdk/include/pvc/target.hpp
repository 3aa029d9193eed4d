// Migration target selection (the reference's `findTargetNode`): one
// implementation shared by the hypervisor module (flush) and fencing.
//
// `choose` is a pure function over a snapshot of node figures; `read_*`
// build that snapshot from ZooKeeper. Ties are broken deterministically:
// candidates are considered in ascending node-name order and a later node
// must be strictly better, so the lowest node name wins a tie.
#pragma once

#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc::zk { class Session; }

namespace pvc::target {

enum class Selector { mem, memprov, load, vcpus, vms };

// The selectors' names, in Selector's order: the values of
// pvc.system.migration.target_selector and /config/migration_target_selector.
inline constexpr std::string_view selector_names[] = {"mem", "memprov", "load", "vcpus", "vms"};
// What a VM's node_selector may be: a selector's name, or "none" (the
// cluster's selector decides).
inline std::vector<std::string> vm_selector_choices() {
    std::vector<std::string> out(std::begin(selector_names), std::end(selector_names));
    out.emplace_back("none");
    return out;
}

// A name of selector_names; anything else (including "") is nullopt.
PVC_SDK_API std::optional<Selector> parse_selector(std::string_view s);

// What the selectors need to know of one node. A figure that is absent or
// does not parse is nullopt; such a node is skipped by selectors that need it.
struct NodeFigures {
    std::string name;
    std::string daemon_state;   // /nodes/<n>/daemonstate
    std::string domain_state;   // /nodes/<n>/domainstate
    std::optional<long> memfree, memused, memprov, vcpualloc, domainscount;
    std::optional<double> cpuload;
};

// What the selectors need to know of one VM.
struct Request {
    std::optional<std::string> node_limit;     // /node_limit (nullopt = absent)
    std::optional<std::string> node_selector;  // /node_selector (nullopt = absent)
    std::string cluster_selector;              // /config/migration_target_selector
    std::string current_node;                  // /node: never a candidate
    std::vector<std::string> exclude;          // further nodes never chosen (e.g. the flushing node)
};

// The chosen node, or nullopt when there is no target.
PVC_SDK_API std::optional<std::string> choose(const std::vector<NodeFigures>& nodes, const Request& request);

// Snapshot of every node under /nodes (blocking reads).
PVC_SDK_API std::vector<NodeFigures> read_nodes(zk::Session& session);
// The request for domain `uuid` (blocking reads).
PVC_SDK_API Request read_request(zk::Session& session, const std::string& uuid);
// read_request + read_nodes + choose.
PVC_SDK_API std::optional<std::string> find_target(zk::Session& session, const std::string& uuid,
                                       const std::vector<std::string>& exclude = {});

}  // namespace pvc::target
