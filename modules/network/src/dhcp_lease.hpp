// DHCP leases in ZooKeeper as the reference's dnsmasq lease script writes
// them: /networks/<vni>/dhcp4_leases/<mac> = "" with
// expiry, ipaddr, hostname, clientid. Used by the lease helper that dnsmasq
// runs (`--dhcp-script`), one process per lease event.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pvc/zk.hpp"

namespace pvc::network {

struct Lease {
    std::string mac;        // or the DUID, for DHCPv6 (kept as the reference does)
    std::string ip;
    std::string hostname;   // "" if none
    std::string expiry;     // Unix time, "0" = infinite
    std::string client_id;  // "*" if none
};

// The VNI in DNSMASQ_BRIDGE_INTERFACE: its first run of digits ("vmbr100" -> "100").
std::optional<std::string> bridge_vni(const std::string& interface);

// The lease of an `add`/`old` event: argv after the action, dnsmasq's environment.
Lease lease_from_event(const std::vector<std::string>& args, const char* expires_env, const char* client_id_env);

// One line of the `init` answer dnsmasq reads back: "<expiry> <mac> <ip>
// <hostname> <clientid>", `*` for an empty hostname or client id (a deliberate
// deviation: the reference printed two adjacent spaces, which dnsmasq misreads).
std::string init_line(const Lease& l);

// All leases of a network (absent list: none).
std::vector<Lease> read_leases(zk::Session& zk, const std::string& vni);
// The lease replaced whole in one transaction (an existing node is deleted
// first; a deliberate deviation: the reference's `add` failed on an existing
// lease and ignored `old`). Returns the transaction's status.
zk::Status write_lease(zk::Session& zk, const std::string& vni, const Lease& l);
// Recursive delete; absent is fine.
void delete_lease(zk::Session& zk, const std::string& vni, const std::string& mac);

}  // namespace pvc::network
