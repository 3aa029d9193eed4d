// Address math of the network keys (pvc.cluster.networks): IPv4 and IPv6
// addresses and networks as Python's ipaddress sees them, so a node accepts
// and computes (by-id) exactly the addresses the reference does. The network
// module validates those keys with it; the storage module derives this
// node's storage address with it.
#pragma once

#include <optional>
#include <string>

#include <fmt/format.h>

#include "pvc/export.hpp"

namespace pvc::address {

using u128 = unsigned __int128;

struct IpAddress {
    int family = 4;  // 4 or 6
    u128 value = 0;
    int bits() const { return family == 4 ? 32 : 128; }
};

PVC_SDK_API std::optional<IpAddress> parse_ip(const std::string& text);
PVC_SDK_API std::string format_ip(const IpAddress& a);
PVC_SDK_API std::optional<int> parse_prefix(const std::string& text, int max_bits);
PVC_SDK_API u128 host_mask(int bits, int prefix);

struct IpNetwork {
    IpAddress address;  // the network address
    int prefix = 0;

    u128 last() const { return address.value | host_mask(address.bits(), prefix); }
    // Usable hosts: Python's ip_network(...).hosts().
    u128 first_host() const {
        int host_bits = address.bits() - prefix;
        return host_bits <= 1 ? address.value : address.value + 1;
    }
    u128 last_host() const {
        int host_bits = address.bits() - prefix;
        if (address.family == 4 && host_bits > 1) return last() - 1;
        return last();
    }
    bool is_host(const IpAddress& a) const {
        return a.family == address.family && a.value >= first_host() && a.value <= last_host();
    }
    std::string to_string() const { return fmt::format("{}/{}", format_ip(address), prefix); }
};

// A strict network: "addr/prefix" with no host bits set.
PVC_SDK_API std::optional<IpNetwork> parse_network(const std::string& text, std::string& why);

// This node's address ("addr/prefix") in `network`, from the address key as
// written: "by-id" (the node_id-th usable host counted from 1; node id 0, a
// hostname without digits, is the last usable host, as the reference) or
// "addr/prefix" (a usable host of the network). nullopt with `why` when the
// key cannot give one; `hostname` names the host in that message.
PVC_SDK_API std::optional<std::string> node_address(const IpNetwork& network, const std::string& written,
                                                    const std::string& node_id, const std::string& hostname,
                                                    std::string& why);

}  // namespace pvc::address
