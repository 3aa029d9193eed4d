// Firewall rendering and validation (per-network chains, numeric ACL order,
// a bad ACL refused on its network only):
// unit tests on the text, no kernel.
#include <gtest/gtest.h>

#include <algorithm>

#include "firewall.hpp"

using namespace pvc::network;

namespace {
FirewallNetwork net1000() {
    FirewallNetwork n;
    n.vni = 1000;
    n.ip4_network = "10.200.0.0/24";
    n.ip4_gateway = "10.200.0.1";
    return n;
}
std::vector<std::string> descriptions(const std::vector<Acl>& v) {
    std::vector<std::string> out;
    for (const auto& a : v) out.push_back(a.description);
    return out;
}
}  // namespace

TEST(FirewallAcls, SortedNumericallyNotAsStringsAndNoneDropped) {
    std::vector<Acl> acls;
    for (int i = 0; i < 12; ++i) acls.push_back({"in", "acl" + std::to_string(i), "accept", std::to_string(i)});
    acls.push_back({"in", "same-b", "drop", "3"});  // the reference drops one of two equal orders
    acls.push_back({"in", "no-order", "drop", ""});
    acls.push_back({"out", "outbound", "drop", "0"});
    auto in = ordered(acls, "in");
    ASSERT_EQ(in.size(), 14u);
    EXPECT_EQ(descriptions(in),
              (std::vector<std::string>{"acl0", "acl1", "acl2", "acl3", "same-b", "acl4", "acl5", "acl6", "acl7", "acl8",
                                        "acl9", "acl10", "acl11", "no-order"}));
    EXPECT_EQ(descriptions(ordered(acls, "out")), std::vector<std::string>{"outbound"});
}

TEST(FirewallAcls, ARuleMustBeOneCommandOnOneLine) {
    EXPECT_EQ(acl_text_problem("ip saddr 10.0.0.0/8 tcp dport 22 accept"), "");
    EXPECT_EQ(acl_text_problem("tcp dport { 22, 80 } accept"), "");
    EXPECT_EQ(acl_text_problem("meta iifname \"a;b\" accept"), "");  // inside a string
    EXPECT_NE(acl_text_problem("accept; flush ruleset"), "");
    EXPECT_NE(acl_text_problem("accept\nflush ruleset"), "");
    EXPECT_NE(acl_text_problem("   "), "");
}

TEST(FirewallFragment, ManagedNetworkChainsAllowListJumpsAndAclsInOrder) {
    FirewallNetwork n = net1000();
    n.ip6_network = "2001:db8:100::/64";
    n.ip6_gateway = "2001:db8:100::1";
    n.acls = {{"out", "o1", "ip daddr 8.8.8.8 drop", "0"},
              {"in", "second", "tcp dport 80 accept", "1"},
              {"in", "first", "tcp dport 22 drop", "0"}};
    Fragment f = render_fragment(n);
    EXPECT_TRUE(f.refused_acl.empty());
    const std::string& t = f.text;
    for (const char* c : {"vxlan1000-in", "vxlan1000-out", "vxlan1000-input", "vxlan1000-forward"}) {
        EXPECT_NE(t.find(std::string("add chain inet filter ") + c + "\n"), std::string::npos) << c;
        EXPECT_NE(t.find(std::string("flush chain inet filter ") + c + "\n"), std::string::npos) << c;
    }
    auto at = [&](const std::string& s) {
        auto p = t.find(s);
        EXPECT_NE(p, std::string::npos) << s << "\n" << t;
        return p;
    };
    at("add rule inet filter vxlan1000-input udp dport 67 counter accept\n");
    // IPv6 jumps first, then IPv4, as the reference's fragment.
    EXPECT_LT(at("add rule inet filter vxlan1000-forward ip6 daddr 2001:db8:100::/64 counter jump vxlan1000-in\n"),
              at("add rule inet filter vxlan1000-forward ip daddr 10.200.0.0/24 counter jump vxlan1000-in\n"));
    at("add rule inet filter vxlan1000-forward ip saddr 10.200.0.0/24 counter jump vxlan1000-out\n");
    // The allow-list ends with the drop; in ACLs by order, then out ACLs.
    EXPECT_LT(at("add rule inet filter vxlan1000-input tcp dport 80 counter accept\n"),
              at("add rule inet filter vxlan1000-input counter drop\n"));
    EXPECT_LT(at("add rule inet filter vxlan1000-in counter tcp dport 22 drop\n"),
              at("add rule inet filter vxlan1000-in counter tcp dport 80 accept\n"));
    EXPECT_LT(at("add rule inet filter vxlan1000-in counter tcp dport 80 accept\n"),
              at("add rule inet filter vxlan1000-out counter ip daddr 8.8.8.8 drop\n"));
    // Each ACL's line number names it (nft's messages give the line).
    int line = 1 + static_cast<int>(std::count(t.begin(), t.begin() + at("add rule inet filter vxlan1000-in counter tcp dport 22 drop"), '\n'));
    EXPECT_EQ(f.acl_lines.at(line), "first");
    // The dispatch rules are apart (render_dispatch): nothing in pvc-input/pvc-forward.
    EXPECT_EQ(t.find("pvc-"), std::string::npos);
}

TEST(FirewallFragment, NoGatewayNoForwardJumps) {
    FirewallNetwork n = net1000();
    n.ip4_gateway.reset();
    EXPECT_EQ(render_fragment(n).text.find("jump vxlan1000-in"), std::string::npos);
}

TEST(FirewallFragment, AnAclThatIsNotOneRuleIsRefusedBeforeNft) {
    FirewallNetwork n = net1000();
    n.acls = {{"in", "ok", "accept", "0"}, {"in", "sneaky", "accept; flush ruleset", "1"}};
    Fragment f = render_fragment(n);
    EXPECT_EQ(f.refused_acl, "sneaky");
    EXPECT_NE(f.refused_why.find("';'"), std::string::npos) << f.refused_why;
}

// The reference includes networks/<vni>.nft in lexical file-name
// order, so its forward chain has 100's jumps before 20's; the dispatch
// chains follow that order, whatever order the networks came in.
TEST(FirewallDispatch, NetworksAreDispatchedInTheReferencesFileNameOrder) {
    EXPECT_EQ(include_order({20, 100, 3, 1, 10, 2000}), (std::vector<uint32_t>{1, 10, 100, 20, 2000, 3}));
    std::string t = render_dispatch({20, 100});
    EXPECT_LT(t.find("flush chain inet filter pvc-forward\n"), t.find("add rule"));
    EXPECT_LT(t.find("add rule inet filter pvc-forward counter jump vxlan100-forward\n"),
              t.find("add rule inet filter pvc-forward counter jump vxlan20-forward\n"));
    EXPECT_LT(t.find("add rule inet filter pvc-input meta iifname \"vmbr100\" counter jump vxlan100-input\n"),
              t.find("add rule inet filter pvc-input meta iifname \"vmbr20\" counter jump vxlan20-input\n"));
    EXPECT_EQ(render_dispatch({}), "flush chain inet filter pvc-input\nflush chain inet filter pvc-forward\n");
}

TEST(FirewallChains, OursAreKnownByName) {
    EXPECT_EQ(chain_vni("vxlan1000-in"), 1000u);
    EXPECT_EQ(chain_vni("vxlan7-forward"), 7u);
    EXPECT_EQ(chain_vni("vxlan1000-input"), 1000u);
    EXPECT_FALSE(chain_vni("vxlan1000-other"));
    EXPECT_FALSE(chain_vni("vxlan01-in"));
    EXPECT_FALSE(chain_vni("input"));
    EXPECT_FALSE(chain_vni("pvc-forward"));
}

TEST(FirewallBase, OwnTableOnlyStaticDropInsBeforeTheDispatchers) {
    std::string b = render_base("/var/lib/pvc/nft/static");
    EXPECT_EQ(b.find("flush ruleset"), std::string::npos);
    EXPECT_LT(b.find("include \"/var/lib/pvc/nft/static/*\""), b.find("add rule inet filter input counter jump pvc-input"));
    EXPECT_NE(b.find("add chain inet filter forward { type filter hook forward priority 0; policy accept; }"),
              std::string::npos);
    EXPECT_NE(b.find("add chain inet filter input { type filter hook input priority 0; policy accept; }"),
              std::string::npos);
}
