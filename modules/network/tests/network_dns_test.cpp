// The primary's DNS aggregator and metadata API for real (modules/network/
// README.md, "DNS aggregator", "Metadata API"): two nodes, each a network
// namespace running pvcnoded with this module, on a switch namespace that
// holds a private ZooKeeper and a private PostgreSQL (initdb/pg_ctl as
// nobody, one cluster for the whole binary: PowerDNS's schema in pvcdns,
// the provisioner's tables in pvcapi). The primary runs pdns_server (gpgsql)
// on its floating addresses; `dig` from the switch asks it for the names of
// DHCP leases; a guest namespace on vmbr<vni> fetches its meta-data and
// user-data over HTTP from 169.254.169.254. Then: pdns_server killed,
// PostgreSQL stopped and started under the running primary, the bundled psql
// health plugin, and a hand-over.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "metadata_api.hpp"
#include "netns.hpp"
#include "network_config.hpp"
#include "postgres.hpp"
#include "pvc/cluster.hpp"
#include "pvc/log.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_health.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace bp = boost::process;
using namespace pvc::network::test;
using nlohmann::json;
using pvc::test::eventually;

namespace {

const char* switch_ip = "10.231.0.100";
const char* cluster_floating = "10.231.0.250";
const char* vni = "1100";
const char* domain = "net1100.local";
const char* gateway = "10.110.0.1";

// `pvc network add 1100 --dhcp ...`: every key in one transaction, as the reference client writes it.
const char* add_network_py = R"(
import sys
from kazoo.client import KazooClient
hosts, vni, domain, net4, gw4, start, end = sys.argv[1:8]
zk = KazooClient(hosts=hosts); zk.start()
p = "/networks/" + vni
t = zk.transaction()
t.create(p, ("net" + vni).encode())
for k, v in [("nettype", "managed"), ("mtu", ""), ("domain", domain), ("name_servers", ""),
             ("ip6_network", "None"), ("ip6_gateway", "None"), ("dhcp6_flag", "False"), ("ip4_network", net4),
             ("ip4_gateway", gw4), ("dhcp4_flag", "True"), ("dhcp4_start", start), ("dhcp4_end", end),
             ("dhcp4_reservations", ""), ("dhcp4_leases", ""), ("firewall_rules", ""),
             ("firewall_rules/in", ""), ("firewall_rules/out", "")]:
    t.create(p + "/" + k, v.encode())
r = t.commit()
bad = [x for x in r if isinstance(x, Exception)]
if bad: print(bad); sys.exit(1)
zk.stop()
)";

// `pvc network dhcp add`: a reservation.
const char* add_reservation_py = R"(
import sys
from kazoo.client import KazooClient
hosts, vni, mac, ip, name = sys.argv[1:6]
zk = KazooClient(hosts=hosts); zk.start()
p = "/networks/%s/dhcp4_reservations/%s" % (vni, mac)
t = zk.transaction()
t.create(p, b"static"); t.create(p + "/ipaddr", ip.encode()); t.create(p + "/hostname", name.encode())
r = t.commit()
bad = [x for x in r if isinstance(x, Exception)]
if bad: print(bad); sys.exit(1)
zk.stop()
)";

// A VM as the reference writes one (the keys the metadata API reads).
const char* add_vm_py = R"(
import sys
from kazoo.client import KazooClient
hosts, uuid, name, mac, profile = sys.argv[1:6]
xml = """<domain type='kvm'><name>%s</name><uuid>%s</uuid><memory unit='MiB'>64</memory>
<devices><interface type='bridge'><mac address='%s'/><source bridge='vmbr1100'/><model type='virtio'/></interface></devices>
</domain>""" % (name, uuid, mac)
zk = KazooClient(hosts=hosts); zk.start()
p = "/domains/" + uuid
t = zk.transaction()
t.create(p, name.encode()); t.create(p + "/xml", xml.encode()); t.create(p + "/profile", profile.encode())
t.create(p + "/state", b"start"); t.create(p + "/node", b"hv1")
r = t.commit()
bad = [x for x in r if isinstance(x, Exception)]
if bad: print(bad); sys.exit(1)
zk.stop()
)";

// One node: pvcnoded in the node's namespace with its own hostname and /etc/hosts.
class Node {
public:
    Node(int n, const Netns& ns, const std::filesystem::path& dir, const std::string& zk_port)
        : n_(n), ns_(ns), dir_(dir / ("hv" + std::to_string(n))) {
        NetworkConfigOptions o;
        o.node = "hv" + std::to_string(n);
        o.coordinators = "[hv1:" + zk_port + ", hv2:" + zk_port + "]";
        o.base_dir = dir_;
        o.module_dir = pvc::test::build_dir() + "/modules";
        o.db_host = switch_ip;
        config_ = write_network_config(o);
        // Every coordinator name resolves to the switch, where ZooKeeper and
        // PostgreSQL listen (the psql plugin connects to the node's own name).
        std::ofstream(dir_ / "hosts") << "127.0.0.1 localhost\n" << switch_ip << " hv1 hv2\n";
        auto psql = std::filesystem::path(pvc::test::build_dir()) / "plugins" / "psql";
        if (std::filesystem::exists(psql)) std::filesystem::create_symlink(psql, dir_ / "plugins" / "psql");
    }
    ~Node() { kill(); }
    std::string name() const { return "hv" + std::to_string(n_); }
    void start() {
        log_ = dir_ / "pvcnoded.log";
        child_ = std::make_unique<bp::child>(
            bp::search_path("ip"), "netns", "exec", ns_.name(), "unshare", "-u", "-m", "--propagation", "private", "--",
            "sh", "-c", "mount --bind \"$3\" /etc/hosts && hostname \"$0\" && exec \"$1\" --config \"$2\"", name(),
            pvc::test::pvcnoded_binary(), config_.string(), (dir_ / "hosts").string(),
            (bp::std_out & bp::std_err) > log_.string(), bp::std_in < bp::null);
    }
    int stop() {
        if (!child_ || !child_->running()) return -1;
        ::kill(child_->id(), SIGTERM);
        if (!child_->wait_for(std::chrono::seconds(150))) kill();
        return child_->exit_code();
    }
    void kill() {
        if (child_ && child_->running()) {
            ::kill(child_->id(), SIGKILL);
            child_->wait();
        }
    }
    std::string log() const { return pvc::test::slurp(log_); }
    const Netns& ns() const { return ns_; }
    std::filesystem::path dir() const { return dir_; }

private:
    int n_;
    const Netns& ns_;
    std::filesystem::path dir_, config_, log_;
    std::unique_ptr<bp::child> child_;
};

}  // namespace

class NetworkDns : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        std::string p = ns_prefix();
        sw_ = new Netns(p + "s");
        ns1_ = new Netns(p + "a");
        ns2_ = new Netns(p + "b");
        sw_->must_exec({"ip", "link", "add", "sw0", "type", "bridge"});
        sw_->must_exec({"ip", "addr", "add", std::string(switch_ip) + "/24", "dev", "sw0"});
        sw_->must_exec({"ip", "link", "set", "sw0", "up"});
        sw_->must_exec({"ip", "link", "set", "lo", "up"});
        for (auto [port, ns] : {std::pair{"p1", ns1_}, std::pair{"p2", ns2_}}) {
            sw_->must_exec({"ip", "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns->name()});
            sw_->must_exec({"ip", "link", "set", port, "master", "sw0", "up"});
        }
        // This process lives in the switch namespace from here on: ZooKeeper,
        // PostgreSQL, our session, the clients and dig.
        in_sw_ = new InNetns(sw_->name());
        zk_ = new pvc::test::ZkServer("0.0.0.0");
        dir_ = new pvc::test::TempDir("pvc-dns");
        std::filesystem::permissions(dir_->path(), std::filesystem::perms(0755));
        pg_ = new PrivatePostgres(dir_->path() / "postgres", switch_ip, 5432);
        pg_->create_database("pvcdns", "pvcdns", "pvcdns");
        pg_->sql_file("/usr/share/doc/pdns-backend-pgsql/schema.pgsql.sql", "pvcdns", "pvcdns", "pvcdns");
        pg_->create_database("pvcapi", "pvcapi", "pvcapi");
        // The provisioner's tables the metadata API reads (and alembic_version,
        // which the psql plugin reads).
        pg_->sql("CREATE TABLE userdata (id SERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, userdata TEXT);"
                 "CREATE TABLE profile (id SERIAL PRIMARY KEY, name TEXT UNIQUE NOT NULL, userdata INT REFERENCES userdata(id));"
                 "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL);"
                 "INSERT INTO alembic_version VALUES ('88fa0d88a9f8');"
                 "INSERT INTO userdata (name, userdata) VALUES ('basic', '#cloud-config\nhostname: vm1\n');"
                 "INSERT INTO profile (name, userdata) VALUES ('prof1', 1);"
                 "ALTER TABLE userdata OWNER TO pvcapi; ALTER TABLE profile OWNER TO pvcapi;"
                 "ALTER TABLE alembic_version OWNER TO pvcapi;",
                 "pvcapi");
        std::string port = std::to_string(zk_->port());
        node1_ = new Node(1, *ns1_, dir_->path(), port);
        node2_ = new Node(2, *ns2_, dir_->path(), port);
        pvc::zk::SessionOptions opts;
        opts.hosts = zk_->hosts();
        session_ = pvc::zk::Session::connect(opts);
        pvc::init_cluster(*session_);
        node1_->start();
        node2_->start();
        setup_ok_ = eventually([] { return primary() != nullptr; }, std::chrono::seconds(60));
        if (setup_ok_) {
            auto r = pvc::test::run_python(add_network_py, {zk_->hosts(), vni, domain, "10.110.0.0/24", gateway,
                                                            "10.110.0.100", "10.110.0.199"});
            setup_ok_ = r.status == 0;
        }
    }
    static void TearDownTestSuite() {
        for (Node* n : {node1_, node2_})
            if (n) n->stop();
        delete node1_;
        delete node2_;
        if (session_) session_->close();
        session_.reset();
        for (const char* g : {"g1", "g2", "g3", "g4", "g5", "g7"}) run({"ip", "netns", "del", ns_prefix() + g});
        delete pg_;
        delete zk_;
        delete in_sw_;
        delete ns1_;
        delete ns2_;
        delete sw_;
        delete dir_;
    }
    void SetUp() override { ASSERT_TRUE(setup_ok_) << node1_->log() << node2_->log(); }

    // The node that is primary now (router state primary), or null.
    static Node* primary() {
        std::string p = session_->get("/config/primary_node").value_or("");
        for (Node* n : {node1_, node2_})
            if (n->name() == p && session_->get("/nodes/" + p + "/routerstate").value_or("") == "primary") return n;
        return nullptr;
    }
    static Node* other(Node* n) { return n == node1_ ? node2_ : node1_; }

    // dig through the aggregator on the cluster floating address: the answers, one per line.
    static std::string dig(const std::string& name) {
        auto r = run({"dig", "+short", "+time=2", "+tries=1", "@" + std::string(cluster_floating), name, "A"});
        return r.status == 0 ? r.out : "";
    }
    // A guest on the node's vmbr1100 (a namespace with a veth) that takes a
    // DHCP lease for `hostname`; the leased address ("" if none). With
    // `configure`, the address and a default route via the gateway are set.
    static std::string guest(const Node& node, const std::string& g, const std::string& mac, const std::string& hostname,
                             bool configure) {
        std::string ns = ns_prefix() + g;
        run({"ip", "netns", "del", ns});
        must({"ip", "netns", "add", ns});
        must({"ip", "-n", node.ns().name(), "link", "add", g, "type", "veth", "peer", "name", "eth0", "netns", ns});
        must({"ip", "-n", node.ns().name(), "link", "set", g, "master", "vmbr1100", "up"});
        must({"ip", "-n", ns, "link", "set", "eth0", "address", mac, "up"});
        std::vector<std::string> argv = {"ip", "netns", "exec", ns, "busybox", "udhcpc", "-i", "eth0", "-n", "-q",
                                         "-t", "10", "-T", "1", "-s", "/bin/true", "-x", "hostname:" + hostname};
        auto r = run(argv);
        auto p = r.out.find("lease of ");
        if (p == std::string::npos) return "";
        std::string ip = r.out.substr(p + 9, r.out.find(' ', p + 9) - p - 9);
        if (configure) {
            must({"ip", "-n", ns, "addr", "add", ip + "/24", "dev", "eth0"});
            must({"ip", "-n", ns, "route", "add", "default", "via", gateway});
        }
        return ip;
    }
    // What a guest gets from the metadata API, fetched as cloud-init does
    // (Python's urllib) inside the guest's namespace; on an HTTP error
    // "(HTTP <status>)", on another failure "(failed: <why>)".
    static std::string fetch(const std::string& g, const std::string& path) {
        static const char* get_py = R"py(
import sys, json, urllib.request, urllib.error
try:
    with urllib.request.urlopen("http://169.254.169.254" + sys.argv[1], timeout=10) as r:
        out = r.read().decode()
except urllib.error.HTTPError as e:
    out = "(HTTP %d)" % e.code
except Exception as e:
    out = "(failed: %s)" % e
print(json.dumps(out))
)py";
        auto r = run({"ip", "netns", "exec", ns_prefix() + g, "/usr/bin/python3", "-c", get_py, path});
        try {
            return json::parse(r.out).get<std::string>();
        } catch (const std::exception&) {
            return "(no answer: " + r.out + ")";
        }
    }
    // pdns_server processes in a node's namespace.
    static std::vector<int> pdns_pids(const Node& n) {
        std::vector<int> out;
        std::istringstream pids(run({"ip", "netns", "pids", n.ns().name()}).out);
        for (int pid; pids >> pid;) {
            std::string cmdline = pvc::test::slurp("/proc/" + std::to_string(pid) + "/cmdline");
            if (cmdline.rfind("/usr/sbin/pdns_server", 0) == 0) out.push_back(pid);
        }
        return out;
    }
    // The guardian: the pdns_server whose parent is the daemon (its
    // instance is its child; an orphaned instance is neither).
    static int pdns_guardian(const Node& n) {
        for (int pid : pdns_pids(n)) {
            std::string status = pvc::test::slurp("/proc/" + std::to_string(pid) + "/status");
            auto p = status.find("PPid:");
            int ppid = p == std::string::npos ? 0 : std::atoi(status.c_str() + p + 5);
            if (pvc::test::slurp("/proc/" + std::to_string(ppid) + "/cmdline").find("pvcnoded") != std::string::npos)
                return pid;
        }
        return -1;
    }
    static bool listening_on_80(const Node& n) {
        return n.ns().exec({"ss", "-Htln", "src", "169.254.169.254:80"}).out.find("169.254.169.254:80") !=
               std::string::npos;
    }
    static json health(const Node& n) {
        auto r = pvc::test::run_python(pvc::test::node_health_py, {zk_->hosts(), n.name()});
        return r.status == 0 ? json::parse(r.out) : json{{"error", r.out + r.err}};
    }
    static json entry(const json& read, const std::string& name) {
        if (!read.contains("details")) return nullptr;
        for (const auto& d : read.at("details"))
            if (d.at("name") == name) return d;
        return nullptr;
    }
    // The message of the network module's health item `item` ("" if none).
    static std::string item(const Node& n, const std::string& item) {
        json e = entry(health(n), "module-network");
        if (e.is_null() || !e.at("data").contains(item)) return "";
        return e.at("data").at(item).at("message").get<std::string>();
    }

    static Netns *sw_, *ns1_, *ns2_;
    static InNetns* in_sw_;
    static pvc::test::ZkServer* zk_;
    static pvc::test::TempDir* dir_;
    static PrivatePostgres* pg_;
    static Node *node1_, *node2_;
    static std::shared_ptr<pvc::zk::Session> session_;
    static inline bool setup_ok_ = false;
};
Netns *NetworkDns::sw_, *NetworkDns::ns1_, *NetworkDns::ns2_;
InNetns* NetworkDns::in_sw_;
pvc::test::ZkServer* NetworkDns::zk_;
pvc::test::TempDir* NetworkDns::dir_;
PrivatePostgres* NetworkDns::pg_;
Node *NetworkDns::node1_, *NetworkDns::node2_;
std::shared_ptr<pvc::zk::Session> NetworkDns::session_;

// A lease's name is answered by PowerDNS on the floating address, from the
// database the aggregator filled; a reservation's too; a name dnsmasq no
// longer serves goes.
TEST_F(NetworkDns, LeasesAndReservationsAreAnsweredThroughTheAggregator) {
    Node* p = primary();
    ASSERT_NE(p, nullptr);
    ASSERT_TRUE(eventually([&] { return pdns_guardian(*p) > 0; }, std::chrono::seconds(30))) << p->log();
    // The domain row, SOA and NS, as the reference writes them.
    ASSERT_TRUE(eventually([&] {
        return pg_->sql("SELECT count(*) FROM domains WHERE name='net1100.local'", "pvcdns") == "1\n";
    }, std::chrono::seconds(30))) << p->log();
    EXPECT_EQ(pg_->sql("SELECT content FROM records WHERE type='NS'", "pvcdns"), "pvc-dns.example.com\n");
    EXPECT_EQ(pg_->sql("SELECT content FROM records WHERE type='SOA'", "pvcdns").rfind("nsX.example.com root.example.com ", 0), 0u);

    std::string ip = guest(*p, "g1", "52:54:00:aa:00:01", "vm1", true);
    ASSERT_FALSE(ip.empty()) << p->log();
    EXPECT_TRUE(eventually([&] { return dig("vm1.net1100.local") == ip + "\n"; }, std::chrono::seconds(30)))
        << dig("vm1.net1100.local") << p->log();
    // A reservation: the reserved address under the client's name.
    pvc::test::run_python(add_reservation_py, {zk_->hosts(), vni, "52:54:00:aa:00:02", "10.110.0.42", "vm2"});
    std::string ip2;
    ASSERT_TRUE(eventually([&] {
        ip2 = guest(*p, "g2", "52:54:00:aa:00:02", "vm2", true);
        return ip2 == "10.110.0.42";
    }, std::chrono::seconds(30))) << ip2;
    EXPECT_TRUE(eventually([&] { return dig("vm2.net1100.local") == "10.110.0.42\n"; }, std::chrono::seconds(30)))
        << p->log();
    // g2 renews under another name: dnsmasq's zone no longer has vm2, so
    // its row is stale and removed; the new name is answered.
    run({"ip", "netns", "exec", ns_prefix() + "g2", "busybox", "udhcpc", "-i", "eth0", "-n", "-q", "-t", "10", "-T",
         "1", "-s", "/bin/true", "-x", "hostname:vm2b"});
    EXPECT_TRUE(eventually([&] {
        return pg_->sql("SELECT count(*) FROM records WHERE name='vm2.net1100.local'", "pvcdns") == "0\n" &&
               dig("vm2.net1100.local").empty() && dig("vm2b.net1100.local") == "10.110.0.42\n";
    }, std::chrono::seconds(30))) << p->log();
    EXPECT_EQ(dig("vm1.net1100.local"), ip + "\n");
}

// The guest fetches its meta-data and user-data from 169.254.169.254; the
// answers for routes and unknown addresses.
TEST_F(NetworkDns, MetadataServesTheVmWhoseLeaseHoldsTheSourceAddress) {
    Node* p = primary();
    ASSERT_NE(p, nullptr);
    auto r = pvc::test::run_python(add_vm_py, {zk_->hosts(), "11111111-2222-3333-4444-555555555555", "vm5",
                                               "52:54:00:aa:00:05", "prof1"});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    std::string ip = guest(*p, "g5", "52:54:00:aa:00:05", "vm5", true);
    ASSERT_FALSE(ip.empty()) << p->log();
    ASSERT_TRUE(eventually([&] { return listening_on_80(*p); }, std::chrono::seconds(30))) << p->log();
    // The lease is in ZooKeeper once the lease helper ran.
    ASSERT_TRUE(eventually([&] {
        return session_->get("/networks/1100/dhcp4_leases/52:54:00:aa:00:05/ipaddr").value_or("") == ip;
    }, std::chrono::seconds(30)));
    EXPECT_EQ(fetch("g5", "/latest/meta-data/instance-id"), "11111111-2222-3333-4444-555555555555");
    EXPECT_EQ(fetch("g5", "/2009-04-04/meta-data/name"), "vm5");
    EXPECT_EQ(fetch("g5", "/latest/meta-data/profile"), "prof1");
    EXPECT_EQ(fetch("g5", "/latest/meta-data/"), "instance-id\nname\nprofile");
    EXPECT_EQ(fetch("g5", "/latest/user-data"), "#cloud-config\nhostname: vm1\n");

    // The routes, answered by the same code in this process (no listener).
    pvc::network::MetadataApi::Options o;
    o.db = {switch_ip, "pvcapi", "pvcapi", "pvcapi", 5432};
    pvc::network::MetadataApi api(o, session_, pvc::Logger());
    auto root = api.answer("GET", "/", ip);
    EXPECT_EQ(root.status, 209);
    EXPECT_EQ(json::parse(root.body), (json{{"message", "PVC Provisioner Metadata API version 1"}}));
    EXPECT_EQ(api.answer("GET", "/latest/meta-data/instance-id", "10.110.0.250").status, 404);
    EXPECT_EQ(api.answer("GET", "/latest/other", ip).status, 404);
    EXPECT_EQ(api.answer("POST", "/latest/user-data", ip).status, 405);
    EXPECT_EQ(api.answer("GET", "/latest/user-data", ip).body, "#cloud-config\nhostname: vm1\n");
    // A reservation's address finds the VM with that MAC without a lease.
    pvc::test::run_python(add_reservation_py, {zk_->hosts(), vni, "52:54:00:aa:00:06", "10.110.0.46", "vm6"});
    r = pvc::test::run_python(add_vm_py, {zk_->hosts(), "66666666-2222-3333-4444-555555555555", "vm6",
                                          "52:54:00:aa:00:06", "noprofile"});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(api.answer("GET", "/latest/meta-data/name", "10.110.0.46").body, "vm6");
    auto none = api.answer("GET", "/latest/user-data", "10.110.0.46");
    EXPECT_EQ(none.status, 200);
    EXPECT_EQ(none.body, "");
}

// pdns_server killed outright: restarted (backoff from 1 s) and answering again.
TEST_F(NetworkDns, PdnsServerKilledIsRestarted) {
    Node* p = primary();
    ASSERT_NE(p, nullptr);
    int before = pdns_guardian(*p);
    ASSERT_GT(before, 0);
    ::kill(before, SIGKILL);
    EXPECT_TRUE(eventually([&] {
        int now = pdns_guardian(*p);
        return now > 0 && now != before;
    }, std::chrono::seconds(30))) << p->log();
    EXPECT_NE(p->log().find("DNS aggregator: pdns_server exited (killed by signal 9); restarting in"), std::string::npos)
        << p->log();
    EXPECT_TRUE(eventually([&] { return !dig("vm1.net1100.local").empty(); }, std::chrono::seconds(30)));
}

// PostgreSQL stopped under the running primary: the node's health says so,
// the primary's other duties go on (a new network gets its links), and once
// PostgreSQL is back the aggregator catches up by itself.
TEST_F(NetworkDns, PostgresStoppedAndStartedUnderARunningPrimary) {
    Node* p = primary();
    ASSERT_NE(p, nullptr);
    pg_->stop();
    std::string lease = guest(*p, "g3", "52:54:00:aa:00:03", "vm3", false);  // dnsmasq goes on
    ASSERT_FALSE(lease.empty()) << p->log();
    std::string msg;
    EXPECT_TRUE(eventually([&] {
        msg = item(*p, "dns-aggregator");
        return msg.find("DNS aggregator: PostgreSQL database pvcdns at 10.231.0.100:5432: ") == 0;
    }, std::chrono::seconds(40))) << msg << p->log();
    // Other duties: a network created now is made on the primary.
    auto r = pvc::test::run_python(add_network_py, {zk_->hosts(), "1101", "net1101.local", "10.111.0.0/24",
                                                    "10.111.0.1", "10.111.0.100", "10.111.0.199"});
    ASSERT_EQ(r.status, 0);
    EXPECT_TRUE(eventually([&] { return p->ns().exec({"ip", "link", "show", "vmbr1101"}).status == 0; },
                           std::chrono::seconds(30)));
    EXPECT_EQ(session_->get("/nodes/" + p->name() + "/daemonstate").value_or(""), "run");
    pg_->start();
    EXPECT_TRUE(eventually([&] { return item(*p, "dns-aggregator").empty(); }, std::chrono::seconds(40))) << p->log();
    EXPECT_TRUE(eventually([&] { return dig("vm3.net1100.local") == lease + "\n"; }, std::chrono::seconds(40)))
        << p->log();
    EXPECT_TRUE(eventually([&] {
        return pg_->sql("SELECT count(*) FROM domains WHERE name='net1101.local'", "pvcdns") == "1\n";
    }, std::chrono::seconds(30)));
}

// PostgreSQL hung (stopped with SIGSTOP: connections are accepted, nothing
// answers): the aggregator's call ends at its deadline and the health says
// so; DHCP, network changes and the keepalive go on meanwhile; once it
// answers again the zone catches up.
TEST_F(NetworkDns, PostgresHungDelaysNothingElse) {
    Node* p = primary();
    ASSERT_NE(p, nullptr);
    pg_->signal_all(SIGSTOP);
    struct Resume {
        ~Resume() { pg_->signal_all(SIGCONT); }
    } resume;
    std::string lease = guest(*p, "g7", "52:54:00:aa:00:07", "vm7", false);
    ASSERT_FALSE(lease.empty()) << p->log();
    // (Its log line: the node's health is published by health passes,
    // which the psql plugin, hung on the same database, holds up to its timeout.)
    EXPECT_TRUE(eventually([&] {
        return p->log().find(" at 10.231.0.100:5432: no answer within 5000 ms") !=
               std::string::npos;
    }, std::chrono::seconds(30))) << p->log();
    auto r = pvc::test::run_python(add_network_py, {zk_->hosts(), "1102", "net1102.local", "10.112.0.0/24",
                                                    "10.112.0.1", "10.112.0.100", "10.112.0.199"});
    ASSERT_EQ(r.status, 0);
    EXPECT_TRUE(eventually([&] { return p->ns().exec({"ip", "link", "show", "vmbr1102"}).status == 0; },
                           std::chrono::seconds(30)));
    std::string ka = session_->get("/nodes/" + p->name() + "/keepalive").value_or("");
    EXPECT_TRUE(eventually([&] { return session_->get("/nodes/" + p->name() + "/keepalive").value_or("") != ka; },
                           std::chrono::seconds(20)));
    pg_->signal_all(SIGCONT);
    EXPECT_TRUE(eventually([&] { return dig("vm7.net1100.local") == lease + "\n"; }, std::chrono::seconds(40)))
        << p->log();
    EXPECT_NE(p->log().find("DNS aggregator: database reachable again"), std::string::npos) << p->log();
}

// The bundled psql plugin, on coordinators with networking: both databases answer.
TEST_F(NetworkDns, PsqlHealthPluginReadsItsKeysAndReachesBothDatabases) {
    if (!std::filesystem::exists(std::filesystem::path(pvc::test::build_dir()) / "plugins" / "psql"))
        GTEST_SKIP() << "the bundled plugins are not built (target pvc-health-plugins)";
    for (Node* n : {node1_, node2_}) {
        json e;
        EXPECT_TRUE(eventually([&] {
            e = entry(health(*n), "psql");
            return !e.is_null() && e.at("message") == "Successfully connected to PostgreSQL databases on localhost";
        }, std::chrono::seconds(40))) << e.dump() << n->log();
        if (!e.is_null()) {
            EXPECT_EQ(e.at("health_delta"), 0);
        }
    }
}

// A hand-over: pdns_server and the metadata API move to the new primary and
// run on one node only; the names are still answered on the floating address.
TEST_F(NetworkDns, HandOverMovesTheServicesToTheNewPrimary) {
    Node* old = primary();
    ASSERT_NE(old, nullptr);
    Node* next = other(old);
    ASSERT_TRUE(session_->write({{"/config/primary_node", next->name()}}));
    ASSERT_TRUE(eventually([&] { return primary() == next; }, std::chrono::seconds(60))) << old->log() << next->log();
    EXPECT_TRUE(eventually([&] { return pdns_pids(*old).empty() && !listening_on_80(*old); }, std::chrono::seconds(30)));
    EXPECT_TRUE(eventually([&] { return pdns_guardian(*next) > 0 && listening_on_80(*next); }, std::chrono::seconds(30)))
        << next->log();
    EXPECT_TRUE(pdns_pids(*old).empty());
    // The new primary's aggregator serves the zone (from its own dnsmasq,
    // which the new primary's DHCP now fills).
    std::string ip = guest(*next, "g4", "52:54:00:aa:00:04", "vm4", true);
    ASSERT_FALSE(ip.empty()) << next->log();
    EXPECT_TRUE(eventually([&] { return dig("vm4.net1100.local") == ip + "\n"; }, std::chrono::seconds(30)))
        << next->log();
    auto r = pvc::test::run_python(add_vm_py, {zk_->hosts(), "44444444-2222-3333-4444-555555555555", "vm4",
                                               "52:54:00:aa:00:04", "prof1"});
    ASSERT_EQ(r.status, 0);
    EXPECT_EQ(fetch("g4", "/latest/meta-data/name"), "vm4");
    EXPECT_EQ(fetch("g4", "/latest/user-data"), "#cloud-config\nhostname: vm1\n");
}
