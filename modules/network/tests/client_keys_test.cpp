// What the client library writes for a network (pvc/client_network.hpp, used
// by `pvc network` and the API) is what this module reads: networks added and
// modified through it, against a real ZooKeeper, read back key by key as the
// module reads them and accepted by parse_network with the values asked for.
#include <gtest/gtest.h>

#include "client_network.hpp"
#include "pvc/client_network.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;

namespace {

pvc::network::NetworkKeys read_keys(pvc::zk::Session& s, const std::string& vni) {
    pvc::network::NetworkKeys keys;
    keys["nettype"] = s.get(path("network.type", {vni})).value_or("");
    keys["mtu"] = s.get(path("network.mtu", {vni})).value_or("");
    for (const char* k : {"ip4_network", "ip4_gateway", "ip6_network", "ip6_gateway", "dhcp4_flag", "dhcp4_start",
                          "dhcp4_end", "dhcp6_flag", "domain", "name_servers"})
        keys[k] = s.get(path("network.vni", {vni}) + "/" + k).value_or("");
    return keys;
}

TEST(NetworkClientKeys, WhatClientsWriteIsWhatTheModuleReads) {
    pvc::test::ZkServer server;
    auto s = pvc::zk::Session::connect({server.hosts(), 10s, 15s, 10s});
    s->ensure_path(path("base.network"));

    pvc::client::NetworkSpec m;
    m.vni = "4100";
    m.description = "office";
    m.nettype = "managed";
    m.mtu = "";
    m.ip4_network = "10.41.0.0/24";
    m.ip4_gateway = "10.41.0.1";
    m.ip6_network = "2001:db8:41::/64";
    m.dhcp4 = true;
    m.dhcp4_start = "10.41.0.100";
    m.dhcp4_end = "10.41.0.199";
    ASSERT_TRUE(pvc::client::add_network(*s, m).ok());
    auto p = pvc::network::parse_network("4100", read_keys(*s, "4100"));
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_EQ(p.network->type, pvc::network::NetType::managed);
    EXPECT_FALSE(p.network->mtu);
    EXPECT_EQ(p.network->ip4_network, "10.41.0.0/24");
    EXPECT_EQ(p.network->ip6_gateway, "2001:db8:41::1");
    EXPECT_EQ(pvc::network::gateway_addresses(*p.network),
              (std::vector<std::string>{"2001:db8:41::1/64", "10.41.0.1/24"}));

    pvc::client::NetworkChange c;
    c.mtu = "1400";
    c.ip6_network = "";
    ASSERT_TRUE(pvc::client::modify_network(*s, "office", c).ok());
    p = pvc::network::parse_network("4100", read_keys(*s, "4100"));
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_EQ(p.network->mtu, 1400u);
    EXPECT_FALSE(p.network->ip6_network);

    pvc::client::NetworkSpec b;
    b.vni = "41";
    b.description = "vlan41";
    b.nettype = "bridged";
    b.mtu = "";
    ASSERT_TRUE(pvc::client::add_network(*s, b).ok());
    p = pvc::network::parse_network("41", read_keys(*s, "41"));
    ASSERT_TRUE(p.network) << p.error;
    EXPECT_EQ(p.network->type, pvc::network::NetType::bridged);
    EXPECT_EQ(p.network->base_link(), "vlan41");
    EXPECT_FALSE(p.network->ip4_network);
}

}  // namespace
