// The bundled health checks (health-plugins/README.md), loaded from the build's
// plugins directory by the real host, against what exists on this machine.
// Where the hardware or service is absent, the test asserts the report that
// absence produces (never a silent pass).
#include "health_support.hpp"

#include <fstream>
#include <mutex>
#include <regex>
#include <thread>

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

using namespace std::chrono_literals;
using pvc::test::HealthOptions;

namespace {

class BundledPluginTest : public pvc::test::HealthTest {
protected:
    // Links one bundled plugin (file name as built) into the test plugin dir.
    void bundle(const std::string& file) {
        auto src = build_dir() / "plugins" / file;
        ASSERT_TRUE(std::filesystem::exists(src)) << src << " missing: build target pvc-health-plugins";
        std::filesystem::create_symlink(src, plugins_ / file);
    }
    std::string message(const std::string& p) { return pkey("monitoring_plugin.message", p).value_or("<absent>"); }
    int delta(const std::string& p) { return std::stoi(pkey("monitoring_plugin.health_delta", p).value_or("-1")); }
};

bool tcp_port_open(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

TEST_F(BundledPluginTest, LoadReportsLoadAgainstCpuCount) {
    bundle("load.so");
    auto h = host(config());
    h->load();
    ASSERT_EQ(h->plugin_names(), std::vector<std::string>{"load"});
    pass(*h);
    std::smatch m;
    auto msg = message("load");
    ASSERT_TRUE(std::regex_match(msg, m, std::regex(R"(Current load is ([0-9]+\.[0-9]{1,2}) out of ([0-9]+) CPU cores)")))
        << msg;
    double load = std::stod(m[1]);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    EXPECT_EQ(std::stol(m[2]), cores);
    EXPECT_EQ(delta("load"), load > cores ? 50 : 0);
}

TEST_F(BundledPluginTest, DiskChecksEverySmartDiskOrReportsNone) {
    bundle("disk");
    auto h = host(config(HealthOptions().with_plugin_timeout(20)));
    h->load();
    ASSERT_EQ(h->plugin_names(), std::vector<std::string>{"disk"});
    pass(*h, "client", 30s);
    auto lsblk = pvc::test::run_command({"lsblk", "--json", "--paths", "--include", "8,259"});
    auto disks = nlohmann::json::parse(lsblk.out)["blockdevices"];
    bool smartctl = std::filesystem::exists("/usr/sbin/smartctl");
    if (disks.empty() || !smartctl) {
        // No SCSI/SATA/NVMe disk (virtio only) or no smartctl: nothing checked, said so.
        EXPECT_EQ(message("disk"), "All 0 checked disks report OK: ");
        EXPECT_EQ(delta("disk"), 0);
    } else {
        EXPECT_TRUE(message("disk").find("disk") != std::string::npos) << message("disk");
    }
}

TEST_F(BundledPluginTest, DpkgReportsPackageStateWithData) {
    bundle("dpkg");
    auto h = host(config(HealthOptions().with_plugin_timeout(30)));
    h->load();
    pass(*h, "client", 40s);
    std::string version;
    std::ifstream("/etc/debian_version") >> version;
    auto msg = message("dpkg");
    EXPECT_TRUE(std::regex_match(msg, std::regex("Debian " + std::regex_replace(version, std::regex("\\."), "\\.") +
                                                 "; Obsolete conffiles: [0-9]+; Packages inconsistent: [0-9]+, "
                                                 "upgradable: [0-9]+")))
        << msg;
    auto data = nlohmann::json::parse(pkey("monitoring_plugin.data", "dpkg").value_or("null"));
    EXPECT_EQ(data["debian_version"], version);
    EXPECT_TRUE(data["obsolete_conffiles"].is_array());
    EXPECT_TRUE(data["inconsistent_packages"].is_array());
    EXPECT_TRUE(data["upgradable_packages"].is_array());
    int expected = (data["obsolete_conffiles"].empty() ? 0 : 1) + (data["inconsistent_packages"].empty() ? 0 : 1) +
                   (data["upgradable_packages"].empty() ? 0 : 1);
    EXPECT_EQ(delta("dpkg"), expected);
}

TEST_F(BundledPluginTest, EdacWithoutEdacUtilReportsEmptyErrorList) {
    bundle("edac");
    auto h = host(config());
    h->load();
    pass(*h);
    if (!std::filesystem::exists("/usr/bin/edac-util")) {
        EXPECT_EQ(message("edac"), "EDAC reports errors: ");  // the reference's text when the tool is absent
        EXPECT_EQ(delta("edac"), 0);
    } else {
        EXPECT_EQ(message("edac").rfind("EDAC reports", 0), 0u);
    }
}

TEST_F(BundledPluginTest, HardwareRaidAndPowerSupplyChecksRefuseToLoadWithoutHardware) {
    bundle("hwrd");
    bundle("psur");
    bundle("load.so");
    auto h = host(config());
    h->load();
    EXPECT_EQ(h->plugin_names(), std::vector<std::string>{"load"});
    EXPECT_TRUE(log_has("warning: Failed to load monitoring plugin: No hardware RAID management commands found"));
    // No in-band BMC here: ipmitool fails.
    EXPECT_TRUE(log_has("warning: Failed to load monitoring plugin: Error running ipmitool command"));
}

TEST_F(BundledPluginTest, IpmiReportsAnUnreachableBmc) {
    bundle("ipmi");
    // Loopback port 623 has no BMC: ipmitool fails (or times out after 5 s).
    auto h = host(config(HealthOptions().with_plugin_timeout(10).with_ipmi_host("127.0.0.1")));
    h->load();
    pass(*h, "client", 20s);
    EXPECT_EQ(message("ipmi"), "IPMI via admin@127.0.0.1 is NOT responding");
    EXPECT_EQ(delta("ipmi"), 10);
}

TEST_F(BundledPluginTest, KeydbReportsRefusedConnection) {
    bundle("kydb");
    auto h = host(config());
    h->load();
    pass(*h);
    if (tcp_port_open(6379)) {
        EXPECT_EQ(delta("kydb"), 0) << message("kydb");
    } else {
        // redis-py's text for a refused connection
        EXPECT_EQ(message("kydb"), "Failed to connect to KeyDB/Redis: Error 111 connecting to localhost:6379. Connection refused.");
        EXPECT_EQ(delta("kydb"), 50);
    }
}

// A KeyDB/Redis stand-in on 127.0.0.1:6379 that answers one request per
// connection with `reply` (the plugin speaks RESP itself: no redis-py).
class FakeResp {
public:
    explicit FakeResp(std::string reply) : reply_(std::move(reply)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(6379);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && ::listen(fd_, 4) == 0;
        if (bound_)
            thread_ = std::thread([this] {
                for (;;) {
                    int c = ::accept(fd_, nullptr, nullptr);
                    if (c < 0) return;
                    char buf[256];
                    std::string got;
                    while (got.find("INFO\r\n") == std::string::npos) {
                        ssize_t n = ::recv(c, buf, sizeof buf, 0);
                        if (n <= 0) break;
                        got.append(buf, static_cast<size_t>(n));
                    }
                    {
                        std::lock_guard g(m_);
                        requests_ += got;
                    }
                    (void)!::send(c, reply_.data(), reply_.size(), MSG_NOSIGNAL);
                    ::close(c);
                }
            });
    }
    ~FakeResp() {
        ::shutdown(fd_, SHUT_RDWR);
        if (thread_.joinable()) thread_.join();
        ::close(fd_);
    }
    bool bound() const { return bound_; }
    // What the plugin sent (complete after the pass: the thread has answered by then).
    std::string requests() const {
        std::lock_guard g(m_);
        return requests_;
    }

private:
    std::string reply_;
    int fd_ = -1;
    bool bound_ = false;
    mutable std::mutex m_;
    std::string requests_;
    std::thread thread_;
};

TEST_F(BundledPluginTest, KeydbSendsInfoAndReportsTheAnswer) {
    if (tcp_port_open(6379)) {
        // A real KeyDB/Redis runs here (KeydbReportsRefusedConnection then checks it).
        GTEST_SKIP() << "port 6379 is taken by a real server";
    }
    bundle("kydb");
    auto h = host(config());
    h->load();
    {
        FakeResp server("$22\r\n# Server\r\nredis_mode:x\r\n");
        ASSERT_TRUE(server.bound());
        pass(*h);
        EXPECT_EQ(server.requests(), "*1\r\n$4\r\nINFO\r\n");
        // (sic) the reference's text on success
        EXPECT_EQ(message("kydb"), "Successfully connected to Libvirtd on localhost");
        EXPECT_EQ(delta("kydb"), 0);
    }
    {
        FakeResp server("-NOAUTH Authentication required.\r\n");
        ASSERT_TRUE(server.bound());
        pass(*h);
        // redis-py's AuthenticationError text: the code word dropped
        EXPECT_EQ(message("kydb"), "Failed to connect to KeyDB/Redis: Authentication required.");
        EXPECT_EQ(delta("kydb"), 50);
    }
    {
        FakeResp server("");  // closes without an answer
        ASSERT_TRUE(server.bound());
        pass(*h);
        EXPECT_EQ(message("kydb"), "Failed to connect to KeyDB/Redis: Connection closed by server.");
        EXPECT_EQ(delta("kydb"), 50);
    }
}

TEST_F(BundledPluginTest, PsqlReportsUnreachableDatabase) {
    bundle("psql");
    // The database keys exist with networking on (the devices need not).
    auto h = host(config(HealthOptions().with_networking({"brdev", "upl", "clus", "clus"})));
    h->load();
    pass(*h);
    // No Patroni here, and the node name does not resolve.
    EXPECT_EQ(message("psql").rfind("Failed to connect to PostgreSQL database pvcapi: ", 0), 0u) << message("psql");
    EXPECT_EQ(delta("psql"), 50);
    EXPECT_EQ(key("node.monitoring.health"), "50");
}

// With networking off the reference's dictionary has no database keys (the
// reference's file failed every run with a KeyError traceback): the plugin
// refuses to load, saying why, without a traceback, and subtracts nothing.
TEST_F(BundledPluginTest, PsqlWithoutNetworkingRefusesToLoadSayingWhy) {
    bundle("psql");
    auto h = host(config());  // enable_networking: false
    h->load();
    EXPECT_TRUE(h->plugin_names().empty());
    EXPECT_TRUE(log_has("warning: Failed to load monitoring plugin: No PostgreSQL databases to check: networking is "
                        "not enabled on this node (enable_networking: false)"))
        << log_text();
    EXPECT_FALSE(log_has("Traceback")) << log_text();
}

TEST_F(BundledPluginTest, NicsWithoutNetworkingRefusesToLoadSayingWhy) {
    bundle("nics");
    auto h = host(config());  // enable_networking: false -> no device keys, as on a reference node
    h->load();
    EXPECT_TRUE(h->plugin_names().empty());
    EXPECT_TRUE(log_has("warning: Failed to load monitoring plugin: No network devices to check: networking is not "
                        "enabled on this node (enable_networking: false)"))
        << log_text();
    EXPECT_FALSE(log_has("Traceback")) << log_text();
}

// A configured device that does not exist fails the run with its name and
// key (a PluginError: no traceback); the node's health is untouched.
TEST_F(BundledPluginTest, NicsWithAMissingDeviceFailsTheRunNamingIt) {
    bundle("nics");
    auto h = host(config(HealthOptions().with_networking({"pvcnodev0", "pvcnodev1", "pvcnodev2", "pvcnodev2"})));
    h->load();
    ASSERT_EQ(h->plugin_names(), std::vector<std::string>{"nics"});
    pass(*h);
    EXPECT_TRUE(log_has("Monitoring plugin nics failed: PluginError: network device pvcnodev0 (bridge_dev) does not "
                        "exist"))
        << log_text();
    EXPECT_FALSE(log_has("Traceback")) << log_text();
    EXPECT_EQ(message("nics"), "Initializing");
    EXPECT_EQ(delta("nics"), 0);
    EXPECT_EQ(key("node.monitoring.health"), "100");
}

// nics on real veth pairs, in a network namespace of the test's own: the
// outer test creates the namespace and the devices and re-runs this binary
// inside it (`ip netns exec` also remounts /sys, so /sys/class/net is the
// namespace's), where the inner test (registered only in that run, below)
// loads the plugin, changes link states and checks every report. A veth
// reports speed 10000 and no supported link modes ("Not reported", which
// ethtool cannot change: `ethtool -s` is not supported by veth).
constexpr const char* kNicsInner = "PVC_HEALTH_NICS_INNER";

TEST_F(BundledPluginTest, NicsReportsVethLinksInANetworkNamespace) {
    ASSERT_EQ(geteuid(), 0u) << "needs root for a network namespace";
    auto ethtool = pvc::test::run_command({"ethtool", "--version"});
    ASSERT_EQ(ethtool.status, 0) << "ethtool is not installed (tools/debian-packages.txt): " << ethtool.err;
    auto ns = fmt::format("pvcnics{}", getpid());
    // Removed whatever happens below: the devices die with the namespace.
    struct Cleanup {
        std::string ns;
        ~Cleanup() {
            pvc::test::run_command({"bash", "-c", fmt::format("for p in $(ip netns pids {0} 2>/dev/null); do "
                                                              "kill -9 $p; done; ip netns del {0} 2>/dev/null; true",
                                                              ns)});
        }
    } cleanup{ns};
    // brdev: bridge device; upl: upstream; clus: cluster and storage.
    auto up = pvc::test::run_command({"bash", "-c", fmt::format(R"(set -e
ip netns add {0}
ip -n {0} link set lo up
for d in brdev upl clus; do
  ip -n {0} link add $d type veth peer name $d-peer
  ip -n {0} link set $d up
  ip -n {0} link set $d-peer up
done
# The configured addresses. Without any IPv4 address besides loopback (only
# the veths' IPv6 link-local ones), getaddrinfo(AI_ADDRCONFIG) would not
# return 127.0.0.1 and the inner run could not reach its ZooKeeper.
ip -n {0} addr add 192.0.2.1/24 dev upl
ip -n {0} addr add 10.255.0.1/24 dev clus
ip -n {0} addr add 10.254.0.1/24 dev clus)",
                                                                 ns)});
    ASSERT_EQ(up.status, 0) << up.out << up.err;
    auto self = std::filesystem::read_symlink("/proc/self/exe").string();
    auto inner = pvc::test::run_command({"ip", "netns", "exec", ns, "env", std::string(kNicsInner) + "=1", self,
                                         "--gtest_filter=BundledPluginTest.NicsInner"},
                                        std::chrono::seconds(120));
    EXPECT_EQ(inner.status, 0) << inner.out << inner.err;
    EXPECT_NE(inner.out.find("[  PASSED  ] 1 test"), std::string::npos) << inner.out << inner.err;
}

class NicsInner : public BundledPluginTest {
public:
    void TestBody() override {
        // Inside the namespace: exactly the devices the outer test made.
        for (auto d : {"brdev", "upl", "clus"})
            ASSERT_TRUE(std::filesystem::exists(std::filesystem::path("/sys/class/net") / d)) << d;
        bundle("nics");
        auto h = host(config(HealthOptions().with_networking({"brdev", "upl", "clus", "clus"})));
        h->load();
        ASSERT_EQ(h->plugin_names(), std::vector<std::string>{"nics"});
        auto ip = [](const std::string& args) {
            auto r = pvc::test::run_command({"bash", "-c", "ip link set " + args});
            ASSERT_EQ(r.status, 0) << args << ": " << r.err;
        };
        const std::string ok = " OK at 10000 Mbps (supported speeds not reported)";

        // All links up: one part per distinct device, sorted; nothing degraded.
        pass(*h);
        EXPECT_EQ(message("nics"), "brdev" + ok + ", clus" + ok + ", upl" + ok);
        EXPECT_EQ(delta("nics"), 0);
        EXPECT_EQ(h->health(), std::optional<int>(100));

        // A device administratively down: -1 Mbps, +10 (as a NIC without link).
        ip("clus down");
        pass(*h);
        EXPECT_EQ(message("nics"), "brdev" + ok + ", clus DEGRADED at -1 Mbps, upl" + ok);
        EXPECT_EQ(delta("nics"), 10);
        EXPECT_EQ(h->health(), std::optional<int>(90));

        // And a second one without carrier (its peer down): +10 more.
        ip("upl-peer down");
        pass(*h);
        EXPECT_EQ(message("nics"), "brdev" + ok + ", clus DEGRADED at -1 Mbps, upl DEGRADED at -1 Mbps");
        EXPECT_EQ(delta("nics"), 20);
        EXPECT_EQ(h->health(), std::optional<int>(80));

        // Links back: all OK again.
        ip("clus up");
        ip("upl-peer up");
        for (auto d : {"clus", "upl"})
            ASSERT_TRUE(pvc::test::eventually(
                [&] {
                    std::ifstream f(std::filesystem::path("/sys/class/net") / d / "carrier");
                    std::string c;
                    return (f >> c) && c == "1";
                },
                5s))
                << d << " has no carrier";
        pass(*h);
        EXPECT_EQ(message("nics"), "brdev" + ok + ", clus" + ok + ", upl" + ok);
        EXPECT_EQ(delta("nics"), 0);
        EXPECT_FALSE(log_has("Monitoring plugin nics failed", 0ms)) << log_text();
    }
};

// Registered only in the inner run, so the normal run has no skipped test.
[[maybe_unused]] const bool nics_inner_registered = [] {
    if (getenv(kNicsInner))
        ::testing::RegisterTest("BundledPluginTest", "NicsInner", nullptr, nullptr, __FILE__, __LINE__,
                                []() -> BundledPluginTest* { return new NicsInner; });
    return true;
}();

TEST_F(BundledPluginTest, ZkprConnectsToThisNodesZooKeeperMember) {
    bundle("zkpr.so");
    // This node is the coordinator "localhost" whose member is the test server.
    node_ = "localhost";
    auto h = host(config(HealthOptions().with_node("localhost").with_coordinators(fmt::format("[localhost:{}]", server_->port()))));
    h->load();
    pass(*h);
    EXPECT_EQ(message("zkpr"), "Successfully connected to Zookeeper on localhost");
    EXPECT_EQ(delta("zkpr"), 0);
}

TEST_F(BundledPluginTest, ZkprReportsFailureOnANodeWithoutZooKeeper) {
    bundle("zkpr.so");
    auto h = host(config());  // not a coordinator: <node>:2181, which does not resolve
    h->load();
    pass(*h);
    EXPECT_EQ(message("zkpr").rfind("Failed to connect to Zookeeper: ", 0), 0u) << message("zkpr");
    EXPECT_EQ(delta("zkpr"), 50);
}

TEST_F(BundledPluginTest, LbvtReportsUnreachableLibvirtd) {
    bundle("lbvt.so");
    auto h = host(config());  // qemu+tcp://<node>/system: the node name does not resolve here
    h->load();
    pass(*h);
    EXPECT_EQ(message("lbvt").rfind("Failed to connect to Libvirtd: ", 0), 0u) << message("lbvt");
    EXPECT_EQ(delta("lbvt"), 50);
}

// The success path of lbvt needs a libvirtd listening on TCP at the node's
// name. A private libvirtd runs in a network + mount namespace of its own
// (127.0.0.1:16509 there); this test binary re-runs the inner test inside
// that namespace with node name "localhost".
TEST_F(BundledPluginTest, LbvtConnectsToAPrivateLibvirtd) {
    if (getenv("PVC_HEALTH_LBVT_INNER")) GTEST_SKIP() << "inner run";
    ASSERT_EQ(geteuid(), 0u) << "needs root for a network namespace";
    auto ns = fmt::format("pvch{}", getpid());
    auto r = dir_.path() / "libvirt";
    for (auto d : {"etc", "run", "lib", "cache", "log"}) std::filesystem::create_directories(r / d);
    std::ofstream(r / "etc" / "libvirtd.conf") << "listen_tls = 0\nlisten_tcp = 1\nlisten_addr = \"127.0.0.1\"\n"
                                                  "auth_tcp = \"none\"\nauth_unix_rw = \"none\"\n"
                                                  "log_outputs = \"3:file:/var/log/libvirt/libvirtd.log\"\n";
    std::ofstream(r / "etc" / "qemu.conf") << "user = \"root\"\ngroup = \"root\"\ndynamic_ownership = 0\n"
                                              "security_driver = \"none\"\nstdio_handler = \"file\"\n"
                                              "cgroup_controllers = [ ]\n";
    std::ofstream(r / "etc" / "libvirt.conf") << "";
    auto R = r.string();
    auto up = pvc::test::run_command({"bash", "-c", fmt::format(R"(set -e
ip netns add {ns}
ip netns exec {ns} ip link set lo up
setsid ip netns exec {ns} unshare -m --propagation private bash -c '
  set -e
  mkdir -p /run/libvirt
  mount --bind {R}/etc /etc/libvirt
  mount --bind {R}/run /run/libvirt
  mount --bind {R}/lib /var/lib/libvirt
  mount --bind {R}/cache /var/cache/libvirt
  mount --bind {R}/log /var/log/libvirt
  exec libvirtd --listen -f /etc/libvirt/libvirtd.conf -p {R}/libvirtd.pid' </dev/null >{R}/stdout.log 2>&1 &
for i in $(seq 1 600); do
  ip netns exec {ns} virsh -q -c qemu+tcp://127.0.0.1/system hostname >/dev/null 2>&1 && exit 0
  sleep 0.1
done
cat {R}/stdout.log; exit 1)",
                                                                 fmt::arg("ns", ns), fmt::arg("R", R))});
    auto down = [&] {
        pvc::test::run_command({"bash", "-c", fmt::format("kill $(cat {R}/libvirtd.pid) 2>/dev/null; sleep 0.3; "
                                                          "for p in $(ip netns pids {ns}); do kill -9 $p; done; "
                                                          "ip netns del {ns}",
                                                          fmt::arg("ns", ns), fmt::arg("R", R))});
    };
    if (up.status != 0) {
        down();
        FAIL() << "private libvirtd did not start: " << up.out << up.err;
    }
    auto self = std::filesystem::read_symlink("/proc/self/exe").string();
    auto inner = pvc::test::run_command(
        {"ip", "netns", "exec", ns, "env", "PVC_HEALTH_LBVT_INNER=1", self,
         "--gtest_filter=BundledPluginTest.LbvtInnerConnectsToLocalhost"},
        std::chrono::seconds(120));
    down();
    EXPECT_EQ(inner.status, 0) << inner.out << inner.err;
    EXPECT_NE(inner.out.find("[  PASSED  ] 1 test"), std::string::npos) << inner.out;
}

TEST_F(BundledPluginTest, LbvtInnerConnectsToLocalhost) {
    if (!getenv("PVC_HEALTH_LBVT_INNER")) GTEST_SKIP() << "run by LbvtConnectsToAPrivateLibvirtd";
    bundle("lbvt.so");
    node_ = "localhost";
    auto h = host(config(HealthOptions().with_node("localhost")));
    h->load();
    pass(*h);
    EXPECT_EQ(message("lbvt"), "Successfully connected to Libvirtd on localhost");
    EXPECT_EQ(delta("lbvt"), 0);
}

TEST_F(BundledPluginTest, AllShippedPluginsTogether) {
    for (auto& e : std::filesystem::directory_iterator(build_dir() / "plugins")) bundle(e.path().filename().string());
    auto h = host(config(HealthOptions().with_plugin_timeout(30)));
    h->load();
    auto names = h->plugin_names();
    // hwrd and psur refuse to load without their hardware, nics and psql
    // without networking (off here); all others load.
    EXPECT_EQ(names, (std::vector<std::string>{"disk", "dpkg", "edac", "ipmi", "kydb", "lbvt", "load", "zkpr"}));
    EXPECT_FALSE(log_has("Traceback")) << log_text();
    pass(*h, "client", 60s);
    ASSERT_TRUE(h->health());
    int sum = 0;
    for (auto& n : names) sum += delta(n);
    EXPECT_EQ(*h->health(), std::max(0, 100 - sum));
    EXPECT_EQ(key("node.monitoring.health"), std::to_string(*h->health()));
}

}  // namespace
