// The lab of the DNS aggregator and metadata API tests and benchmark: two
// nodes, each a network namespace running pvcnoded with the network module,
// on a switch namespace that holds a private ZooKeeper and a private
// PostgreSQL (initdb/pg_ctl as nobody: PowerDNS's schema in pvcdns, the
// provisioner's tables in pvcapi), and managed network 1100 with DHCP. The
// calling thread lives in the switch namespace while the lab exists. Root
// only. Header-only: the test and the benchmark include it.
#pragma once

#include <csignal>
#include <fstream>
#include <sstream>

#include <boost/process.hpp>
#include <nlohmann/json.hpp>

#include "netns.hpp"
#include "network_config.hpp"
#include "postgres.hpp"
#include "pvc/cluster.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_health.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace pvc::network::test::dns {

namespace bp = boost::process;
using nlohmann::json;
using pvc::test::eventually;


inline const char* switch_ip = "10.231.0.100";
inline const char* cluster_floating = "10.231.0.250";
inline const char* vni = "1100";
inline const char* domain = "net1100.local";
inline const char* gateway = "10.110.0.1";

// `pvc network add 1100 --dhcp ...`: every key in one transaction, as the reference client writes it.
inline const char* add_network_py = R"(
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
inline const char* add_reservation_py = R"(
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
inline const char* add_vm_py = R"(
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


class Lab {
public:
    Lab() {
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
        ok_ = eventually([this] { return primary() != nullptr; }, std::chrono::seconds(60));
        if (ok_) {
            auto r = pvc::test::run_python(add_network_py, {zk_->hosts(), vni, domain, "10.110.0.0/24", gateway,
                                                            "10.110.0.100", "10.110.0.199"});
            ok_ = r.status == 0;
        }
    }
    ~Lab() {
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
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;
    // Whether both daemons came up, one is primary and network 1100 was written.
    bool ok() const { return ok_; }

    // The node that is primary now (router state primary), or null.
    Node* primary() {
        std::string p = session_->get("/config/primary_node").value_or("");
        for (Node* n : {node1_, node2_})
            if (n->name() == p && session_->get("/nodes/" + p + "/routerstate").value_or("") == "primary") return n;
        return nullptr;
    }
    Node* other(Node* n) { return n == node1_ ? node2_ : node1_; }

    // dig through the aggregator on the cluster floating address: the answers, one per line.
    std::string dig(const std::string& name) {
        auto r = run({"dig", "+short", "+time=2", "+tries=1", "@" + std::string(cluster_floating), name, "A"});
        return r.status == 0 ? r.out : "";
    }
    // A guest on the node's vmbr1100 (a namespace with a veth) that takes a
    // DHCP lease for `hostname`; the leased address ("" if none). With
    // `configure`, the address and a default route via the gateway are set.
    std::string guest(const Node& node, const std::string& g, const std::string& mac, const std::string& hostname,
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
    std::string fetch(const std::string& g, const std::string& path) {
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
    std::vector<int> pdns_pids(const Node& n) {
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
    int pdns_guardian(const Node& n) {
        for (int pid : pdns_pids(n)) {
            std::string status = pvc::test::slurp("/proc/" + std::to_string(pid) + "/status");
            auto p = status.find("PPid:");
            int ppid = p == std::string::npos ? 0 : std::atoi(status.c_str() + p + 5);
            if (pvc::test::slurp("/proc/" + std::to_string(ppid) + "/cmdline").find("pvcnoded") != std::string::npos)
                return pid;
        }
        return -1;
    }
    bool listening_on_80(const Node& n) {
        return n.ns().exec({"ss", "-Htln", "src", "169.254.169.254:80"}).out.find("169.254.169.254:80") !=
               std::string::npos;
    }
    json health(const Node& n) {
        auto r = pvc::test::run_python(pvc::test::node_health_py, {zk_->hosts(), n.name()});
        return r.status == 0 ? json::parse(r.out) : json{{"error", r.out + r.err}};
    }
    json entry(const json& read, const std::string& name) {
        if (!read.contains("details")) return nullptr;
        for (const auto& d : read.at("details"))
            if (d.at("name") == name) return d;
        return nullptr;
    }
    // The message of the network module's health item `item` ("" if none).
    std::string item(const Node& n, const std::string& item) {
        json e = entry(health(n), "module-network");
        if (e.is_null() || !e.at("data").contains(item)) return "";
        return e.at("data").at(item).at("message").get<std::string>();
    }

    Netns *sw_ = nullptr, *ns1_ = nullptr, *ns2_ = nullptr;
    InNetns* in_sw_ = nullptr;
    pvc::test::ZkServer* zk_ = nullptr;
    pvc::test::TempDir* dir_ = nullptr;
    PrivatePostgres* pg_ = nullptr;
    Node *node1_ = nullptr, *node2_ = nullptr;
    std::shared_ptr<pvc::zk::Session> session_;
    bool ok_ = false;
};

}  // namespace pvc::network::test::dns
