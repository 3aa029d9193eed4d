// A network's keys as ZooKeeper holds them → a validated network or the reason
// it is refused (issue item 7: bad input).
#include <gtest/gtest.h>

#include <algorithm>

#include <arpa/inet.h>

#include <fmt/format.h>

#include "client_network.hpp"

using namespace pvc::network;

namespace {
NetworkKeys managed(std::string net4 = "10.100.0.0/24", std::string gw4 = "10.100.0.1") {
    return {{"", "net100"},          {"nettype", "managed"},   {"mtu", ""},
            {"ip4_network", net4},   {"ip4_gateway", gw4},     {"ip6_network", "None"},
            {"ip6_gateway", "None"}, {"dhcp4_flag", "False"}};
}
}  // namespace

TEST(ClientNetwork, ManagedNetworkAsTheReferenceClientWritesIt) {
    auto p = parse_network("100", managed());
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_EQ(p.network->vni, 100u);
    EXPECT_EQ(p.network->type, NetType::managed);
    EXPECT_EQ(p.network->description, "net100");
    EXPECT_FALSE(p.network->mtu);
    EXPECT_EQ(p.network->base_link(), "vxlan100");
    EXPECT_EQ(p.network->bridge(), "vmbr100");
    EXPECT_EQ(*p.network->ip4_network, "10.100.0.0/24");
}

TEST(ClientNetwork, VniRangeDependsOnTheType) {
    EXPECT_TRUE(parse_network("16777215", managed()).network);
    auto too_big = parse_network("16777216", managed());
    EXPECT_FALSE(too_big.network);
    EXPECT_NE(too_big.error.find("outside 1-16777215"), std::string::npos) << too_big.error;
    EXPECT_FALSE(parse_network("0", managed()).network);

    NetworkKeys bridged{{"nettype", "bridged"}, {"mtu", ""}};
    EXPECT_TRUE(parse_network("4094", bridged).network);
    auto vlan = parse_network("4095", bridged);
    EXPECT_FALSE(vlan.network);
    EXPECT_NE(vlan.error.find("outside 1-4094"), std::string::npos) << vlan.error;
}

TEST(ClientNetwork, VniMustBePlainDecimal) {
    for (const char* bad : {"", "abc", "-5", "010", "1e3", "100 ", "99999999999999999999"})
        EXPECT_FALSE(parse_network(bad, managed()).network) << bad;
}

TEST(ClientNetwork, UnknownNettypeGetsNoLinks) {
    auto k = managed();
    k["nettype"] = "garbage";
    auto p = parse_network("100", k);
    EXPECT_FALSE(p.network);
    EXPECT_NE(p.error.find("neither managed nor bridged"), std::string::npos);
    k.erase("nettype");
    EXPECT_FALSE(parse_network("100", k).network);
}

TEST(ClientNetwork, MalformedSubnetsAreRefused) {
    for (auto [net, gw] : std::vector<std::pair<std::string, std::string>>{
             {"10.300.0.0/24", "None"},     // not an address
             {"10.100.0.0", "None"},        // no prefix
             {"10.100.0.5/24", "None"},     // host bits
             {"10.100.0.0/33", "None"},     // prefix
             {"10.100.0.0/24", "10.101.0.1"},  // gateway outside
             {"10.100.0.0/24", "bogus"},
             {"None", "10.100.0.1"}}) {     // gateway without network
        auto p = parse_network("100", managed(net, gw));
        EXPECT_FALSE(p.network) << net << " " << gw;
        EXPECT_FALSE(p.error.empty());
    }
    auto k = managed();
    k["ip6_network"] = "2001:db8:100::/64";
    k["ip6_gateway"] = "2001:db8:100::1";
    EXPECT_TRUE(parse_network("100", k).network);
    k["ip6_network"] = "2001:db8:100::1/64";
    EXPECT_FALSE(parse_network("100", k).network);
}

TEST(ClientNetwork, UnsetMeansMissingEmptyOrNone) {
    NetworkKeys k{{"nettype", "managed"}};
    auto p = parse_network("7", k);
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_FALSE(p.network->ip4_network);
    EXPECT_FALSE(p.network->mtu);
    k["mtu"] = "None";
    EXPECT_FALSE(parse_network("7", k).network->mtu);
}

TEST(ClientNetwork, MtuUnsetTakesTheMaximumAndIsWrittenBack) {
    auto n = *parse_network("100", managed()).network;
    auto d = decide_mtu(n, 1450, std::nullopt);
    EXPECT_EQ(d.mtu, 1450u);
    EXPECT_TRUE(d.write_back);
}

TEST(ClientNetwork, MtuAboveTheMaximumIsClampedAndWrittenBack) {
    auto k = managed();
    k["mtu"] = "9000";
    auto d = decide_mtu(*parse_network("100", k).network, 1450, std::nullopt);
    EXPECT_EQ(d.mtu, 1450u);
    EXPECT_TRUE(d.write_back);
    k["mtu"] = "1400";
    d = decide_mtu(*parse_network("100", k).network, 1450, std::nullopt);
    EXPECT_EQ(d.mtu, 1400u);
    EXPECT_FALSE(d.write_back);
}

TEST(ClientNetwork, GarbageMtuKeepsTheCurrentOneWithoutWritingBack) {
    auto k = managed();
    k["mtu"] = "jumbo";
    auto n = *parse_network("100", k).network;
    EXPECT_TRUE(n.mtu_garbage);
    auto d = decide_mtu(n, 1450, 1300u);
    EXPECT_EQ(d.mtu, 1300u);
    EXPECT_FALSE(d.write_back);
    EXPECT_FALSE(d.warning.empty());
    EXPECT_EQ(decide_mtu(n, 1450, std::nullopt).mtu, 1450u);
}

TEST(ClientNetwork, GatewayAddressesCarryTheirNetworksPrefixIpv6First) {
    auto k = managed();
    k["ip6_network"] = "2001:db8:100::/64";
    k["ip6_gateway"] = "2001:db8:100::1";
    auto n = *parse_network("100", k).network;
    EXPECT_EQ(gateway_addresses(n), (std::vector<std::string>{"2001:db8:100::1/64", "10.100.0.1/24"}));
    EXPECT_TRUE(gateway_addresses(*parse_network("100", managed("10.100.0.0/24", "None")).network).empty());
    NetworkKeys bridged{{"nettype", "bridged"}};
    EXPECT_TRUE(gateway_addresses(*parse_network("100", bridged).network).empty());
}

TEST(ClientNetwork, ClientLinkNamesNeedTheirKindAndAPlainDecimalVni) {
    auto vni = [](const char* name, const char* kind) {
        LinkState l;
        l.name = name;
        l.kind = kind;
        return client_link_vni(l);
    };
    EXPECT_EQ(vni("vxlan1000", "vxlan"), "1000");
    EXPECT_EQ(vni("vmbr1000", "bridge"), "1000");
    EXPECT_EQ(vni("vlan200", "vlan"), "200");
    EXPECT_EQ(vni("vmbr1000", "vxlan"), std::nullopt);
    EXPECT_EQ(vni("vxlan1000", "bridge"), std::nullopt);
    EXPECT_EQ(vni("vmbr", "bridge"), std::nullopt);
    EXPECT_EQ(vni("vmbr01", "bridge"), std::nullopt);
    EXPECT_EQ(vni("vmbr1a", "bridge"), std::nullopt);
    EXPECT_EQ(vni("brcluster", "bridge"), std::nullopt);
    EXPECT_EQ(vni("xvmbr1", "bridge"), std::nullopt);
}

// The kernel reports addresses in canonical form (lower case, zeros
// compressed); a gateway written otherwise must match it, or the old primary
// never finds it among its addresses and keeps it after a hand-over.
TEST(ClientNetwork, AddressesAreKeptInTheKernelsCanonicalForm) {
    auto k = managed("10.100.0.0/024", "10.100.0.1");
    k["ip6_network"] = "FD00:0100:0:0::/064";
    k["ip6_gateway"] = "FD00:100:0::0001";
    auto p = parse_network("100", k);
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_EQ(*p.network->ip6_network, "fd00:100::/64");
    EXPECT_EQ(*p.network->ip6_gateway, "fd00:100::1");
    EXPECT_EQ(*p.network->ip4_network, "10.100.0.0/24");
    EXPECT_EQ(gateway_addresses(*p.network), (std::vector<std::string>{"fd00:100::1/64", "10.100.0.1/24"}));
}

namespace {
LinkState link_state(int ifindex, const char* name, const char* kind, int master = 0, uint32_t id = 0, int parent = 0,
                     uint16_t port = 0) {
    LinkState l;
    l.ifindex = ifindex;
    l.name = name;
    l.kind = kind;
    l.master = master;
    l.id = id;
    l.parent = parent;
    l.port = port;
    return l;
}
}  // namespace

// The start-up sweep removes only links of PVC's shape (its VNI or id, its
// port, over its device, in its own bridge); an OS VLAN, an admin bridge, or
// a VXLAN another tool made are left alone even when named like PVC's.
// (vlan links by description: the CI kernel cannot make them.)
TEST(OrphanSweep, OnlyLinksOfPvcsOwnShapeAreRemoved) {
    std::vector<LinkState> links = {
        link_state(1, "eth0", ""),                           // cluster device
        link_state(2, "eth1", ""),                           // bridge_device
        link_state(3, "eth2", ""),                           // another NIC
        link_state(10, "vmbr5", "bridge"),                   // a deleted bridged network: removed
        link_state(11, "vlan5", "vlan", 10, 5, 2),
        link_state(12, "tap5", "tun", 10),                   // a guest's tap
        link_state(20, "vmbr6", "bridge"),                   // a deleted managed network: removed
        link_state(21, "vxlan6", "vxlan", 20, 6, 1, 4789),
        link_state(30, "vlan10", "vlan", 0, 10, 3),          // an OS VLAN on another NIC: left
        link_state(31, "vlan11", "vlan", 0, 12, 2),          // another id than its name: left
        link_state(40, "vmbr3", "bridge"),                   // an admin bridge with a NIC: left
        link_state(41, "eth3", "", 40),
        link_state(50, "vxlan9", "vxlan", 0, 9, 1, 8472),    // another port: left
        link_state(51, "vxlan12", "vxlan", 0, 12, 3, 4789),  // over another device: left
        link_state(60, "vmbr13", "bridge"),                  // a PVC-shaped vxlan in a bridge with a NIC: both left
        link_state(61, "vxlan13", "vxlan", 60, 13, 1, 4789),
        link_state(62, "eth4", "", 60),
        link_state(70, "vmbr14", "bridge"),                  // an empty bridge: removed
        link_state(80, "vmbr15", "bridge"),                  // wanted: kept
        link_state(81, "vxlan15", "vxlan", 80, 15, 1, 4789),
        link_state(90, "vlan16", "vlan", 0, 16, 2),          // a configured host device: kept
        link_state(91, "vlan17", "vlan", 0, 17, 2),          // an OS VLAN on bridge_device, in no bridge: left
        link_state(92, "vxlan18", "vxlan", 0, 18, 1, 4789),  // PVC's, its bridge already gone: removed
        link_state(93, "vmbr0", "bridge"),                   // number 0 is no network's: left, even empty
    };
    SweepResult r = plan_orphan_sweep(links, {{"15"}, {"eth0", "eth1", "vlan16"}, "eth0", "eth1"});
    EXPECT_EQ(r.removed, (std::vector<std::string>{"vmbr5", "vmbr6", "vmbr14", "vlan5", "vxlan6", "vxlan18"}));
    EXPECT_EQ(r.left, (std::vector<std::string>{"vmbr3 (has port eth3)", "vmbr13 (has port eth4)",
                                                "vmbr0 (no network has number 0)", "vlan10 (not on bridge_device)",
                                                "vlan11 (id 12)",
                                                "vxlan9 (UDP port 8472)", "vxlan12 (not over the cluster device)",
                                                "vxlan13 (a port of a bridge that stays)", "vlan17 (in no bridge)"}));
    // Without a bridge_device configured, no vlan link is PVC's.
    r = plan_orphan_sweep(links, {{"15"}, {"eth0"}, "eth0", std::nullopt});
    EXPECT_EQ(std::count(r.removed.begin(), r.removed.end(), "vlan5"), 0);
    EXPECT_EQ(std::count(r.removed.begin(), r.removed.end(), "vmbr5"), 0);
}

// Overlapping subnets (issue item 7): noticed between networks, never
// refused; each pair once per family, malformed subnets skipped.
TEST(SubnetOverlap, ContainmentAndEqualityOverlapAdjacencyDoesNot) {
    EXPECT_TRUE(subnets_overlap("10.0.0.0/16", "10.0.5.0/24", AF_INET));
    EXPECT_TRUE(subnets_overlap("10.0.5.0/24", "10.0.0.0/16", AF_INET));
    EXPECT_TRUE(subnets_overlap("10.0.5.0/24", "10.0.5.0/24", AF_INET));
    EXPECT_TRUE(subnets_overlap("0.0.0.0/0", "192.168.1.0/24", AF_INET));
    EXPECT_FALSE(subnets_overlap("10.0.0.0/25", "10.0.0.128/25", AF_INET));  // adjacent
    EXPECT_FALSE(subnets_overlap("10.0.0.0/24", "10.0.1.0/24", AF_INET));
    EXPECT_FALSE(subnets_overlap("10.0.1.0/24", "10.0.0.0/24", AF_INET));
    EXPECT_TRUE(subnets_overlap("fd00::/48", "fd00:0:0:1::/64", AF_INET6));
    EXPECT_FALSE(subnets_overlap("fd00::/64", "fd00:0:0:1::/64", AF_INET6));  // adjacent
    EXPECT_FALSE(subnets_overlap("fd00::/49", "fd00:0:0:8000::/49", AF_INET6));
    // Not strict CIDRs of the family: not compared.
    EXPECT_FALSE(subnets_overlap("10.0.0.1/24", "10.0.0.0/24", AF_INET));
    EXPECT_FALSE(subnets_overlap("10.300.0.0/24", "10.0.0.0/8", AF_INET));
    EXPECT_FALSE(subnets_overlap("10.0.0.0", "10.0.0.0/8", AF_INET));
    EXPECT_FALSE(subnets_overlap("fd00::/64", "fd00::/64", AF_INET));
}

TEST(SubnetOverlap, EveryOverlappingPairOnceWithBothSubnets) {
    std::map<std::string, NetworkSubnets> nets{
        {"100", {"10.100.0.0/16", "fd00:100::/64"}},
        {"101", {"10.100.7.0/24", std::nullopt}},   // inside 100's IPv4
        {"102", {"10.101.0.0/24", "fd00:100::/48"}},  // IPv6 contains 100's; IPv4 apart
        {"103", {"10.100.0.0/25", std::nullopt}},   // inside 100's, beside 101
        {"104", {"10.102.0.0/24", "fd00:104::/64"}},  // alone
    };
    auto o = find_overlaps(nets);
    std::vector<SubnetOverlap> want{
        {"100", "10.100.0.0/16", "101", "10.100.7.0/24"},
        {"100", "fd00:100::/64", "102", "fd00:100::/48"},
        {"100", "10.100.0.0/16", "103", "10.100.0.0/25"},
    };
    EXPECT_EQ(o, want);
    // Both families of one pair: IPv4 first.
    auto both = find_overlaps({{"1", {"10.0.0.0/24", "fd00::/64"}}, {"2", {"10.0.0.0/25", "fd00::/80"}}});
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(both[0].subnet_a, "10.0.0.0/24");
    EXPECT_EQ(both[1].subnet_a, "fd00::/64");
}

TEST(SubnetOverlap, MalformedAndUnsetSubnetsAreSkipped) {
    auto o = find_overlaps({
        {"1", {"10.0.0.0/24", std::nullopt}},
        {"2", {"10.0.0.5/24", std::nullopt}},    // host bits set
        {"3", {"10.300.0.0/8", std::nullopt}},   // not an address
        {"4", {"fd00::/64", "10.0.0.0/24"}},     // families swapped
        {"5", {std::nullopt, std::nullopt}},
        {"6", {"garbage", "fd00::/200"}},
    });
    EXPECT_TRUE(o.empty());
    EXPECT_TRUE(find_overlaps({}).empty());
    // Adjacent subnets of many networks: none overlap.
    std::map<std::string, NetworkSubnets> adjacent;
    for (int i = 0; i < 256; ++i)
        adjacent[std::to_string(1000 + i)] = {"10.9." + std::to_string(i) + ".0/24",
                                               "fd00:9:" + fmt::format("{:x}", i) + "::/48"};
    EXPECT_TRUE(find_overlaps(adjacent).empty());
    adjacent["2000"] = {"10.9.0.0/16", std::nullopt};
    EXPECT_EQ(find_overlaps(adjacent).size(), 256u);
}
