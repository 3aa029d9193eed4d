// What a PVC client writes for client networks, their DHCP reservations and
// firewall ACLs, and SR-IOV VF settings (docs/wire-contract.md §5.10): the
// reference's keys, transactions, checks and messages, shared by the `pvc`
// command line and the API module so both manage networks the same way.
//
// Unlike pvc/client.hpp's VM writes, these functions check their input and
// return the text shown to a person (the reference's messages, which its
// own client prints): an API route answers `status` with `message`, `pvc`
// prints the message and fails unless ok().
//
// Every read-modify-write is one ZooKeeper transaction that sets the keys it
// decided on at the versions it read (a network's list of reservations or of
// ACLs is guarded by its parent key's version), redone from fresh reads when
// another writer got there first: concurrent writers never lose each other's
// change, and a lost race is never reported as a failure.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pvc/export.hpp"
#include "pvc/zk.hpp"

namespace pvc::client {

// The outcome of a network operation: HTTP-style status (200 done, 400
// refused with the reason in `message`, 500 ZooKeeper failed) and the text.
// `written`: on success, each key written with its value (nullopt: removed),
// for a caller that waits until a watched view shows them.
struct NetResult {
    int status = 200;
    std::string message;
    std::vector<std::pair<std::string, std::optional<std::string>>> written = {};
    bool ok() const { return status == 200; }
};

// The VNI of network `id`: an all-digit `id` is a VNI (a child of /networks),
// anything else a description. nullopt when there is no such network.
PVC_SDK_API std::optional<std::string> resolve_network(zk::Session& session, const std::string& id);

// A new network (POST /network, `pvc network add`). Absent optional fields
// are stored as the reference does ("None"; mtu ""), name servers joined with
// ','. A managed network without a domain gets "<description>.local"; an
// IPv6 network without a gateway gets "<network text before '/'>1".
struct NetworkSpec {
    std::string vni, description, nettype;  // nettype: managed | bridged
    std::optional<std::string> mtu, domain;
    std::vector<std::string> name_servers;
    std::optional<std::string> ip4_network, ip4_gateway, ip6_network, ip6_gateway;
    bool dhcp4 = false;
    std::optional<std::string> dhcp4_start, dhcp4_end;
};
PVC_SDK_API NetResult add_network(zk::Session& session, const NetworkSpec& spec);

// A change of network `id` (VNI or description): only the fields given are
// written ("" clears one); name servers only when given.
struct NetworkChange {
    std::optional<std::string> description, mtu, domain;
    std::optional<std::vector<std::string>> name_servers;
    std::optional<std::string> ip4_network, ip4_gateway, ip6_network, ip6_gateway;
    std::optional<bool> dhcp4;
    std::optional<std::string> dhcp4_start, dhcp4_end;
};
PVC_SDK_API NetResult modify_network(zk::Session& session, const std::string& id, const NetworkChange& change);
PVC_SDK_API NetResult remove_network(zk::Session& session, const std::string& id);

// DHCP reservations: MAC (lower-cased), dotted-quad IP inside the network's
// IPv4 network when it has one, hostname (absent: "None"). Removal matches
// `match` exactly against each reservation's MAC, hostname and IP, then each
// dynamic lease's; the last match wins.
PVC_SDK_API NetResult add_reservation(zk::Session& session, const std::string& id, const std::string& mac,
                                      const std::string& ip, const std::optional<std::string>& hostname);
PVC_SDK_API NetResult remove_reservation(zk::Session& session, const std::string& id, const std::string& match);

// Firewall ACLs: `direction` in | out; `order` the 0-based position in that
// direction's list (absent, empty or past the end: last). The others of the
// direction are renumbered densely in the same transaction; so on removal.
PVC_SDK_API NetResult add_acl(zk::Session& session, const std::string& id, const std::string& description,
                              const std::string& rule, const std::string& direction,
                              const std::optional<std::string>& order);
PVC_SDK_API NetResult remove_acl(zk::Session& session, const std::string& id, const std::string& description);

// --- reads (the command line's list and info; blocking reads of ZooKeeper) ---
struct NetworkInfo {
    std::string vni, description, nettype, mtu, domain, name_servers;
    std::string ip4_network, ip4_gateway, dhcp4_flag, dhcp4_start, dhcp4_end;
    std::string ip6_network, ip6_gateway, dhcp6_flag;
};
PVC_SDK_API std::optional<NetworkInfo> read_network(zk::Session& session, const std::string& vni);
PVC_SDK_API std::vector<std::string> network_vnis(zk::Session& session);  // numeric order

struct Reservation {
    std::string mac, ip, hostname, expiry, client_id;
    bool is_static = true;
};
// Reservations by MAC, then (with `leases`) the dynamic leases by MAC.
PVC_SDK_API std::vector<Reservation> read_reservations(zk::Session& session, const std::string& vni, bool leases);

struct Acl {
    std::string direction, description, rule;
    long order = 0;
};
// ACLs of one direction ("" both: in, then out), by numeric order.
PVC_SDK_API std::vector<Acl> read_acls(zk::Session& session, const std::string& vni, const std::string& direction);

// --- SR-IOV ---
struct SriovPf {
    std::string phy, mtu;
    std::vector<std::string> vfs;  // natural order
};
struct SriovVf {
    std::string phy, pf, mtu, mac;
    std::string vlan_id, vlan_qos, tx_rate_min, tx_rate_max, link_state, spoof_check, trust, query_rss;
    std::string pci_domain, pci_bus, pci_slot, pci_function;
    std::string used, used_by;
};
// nullopt: no such node.
PVC_SDK_API std::optional<std::vector<SriovPf>> read_sriov_pfs(zk::Session& session, const std::string& node);
// The node's VFs in natural order (digit runs compared as numbers), only
// those of `pf` when given; nullopt: no such node.
PVC_SDK_API std::optional<std::vector<SriovVf>> read_sriov_vfs(zk::Session& session, const std::string& node,
                                                               const std::optional<std::string>& pf = std::nullopt);

// PUT /sriov/vf/<node>/<vf>, `pvc network sriov vf set`: each given value
// written to the VF's config key, in one transaction. vlan_id 0-4095,
// vlan_qos 0-7, rates non-negative integers, link_state auto|enable|disable;
// booleans in any lenient spelling, stored True/False.
struct VfConfig {
    std::optional<std::string> vlan_id, vlan_qos, tx_rate_min, tx_rate_max, link_state, spoof_check, trust, query_rss;
};
PVC_SDK_API NetResult set_vf(zk::Session& session, const std::string& node, const std::string& vf,
                             const VfConfig& config);

}  // namespace pvc::client
