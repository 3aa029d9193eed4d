// The firewall against the real kernel through libnftables, in a network
// namespace of this test (issue item 4): base, one network's
// transaction leaving the others' chains alone (same rule handles), a bad ACL
// refused on its network only, removal, a restart over existing rules.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "firewall.hpp"
#include "netns.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc::network;
using namespace pvc::network::test;
using nlohmann::json;

namespace {

class FirewallInNetns : public ::testing::Test {
protected:
    void SetUp() override {
        ns_ = std::make_unique<Netns>(ns_prefix() + "f");
        in_ = std::make_unique<InNetns>(ns_->name());
        dir_ = std::make_unique<pvc::test::TempDir>("pvc-nft");
        fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
        fw_->apply_base();
    }
    void TearDown() override {
        fw_.reset();
        in_.reset();
        ns_.reset();
    }
    static FirewallNetwork net(uint32_t vni, std::vector<Acl> acls = {}) {
        FirewallNetwork n;
        n.vni = vni;
        n.ip4_network = "10.200." + std::to_string(vni % 256) + ".0/24";
        n.ip4_gateway = "10.200." + std::to_string(vni % 256) + ".1";
        n.acls = std::move(acls);
        return n;
    }
    // chain -> the handles of its rules, for the whole table.
    std::map<std::string, std::vector<uint64_t>> handles() {
        std::map<std::string, std::vector<uint64_t>> out;
        json j = json::parse(ns_->must_exec({"nft", "-a", "-j", "list", "table", "inet", "filter"}));
        for (const auto& item : j.at("nftables")) {
            if (item.contains("chain")) out[item["chain"]["name"].get<std::string>()];
            if (item.contains("rule")) out[item["rule"]["chain"].get<std::string>()].push_back(item["rule"]["handle"]);
        }
        return out;
    }
    std::string chain(const std::string& name) {
        return ns_->must_exec({"nft", "list", "chain", "inet", "filter", name});
    }
    // The targets of a chain's jumps, in rule order, as nft lists them.
    std::vector<std::string> jumps(const std::string& name) {
        std::vector<std::string> out;
        json j = json::parse(ns_->must_exec({"nft", "-j", "list", "chain", "inet", "filter", name}));
        for (const auto& item : j.at("nftables"))
            if (item.contains("rule"))
                for (const auto& e : item["rule"]["expr"])
                    if (e.contains("jump")) out.push_back(e["jump"]["target"]);
        return out;
    }
    using Jumps = std::vector<std::string>;

    std::unique_ptr<Netns> ns_;
    std::unique_ptr<InNetns> in_;
    std::unique_ptr<pvc::test::TempDir> dir_;
    std::unique_ptr<Firewall> fw_;
};

}  // namespace

TEST_F(FirewallInNetns, BaseHooksDispatchIntoEachNetworksOwnChains) {
    ASSERT_TRUE(fw_->apply(net(1000, {{"in", "ssh", "tcp dport 22 drop", "0"}})).ok);
    std::string in = chain("vxlan1000-in");
    EXPECT_NE(in.find("tcp dport 22 drop"), std::string::npos) << in;
    EXPECT_NE(chain("pvc-input").find("iifname \"vmbr1000\" counter packets 0 bytes 0 jump vxlan1000-input"),
              std::string::npos);
    EXPECT_NE(chain("vxlan1000-forward").find("ip daddr " + *net(1000).ip4_network), std::string::npos);
    EXPECT_NE(chain("input").find("jump pvc-input"), std::string::npos);
    // The file says what was run.
    std::ifstream f(dir_->path() / "nft" / "networks" / "1000.nft");
    std::string text((std::istreambuf_iterator<char>(f)), {});
    EXPECT_NE(text.find("add rule inet filter vxlan1000-in counter tcp dport 22 drop"), std::string::npos);
}

TEST_F(FirewallInNetns, OneNetworksChangeLeavesEveryOtherChainsRulesUntouched) {
    ASSERT_TRUE(fw_->apply(net(1000, {{"in", "a", "tcp dport 22 drop", "0"}})).ok);
    ASSERT_TRUE(fw_->apply(net(1001, {{"in", "b", "tcp dport 23 drop", "0"}})).ok);
    auto before = handles();
    auto o = fw_->apply(net(1000, {{"in", "a", "tcp dport 22 drop", "0"}, {"out", "c", "udp dport 53 drop", "0"}}));
    ASSERT_TRUE(o.ok && o.changed);
    auto after = handles();
    for (const auto& [c, h] : before) {
        if (chain_vni(c) == 1000u) continue;
        EXPECT_EQ(after[c], h) << c;
    }
    EXPECT_NE(after["vxlan1000-out"], before["vxlan1000-out"]);
    // The same rules again: nothing sent to the kernel.
    auto again = fw_->apply(net(1000, {{"in", "a", "tcp dport 22 drop", "0"}, {"out", "c", "udp dport 53 drop", "0"}}));
    EXPECT_TRUE(again.ok);
    EXPECT_FALSE(again.changed);
    EXPECT_EQ(handles(), after);
}

TEST_F(FirewallInNetns, ABadAclIsRefusedOnItsNetworkWhichKeepsItsRulesAndOthersStillChange) {
    ASSERT_TRUE(fw_->apply(net(1000, {{"in", "good", "tcp dport 22 drop", "0"}})).ok);
    ASSERT_TRUE(fw_->apply(net(1001)).ok);
    auto before = handles();
    auto bad = fw_->apply(net(1000, {{"in", "good", "tcp dport 22 drop", "0"}, {"in", "typo", "tcp dport 80 acept", "1"}}));
    EXPECT_FALSE(bad.ok);
    EXPECT_EQ(bad.acl, "typo");
    EXPECT_NE(bad.error.find("acept"), std::string::npos) << bad.error;
    EXPECT_EQ(handles(), before);  // nothing changed anywhere
    // A rule nft parses but the kernel refuses (a jump to no chain) is refused the same way.
    auto missing = fw_->apply(net(1000, {{"in", "nowhere", "jump no-such-chain", "0"}}));
    EXPECT_FALSE(missing.ok);
    EXPECT_EQ(missing.acl, "nowhere") << missing.error;
    EXPECT_EQ(handles(), before);
    // The other network changes as usual.
    ASSERT_TRUE(fw_->apply(net(1001, {{"in", "x", "tcp dport 25 drop", "0"}})).ok);
    EXPECT_NE(chain("vxlan1001-in").find("tcp dport 25 drop"), std::string::npos);
    EXPECT_NE(chain("vxlan1000-in").find("tcp dport 22 drop"), std::string::npos);
}

TEST_F(FirewallInNetns, RemovalTakesTheNetworksChainsAndDispatchOnly) {
    ASSERT_TRUE(fw_->apply(net(1000)).ok);
    ASSERT_TRUE(fw_->apply(net(1001)).ok);
    fw_->remove(1000);
    auto h = handles();
    for (const auto& c : network_chains(1000)) EXPECT_FALSE(h.count(c)) << c;
    for (const auto& c : network_chains(1001)) EXPECT_TRUE(h.count(c)) << c;
    EXPECT_EQ(chain("pvc-input").find("vxlan1000"), std::string::npos);
    EXPECT_EQ(fw_->networks_in_kernel(), std::set<uint32_t>{1001});
    fw_->remove(1000);  // absent: fine
}

TEST_F(FirewallInNetns, ARestartKeepsNetworksRulesUntilReappliedAndAddsNoSecondDispatch) {
    ASSERT_TRUE(fw_->apply(net(1000, {{"in", "a", "tcp dport 22 drop", "0"}})).ok);
    auto before = handles();
    // The operator's static drop-in is read at start, before the dispatchers.
    std::ofstream(dir_->path() / "nft" / "static" / "10-ssh.nft") << "add rule inet filter input tcp dport 2222 drop\n";
    fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
    fw_->apply_base();
    auto after = handles();
    for (const auto& c : network_chains(1000)) EXPECT_EQ(after[c], before[c]) << c;
    EXPECT_EQ(after["pvc-input"], before["pvc-input"]);
    std::string input = chain("input");
    EXPECT_LT(input.find("tcp dport 2222 drop"), input.find("jump pvc-input")) << input;
    ASSERT_TRUE(fw_->apply(net(1000, {{"in", "a", "tcp dport 22 drop", "0"}})).ok);
    EXPECT_EQ(handles()["pvc-input"].size(), 1u);
    EXPECT_EQ(handles()["pvc-forward"].size(), 1u);
}

// Both hook chains have the default policy accept. The table may exist
// before the daemon (Debian's `inet filter`) with a drop policy: its rules
// are flushed, so a kept drop policy would cut the node off (ZooKeeper, SSH,
// Ceph). An operator's static drop-in may still set drop on purpose.
TEST_F(FirewallInNetns, TheBaseChainsPolicyIsAcceptOverATableThatHadDrop) {
    ns_->must_exec({"nft", "add chain inet filter input { type filter hook input priority 0; policy drop; }"});
    ns_->must_exec({"nft", "add chain inet filter forward { type filter hook forward priority 0; policy drop; }"});
    ASSERT_NE(chain("input").find("policy drop;"), std::string::npos);
    fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
    fw_->apply_base();
    for (const char* c : {"input", "forward"}) EXPECT_NE(chain(c).find("policy accept;"), std::string::npos) << chain(c);

    std::ofstream(dir_->path() / "nft" / "static" / "00-policy.nft")
        << "add chain inet filter input { type filter hook input priority 0; policy drop; }\n"
        << "add rule inet filter input tcp dport 22 accept\n";
    fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
    fw_->apply_base();
    std::string input = chain("input");
    EXPECT_NE(input.find("policy drop;"), std::string::npos) << input;
    EXPECT_NE(input.find("tcp dport 22 accept"), std::string::npos) << input;
    EXPECT_NE(chain("forward").find("policy accept;"), std::string::npos);
}

// The reference includes networks/<vni>.nft in lexical file-name
// order (100.nft before 20.nft), and for traffic between two networks the
// first chain with a verdict wins: the dispatch chains follow that order,
// not the order the networks were created in (which differs between nodes
// and restarts).
TEST_F(FirewallInNetns, NetworksAreDispatchedInFileNameOrderWhicheverCameFirst) {
    const Jumps forward{"vxlan100-forward", "vxlan20-forward", "vxlan3-forward"};
    const Jumps input{"vxlan100-input", "vxlan20-input", "vxlan3-input"};
    for (const auto& order : {std::vector<uint32_t>{20, 100, 3}, std::vector<uint32_t>{3, 100, 20}}) {
        for (uint32_t v : order) ASSERT_TRUE(fw_->apply(net(v)).ok) << v;
        EXPECT_EQ(jumps("pvc-forward"), forward) << order[0];
        EXPECT_EQ(jumps("pvc-input"), input) << order[0];
        EXPECT_TRUE(fw_->intact());
        // Removal keeps the others' order; a network back takes its place.
        fw_->remove(100);
        EXPECT_EQ(jumps("pvc-forward"), (Jumps{"vxlan20-forward", "vxlan3-forward"}));
        ASSERT_TRUE(fw_->apply(net(100)).ok);
        EXPECT_EQ(jumps("pvc-forward"), forward);
        for (uint32_t v : order) fw_->remove(v);
        EXPECT_EQ(jumps("pvc-forward"), Jumps{});
    }
}

// An earlier run (or version) that dispatched in creation order: the start
// puts the dispatch rules in file-name order, each network once.
TEST_F(FirewallInNetns, AtStartDispatchRulesOfAnEarlierRunArePutInFileNameOrder) {
    ASSERT_TRUE(fw_->apply(net(20)).ok);
    ASSERT_TRUE(fw_->apply(net(100)).ok);
    ns_->must_exec({"nft", "flush chain inet filter pvc-forward; flush chain inet filter pvc-input; "
                           "add rule inet filter pvc-forward jump vxlan20-forward; "
                           "add rule inet filter pvc-forward jump vxlan100-forward; "
                           "add rule inet filter pvc-forward jump vxlan20-forward; "
                           "add rule inet filter pvc-input iifname \"vmbr20\" jump vxlan20-input; "
                           "add rule inet filter pvc-input iifname \"vmbr100\" jump vxlan100-input"});
    fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
    fw_->apply_base();
    EXPECT_EQ(jumps("pvc-forward"), (Jumps{"vxlan100-forward", "vxlan20-forward"}));
    EXPECT_EQ(jumps("pvc-input"), (Jumps{"vxlan100-input", "vxlan20-input"}));
    // Already in order: a further start leaves them alone (same handles).
    auto before = handles();
    fw_ = std::make_unique<Firewall>(dir_->path() / "nft");
    fw_->apply_base();
    EXPECT_EQ(handles()["pvc-forward"], before["pvc-forward"]);
    EXPECT_EQ(handles()["pvc-input"], before["pvc-input"]);
}

// Our rules removed from outside (`nft flush ruleset`, nftables.service's
// reload, a flush of the table): intact() says so; the module then applies
// the base and every network again (network_daemon_test), which restores all.
TEST_F(FirewallInNetns, RulesRemovedFromOutsideAreSeenAndComeBackWithBaseAndNetworks) {
    const std::vector<std::string> outside = {
        "flush ruleset",
        "flush ruleset; add table inet filter; "
        "add chain inet filter input { type filter hook input priority 0; policy accept; }; "
        "add chain inet filter forward { type filter hook forward priority 0; policy accept; }",
        "flush table inet filter"};
    for (const auto& cmd : outside) {
        ASSERT_TRUE(fw_->apply(net(20, {{"in", "ssh", "tcp dport 22 drop", "0"}})).ok);
        ASSERT_TRUE(fw_->apply(net(100)).ok);
        ASSERT_TRUE(fw_->intact());
        ns_->must_exec({"nft", cmd});
        EXPECT_FALSE(fw_->intact()) << cmd;
        fw_->apply_base();
        ASSERT_TRUE(fw_->apply(net(20, {{"in", "ssh", "tcp dport 22 drop", "0"}})).ok) << cmd;
        ASSERT_TRUE(fw_->apply(net(100)).ok) << cmd;
        EXPECT_TRUE(fw_->intact()) << cmd;
        EXPECT_NE(chain("vxlan20-in").find("tcp dport 22 drop"), std::string::npos) << cmd;
        EXPECT_NE(chain("vxlan20-input").find("counter packets 0 bytes 0 drop"), std::string::npos) << cmd;
        EXPECT_EQ(jumps("forward"), Jumps{"pvc-forward"}) << cmd;
        EXPECT_EQ(jumps("pvc-forward"), (Jumps{"vxlan100-forward", "vxlan20-forward"})) << cmd;
    }
}
