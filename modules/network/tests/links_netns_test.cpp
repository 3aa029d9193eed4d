// Host networking and client-network links against the real kernel, in a
// network namespace of this test (issue items 1, 2).
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <netpacket/packet.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "arp.hpp"
#include "client_network.hpp"
#include "host_network.hpp"
#include "netns.hpp"
#include "network_config.hpp"
#include "config_reader.hpp"
#include "pvc/log.hpp"

using namespace pvc::network;
using namespace pvc::network::test;
using nlohmann::json;

namespace {

class LinksInNetns : public ::testing::Test {
protected:
    void SetUp() override {
        ns_ = std::make_unique<Netns>(ns_prefix() + "l");
        ns_->must_exec({"ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth1"});
        in_ = std::make_unique<InNetns>(ns_->name());
        nl_ = std::make_unique<Netlink>();
    }
    void TearDown() override {
        nl_.reset();
        in_.reset();
        ns_.reset();
    }
    json link(const std::string& name) {
        auto r = ns_->exec({"ip", "-d", "-j", "link", "show", "dev", name});
        if (r.status != 0) return nullptr;
        return json::parse(r.out).at(0);
    }
    std::vector<std::string> addresses(const std::string& dev) {
        std::vector<std::string> out;
        // Kept in a variable: a range-for over a temporary's member dangles.
        json shown = json::parse(ns_->must_exec({"ip", "-j", "-4", "addr", "show", "dev", dev}));
        for (const auto& a : shown.at(0).at("addr_info"))
            out.push_back(a.at("local").get<std::string>() + "/" + std::to_string(a.at("prefixlen").get<int>()));
        return out;
    }
    static bool up(const json& l) {
        for (const auto& f : l.at("flags"))
            if (f == "UP") return true;
        return false;
    }
    pvc::Config config(const NetworkConfigOptions& o, const std::string& host = "hv3") {
        return pvc::parse_config(network_config_yaml(o), "test", pvc::host_identity(host));
    }
    // The plan from the module's keys, as its configure makes it.
    static HostPlan plan_of(const pvc::Config& c, pvc::ConfigProblems& problems) {
        return plan_host(c, pvc::network::Settings::read(c, problems), problems);
    }
    pvc::Logger log_;
    std::unique_ptr<Netns> ns_;
    std::unique_ptr<InNetns> in_;
    std::unique_ptr<Netlink> nl_;
};

LinkPlan managed_plan(uint32_t vni, unsigned mtu) {
    ClientNetwork n;
    n.vni = vni;
    n.type = NetType::managed;
    return plan_links(n, "eth0", mtu);
}

}  // namespace

TEST_F(LinksInNetns, HostBridgeAddressesRouteAndSysctlsThenNothingOnASecondRun) {
    pvc::ConfigProblems problems;
    HostPlan plan = plan_of(config({}), problems);
    ASSERT_TRUE(problems.empty());
    // The sample's layout: every role on one device → one bridge.
    ASSERT_EQ(plan.bridges.size(), 1u);
    EXPECT_EQ(plan.role_bridge.at("upstream"), "brcluster");

    auto first = apply_host(*nl_, plan, log_);
    EXPECT_FALSE(first.empty());
    json br = link("brcluster");
    ASSERT_FALSE(br.is_null());
    EXPECT_EQ(br.at("linkinfo").at("info_kind"), "bridge");
    EXPECT_TRUE(up(br));
    EXPECT_EQ(br.at("mtu"), 1500);
    json eth0 = link("eth0");
    EXPECT_EQ(eth0.at("master"), "brcluster");
    EXPECT_TRUE(up(eth0));
    // by-id on hv3: the third usable host of each role's network.
    auto addrs = addresses("brcluster");
    EXPECT_EQ(addrs, (std::vector<std::string>{"10.231.0.3/24", "10.231.1.3/24", "10.231.2.3/24"}));
    auto route = json::parse(ns_->must_exec({"ip", "-j", "route", "show", "default"}));
    ASSERT_EQ(route.size(), 1u);
    EXPECT_EQ(route.at(0).at("gateway"), "10.231.2.254");
    EXPECT_EQ(route.at(0).at("dev"), "brcluster");
    EXPECT_EQ(read_sysctl("net/ipv4/ip_forward"), "1");
    EXPECT_EQ(read_sysctl("net/ipv4/conf/brcluster/rp_filter"), "0");

    int ifindex = br.at("ifindex");
    auto second = apply_host(*nl_, plan, log_);
    EXPECT_TRUE(second.empty()) << second.front();
    EXPECT_EQ(link("brcluster").at("ifindex"), ifindex);
}

TEST_F(LinksInNetns, RolesAreGroupedByDeviceAndTheRouteUsesTheUpstreamBridge) {
    NetworkConfigOptions o;
    o.upstream_device = "eth1";  // storage stays with cluster on eth0
    pvc::ConfigProblems problems;
    HostPlan plan = plan_of(config(o), problems);
    ASSERT_EQ(plan.bridges.size(), 2u);
    EXPECT_EQ(plan.role_bridge.at("storage"), "brcluster");
    EXPECT_EQ(plan.role_bridge.at("upstream"), "brupstream");
    apply_host(*nl_, plan, log_);
    EXPECT_EQ(addresses("brcluster"), (std::vector<std::string>{"10.231.0.3/24", "10.231.1.3/24"}));
    EXPECT_EQ(addresses("brupstream"), (std::vector<std::string>{"10.231.2.3/24"}));
    EXPECT_EQ(link("eth1").at("master"), "brupstream");
    auto route = json::parse(ns_->must_exec({"ip", "-j", "route", "show", "default"}));
    EXPECT_EQ(route.at(0).at("dev"), "brupstream");
}

TEST_F(LinksInNetns, AnExistingDefaultRouteViaAnotherGatewayIsLeftAlone) {
    pvc::ConfigProblems problems;
    HostPlan plan = plan_of(config({}), problems);
    apply_host(*nl_, plan, log_);
    ns_->must_exec({"ip", "route", "replace", "default", "via", "10.231.2.77", "dev", "brcluster"});
    apply_host(*nl_, plan, log_);
    auto route = json::parse(ns_->must_exec({"ip", "-j", "route", "show", "default"}));
    ASSERT_EQ(route.size(), 1u);
    EXPECT_EQ(route.at(0).at("gateway"), "10.231.2.77");
}

TEST_F(LinksInNetns, BadDeviceNameIsAConfigProblemWithItsPath) {
    NetworkConfigOptions o;
    o.storage_device = "a/very/long/device/name";
    pvc::ConfigProblems problems;
    plan_of(config(o), problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems.list()[0].path, "pvc.system.configuration.networking.storage.device");
    EXPECT_GT(problems.list()[0].line, 0);
}

TEST_F(LinksInNetns, ManagedNetworkGetsVxlanOnTheClusterDeviceInItsBridge) {
    auto r = reconcile(*nl_, managed_plan(1000, 1450));
    EXPECT_FALSE(r.changes.empty());
    json vx = link("vxlan1000");
    ASSERT_FALSE(vx.is_null());
    const json& data = vx.at("linkinfo").at("info_data");
    EXPECT_EQ(vx.at("linkinfo").at("info_kind"), "vxlan");
    EXPECT_EQ(data.at("id"), 1000);
    EXPECT_EQ(data.at("port"), 4789);
    EXPECT_EQ(data.at("link"), "eth0");
    EXPECT_FALSE(data.contains("local"));
    EXPECT_EQ(vx.at("master"), "vmbr1000");
    EXPECT_EQ(vx.at("mtu"), 1450);
    EXPECT_TRUE(up(vx));
    json br = link("vmbr1000");
    EXPECT_EQ(br.at("linkinfo").at("info_kind"), "bridge");
    EXPECT_EQ(br.at("mtu"), 1450);
    EXPECT_TRUE(up(br));
    EXPECT_FALSE(tx_checksum("vmbr1000"));
    EXPECT_EQ(read_sysctl("net/ipv6/conf/vmbr1000/accept_dad"), "0");
}

TEST_F(LinksInNetns, ReconcilingAnExistingNetworkChangesNothing) {
    reconcile(*nl_, managed_plan(1000, 1450));
    int vx = link("vxlan1000").at("ifindex"), br = link("vmbr1000").at("ifindex");
    auto again = reconcile(*nl_, managed_plan(1000, 1450));
    EXPECT_TRUE(again.changes.empty()) << again.changes.front();
    EXPECT_EQ(link("vxlan1000").at("ifindex"), vx);
    EXPECT_EQ(link("vmbr1000").at("ifindex"), br);
}

TEST_F(LinksInNetns, MtuChangeChangesOnlyTheMtu) {
    reconcile(*nl_, managed_plan(1000, 1450));
    int vx = link("vxlan1000").at("ifindex");
    auto r = reconcile(*nl_, managed_plan(1000, 1400));
    EXPECT_EQ(r.changes.size(), 2u);
    EXPECT_EQ(link("vxlan1000").at("mtu"), 1400);
    EXPECT_EQ(link("vmbr1000").at("mtu"), 1400);
    EXPECT_EQ(link("vxlan1000").at("ifindex"), vx);
}

TEST_F(LinksInNetns, VxlanWithOtherAttributesIsReplaced) {
    ns_->must_exec({"ip", "link", "add", "vxlan1000", "type", "vxlan", "id", "1000", "dstport", "8472", "dev", "eth0"});
    auto r = reconcile(*nl_, managed_plan(1000, 1450));
    EXPECT_EQ(link("vxlan1000").at("linkinfo").at("info_data").at("port"), 4789);
    EXPECT_EQ(link("vxlan1000").at("master"), "vmbr1000");
}

TEST_F(LinksInNetns, RemovalDeletesBothLinks) {
    reconcile(*nl_, managed_plan(1000, 1450));
    remove_links(*nl_, "vxlan1000", "vmbr1000");
    EXPECT_TRUE(link("vxlan1000").is_null());
    EXPECT_TRUE(link("vmbr1000").is_null());
    remove_links(*nl_, "vxlan1000", "vmbr1000");  // absent: fine
}

// Links of networks deleted while the daemon was down: only vxlan<vni> /
// vmbr<vni> / vlan<vni> of the matching kind and of PVC's shape whose VNI no
// network wants go; the wanted network's, the host's and look-alikes stay.
TEST_F(LinksInNetns, OrphanLinksOfDeletedNetworksAreRemovedAndNothingElse) {
    reconcile(*nl_, managed_plan(1000, 1450));  // still in ZooKeeper
    reconcile(*nl_, managed_plan(1001, 1450));  // deleted meanwhile
    reconcile(*nl_, managed_plan(7, 1450));     // deleted meanwhile
    ns_->must_exec({"ip", "link", "add", "vmbr1002", "type", "bridge"});        // a bridge left alone
    ns_->must_exec({"ip", "link", "add", "vmbr05", "type", "bridge"});          // not a plain decimal VNI
    ns_->must_exec({"ip", "link", "add", "vmbrx9", "type", "bridge"});          // not our pattern
    ns_->must_exec({"ip", "link", "add", "vmbr8", "type", "veth", "peer", "name", "p8"});  // not a bridge
    ns_->must_exec({"ip", "link", "add", "vmbr9", "type", "bridge"});           // a host bridge by configuration
    // Not PVC's, though named like its links: an admin bridge with a NIC in
    // it, VXLANs another tool made (another port, another device, another
    // VNI than the name's).
    ns_->must_exec({"ip", "link", "add", "vmbr0", "type", "bridge"});
    ns_->must_exec({"ip", "link", "add", "vmbr100", "type", "bridge"});
    ns_->must_exec({"ip", "link", "add", "nic0", "type", "veth", "peer", "name", "nic0p"});
    ns_->must_exec({"ip", "link", "set", "nic0", "master", "vmbr100"});
    ns_->must_exec({"ip", "link", "add", "vxlan10", "type", "vxlan", "id", "10", "dstport", "8472", "dev", "eth0"});
    ns_->must_exec({"ip", "link", "add", "vxlan11", "type", "vxlan", "id", "11", "dstport", "4789", "dev", "eth1"});
    ns_->must_exec({"ip", "link", "add", "vxlan12", "type", "vxlan", "id", "99", "dstport", "4789", "dev", "eth0"});
    // A deleted network's bridge with a guest's tap still in it: PVC's.
    ns_->must_exec({"ip", "tuntap", "add", "tap7", "mode", "tap"});
    ns_->must_exec({"ip", "link", "set", "tap7", "master", "vmbr7"});
    SweepResult swept = remove_orphan_links(*nl_, {{"1000"}, {"vmbr9", "eth0"}, "eth0", std::nullopt});
    auto removed = swept.removed;
    std::sort(removed.begin(), removed.end());
    EXPECT_EQ(removed, (std::vector<std::string>{"vmbr1001", "vmbr1002", "vmbr7", "vxlan1001", "vxlan7"}));
    for (const char* gone : {"vxlan1001", "vmbr1001", "vxlan7", "vmbr7", "vmbr1002"})
        EXPECT_TRUE(link(gone).is_null()) << gone;
    for (const char* kept : {"vxlan1000", "vmbr1000", "vmbr05", "vmbrx9", "vmbr8", "vmbr9", "eth0", "vmbr0", "vmbr100", "nic0",
                             "vxlan10", "vxlan11", "vxlan12", "tap7"})
        EXPECT_FALSE(link(kept).is_null()) << kept;
    EXPECT_EQ(link("vxlan1000").at("master"), "vmbr1000");
    EXPECT_EQ(link("nic0").at("master"), "vmbr100");
    auto left = swept.left;
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"vmbr0 (no network has number 0)", "vmbr100 (has port nic0)",
                                              "vxlan10 (UDP port 8472)",
                                              "vxlan11 (not over the cluster device)", "vxlan12 (id 99)"}));
    // A second pass finds nothing to remove.
    EXPECT_TRUE(remove_orphan_links(*nl_, {{"1000"}, {"vmbr9"}, "eth0", std::nullopt}).removed.empty());
}

// A client network never takes a host's link: one named like its base link
// or bridge that is a configured host device, or of another kind, or a port
// of another bridge, refuses the network before anything changes
// (ifupdown names a VLAN device vlan<id>, so a core device may be vlan1000).
TEST_F(LinksInNetns, HostLinksNamedLikeANetworksAreRefusedNotTakenOrDeleted) {
    ns_->must_exec({"ip", "link", "add", "brupstream", "type", "bridge"});
    ns_->must_exec({"ip", "link", "add", "vlan1000", "mtu", "1400", "type", "veth", "peer", "name", "v1000p"});
    ns_->must_exec({"ip", "link", "set", "vlan1000", "master", "brupstream"});
    int host = link("vlan1000").at("ifindex");
    ClientNetwork n;
    n.vni = 1000;
    n.type = NetType::bridged;
    // A configured host device (the upstream role's).
    EXPECT_THROW(reconcile(*nl_, plan_links(n, "eth0", 1500), {"eth0", "brupstream", "vlan1000"}), LinkConflict);
    // The same link, not named in the configuration: still not PVC's.
    EXPECT_THROW(reconcile(*nl_, plan_links(n, "eth0", 1500)), LinkConflict);
    json l = link("vlan1000");
    ASSERT_FALSE(l.is_null());
    EXPECT_EQ(l.at("ifindex"), host);
    EXPECT_EQ(l.at("master"), "brupstream");
    EXPECT_EQ(l.at("mtu"), 1400);
    EXPECT_TRUE(link("vmbr1000").is_null());

    // A VXLAN of PVC's own shape in another bridge is not moved out of it.
    ns_->must_exec({"ip", "link", "add", "bradmin", "type", "bridge"});
    ns_->must_exec({"ip", "link", "add", "vxlan1001", "type", "vxlan", "id", "1001", "dstport", "4789", "dev", "eth0"});
    ns_->must_exec({"ip", "link", "set", "vxlan1001", "master", "bradmin"});
    EXPECT_THROW(reconcile(*nl_, managed_plan(1001, 1450)), LinkConflict);
    EXPECT_EQ(link("vxlan1001").at("master"), "bradmin");
    EXPECT_TRUE(link("vmbr1001").is_null());

    // A bridge name held by a link that is not a bridge is not deleted.
    ns_->must_exec({"ip", "link", "add", "vmbr1002", "type", "veth", "peer", "name", "v1002p"});
    int dummy = link("vmbr1002").at("ifindex");
    EXPECT_THROW(reconcile(*nl_, managed_plan(1002, 1450)), LinkConflict);
    EXPECT_EQ(link("vmbr1002").at("ifindex"), dummy);
    EXPECT_TRUE(link("vxlan1002").is_null());
}

// A bridged network needs the kernel's 802.1Q support. Where it exists the
// vlan link is checked; where it does not (this project's CI kernel) the
// refusal must surface as "unsupported kind", never be swallowed.
TEST_F(LinksInNetns, BridgedNetworkCreatesAVlanOrReportsTheKernelCannot) {
    ClientNetwork n;
    n.vni = 200;
    n.type = NetType::bridged;
    bool kernel_has_vlan = ns_->exec({"ip", "link", "add", "link", "eth1", "name", "probe", "type", "vlan", "id", "5"}).status == 0;
    if (kernel_has_vlan) ns_->must_exec({"ip", "link", "del", "probe"});
    try {
        reconcile(*nl_, plan_links(n, "eth0", 1500));
        ASSERT_TRUE(kernel_has_vlan) << "vlan200 created on a kernel that refused iproute2's vlan";
        json v = link("vlan200");
        EXPECT_EQ(v.at("linkinfo").at("info_kind"), "vlan");
        EXPECT_EQ(v.at("linkinfo").at("info_data").at("id"), 200);
        EXPECT_EQ(v.at("master"), "vmbr200");
        EXPECT_EQ(read_sysctl("net/ipv6/conf/vmbr200/disable_ipv6"), "1");
    } catch (const NetlinkError& e) {
        EXPECT_FALSE(kernel_has_vlan) << e.what();
        EXPECT_TRUE(e.unsupported_kind()) << e.what();
        std::cout << "[ note     ] this kernel has no 802.1Q VLAN support: " << e.what() << "\n";
    }
}

// What `arping -P -U -c 2 -W 0.02 -S ip ip` sends, captured on the
// other end of the link.
TEST_F(LinksInNetns, GratuitousArpIsTwoBroadcastRepliesFromTheInterfaceForTheAddress) {
    ns_->must_exec({"ip", "link", "set", "eth0", "up"});
    ns_->must_exec({"ip", "link", "set", "eth1", "up"});
    std::string mac = link("eth0").at("address");
    struct Socket {
        int fd;
        ~Socket() {
            if (fd >= 0) ::close(fd);
        }
    } sock{::socket(AF_PACKET, SOCK_DGRAM | SOCK_CLOEXEC, htons(ETH_P_ARP))};
    int fd = sock.fd;
    ASSERT_GE(fd, 0);
    sockaddr_ll at{};
    at.sll_family = AF_PACKET;
    at.sll_protocol = htons(ETH_P_ARP);
    at.sll_ifindex = static_cast<int>(if_nametoindex("eth1"));
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&at), sizeof at), 0);
    timeval tv{2, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    send_gratuitous_arp("eth0", "10.9.9.9");
    for (int i = 0; i < 2; ++i) {
        unsigned char buf[64];
        sockaddr_ll from{};
        socklen_t len = sizeof from;
        ssize_t n = ::recvfrom(fd, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len);
        ASSERT_GE(n, 28) << "ARP " << i << " not received";
        EXPECT_EQ(from.sll_pkttype, PACKET_BROADCAST);
        EXPECT_EQ((buf[6] << 8) | buf[7], ARPOP_REPLY);
        char sha[18];
        std::snprintf(sha, sizeof sha, "%02x:%02x:%02x:%02x:%02x:%02x", buf[8], buf[9], buf[10], buf[11], buf[12], buf[13]);
        EXPECT_EQ(std::string(sha), mac);
        char spa[16], tpa[16];
        inet_ntop(AF_INET, buf + 14, spa, sizeof spa);
        inet_ntop(AF_INET, buf + 24, tpa, sizeof tpa);
        EXPECT_STREQ(spa, "10.9.9.9");
        EXPECT_STREQ(tpa, "10.9.9.9");
    }
}
