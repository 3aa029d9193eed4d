// `pvc network ...` against a real ZooKeeper: the keys each command writes
// (read back with a separate session), its messages and exit statuses.
// The checks and transactions themselves are the client library's, tested
// in integration-client_network_test; this covers the command line's options.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using nlohmann::json;
using pvc::schema::path;
using pvc::test::ProcResult;

namespace {

class PvcNetwork : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new pvc::test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        zk_ = pvc::zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
        zk_->ensure_path(path("base.network"));
        zk_->ensure_path(path("base.node"));
        vni_ = std::to_string(next_vni_++);
        desc_ = "net" + vni_;
    }
    ProcResult pvc(std::vector<std::string> args) {
        std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", server_->hosts()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, 60s);
    }
    std::string get(const std::string& p) { return zk_->get(p).value_or("<absent>"); }
    void add_network() {
        auto r = pvc({"network", "add", vni_, "-d", desc_, "-p", "managed", "-i", "10.20.0.0/24", "-g", "10.20.0.1",
                      "--dns-server", "10.20.0.1", "--dhcp", "--dhcp-start", "10.20.0.100", "--dhcp-end", "10.20.0.199"});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, "Network '" + desc_ + "' added successfully!\n");
    }

    static pvc::test::ZkServer* server_;
    static int next_vni_;
    std::shared_ptr<pvc::zk::Session> zk_;
    std::string vni_, desc_;
};
pvc::test::ZkServer* PvcNetwork::server_ = nullptr;
int PvcNetwork::next_vni_ = 100;

TEST_F(PvcNetwork, AddModifyInfoListRemove) {
    add_network();
    EXPECT_EQ(get(path("network.vni", {vni_})), desc_);
    EXPECT_EQ(get(path("network.mtu", {vni_})), "");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.20.0.1");
    EXPECT_EQ(get(path("network.ip4.dhcp", {vni_})), "True");
    EXPECT_EQ(get(path("network.domain", {vni_})), desc_ + ".local");
    EXPECT_EQ(get(path("network.ip6.network", {vni_})), "None");

    auto r = pvc({"network", "modify", desc_, "--mtu", "1400", "--ipnet6", "2001:db8:20::/64"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Network '" + desc_ + "' modified successfully!\n");
    EXPECT_EQ(get(path("network.mtu", {vni_})), "1400");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.20.0.1");
    EXPECT_EQ(get(path("network.ip6.gateway", {vni_})), "2001:db8:20::1");
    r = pvc({"network", "modify", vni_, "--no-dhcp", "--dns-server", "10.20.0.2", "--dns-server", "10.20.0.3"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(get(path("network.ip4.dhcp", {vni_})), "False");
    EXPECT_EQ(get(path("network.nameservers", {vni_})), "10.20.0.2,10.20.0.3");

    r = pvc({"network", "info", vni_, "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    auto j = json::parse(r.out);
    EXPECT_EQ(j["description"], desc_);
    EXPECT_EQ(j["mtu"], "1400");
    EXPECT_EQ(j["name_servers"], (json{"10.20.0.2", "10.20.0.3"}));
    r = pvc({"network", "list", "--format", "json", desc_});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(json::parse(r.out).size(), 1u);
    r = pvc({"network", "info", vni_, "--long"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("Firewall rules"), std::string::npos) << r.out;

    r = pvc({"network", "remove", vni_, "--yes"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Network '" + desc_ + "' removed successfully!\n");
    EXPECT_FALSE(zk_->exists(path("network.vni", {vni_})));
}

TEST_F(PvcNetwork, RefusalsWriteNothing) {
    auto r = pvc({"network", "add", "0", "-d", desc_, "-p", "managed"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: VNI '0' is not valid: a managed network's VNI is 1-16777215!\n");
    r = pvc({"network", "add", vni_, "-d", desc_, "-p", "managed", "--dhcp"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("DHCPv4 start and end addresses are required"), std::string::npos) << r.err;
    EXPECT_FALSE(zk_->exists(path("network.vni", {vni_})));
    r = pvc({"network", "modify", "nosuchnet", "--mtu", "1500"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: Could not find network 'nosuchnet' in the cluster!\n");
    // Usage errors: exit 2, naming the command or option.
    r = pvc({"network", "add", vni_, "-d", desc_, "-p", "managed", "--bogus"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("unknown option '--bogus' for 'pvc network add'"), std::string::npos) << r.err;
    r = pvc({"network", "add", vni_, "-d", desc_, "-p", "other"});
    EXPECT_EQ(r.status, 2);
    r = pvc({"network", "bogus"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'bogus' is not a command of 'pvc network'"), std::string::npos) << r.err;
    r = pvc({"network", "modify", vni_});
    EXPECT_EQ(r.status, 2);
    EXPECT_FALSE(zk_->exists(path("network.vni", {vni_})));
}

TEST_F(PvcNetwork, DhcpReservations) {
    add_network();
    auto r = pvc({"network", "dhcp", "add", desc_, "10.20.0.10", "52:54:00:AA:BB:CC", "--hostname", "web1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "DHCP reservation '52:54:00:aa:bb:cc' added successfully!\n");
    EXPECT_EQ(get(path("reservation.ip", {vni_, "52:54:00:aa:bb:cc"})), "10.20.0.10");
    EXPECT_EQ(get(path("reservation.hostname", {vni_, "52:54:00:aa:bb:cc"})), "web1");
    r = pvc({"network", "dhcp", "add", desc_, "10.20.0.10", "52:54:00:aa:bb:cd"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: A reservation with IP address '10.20.0.10' already exists!\n");
    r = pvc({"network", "dhcp", "list", vni_, "--static", "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    auto j = json::parse(r.out);
    ASSERT_EQ(j.size(), 1u);
    EXPECT_EQ(j[0]["hostname"], "web1");
    r = pvc({"network", "dhcp", "remove", vni_, "web1"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "DHCP static reservation '52:54:00:aa:bb:cc' removed successfully!\n");
    EXPECT_FALSE(zk_->exists(path("reservation.mac", {vni_, "52:54:00:aa:bb:cc"})));
}

TEST_F(PvcNetwork, AclsInAndOut) {
    add_network();
    auto r = pvc({"network", "acl", "add", vni_, "--out", "-d", "dns", "-r", "udp dport 53 accept"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Firewall rule 'dns' added successfully!\n");
    EXPECT_EQ(get(path("rule.rule", {vni_, "out", "dns"})), "udp dport 53 accept");  // out stays out
    ASSERT_EQ(pvc({"network", "acl", "add", vni_, "--in", "-d", "ssh", "-r", "tcp dport 22 accept"}).status, 0);
    ASSERT_EQ(pvc({"network", "acl", "add", vni_, "-d", "web", "-r", "tcp dport 80 accept", "--order", "0"}).status, 0);
    EXPECT_EQ(get(path("rule.order", {vni_, "in", "web"})), "0");
    EXPECT_EQ(get(path("rule.order", {vni_, "in", "ssh"})), "1");
    r = pvc({"network", "acl", "list", vni_, "--in", "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    auto j = json::parse(r.out);
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0]["description"], "web");
    r = pvc({"network", "acl", "remove", vni_, "web"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Firewall rule 'web' removed successfully!\n");
    EXPECT_EQ(get(path("rule.order", {vni_, "in", "ssh"})), "0");
}

TEST_F(PvcNetwork, SriovListsAndVfSet) {
    const std::string node = "hv" + vni_, vf = "ens1f0v0";
    ASSERT_TRUE(zk_->write({{path("node.name", {node}), ""},
                            {path("node.sriov", {node}), ""},
                            {path("node.sriov.pf", {node}), ""},
                            {path("sriov_pf.phy", {node, "ens1f0"}), ""},
                            {path("sriov_pf.mtu", {node, "ens1f0"}), "1500"},
                            {path("node.sriov.vf", {node}), ""},
                            {path("sriov_vf.phy", {node, vf}), ""},
                            {path("sriov_vf.pf", {node, vf}), "ens1f0"},
                            {path("sriov_vf.config", {node, vf}), ""},
                            {path("sriov_vf.config.spoof_check", {node, vf}), "True"}}));
    auto r = pvc({"network", "sriov", "vf", "set", node, vf, "--vlan-id", "42", "--no-spoof-check", "--trust"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Successfully modified configuration of SR-IOV VF '" + vf + "' on node '" + node + "'.\n");
    EXPECT_EQ(get(path("sriov_vf.config.vlan_id", {node, vf})), "42");
    EXPECT_EQ(get(path("sriov_vf.config.spoof_check", {node, vf})), "False");
    EXPECT_EQ(get(path("sriov_vf.config.trust", {node, vf})), "True");
    r = pvc({"network", "sriov", "vf", "info", node, vf, "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)["config"]["vlan_id"], "42");
    r = pvc({"network", "sriov", "pf", "list", node, "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)[0]["vfs"], (json{vf}));
    r = pvc({"network", "sriov", "vf", "set", node, vf});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: No changes to apply.\n");
    r = pvc({"network", "sriov", "vf", "list", "nonode"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: Specified node 'nonode' is invalid.\n");
}

// Every network command has help with examples (no cluster needed).
TEST(PvcNetworkHelp, EveryCommandHasHelpWithExamples) {
    std::vector<std::vector<std::string>> cmds = {
        {"network"}, {"network", "add"}, {"network", "modify"}, {"network", "remove"}, {"network", "info"},
        {"network", "list"}, {"network", "dhcp"}, {"network", "dhcp", "add"}, {"network", "dhcp", "remove"},
        {"network", "dhcp", "list"}, {"network", "acl"}, {"network", "acl", "add"}, {"network", "acl", "remove"},
        {"network", "acl", "list"}, {"network", "sriov"}, {"network", "sriov", "pf"}, {"network", "sriov", "pf", "list"},
        {"network", "sriov", "pf", "info"}, {"network", "sriov", "vf"}, {"network", "sriov", "vf", "list"},
        {"network", "sriov", "vf", "info"}, {"network", "sriov", "vf", "set"}};
    for (auto c : cmds) {
        c.insert(c.begin(), PVC_CLI_BINARY);
        c.push_back("--help");
        auto r = pvc::test::run_command(c);
        EXPECT_EQ(r.status, 0) << c[c.size() - 2];
        EXPECT_NE(r.out.find("Examples:"), std::string::npos) << c[c.size() - 2];
    }
}

}  // namespace
