// The client library's network writes (pvc/client_network.hpp) against a real
// ZooKeeper: each operation's keys as read back, its checks and messages,
// ACL ordering, SR-IOV VF settings, and concurrent writers on one network
// (eight reservation adds at once: none lost; ACL adds at once: dense order).
#include <barrier>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "pvc/client_network.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace pvc;
using namespace std::chrono_literals;
using schema::path;

namespace {

class ClientNetwork : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        zk_ = connect();
        zk_->ensure_path(path("base.network"));
        vni_ = std::to_string(next_vni_++);
        desc_ = test::unique_name("net");
    }
    static std::shared_ptr<zk::Session> connect() { return zk::Session::connect({server_->hosts(), 10s, 15s, 10s}); }
    std::string get(const std::string& p) { return zk_->get(p).value_or("<absent>"); }

    client::NetworkSpec managed() {
        client::NetworkSpec s;
        s.vni = vni_;
        s.description = desc_;
        s.nettype = "managed";
        s.mtu = "";
        s.ip4_network = "10.10.0.0/24";
        s.ip4_gateway = "10.10.0.1";
        s.dhcp4 = true;
        s.dhcp4_start = "10.10.0.100";
        s.dhcp4_end = "10.10.0.199";
        return s;
    }

    static test::ZkServer* server_;
    static int next_vni_;
    std::shared_ptr<zk::Session> zk_;
    std::string vni_, desc_;
};
test::ZkServer* ClientNetwork::server_ = nullptr;
int ClientNetwork::next_vni_ = 1000;

TEST_F(ClientNetwork, AddWritesEveryKeyOfTheNetwork) {
    auto s = managed();
    s.name_servers = {"10.10.0.1"};  // one server stays one (the reference split it into characters)
    s.ip6_network = "2001:db8:100::/64";
    auto r = client::add_network(*zk_, s);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.message, "Network '" + desc_ + "' added successfully!");
    EXPECT_EQ(get(path("network.vni", {vni_})), desc_);
    EXPECT_EQ(get(path("network.type", {vni_})), "managed");
    EXPECT_EQ(get(path("network.mtu", {vni_})), "");
    EXPECT_EQ(get(path("network.domain", {vni_})), desc_ + ".local");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.10.0.1");
    EXPECT_EQ(get(path("network.ip4.network", {vni_})), "10.10.0.0/24");
    EXPECT_EQ(get(path("network.ip4.gateway", {vni_})), "10.10.0.1");
    EXPECT_EQ(get(path("network.ip4.dhcp", {vni_})), "True");
    EXPECT_EQ(get(path("network.ip4.dhcp_start", {vni_})), "10.10.0.100");
    EXPECT_EQ(get(path("network.ip4.dhcp_end", {vni_})), "10.10.0.199");
    EXPECT_EQ(get(path("network.ip6.network", {vni_})), "2001:db8:100::/64");
    EXPECT_EQ(get(path("network.ip6.gateway", {vni_})), "2001:db8:100::1");
    EXPECT_EQ(get(path("network.ip6.dhcp", {vni_})), "True");
    for (const char* k : {"network.lease", "network.reservation", "network.rule", "network.rule.in", "network.rule.out"})
        EXPECT_EQ(get(path(k, {vni_})), "") << k;
    // Nothing at the ZooKeeper root (the reference's POST /network/<vni> wrote there).
    EXPECT_FALSE(zk_->exists("/nettype"));

    EXPECT_EQ(client::add_network(*zk_, s).message, "ERROR: A network with VNI '" + vni_ + "' already exists!");
    s.vni = std::to_string(next_vni_++);
    EXPECT_EQ(client::add_network(*zk_, s).message, "ERROR: A network with description '" + desc_ + "' already exists!");
    EXPECT_FALSE(zk_->exists(path("network.vni", {s.vni})));
}

TEST_F(ClientNetwork, BridgedWithoutOptionalsStoresNone) {
    client::NetworkSpec s;
    s.vni = vni_;
    s.description = desc_;
    s.nettype = "bridged";
    ASSERT_TRUE(client::add_network(*zk_, s).ok());
    EXPECT_EQ(get(path("network.domain", {vni_})), "None");
    EXPECT_EQ(get(path("network.ip4.network", {vni_})), "None");
    EXPECT_EQ(get(path("network.ip6.dhcp", {vni_})), "False");
    EXPECT_EQ(get(path("network.ip4.dhcp", {vni_})), "False");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "");
}

TEST_F(ClientNetwork, AddRefusesBadInputWritingNothing) {
    auto expect_refused = [&](client::NetworkSpec s, const std::string& text) {
        auto r = client::add_network(*zk_, s);
        EXPECT_EQ(r.status, 400);
        EXPECT_EQ(r.message, text);
        EXPECT_FALSE(zk_->exists(path("network.vni", {s.vni}))) << text;
    };
    auto s = managed();
    s.dhcp4_end = std::nullopt;
    expect_refused(s, "ERROR: DHCPv4 start and end addresses are required for a DHCPv4-enabled network.");
    s = managed();
    s.vni = "12a";
    expect_refused(s, "ERROR: VNI '12a' is not valid: a managed network's VNI is 1-16777215!");
    s = managed();
    s.nettype = "bridged";
    s.vni = "5000";
    expect_refused(s, "ERROR: VNI '5000' is not valid: a bridged network's VNI is 1-4094!");
    s = managed();
    s.ip4_network = "10.10.0.1/24";
    expect_refused(s, "ERROR: IPv4 network '10.10.0.1/24' is not valid (address/prefix, no host bits)!");
    s = managed();
    s.ip4_gateway = "10.11.0.1";
    expect_refused(s, "ERROR: IPv4 gateway '10.11.0.1' is not a host address of network '10.10.0.0/24'!");
    s = managed();
    s.ip4_network = std::nullopt;
    s.dhcp4 = false;
    expect_refused(s, "ERROR: IPv4 gateway '10.10.0.1' is set without an IPv4 network!");
    s = managed();
    s.name_servers = {"dns.example"};
    expect_refused(s, "ERROR: Name server 'dns.example' is not a valid IP address!");
    s = managed();
    s.mtu = "big";
    expect_refused(s, "ERROR: MTU 'big' is not valid: it must be a number of bytes (at most 65535)!");
}

TEST_F(ClientNetwork, ModifyWritesOnlyWhatIsGivenAndKeepsNameServers) {
    auto s = managed();
    s.name_servers = {"10.10.0.1", "10.10.0.2"};
    ASSERT_TRUE(client::add_network(*zk_, s).ok());
    client::NetworkChange c;
    c.mtu = "9000";
    c.ip6_network = "2001:db8:200::/64";
    auto r = client::modify_network(*zk_, desc_, c);  // by description
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.message, "Network '" + desc_ + "' modified successfully!");
    EXPECT_EQ(get(path("network.mtu", {vni_})), "9000");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.10.0.1,10.10.0.2");  // not cleared
    EXPECT_EQ(get(path("network.ip6.gateway", {vni_})), "2001:db8:200::1");
    EXPECT_EQ(get(path("network.ip6.dhcp", {vni_})), "True");

    c = {};
    c.ip6_network = "";
    c.name_servers = std::vector<std::string>{"10.10.0.3"};
    c.description = desc_ + "-b";
    ASSERT_TRUE(client::modify_network(*zk_, vni_, c).ok());
    EXPECT_EQ(get(path("network.ip6.dhcp", {vni_})), "False");
    EXPECT_EQ(get(path("network.ip6.gateway", {vni_})), "None");  // no gateway without its network
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.10.0.3");
    EXPECT_EQ(get(path("network.vni", {vni_})), desc_ + "-b");

    c = {};
    c.dhcp4_start = "10.20.0.5";
    EXPECT_EQ(client::modify_network(*zk_, vni_, c).message,
              "ERROR: DHCPv4 start address '10.20.0.5' is not a host address of network '10.10.0.0/24'!");
    c = {};
    c.mtu = "1400";
    EXPECT_EQ(client::modify_network(*zk_, "99999", c).message, "ERROR: Could not find network '99999' in the cluster!");
    EXPECT_FALSE(zk_->exists(path("network.vni", {"99999"})));
}

TEST_F(ClientNetwork, RemoveDeletesTheTree) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    ASSERT_TRUE(client::add_reservation(*zk_, vni_, "52:54:00:00:00:01", "10.10.0.10", "h1").ok());
    auto r = client::remove_network(*zk_, vni_);
    EXPECT_EQ(r.message, "Network '" + desc_ + "' removed successfully!");
    EXPECT_FALSE(zk_->exists(path("network.vni", {vni_})));
    EXPECT_EQ(client::remove_network(*zk_, vni_).message, "ERROR: Could not find network '" + vni_ + "' in the cluster!");
}

TEST_F(ClientNetwork, ReservationsAddAndRemoveByMacHostnameOrIp) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    auto r = client::add_reservation(*zk_, vni_, "52:54:00:AB:CD:EF", "10.10.0.10", std::nullopt);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.message, "DHCP reservation '52:54:00:ab:cd:ef' added successfully!");
    EXPECT_EQ(get(path("reservation.mac", {vni_, "52:54:00:ab:cd:ef"})), "static");
    EXPECT_EQ(get(path("reservation.ip", {vni_, "52:54:00:ab:cd:ef"})), "10.10.0.10");
    EXPECT_EQ(get(path("reservation.hostname", {vni_, "52:54:00:ab:cd:ef"})), "None");

    EXPECT_EQ(client::add_reservation(*zk_, vni_, "52:54:00:ab:cd:ef", "10.10.0.11", "x").message,
              "ERROR: A reservation with MAC '52:54:00:ab:cd:ef' already exists!");
    EXPECT_EQ(client::add_reservation(*zk_, vni_, "52:54:00:ab:cd:ee", "10.10.0.10", "x").message,
              "ERROR: A reservation with IP address '10.10.0.10' already exists!");
    EXPECT_EQ(client::add_reservation(*zk_, vni_, "52-54-00-ab-cd-ee", "10.10.0.12", "x").message,
              "ERROR: MAC address '52-54-00-ab-cd-ee' is not valid! Always use ':' as a separator.");
    EXPECT_EQ(client::add_reservation(*zk_, vni_, "52:54:00:ab:cd:ee", "999.1.1.1", "x").message,
              "ERROR: IP address '999.1.1.1' is not valid!");
    EXPECT_EQ(client::add_reservation(*zk_, vni_, "52:54:00:ab:cd:ee", "10.99.0.1", "x").message,
              "ERROR: IP address '10.99.0.1' is not a host address of network '10.10.0.0/24'!");
    EXPECT_EQ(client::add_reservation(*zk_, "nonet", "52:54:00:ab:cd:ee", "10.10.0.12", "x").message,
              "ERROR: Could not find network 'nonet' in the cluster!");

    ASSERT_TRUE(client::add_reservation(*zk_, vni_, "52:54:00:00:00:02", "10.10.0.20", "web").ok());
    EXPECT_EQ(client::remove_reservation(*zk_, desc_, "web").message,
              "DHCP static reservation '52:54:00:00:00:02' removed successfully!");
    EXPECT_EQ(client::remove_reservation(*zk_, vni_, "10.10.0.10").message,
              "DHCP static reservation '52:54:00:ab:cd:ef' removed successfully!");
    EXPECT_EQ(client::read_reservations(*zk_, vni_, true).size(), 0u);
    EXPECT_EQ(client::remove_reservation(*zk_, vni_, "web").message,
              "ERROR: No DHCP reservation or lease exists matching 'web'!");
    // A dynamic lease (as the lease helper writes it) is removed too.
    ASSERT_TRUE(zk_->write({{path("lease.mac", {vni_, "52:54:00:00:00:09"}), ""},
                            {path("lease.ip", {vni_, "52:54:00:00:00:09"}), "10.10.0.150"}}));
    EXPECT_EQ(client::remove_reservation(*zk_, vni_, "10.10.0.150").message,
              "DHCP dynamic lease '52:54:00:00:00:09' removed successfully!");
    EXPECT_FALSE(zk_->exists(path("lease.mac", {vni_, "52:54:00:00:00:09"})));
}

std::vector<std::pair<std::string, std::string>> orders(zk::Session& s, const std::string& vni, const std::string& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& a : s.children(path(dir == "in" ? "network.rule.in" : "network.rule.out", {vni})).value_or(std::vector<std::string>{}))
        out.emplace_back(a, s.get(path("rule.order", {vni, dir, a})).value_or(""));
    return out;
}
using Orders = std::vector<std::pair<std::string, std::string>>;

TEST_F(ClientNetwork, AclsAreOrderedPerDirectionAndRenumbered) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    auto r = client::add_acl(*zk_, vni_, "ssh", "tcp dport 22 accept", "in", std::nullopt);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.message, "Firewall rule 'ssh' added successfully!");
    ASSERT_TRUE(client::add_acl(*zk_, vni_, "http", "tcp dport 80 accept", "in", std::nullopt).ok());
    ASSERT_TRUE(client::add_acl(*zk_, vni_, "first", "tcp dport 443 accept", "in", "0").ok());
    // An out rule is stored as out (the reference stored --out rules as in).
    ASSERT_TRUE(client::add_acl(*zk_, vni_, "dns", "udp dport 53 accept", "out", "7").ok());
    EXPECT_EQ(orders(*zk_, vni_, "in"), (Orders{{"first", "0"}, {"http", "2"}, {"ssh", "1"}}));
    EXPECT_EQ(orders(*zk_, vni_, "out"), (Orders{{"dns", "0"}}));
    EXPECT_EQ(get(path("rule.rule", {vni_, "out", "dns"})), "udp dport 53 accept");

    EXPECT_EQ(client::add_acl(*zk_, vni_, "dns", "x", "in", std::nullopt).message,
              "ERROR: A rule with description 'dns' already exists!");
    EXPECT_EQ(client::add_acl(*zk_, vni_, "bad", "x", "in", "two").message,
              "ERROR: Order 'two' is not valid: it must be a number from 0!");
    EXPECT_EQ(client::add_acl(*zk_, vni_, "has space", "x", "in", std::nullopt).status, 400);

    EXPECT_EQ(client::remove_acl(*zk_, vni_, "first").message, "Firewall rule 'first' removed successfully!");
    EXPECT_EQ(orders(*zk_, vni_, "in"), (Orders{{"http", "1"}, {"ssh", "0"}}));
    EXPECT_EQ(client::remove_acl(*zk_, vni_, "first").message,
              "ERROR: No firewall rule exists matching description 'first'!");
    auto acls = client::read_acls(*zk_, vni_, "");
    ASSERT_EQ(acls.size(), 3u);
    EXPECT_EQ(acls[0].description, "ssh");
    EXPECT_EQ(acls[2].direction, "out");
}

// More than ten rules: the order is compared as a number (as text "10" < "2").
TEST_F(ClientNetwork, AclOrderIsNumericBeyondTen) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    for (int i = 0; i < 12; ++i)
        ASSERT_TRUE(client::add_acl(*zk_, vni_, "r" + std::to_string(i), "accept", "in", std::nullopt).ok());
    ASSERT_TRUE(client::add_acl(*zk_, vni_, "new", "accept", "in", "3").ok());
    auto acls = client::read_acls(*zk_, vni_, "in");
    ASSERT_EQ(acls.size(), 13u);
    for (size_t i = 0; i < acls.size(); ++i) EXPECT_EQ(acls[i].order, static_cast<long>(i));
    EXPECT_EQ(acls[3].description, "new");
    EXPECT_EQ(acls[12].description, "r11");
}

template <class Body>
void race(int writers, Body body, const std::function<std::shared_ptr<zk::Session>()>& connect) {
    std::vector<std::shared_ptr<zk::Session>> sessions;
    for (int i = 0; i < writers; ++i) sessions.push_back(connect());
    std::barrier start(writers);
    std::vector<std::thread> threads;
    for (int i = 0; i < writers; ++i)
        threads.emplace_back([&, i] {
            start.arrive_and_wait();
            body(i, *sessions[static_cast<size_t>(i)]);
        });
    for (auto& t : threads) t.join();
}

// Eight clients add a reservation to one network at once (each a separate
// session, as separate `pvc` commands or API workers): every one succeeds
// and is there; then eight add one IP at once: exactly one gets it.
TEST_F(ClientNetwork, ConcurrentReservationAddsAreNoneLost) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    constexpr int kWriters = 8;
    std::vector<client::NetResult> results(kWriters);
    race(kWriters, [&](int w, zk::Session& s) {
        results[static_cast<size_t>(w)] = client::add_reservation(s, vni_, "52:54:00:00:01:0" + std::to_string(w),
                                                                  "10.10.0." + std::to_string(10 + w), "h" + std::to_string(w));
    }, connect);
    for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(client::read_reservations(*zk_, vni_, false).size(), static_cast<size_t>(kWriters));

    race(kWriters, [&](int w, zk::Session& s) {
        results[static_cast<size_t>(w)] =
            client::add_reservation(s, vni_, "52:54:00:00:02:0" + std::to_string(w), "10.10.0.50", std::nullopt);
    }, connect);
    int won = 0;
    for (const auto& r : results) {
        if (r.ok()) ++won;
        else EXPECT_EQ(r.message, "ERROR: A reservation with IP address '10.10.0.50' already exists!");
    }
    EXPECT_EQ(won, 1);
    EXPECT_EQ(client::read_reservations(*zk_, vni_, false).size(), static_cast<size_t>(kWriters + 1));
}

// Eight clients add an ACL at position 0 at once: all are there, their
// orders are 0..7 with no duplicate.
TEST_F(ClientNetwork, ConcurrentAclAddsKeepADenseOrder) {
    ASSERT_TRUE(client::add_network(*zk_, managed()).ok());
    constexpr int kWriters = 8;
    std::vector<client::NetResult> results(kWriters);
    race(kWriters, [&](int w, zk::Session& s) {
        results[static_cast<size_t>(w)] = client::add_acl(s, vni_, "a" + std::to_string(w), "accept", "in", "0");
    }, connect);
    for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.message;
    std::set<std::string> seen;
    for (const auto& [d, o] : orders(*zk_, vni_, "in")) seen.insert(o);
    EXPECT_EQ(seen, (std::set<std::string>{"0", "1", "2", "3", "4", "5", "6", "7"}));
}

TEST_F(ClientNetwork, SriovVfSetWritesTheConfigKeys) {
    const std::string node = test::unique_name("hv");
    const std::string vf = "ens1f0v3";
    zk_->ensure_path(path("base.node"));
    ASSERT_TRUE(zk_->write({{path("node.name", {node}), ""},
                            {path("node.sriov", {node}), ""},
                            {path("node.sriov.pf", {node}), ""},
                            {path("sriov_pf.phy", {node, "ens1f0"}), ""},
                            {path("sriov_pf.mtu", {node, "ens1f0"}), "1500"},
                            {path("node.sriov.vf", {node}), ""},
                            {path("sriov_vf.phy", {node, vf}), ""},
                            {path("sriov_vf.pf", {node, vf}), "ens1f0"},
                            {path("sriov_vf.config", {node, vf}), ""},
                            {path("sriov_vf.config.trust", {node, vf}), "False"}}));
    client::VfConfig c;
    c.vlan_id = "100";
    c.trust = "yes";
    c.link_state = "disable";
    auto r = client::set_vf(*zk_, node, vf, c);
    ASSERT_TRUE(r.ok()) << r.message;
    EXPECT_EQ(r.message, "Successfully modified configuration of SR-IOV VF '" + vf + "' on node '" + node + "'.");
    EXPECT_EQ(get(path("sriov_vf.config.vlan_id", {node, vf})), "100");
    EXPECT_EQ(get(path("sriov_vf.config.trust", {node, vf})), "True");
    EXPECT_EQ(get(path("sriov_vf.config.link_state", {node, vf})), "disable");
    EXPECT_EQ(client::set_vf(*zk_, node, vf, {}).message, "ERROR: No changes to apply.");
    EXPECT_EQ(client::set_vf(*zk_, node, "ens9v9", c).message,
              "ERROR: Could not find SR-IOV VF 'ens9v9' on node '" + node + "'.");
    EXPECT_EQ(client::set_vf(*zk_, "nonode", vf, c).message, "ERROR: Specified node 'nonode' is invalid.");
    c.vlan_id = "5000";
    EXPECT_EQ(client::set_vf(*zk_, node, vf, c).status, 400);
    EXPECT_EQ(get(path("sriov_vf.config.vlan_id", {node, vf})), "100");

    auto pfs = client::read_sriov_pfs(*zk_, node);
    ASSERT_TRUE(pfs);
    ASSERT_EQ(pfs->size(), 1u);
    EXPECT_EQ((*pfs)[0].vfs, std::vector<std::string>{vf});
    auto vfs = client::read_sriov_vfs(*zk_, node, std::string("ens1f0"));
    ASSERT_TRUE(vfs);
    ASSERT_EQ(vfs->size(), 1u);
    EXPECT_EQ((*vfs)[0].vlan_id, "100");
    EXPECT_FALSE(client::read_sriov_vfs(*zk_, "nonode"));
}

}  // namespace
