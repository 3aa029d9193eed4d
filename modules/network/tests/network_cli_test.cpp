// `pvc network` as an operator runs it, against one pvcnoded with
// networking on: the node is a network namespace running the real daemon
// with the network module .so, its cluster device a veth to a switch
// namespace that holds a private ZooKeeper; our `pvc` binary writes. What is
// checked is the node's kernel and processes: a network added with `pvc
// network add` gets its vxlan, bridge, gateway address and a dnsmasq that
// answers DHCP; `pvc network dhcp add` reaches dnsmasq (a guest with the
// reserved MAC gets the reserved address, another one an address of the
// range); `pvc network acl add` reaches nftables; `pvc network remove`
// takes all of it away.
//
// It also prints the figures of bench/README.md ("network add to bridge and
// dnsmasq up"); PVC_NET_BENCH_ROUNDS=<n> repeats the add/remove round n
// times (default 1) for them.
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "netns.hpp"
#include "network_config.hpp"
#include "pvc/cluster.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace bp = boost::process;
using namespace pvc::network::test;
using nlohmann::json;
using pvc::test::eventually;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

class NetworkCli : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::string p = ns_prefix();
        sw_ = new Netns(p + "s");
        node_ = new Netns(p + "a");
        sw_->must_exec({"ip", "link", "add", "sw0", "type", "bridge"});
        sw_->must_exec({"ip", "addr", "add", "10.231.0.100/24", "dev", "sw0"});
        sw_->must_exec({"ip", "link", "set", "sw0", "up"});
        // The node's cluster device is its end, eth0: the daemon brings it up.
        sw_->must_exec({"ip", "link", "add", "p1", "type", "veth", "peer", "name", "eth0", "netns", node_->name()});
        sw_->must_exec({"ip", "link", "set", "p1", "master", "sw0", "up"});
        // This process lives in the switch namespace from here on: ZooKeeper,
        // our session and every `pvc` run.
        in_sw_ = new InNetns(sw_->name());
        zk_ = new pvc::test::ZkServer("0.0.0.0");
        dir_ = new pvc::test::TempDir("pvc-netcli");
        // dnsmasq drops root and reads its hosts directory as another user.
        std::filesystem::permissions(dir_->path(), std::filesystem::perms(0755));
        session_ = pvc::zk::Session::connect({zk_->hosts()});
        pvc::init_cluster(*session_);

        NetworkConfigOptions o;
        o.node = "hv1";
        o.coordinators = "[hv1:" + std::to_string(zk_->port()) + "]";
        o.base_dir = dir_->path() / "hv1";
        o.module_dir = pvc::test::build_dir() + "/modules";
        auto config = write_network_config(o);
        std::ofstream(o.base_dir / "hosts") << "127.0.0.1 localhost\n10.231.0.100 hv1\n";
        daemon_log_ = o.base_dir / "pvcnoded.log";
        // Its own hostname and /etc/hosts (hv1 resolves to the switch, where ZooKeeper listens).
        daemon_ = new bp::child(bp::search_path("ip"), "netns", "exec", node_->name(), "unshare", "-u", "-m",
                                "--propagation", "private", "--", "sh", "-c",
                                "mount --bind \"$3\" /etc/hosts && hostname \"$0\" && exec \"$1\" --config \"$2\"",
                                "hv1", pvc::test::pvcnoded_binary(), config.string(), (o.base_dir / "hosts").string(),
                                (bp::std_out & bp::std_err) > daemon_log_.string(), bp::std_in < bp::null);
    }
    static void TearDownTestSuite() {
        // An orderly stop: the daemon stops its dnsmasq instances.
        if (daemon_ && daemon_->running()) {
            ::kill(daemon_->id(), SIGTERM);
            if (!daemon_->wait_for(std::chrono::seconds(150))) {
                ::kill(daemon_->id(), SIGKILL);
                daemon_->wait();
            }
        }
        delete daemon_;
        if (session_) session_->close();
        session_.reset();
        delete zk_;
        delete in_sw_;
        for (const char* g : {"c1", "c2"}) run({"ip", "netns", "del", ns_prefix() + g});
        delete node_;
        delete sw_;
        delete dir_;
    }
    void SetUp() override {
        // The node is the only coordinator: it runs and takes the primary
        // role (the gateway addresses and dnsmasq are the primary's).
        ASSERT_TRUE(eventually([] {
            return session_->get("/nodes/hv1/daemonstate").value_or("") == "run" &&
                   session_->get("/nodes/hv1/routerstate").value_or("") == "primary";
        }, 60s)) << log();
    }

    static std::string log() { return pvc::test::slurp(daemon_log_); }
    // Our `pvc` with the cluster's ZooKeeper; its exit status and output.
    static pvc::test::ProcResult pvc_cli(std::vector<std::string> args) {
        args.insert(args.begin(), {PVC_CLI_BINARY, "--zookeeper", zk_->hosts()});
        return pvc::test::run_command(args);
    }
    static json link(const std::string& name) {
        auto r = node_->exec({"ip", "-d", "-j", "link", "show", "dev", name});
        if (r.status != 0) return nullptr;
        return json::parse(r.out).at(0);
    }
    static bool holds(const std::string& dev, const std::string& cidr) {
        auto r = node_->exec({"ip", "-j", "addr", "show", "dev", dev});
        if (r.status != 0) return false;
        json shown = json::parse(r.out);  // kept: a range-for over a temporary's member would dangle
        for (const auto& a : shown.at(0).at("addr_info"))
            if (a.at("local").get<std::string>() + "/" + std::to_string(a.at("prefixlen").get<int>()) == cidr)
                return true;
        return false;
    }
    // vxlan<vni> in an up vmbr<vni> that holds the gateway.
    static bool network_up(const std::string& vni, const std::string& gateway_cidr) {
        json vx = link("vxlan" + vni), br = link("vmbr" + vni);
        if (vx.is_null() || br.is_null() || !vx.contains("master") || vx.at("master") != "vmbr" + vni) return false;
        bool up = false;
        for (const auto& f : br.at("flags")) up = up || f.get<std::string>() == "UP";
        return up && holds("vmbr" + vni, gateway_cidr);
    }
    // The dnsmasq serving network `vni` in the node (not its script-runner child).
    static std::vector<int> dnsmasq_pids(const std::string& vni) {
        std::vector<int> out;
        std::istringstream pids(run({"ip", "netns", "pids", node_->name()}).out);
        auto serving = [&](int pid) {
            std::string cmdline = pvc::test::slurp("/proc/" + std::to_string(pid) + "/cmdline");
            std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
            return cmdline.rfind("/usr/sbin/dnsmasq ", 0) == 0 &&
                   cmdline.find("/dnsmasq/" + vni + " ") != std::string::npos;
        };
        for (int pid; pids >> pid;) {
            if (!serving(pid)) continue;
            std::string status = pvc::test::slurp("/proc/" + std::to_string(pid) + "/status");
            auto p = status.find("PPid:");
            int ppid = p == std::string::npos ? 0 : std::atoi(status.c_str() + p + 5);
            if (!serving(ppid)) out.push_back(pid);
        }
        return out;
    }
    // A guest on vmbr<vni> with `mac` asks for an address (busybox udhcpc,
    // up to 8 discovers 1 s apart): the address it was offered.
    static std::string dhcp_lease(const std::string& guest, const std::string& vni, const std::string& mac) {
        std::string g = ns_prefix() + guest;
        run({"ip", "netns", "del", g});
        must({"ip", "netns", "add", g});
        must({"ip", "-n", node_->name(), "link", "add", guest, "type", "veth", "peer", "name", "eth0", "netns", g});
        must({"ip", "-n", node_->name(), "link", "set", guest, "master", "vmbr" + vni, "up"});
        must({"ip", "-n", g, "link", "set", "eth0", "address", mac, "up"});
        auto r = run({"ip", "netns", "exec", g, "busybox", "udhcpc", "-i", "eth0", "-n", "-q", "-t", "8", "-T", "1",
                      "-s", "/bin/true"});
        run({"ip", "netns", "del", g});
        auto p = r.out.find("lease of ");
        if (p == std::string::npos) return "no lease: " + r.out;
        return r.out.substr(p + 9, r.out.find(' ', p + 9) - p - 9);
    }
    static bool acl_in_kernel(const std::string& vni, const std::string& text) {
        return node_->exec({"nft", "list", "chain", "inet", "filter", "vxlan" + vni + "-in"}).out.find(text) !=
               std::string::npos;
    }

    static Netns *sw_, *node_;
    static InNetns* in_sw_;
    static pvc::test::ZkServer* zk_;
    static pvc::test::TempDir* dir_;
    static bp::child* daemon_;
    static std::filesystem::path daemon_log_;
    static std::shared_ptr<pvc::zk::Session> session_;
};
Netns *NetworkCli::sw_, *NetworkCli::node_;
InNetns* NetworkCli::in_sw_;
pvc::test::ZkServer* NetworkCli::zk_;
pvc::test::TempDir* NetworkCli::dir_;
bp::child* NetworkCli::daemon_;
std::filesystem::path NetworkCli::daemon_log_;
std::shared_ptr<pvc::zk::Session> NetworkCli::session_;

}  // namespace

TEST_F(NetworkCli, AddReservationAclRemoveReachTheKernelAndDnsmasq) {
    const std::string vni = "1100", gw = "10.110.0.1/24";
    const char* env = std::getenv("PVC_NET_BENCH_ROUNDS");
    const int rounds = std::max(1, env ? std::atoi(env) : 1);
    std::vector<double> to_cli, to_bridge, to_dnsmasq, to_lease;
    for (int round = 0; round < rounds; ++round) {
        // Network add → vxlan in an up bridge with the gateway → dnsmasq;
        // then a reservation → the reserved guest's lease.
        auto t0 = Clock::now();
        auto r = pvc_cli({"network", "add", vni, "-d", "cli1100", "-p", "managed", "-i", "10.110.0.0/24", "-g",
                          "10.110.0.1", "--dhcp", "--dhcp-start", "10.110.0.100", "--dhcp-end", "10.110.0.150"});
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        to_cli.push_back(ms(Clock::now() - t0));
        ASSERT_TRUE(eventually([&] { return network_up(vni, gw); }, 30s))
            << link("vxlan" + vni).dump() << "\n" << link("vmbr" + vni).dump() << "\n"
            << node_->exec({"ip", "-j", "addr", "show", "dev", "vmbr" + vni}).out << log();
        to_bridge.push_back(ms(Clock::now() - t0));
        json vx = link("vxlan" + vni);
        EXPECT_EQ(vx.at("linkinfo").at("info_data").at("id"), 1100);
        EXPECT_EQ(vx.at("linkinfo").at("info_data").at("port"), 4789);
        ASSERT_TRUE(eventually([&] { return dnsmasq_pids(vni).size() == 1; }, 30s)) << log();
        to_dnsmasq.push_back(ms(Clock::now() - t0));
        r = pvc_cli({"network", "dhcp", "add", vni, "10.110.0.5", "52:54:00:11:00:05", "--hostname", "r5"});
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        // The reservation reached dnsmasq: the guest with its MAC gets its address.
        auto file = dir_->path() / "hv1" / "run" / "dnsmasq" / vni / "52:54:00:11:00:05";
        EXPECT_TRUE(eventually([&] { return pvc::test::slurp(file) == "52:54:00:11:00:05,10.110.0.5"; }, 10s)) << log();
        EXPECT_EQ(dhcp_lease("c1", vni, "52:54:00:11:00:05"), "10.110.0.5") << log();
        to_lease.push_back(ms(Clock::now() - t0));

        if (round == 0) {
            // Another guest gets an address of the range (dnsmasq pings it
            // first: about 3 s).
            std::string pool = dhcp_lease("c2", vni, "52:54:00:11:00:06");
            EXPECT_EQ(pool.rfind("10.110.0.1", 0), 0u) << pool;  // 10.110.0.100-150
            EXPECT_GE(std::atoi(pool.substr(pool.rfind('.') + 1).c_str()), 100) << pool;

            // An ACL reaches nftables.
            r = pvc_cli({"network", "acl", "add", vni, "--in", "-d", "no-ping", "-r", "icmp type echo-request drop"});
            ASSERT_EQ(r.status, 0) << r.out << r.err;
            EXPECT_TRUE(eventually([&] { return acl_in_kernel(vni, "echo-request drop"); }, 10s))
                << node_->exec({"nft", "list", "ruleset"}).out << log();
        }

        // Remove: links, gateway, dnsmasq and the network's rules go.
        r = pvc_cli({"network", "remove", vni, "-y"});
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        EXPECT_TRUE(eventually([&] {
            return link("vmbr" + vni).is_null() && link("vxlan" + vni).is_null() && dnsmasq_pids(vni).empty() &&
                   node_->exec({"nft", "list", "chain", "inet", "filter", "vxlan" + vni + "-in"}).status != 0;
        }, 30s)) << node_->exec({"nft", "list", "ruleset"}).out << log();
        EXPECT_FALSE(session_->exists("/networks/" + vni));
    }
    auto show = [](const char* what, std::vector<double> v) {
        std::sort(v.begin(), v.end());
        std::printf("[ figure   ] pvc network add -> %s: p50 %.0f ms, max %.0f ms (%zu rounds)\n", what,
                    v[v.size() / 2], v.back(), v.size());
    };
    show("the command's exit (a process, its ZooKeeper session, the transaction)", to_cli);
    show("vxlan in vmbr, up, gateway address", to_bridge);
    show("dnsmasq running", to_dnsmasq);
    show("`pvc network dhcp add` then the reserved guest's DHCP lease", to_lease);
}
