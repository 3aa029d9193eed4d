// Gratuitous ARP after an address moves to this node: what
// Habets' `arping -P -U -c 2 -W 0.02 -S <ip> <ip>` sends, so switches and
// neighbours learn the address's new MAC at once.
#pragma once

#include <string>

namespace pvc::network {

// Two unsolicited ARP replies 20 ms apart on `ifname`, Ethernet broadcast,
// sender MAC = the interface's, sender IP = target IP = `ipv4`. Throws
// std::runtime_error on failure (callers log it as a warning).
void send_gratuitous_arp(const std::string& ifname, const std::string& ipv4);
// One of those replies (the module sends the second from a timer, so its
// worker never waits the 20 ms).
void send_arp_announcement(const std::string& ifname, const std::string& ipv4);

}  // namespace pvc::network
