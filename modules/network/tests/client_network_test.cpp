// A network's keys as ZooKeeper holds them → a validated network or the reason
// it is refused (network.md §4.1, §5.2; issue item 7: bad input).
#include <gtest/gtest.h>

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
