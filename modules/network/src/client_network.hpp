// A client network as ZooKeeper describes it (/networks/<vni>), validated,
// and the links it needs on every node: vxlan<vni> or vlan<vni>
// enslaved to vmbr<vni>. Links are reconciled: the kernel's state is compared
// with the wanted one and only what differs is changed, so a daemon restart
// over existing networks changes nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "netlink.hpp"

namespace pvc::network {

enum class NetType { managed, bridged };

// The keys of /networks/<vni> as read ("" for absent; "None" kept as written).
using NetworkKeys = std::map<std::string, std::string>;

struct ClientNetwork {
    uint32_t vni = 0;
    NetType type = NetType::managed;
    std::string description;
    std::optional<unsigned> mtu;           // unset: "", missing or "None"
    bool mtu_garbage = false;              // written, but not a number
    std::optional<std::string> ip4_network, ip4_gateway, ip6_network, ip6_gateway;

    std::string base_link() const;         // vxlan<vni> | vlan<vni>
    std::string bridge() const { return "vmbr" + std::to_string(vni); }
};

// The gateway addresses the router-active node holds on vmbr<vni>:
// "<gateway>/<prefix of its network>", IPv6 first, then IPv4.
std::vector<std::string> gateway_addresses(const ClientNetwork& n);

// Validates a network's keys; the error says what is wrong (VNI out of the
// type's range, unknown nettype, malformed or inconsistent subnets).
struct ParsedNetwork {
    std::optional<ClientNetwork> network;
    std::string error;
};
ParsedNetwork parse_network(const std::string& vni_text, const NetworkKeys& keys);

// The subnets of one managed network as accepted (ip4_network,
// ip6_network; unset: none), for the overlap check (README, "Health").
struct NetworkSubnets {
    std::optional<std::string> ip4, ip6;
    bool operator==(const NetworkSubnets&) const = default;
};
// Two networks whose subnets of one family share addresses (one contains
// the other, or they are equal). vni_a sorts before vni_b (as the map does).
struct SubnetOverlap {
    std::string vni_a, subnet_a, vni_b, subnet_b;
    auto operator<=>(const SubnetOverlap&) const = default;
};
// Whether two CIDRs of the family (AF_INET or AF_INET6) share an address.
// False when either is not a strict CIDR of that family (malformed, host bits
// set): such a subnet is refused elsewhere, not compared.
bool subnets_overlap(const std::string& a, const std::string& b, int family);
// Every overlapping pair of networks, each once per family (IPv4 before IPv6
// for a pair), ordered by VNI as the map is; malformed subnets are skipped.
// Pairwise over the parsed subnets: run when the set of networks or a subnet
// changes, not per keepalive.
std::vector<SubnetOverlap> find_overlaps(const std::map<std::string, NetworkSubnets>& networks);

// The MTU a network gets and whether it must be written back.
struct MtuDecision {
    unsigned mtu = 0;
    bool write_back = false;
    std::string warning;                   // why it differs from what was written
};
MtuDecision decide_mtu(const ClientNetwork& n, unsigned maximum, std::optional<unsigned> current);

// The kernel objects of one client network.
struct LinkPlan {
    NetType type = NetType::managed;
    uint32_t vni = 0;
    std::string base, bridge;
    std::string parent;                    // cluster.device (managed) | bridge_device (bridged)
    uint16_t port = 4789;                  // VXLAN UDP destination port
    unsigned mtu = 1500;
};
LinkPlan plan_links(const ClientNetwork& n, const std::string& parent, unsigned mtu);

// What reconcile() changed, for the log (empty: nothing).
struct ReconcileResult {
    std::vector<std::string> changes;
};
// Makes the kernel match the plan. Throws NetlinkError (unsupported_kind()
// when the kernel cannot create the base link's kind) or std::runtime_error.
// Links that are not PVC's are never taken, changed or deleted: a plan whose
// base link or bridge is named like one of `host_devices` (the host's
// configured devices and bridges), whose existing base link is of another
// kind or a port of a bridge other than its own, or whose bridge name is
// held by a link that is not a bridge, throws LinkConflict before anything
// is changed.
struct LinkConflict : std::runtime_error {
    using std::runtime_error::runtime_error;
};
ReconcileResult reconcile(Netlink& nl, const LinkPlan& plan, const std::set<std::string>& host_devices = {});
// Removes the network's links (the network was deleted); absent links are fine.
void remove_links(Netlink& nl, const std::string& base, const std::string& bridge);

// The VNI of a link named like the ones this module makes for client
// networks: `vxlan<vni>` of kind vxlan, `vmbr<vni>` of kind bridge,
// `vlan<vni>` of kind vlan (plain decimal VNI); nothing for any other link.
std::optional<std::string> client_link_vni(const LinkState& link);

// The links of networks deleted while the daemon was down, found once at
// start. A link is one of them only when it has PVC's own shape, not only its
// name: `vxlan<n>` with VNI n, UDP port 4789 over the cluster device, a port
// of nothing or of a `vmbr<n>` removed with it; `vlan<n>` with id n on
// bridge_device, a port of a `vmbr<n>` removed with it; `vmbr<n>` a bridge
// whose ports are only such links of its own n or guest taps (kind tun), or
// none; n never 0. Anything else named like them (an OS VLAN `vlan10`, an
// admin bridge `vmbr0`, a bridge with a NIC in it) is left alone and listed
// in `left`.
struct SweepInput {
    std::set<std::string> wanted;          // the /networks children as read
    std::set<std::string> keep;            // the host's configured devices and bridges
    std::optional<std::string> cluster_device, bridge_device;
    uint16_t port = 4789;                  // VXLAN UDP destination port
};
struct SweepResult {
    std::vector<std::string> removed;      // bridges first (deleting one releases its ports)
    std::vector<std::string> left;         // "<name> (<why it is not PVC's>)"
};
// What the sweep would do over `links` (every link of the namespace).
SweepResult plan_orphan_sweep(const std::vector<LinkState>& links, const SweepInput& in);
// Removes the links plan_orphan_sweep names; returns what it removed and left.
SweepResult remove_orphan_links(Netlink& nl, const SweepInput& in);

}  // namespace pvc::network
