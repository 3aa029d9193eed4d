#include "arp.hpp"

#include <arpa/inet.h>
#include <net/if_arp.h>
#include <linux/if_ether.h>
#include <netpacket/packet.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace pvc::network {

namespace {

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what + ": " + std::strerror(errno)); }

// The ARP payload for Ethernet/IPv4 (RFC 826), packed as on the wire.
struct __attribute__((packed)) ArpPacket {
    uint16_t htype, ptype;
    uint8_t hlen, plen;
    uint16_t op;
    uint8_t sha[6];
    uint8_t spa[4];
    uint8_t tha[6];
    uint8_t tpa[4];
};

}  // namespace

void send_gratuitous_arp(const std::string& ifname, const std::string& ipv4) {
    send_arp_announcement(ifname, ipv4);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    send_arp_announcement(ifname, ipv4);
}

void send_arp_announcement(const std::string& ifname, const std::string& ipv4) {
    in_addr ip{};
    if (inet_pton(AF_INET, ipv4.c_str(), &ip) != 1) throw std::runtime_error("'" + ipv4 + "' is not an IPv4 address");
    unsigned ifindex = if_nametoindex(ifname.c_str());
    if (ifindex == 0) fail("interface " + ifname);
    // Datagram packet socket: the kernel adds the Ethernet header.
    Fd s{::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP))};
    if (s.fd < 0) fail("packet socket");
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
    if (::ioctl(s.fd, SIOCGIFHWADDR, &ifr) < 0) fail("MAC of " + ifname);
    if (ifr.ifr_hwaddr.sa_family != ARPHRD_ETHER) throw std::runtime_error(ifname + " is not an Ethernet interface");

    ArpPacket p{};
    p.htype = htons(ARPHRD_ETHER);
    p.ptype = htons(ETH_P_IP);
    p.hlen = 6;
    p.plen = 4;
    p.op = htons(ARPOP_REPLY);
    std::memcpy(p.sha, ifr.ifr_hwaddr.sa_data, 6);
    std::memcpy(p.spa, &ip, 4);
    std::memset(p.tha, 0xff, 6);
    std::memcpy(p.tpa, &ip, 4);

    sockaddr_ll to{};
    to.sll_family = AF_PACKET;
    to.sll_protocol = htons(ETH_P_ARP);
    to.sll_ifindex = static_cast<int>(ifindex);
    to.sll_halen = 6;
    std::memset(to.sll_addr, 0xff, 6);
    if (::sendto(s.fd, &p, sizeof p, 0, reinterpret_cast<sockaddr*>(&to), sizeof to) != sizeof p)
        fail("sending ARP on " + ifname);
}

}  // namespace pvc::network
