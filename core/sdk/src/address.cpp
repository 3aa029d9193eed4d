// Address math of the network keys (pvc/address.hpp).
#include "pvc/address.hpp"

#include <arpa/inet.h>

#include <array>
#include <charconv>

namespace pvc::address {

std::optional<IpAddress> parse_ip(const std::string& text) {
    IpAddress a;
    if (text.find(':') == std::string::npos) {
        in_addr v4{};
        if (::inet_pton(AF_INET, text.c_str(), &v4) != 1) return std::nullopt;
        a.family = 4;
        a.value = ntohl(v4.s_addr);
        return a;
    }
    in6_addr v6{};
    if (::inet_pton(AF_INET6, text.c_str(), &v6) != 1) return std::nullopt;
    a.family = 6;
    for (unsigned char byte : v6.s6_addr) a.value = (a.value << 8) | byte;
    return a;
}

std::string format_ip(const IpAddress& a) {
    std::array<char, INET6_ADDRSTRLEN> buf{};
    if (a.family == 4) {
        in_addr v4{};
        v4.s_addr = htonl(static_cast<uint32_t>(a.value));
        ::inet_ntop(AF_INET, &v4, buf.data(), buf.size());
    } else {
        in6_addr v6{};
        u128 v = a.value;
        for (int i = 15; i >= 0; --i) {
            v6.s6_addr[i] = static_cast<unsigned char>(v & 0xff);
            v >>= 8;
        }
        ::inet_ntop(AF_INET6, &v6, buf.data(), buf.size());
    }
    return buf.data();
}

std::optional<int> parse_prefix(const std::string& text, int max_bits) {
    if (text.empty() || text.size() > 3) return std::nullopt;
    int value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || ptr != text.data() + text.size() || value < 0 || value > max_bits) return std::nullopt;
    return value;
}

u128 host_mask(int bits, int prefix) {
    int host_bits = bits - prefix;
    if (host_bits == 0) return 0;
    if (host_bits == 128) return ~u128{0};
    return (u128{1} << host_bits) - 1;
}

std::optional<IpNetwork> parse_network(const std::string& text, std::string& why) {
    auto slash = text.find('/');
    if (slash == std::string::npos) {
        why = "expected a network in CIDR form (address/prefix)";
        return std::nullopt;
    }
    auto addr = parse_ip(text.substr(0, slash));
    if (!addr) {
        why = "not a valid IP network: bad address part";
        return std::nullopt;
    }
    auto prefix = parse_prefix(text.substr(slash + 1), addr->bits());
    if (!prefix) {
        why = fmt::format("not a valid IP network: prefix length must be 0..{}", addr->bits());
        return std::nullopt;
    }
    if (addr->value & host_mask(addr->bits(), *prefix)) {
        IpAddress net = *addr;
        net.value &= ~host_mask(addr->bits(), *prefix);
        why = fmt::format("not a valid IP network: host bits are set (did you mean {}/{}?)", format_ip(net),
                          *prefix);
        return std::nullopt;
    }
    return IpNetwork{*addr, *prefix};
}

std::optional<std::string> node_address(const IpNetwork& network, const std::string& written,
                                        const std::string& node_id, const std::string& hostname, std::string& why) {
    if (written == "by-id") {
        u128 count = network.last_host() - network.first_host() + 1;
        u128 id = 0;
        bool overflow = false;
        for (char ch : node_id) {
            if (id > (~u128{0} - 9) / 10) overflow = true;
            id = id * 10 + static_cast<u128>(ch - '0');
        }
        if (!overflow && id == 0)
            return fmt::format("{}/{}", format_ip({network.address.family, network.last_host()}), network.prefix);
        if (overflow || id > count) {
            why = fmt::format("by-id: node id {} of host '{}' is beyond the usable hosts of {}; use a static address",
                              node_id, hostname, network.to_string());
            return std::nullopt;
        }
        return fmt::format("{}/{}", format_ip({network.address.family, network.first_host() + (id - 1)}),
                           network.prefix);
    }
    auto slash = written.find('/');
    auto addr = parse_ip(written.substr(0, slash));
    if (slash == std::string::npos) {
        why = fmt::format("'{}' must be 'by-id' or an address with its prefix (addr/prefix)", written);
    } else if (!addr || !parse_prefix(written.substr(slash + 1), addr->bits())) {
        why = fmt::format("'{}' is not a valid address/prefix", written);
    } else if (!network.is_host(*addr)) {
        why = fmt::format("'{}' is not a usable host address of {}", written, network.to_string());
    } else {
        return written;
    }
    return std::nullopt;
}

}  // namespace pvc::address
