// The RTM_NEWLINK requests the module sends for client-network base links,
// decoded attribute by attribute (as the reference's `ip link add` would). The vlan one is
// what a bridged network sends; this is how it is tested on kernels without
// 802.1Q support, where the kernel refuses it.
#include <arpa/inet.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#include <cstring>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "netlink.hpp"

using namespace pvc::network;

namespace {

// Attributes of one nesting level: type -> payload.
std::map<int, std::string> attrs(const char* data, size_t len) {
    std::map<int, std::string> out;
    auto* a = reinterpret_cast<const rtattr*>(data);
    int left = static_cast<int>(len);
    for (; RTA_OK(a, left); a = RTA_NEXT(a, left))
        out[a->rta_type & NLA_TYPE_MASK] = std::string(static_cast<const char*>(RTA_DATA(a)), RTA_PAYLOAD(a));
    return out;
}

struct Request {
    nlmsghdr header{};
    ifinfomsg info{};
    std::map<int, std::string> top, linkinfo, data;
};

Request decode(const std::string& bytes) {
    Request r;
    EXPECT_GE(bytes.size(), NLMSG_LENGTH(sizeof(ifinfomsg)));
    std::memcpy(&r.header, bytes.data(), sizeof r.header);
    std::memcpy(&r.info, bytes.data() + NLMSG_HDRLEN, sizeof r.info);
    size_t off = NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(ifinfomsg));
    r.top = attrs(bytes.data() + off, bytes.size() - off);
    if (r.top.count(IFLA_LINKINFO)) {
        const auto& li = r.top[IFLA_LINKINFO];
        r.linkinfo = attrs(li.data(), li.size());
        if (r.linkinfo.count(IFLA_INFO_DATA)) {
            const auto& d = r.linkinfo[IFLA_INFO_DATA];
            r.data = attrs(d.data(), d.size());
        }
    }
    return r;
}

template <class T>
T as(const std::string& payload) {
    T v{};
    EXPECT_GE(payload.size(), sizeof v);
    std::memcpy(&v, payload.data(), sizeof v);
    return v;
}

std::string cstr(const std::string& payload) { return std::string(payload.c_str()); }

}  // namespace

TEST(LinkRequest, BridgedNetworkSendsAVlanOnTheBridgeDevice) {
    LinkPtr link = vlan_link("vlan200", 200, 7);
    Request r = decode(add_request(link.get()));
    EXPECT_EQ(r.header.nlmsg_type, RTM_NEWLINK);
    EXPECT_EQ(r.header.nlmsg_flags & (NLM_F_CREATE | NLM_F_EXCL), NLM_F_CREATE | NLM_F_EXCL);
    EXPECT_EQ(cstr(r.top[IFLA_IFNAME]), "vlan200");
    ASSERT_TRUE(r.top.count(IFLA_LINK));
    EXPECT_EQ(as<uint32_t>(r.top[IFLA_LINK]), 7u);  // parent: bridge_device's ifindex
    EXPECT_EQ(cstr(r.linkinfo[IFLA_INFO_KIND]), "vlan");
    ASSERT_TRUE(r.data.count(IFLA_VLAN_ID));
    EXPECT_EQ(as<uint16_t>(r.data[IFLA_VLAN_ID]), 200);
    // Nothing else: kernel defaults for protocol (802.1Q) and flags.
    EXPECT_EQ(r.data.size(), 1u);
}

TEST(LinkRequest, ManagedNetworkSendsAVxlanOnPort4789OnTheClusterDevice) {
    LinkPtr link = vxlan_link("vxlan16777215", 16777215, 4789, 3);
    Request r = decode(add_request(link.get()));
    EXPECT_EQ(r.header.nlmsg_type, RTM_NEWLINK);
    EXPECT_EQ(cstr(r.top[IFLA_IFNAME]), "vxlan16777215");
    EXPECT_EQ(cstr(r.linkinfo[IFLA_INFO_KIND]), "vxlan");
    EXPECT_EQ(as<uint32_t>(r.data[IFLA_VXLAN_ID]), 16777215u);
    // The port goes on the wire in network byte order (the kernel would use 8472 without it).
    ASSERT_TRUE(r.data.count(IFLA_VXLAN_PORT));
    EXPECT_EQ(ntohs(as<uint16_t>(r.data[IFLA_VXLAN_PORT])), 4789);
    EXPECT_EQ(as<uint32_t>(r.data[IFLA_VXLAN_LINK]), 3u);
    // No local, remote or group address: EVPN (outside the daemon) does the flooding.
    EXPECT_FALSE(r.data.count(IFLA_VXLAN_LOCAL));
    EXPECT_FALSE(r.data.count(IFLA_VXLAN_GROUP));
}

TEST(LinkRequest, BridgeIsAPlainBridge) {
    LinkPtr link = bridge_link("vmbr100");
    Request r = decode(add_request(link.get()));
    EXPECT_EQ(cstr(r.top[IFLA_IFNAME]), "vmbr100");
    EXPECT_EQ(cstr(r.linkinfo[IFLA_INFO_KIND]), "bridge");
}
