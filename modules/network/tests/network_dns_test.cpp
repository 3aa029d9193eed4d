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

#include "dns_lab.hpp"
#include "metadata_api.hpp"
#include "pvc/log.hpp"

using namespace pvc::network::test;
using namespace pvc::network::test::dns;

class NetworkDns : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        lab_ = new Lab();
        zk_ = lab_->zk_;
        pg_ = lab_->pg_;
        session_ = lab_->session_;
        node1_ = lab_->node1_;
        node2_ = lab_->node2_;
    }
    static void TearDownTestSuite() {
        session_.reset();
        delete lab_;
    }
    void SetUp() override { ASSERT_TRUE(lab_->ok()) << node1_->log() << node2_->log(); }

    static Node* primary() { return lab_->primary(); }
    static Node* other(Node* n) { return lab_->other(n); }
    static std::string dig(const std::string& name) { return lab_->dig(name); }
    static std::string guest(const Node& node, const std::string& g, const std::string& mac, const std::string& hostname,
                             bool configure) {
        return lab_->guest(node, g, mac, hostname, configure);
    }
    static std::string fetch(const std::string& g, const std::string& path) { return lab_->fetch(g, path); }
    static std::vector<int> pdns_pids(const Node& n) { return lab_->pdns_pids(n); }
    static int pdns_guardian(const Node& n) { return lab_->pdns_guardian(n); }
    static bool listening_on_80(const Node& n) { return lab_->listening_on_80(n); }
    static json health(const Node& n) { return lab_->health(n); }
    static json entry(const json& read, const std::string& name) { return lab_->entry(read, name); }
    static std::string item(const Node& n, const std::string& i) { return lab_->item(n, i); }

    static inline Lab* lab_ = nullptr;
    static inline pvc::test::ZkServer* zk_ = nullptr;
    static inline PrivatePostgres* pg_ = nullptr;
    static inline std::shared_ptr<pvc::zk::Session> session_;
    static inline Node *node1_ = nullptr, *node2_ = nullptr;
};

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
    // A dependency of this test (CMakeLists.txt): missing is a failure, not a skip.
    ASSERT_TRUE(std::filesystem::exists(std::filesystem::path(pvc::test::build_dir()) / "plugins" / "psql"))
        << "the bundled plugins are not built (target pvc-health-plugins)";
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
