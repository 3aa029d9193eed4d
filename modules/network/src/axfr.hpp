// A zone transfer (AXFR, RFC 5936) over TCP, bounded by a deadline: how the
// DNS aggregator reads a managed network's zone from its dnsmasq.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace pvc::network {

struct DnsRecord {
    std::string name;  // lower case, no trailing dot
    uint32_t ttl = 0;
    std::string type;  // "A", "AAAA", "SOA", "NS", "CNAME", "PTR" or "TYPE<n>"
    std::string data;  // A/AAAA: the address as inet_ntop writes it; NS/CNAME/PTR: the name; else ""
    bool operator==(const DnsRecord&) const = default;
};

class AxfrError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Every record of `zone` as `server` (an IPv4 or IPv6 address) sends it,
// the closing SOA left out. Throws AxfrError (refused, malformed, no answer
// within `deadline`).
std::vector<DnsRecord> axfr(const std::string& server, const std::string& zone, std::chrono::milliseconds deadline,
                            uint16_t port = 53);

// The parsing of the answer's messages (each without its 2-byte length), for
// the tests: appends the records of one message; returns how many SOA
// records it held.
int parse_axfr_message(const std::string& msg, uint16_t id, std::vector<DnsRecord>& out);

}  // namespace pvc::network
