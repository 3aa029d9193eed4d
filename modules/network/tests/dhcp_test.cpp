// dnsmasq's arguments (with DNS on the IPv4 gateway too, a deliberate
// deviation), reservation files (on every node, another), the lease
// encoding of the lease helper and the supervised process: unit
// tests (the process test runs a stand-in program, not dnsmasq).
#include <gtest/gtest.h>

#include <signal.h>

#include <fstream>
#include <thread>

#include "dhcp_lease.hpp"
#include "dnsmasq.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc::network;

namespace {
DnsmasqPaths paths() { return {"/usr/lib/pvc/modules/pvcnoded-dnsmasq-lease", "/run/pvc/dnsmasq/100"}; }
DhcpNetwork v4() {
    DhcpNetwork n;
    n.vni = 100;
    n.domain = "net100.local";
    n.gw4 = "10.100.0.1";
    n.dhcp4 = true;
    n.dhcp4_start = "10.100.0.100";
    n.dhcp4_end = "10.100.0.199";
    return n;
}
std::string slurp(const std::filesystem::path& p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}
}  // namespace

TEST(DnsmasqArguments, Ipv4WithDhcpExactlyAsTheReference) {
    EXPECT_EQ(dnsmasq_arguments(v4(), paths()),
              (std::vector<std::string>{
                  "--domain-needed", "--bogus-priv", "--no-hosts", "--dhcp-authoritative", "--filterwin2k",
                  "--expand-hosts", "--domain-needed", "--domain=net100.local", "--local=/net100.local/",
                  "--log-facility=-", "--log-dhcp", "--keep-in-foreground", "--leasefile-ro",
                  "--dhcp-script=/usr/lib/pvc/modules/pvcnoded-dnsmasq-lease", "--dhcp-hostsdir=/run/pvc/dnsmasq/100",
                  "--bind-interfaces", "--listen-address=10.100.0.1", "--auth-zone=net100.local",
                  "--auth-peer=10.100.0.1", "--auth-server=10.100.0.1", "--auth-sec-servers=10.100.0.1",
                  "--dhcp-option=option:ntp-server,10.100.0.1", "--dhcp-range=10.100.0.100,10.100.0.199,48h"}));
}

TEST(DnsmasqArguments, DualStackServesDnsOnBothGatewaysAndIsStatelessWithDhcp4) {
    DhcpNetwork n = v4();
    n.ipv6 = true;
    n.gw6 = "2001:db8:100::1";
    auto a = dnsmasq_arguments(n, paths());
    auto at = [&](const std::string& x) {
        auto it = std::find(a.begin(), a.end(), x);
        EXPECT_NE(it, a.end()) << x;
        return it - a.begin();
    };
    EXPECT_LT(at("--listen-address=2001:db8:100::1"), at("--enable-ra"));
    EXPECT_LT(at("--enable-ra"), at("--dhcp-range=net:vmbr100,::,constructor:vmbr100,ra-stateless,ra-names"));
    at("--dhcp-option=option6:dns-server,[2001:db8:100::1]");
    // The IPv4 block too (a deliberate deviation from the reference), then DHCPv4.
    EXPECT_LT(at("--dhcp-range=net:vmbr100,::,constructor:vmbr100,ra-stateless,ra-names"),
              at("--listen-address=10.100.0.1"));
    EXPECT_LT(at("--listen-address=10.100.0.1"), at("--dhcp-range=10.100.0.100,10.100.0.199,48h"));
}

TEST(DnsmasqArguments, Ipv6OnlyWithoutDhcp4IsStatefulDhcpv6) {
    DhcpNetwork n;
    n.vni = 7;
    n.domain = "n7.local";
    n.ipv6 = true;
    n.gw6 = "2001:db8::1";
    auto a = dnsmasq_arguments(n, paths());
    EXPECT_EQ(std::count(a.begin(), a.end(), "--auth-server=2001:db8::1"), 2);
    EXPECT_EQ(a.back(), "--dhcp-range=net:vmbr7,::2,::ffff:ffff:ffff:ffff,constructor:vmbr7,64,24h");
    EXPECT_TRUE(wants_dnsmasq(n));
}

TEST(DnsmasqArguments, RunsForAnyNetworkWithAGatewayWhateverTheDhcpFlags) {
    DhcpNetwork n = v4();
    n.dhcp4 = false;
    EXPECT_TRUE(wants_dnsmasq(n));
    auto a = dnsmasq_arguments(n, paths());
    EXPECT_EQ(a.back(), "--auth-sec-servers=10.100.0.1");
    n.gw4.reset();
    EXPECT_FALSE(wants_dnsmasq(n));
    // DHCPv4 on without a range: said, and left out.
    DhcpNetwork r = v4();
    r.dhcp4_end.reset();
    std::string why;
    auto b = dnsmasq_arguments(r, paths(), &why);
    EXPECT_NE(why, "");
    EXPECT_EQ(b.back(), "--auth-sec-servers=10.100.0.1");
}

TEST(Reservations, BadMacsAndAddressesAreRefused) {
    EXPECT_EQ(reservation_problem({"52:54:00:12:34:56", "10.0.0.5"}), "");
    EXPECT_NE(reservation_problem({"52:54:00:12:34:5G", "10.0.0.5"}), "");
    EXPECT_NE(reservation_problem({"52:54:00:12:34:56:78", "10.0.0.5"}), "");
    EXPECT_NE(reservation_problem({"52-54-00-12-34-56", "10.0.0.5"}), "");
    EXPECT_NE(reservation_problem({"52:54:00:AB:34:56", "10.0.0.5"}), "");  // the client writes lowercase
    EXPECT_NE(reservation_problem({"52:54:00:12:34:56", "10.0.0.300"}), "");
}

TEST(Reservations, HostFilesFollowTheListAndSayWhenDnsmasqMustReread) {
    pvc::test::TempDir dir("pvc-hosts");
    auto d = dir.path() / "100";
    EXPECT_FALSE(sync_host_files(d, {{"52:54:00:00:00:01", "10.0.0.5"}, {"52:54:00:00:00:02", "10.0.0.6"}}));
    EXPECT_EQ(slurp(d / "52:54:00:00:00:01"), "52:54:00:00:00:01,10.0.0.5");  // no newline, no hostname
    EXPECT_FALSE(sync_host_files(d, {{"52:54:00:00:00:01", "10.0.0.5"}, {"52:54:00:00:00:02", "10.0.0.6"}}));
    // A removed one or a changed address needs SIGHUP; an added one does not (inotify).
    EXPECT_TRUE(sync_host_files(d, {{"52:54:00:00:00:01", "10.0.0.5"}}));
    EXPECT_FALSE(std::filesystem::exists(d / "52:54:00:00:00:02"));
    EXPECT_TRUE(sync_host_files(d, {{"52:54:00:00:00:01", "10.0.0.9"}}));
    EXPECT_EQ(slurp(d / "52:54:00:00:00:01"), "52:54:00:00:00:01,10.0.0.9");
    EXPECT_FALSE(sync_host_files(d, {{"52:54:00:00:00:01", "10.0.0.9"}, {"52:54:00:00:00:03", "10.0.0.7"}}));
}

TEST(Leases, VniFromTheBridgeAndTheInitLine) {
    EXPECT_EQ(bridge_vni("vmbr100"), "100");
    EXPECT_FALSE(bridge_vni("brcluster"));
    Lease l = lease_from_event({"52:54:00:00:00:01", "10.0.0.5"}, nullptr, nullptr);
    EXPECT_EQ(l.expiry, "0");
    EXPECT_EQ(l.client_id, "*");
    EXPECT_EQ(l.hostname, "");
    // The empty hostname is `*` in the answer to init, never two spaces.
    EXPECT_EQ(init_line(l), "0 52:54:00:00:00:01 10.0.0.5 * *");
    Lease m = lease_from_event({"52:54:00:00:00:02", "10.0.0.6", "web1"}, "1795754238", "01:52:54:00:00:00:02");
    EXPECT_EQ(init_line(m), "1795754238 52:54:00:00:00:02 10.0.0.6 web1 01:52:54:00:00:00:02");
}

TEST(DnsmasqProcess, RestartedWithBackoffWhenItDiesAndStoppedWithSigterm) {
    pvc::test::TempDir dir("pvc-dnsmasq");
    auto log = dir.path() / "log" / "x.log";
    // A stand-in that dies at once: exited, next try in 1 s, then 2 s.
    Dnsmasq dying("/bin/sh", {"-c", "echo \"$DNSMASQ_BRIDGE_INTERFACE\"; exit 3"}, {"DNSMASQ_BRIDGE_INTERFACE=vmbr9"}, log);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(dying.supervise(t0).kind, Dnsmasq::Event::started);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    auto ev = dying.supervise(t0 + std::chrono::milliseconds(200));
    EXPECT_EQ(ev.kind, Dnsmasq::Event::exited);
    EXPECT_EQ(ev.what, "exit status 3");
    EXPECT_EQ(ev.next_try, std::chrono::seconds(1));
    EXPECT_EQ(dying.supervise(t0 + std::chrono::milliseconds(500)).kind, Dnsmasq::Event::none);  // backing off
    EXPECT_EQ(dying.supervise(t0 + std::chrono::milliseconds(1300)).kind, Dnsmasq::Event::started);
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_EQ(dying.supervise(t0 + std::chrono::milliseconds(1500)).next_try, std::chrono::seconds(2));
    // Only its environment (not ours), output appended to its log.
    EXPECT_EQ(slurp(log), "vmbr9\nvmbr9\n");

    // One that runs: stopped by SIGTERM and reaped.
    Dnsmasq running("/bin/sleep", {"60"}, {}, log);
    ASSERT_EQ(running.supervise().kind, Dnsmasq::Event::started);
    pid_t pid = running.pid();
    auto t = std::chrono::steady_clock::now();
    running.stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t, std::chrono::seconds(1));
    EXPECT_FALSE(running.running());
    EXPECT_NE(::kill(pid, 0), 0);  // gone and reaped
}
