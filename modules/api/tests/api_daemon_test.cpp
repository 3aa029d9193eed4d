// Two pvcnoded daemons (coordinators hv1 and hv2, each loading the built API
// module .so, VMs on libvirt's test driver) and a private ZooKeeper
// (issue 13, "Tests"): the API follows the primary role, an operator's walk
// over HTTP reaches the same keys as the same walk through our `pvc`, and
// the daemon logs never hold a key.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <thread>

#include "http_client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/ports.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc;
using namespace pvc::api::test;
using namespace std::chrono_literals;
using pvc::test::eventually;
using pvc::test::slurp;
using schema::path;
using Clock = std::chrono::steady_clock;

namespace {

const std::string token = "daemon-t0ken-77ab";
// Reserved for this test process (no other test beside it gets it).
uint16_t api_port() {
    static const auto port = static_cast<uint16_t>(pvc::test::reserve_port());
    return port;
}

std::string address_of(const std::string& node) { return node == "hv1" ? "127.0.0.11" : "127.0.0.12"; }

void replace(std::string& s, const std::string& from, const std::string& to) {
    auto p = s.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    s.replace(p, from.size(), to);
}

std::string test_vm_xml(const std::string& name, const std::string& uuid) {
    return "<domain type='test'><name>" + name + "</name><uuid>" + uuid +
           "</uuid><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64' machine='pc'>hvm</type></os>"
           "<devices><console type='pty'/></devices></domain>";
}

}  // namespace

class ApiDaemon : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        zk = new pvc::test::ZkServer();
        auto s = zk::Session::connect({.hosts = zk->hosts()});
        init_cluster(*s);
        s->close();
    }
    static void TearDownTestSuite() {
        delete zk;
        zk = nullptr;
    }
    void SetUp() override { session = zk::Session::connect({.hosts = zk->hosts()}); }
    void TearDown() override {
        for (auto& [n, d] : daemons) d->signal(SIGTERM);
        for (auto& [n, d] : daemons) d->wait(std::chrono::seconds(60));
        daemons.clear();
        session->close();
    }

    std::filesystem::path config_of(const std::string& node) {
        pvc::test::NodeConfigOptions o;
        o.node = node;
        std::string port = std::to_string(zk->port());
        o.coordinators = "[hv1:" + port + ", hv2:" + port + "]";
        o.base_dir = dir.path() / node;
        o.module_dir = pvc::test::build_dir() + "/modules";
        o.enable_hypervisor = true;
        o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: \"test:///default\"\n";
        std::string yaml = pvc::test::node_config_yaml(o);
        replace(yaml, "enable_api: false", "enable_api: true");
        replace(yaml, "  cluster:\n", "  api:\n    listen_address: " + address_of(node) + "\n    listen_port: " +
                                          std::to_string(api_port()) + "\n    authentication:\n      enabled: true\n"
                                          "      tokens:\n        - description: tests\n          token: " + token + "\n"
                                          "  cluster:\n");
        std::filesystem::create_directories(o.base_dir);
        auto file = o.base_dir / "pvcnoded.yaml";
        std::ofstream(file) << yaml;
        return file;
    }
    void start(const std::string& node) {
        daemons[node] = std::make_unique<pvc::test::DaemonProcess>(node, config_of(node), dir.path() / (node + ".out"));
        ASSERT_TRUE(eventually([&] { return value("node.state.daemon", {node}) == "run"; }, 60s)) << log_of(node);
        // The reference's vCPU admission wants more CPUs than a test machine may have.
        session->write(path("node.data.static", {node}), "16 6.1.0-13-amd64 GNU/Linux x86_64");
    }
    std::string value(std::string_view key, std::initializer_list<std::string_view> ids) {
        return session->get(path(key, ids)).value_or("");
    }
    std::string log_of(const std::string& node) { return slurp(dir.path() / node / "log" / "pvc.log"); }
    std::string primary() { return value("base.config.primary_node", {}); }
    Reply api(const std::string& node, const std::string& method, const std::string& target, const std::string& body = "") {
        Call c;
        c.method = method;
        c.target = "/api/v1" + target;
        c.body = body;
        if (!body.empty()) c.content_type = "application/x-www-form-urlencoded";
        c.api_key = token;
        return request(address_of(node), api_port(), c);
    }
    bool running_on(const std::string& node, const std::string& uuid) {
        return value("node.running_domains", {node}).find(uuid) != std::string::npos;
    }
    // Running (state start) on the node it is assigned to.
    bool runs(const std::string& uuid) {
        return value("domain.state", {uuid}) == "start" && running_on(value("domain.node", {uuid}), uuid);
    }
    // The VM's keys a walk leaves, by key name, for comparing two walks.
    std::map<std::string, std::string> vm_keys(const std::string& uuid, const std::string& name) {
        std::map<std::string, std::string> out;
        for (const auto& k : schema::keys_of(schema::Class::domain)) {
            std::string n(k.name);
            if (n == "domain.xml" || n == "domain.stats" || n == "domain.console.log" || n == "domain.console.vnc") continue;
            std::string v = value(n, {uuid});
            if (n == "domain.name") v = v == name ? "<name>" : v;
            out[n] = v;
        }
        return out;
    }

    static inline pvc::test::ZkServer* zk = nullptr;
    pvc::test::TempDir dir{"pvc-api-daemon"};
    std::shared_ptr<zk::Session> session;
    std::map<std::string, std::unique_ptr<pvc::test::DaemonProcess>> daemons;
};

TEST_F(ApiDaemon, TheApiFollowsThePrimaryWithinTwoSecondsAndTheOldOneStopsListening) {
    start("hv1");
    ASSERT_TRUE(eventually([&] { return value("node.state.router", {"hv1"}) == "primary"; }, 30s)) << log_of("hv1");
    start("hv2");
    ASSERT_TRUE(eventually([&] { return api("hv1", "GET", "/node").status == 200; }, 5s)) << log_of("hv1");
    EXPECT_FALSE(listening(address_of("hv2"), api_port())) << "a secondary does not listen";

    // The hand-over, asked through the API itself.
    auto r = api("hv1", "POST", "/node/hv2/coordinator-state?state=primary");
    ASSERT_EQ(r.status, 200u) << r.body;
    ASSERT_TRUE(eventually([&] { return value("node.state.router", {"hv2"}) == "primary"; }, 30s)) << log_of("hv2");
    auto published = Clock::now();
    ASSERT_TRUE(eventually([&] { return api("hv2", "GET", "/status").status == 200; }, 5s));
    auto answered = Clock::now() - published;
    EXPECT_LE(answered, pvc::test::scaled(2s)) << std::chrono::duration<double>(answered).count() << " s";
    EXPECT_TRUE(eventually([&] { return !listening(address_of("hv1"), api_port()); }, 2s)) << "the old primary still listens";
    EXPECT_EQ(api("hv2", "GET", "/status").json()["primary_node"], "hv2");
    std::printf("[ figure ] API answered on the new primary %.3f s after its router state became primary\n",
                std::chrono::duration<double>(answered).count());
    // Keys are never logged; the access lines are.
    for (const auto& n : {"hv1", "hv2"}) {
        EXPECT_EQ(log_of(n).find(token), std::string::npos) << n;
        EXPECT_EQ(slurp(dir.path() / (std::string(n) + ".out")).find(token), std::string::npos) << n;
    }
    EXPECT_NE(log_of("hv2").find("GET /api/v1/status 200"), std::string::npos);

    // The daemon's own figures: measured, not placeholders.
    auto figure = [&](const std::string& body, const std::string& name) {
        auto p = body.find("\n" + name + " ");
        return p == std::string::npos ? -1.0 : std::stod(body.substr(p + name.size() + 2));
    };
    std::string daemon;
    ASSERT_TRUE(eventually([&] {
        daemon = request(address_of("hv2"), api_port(), Call{"GET", "/api/v1/metrics/daemon", "", "", std::nullopt, "", {}}).body;
        return figure(daemon, "pvcnoded_zookeeper_latency_seconds") > 0 && figure(daemon, "pvcnoded_keepalive_interval_seconds") > 0;
    }, 10s)) << daemon;
    EXPECT_GT(figure(daemon, "pvcnoded_api_requests"), 0) << daemon;
    EXPECT_NE(daemon.find("pvcnoded_keepalive_timestamp{node=\"hv1\"}"), std::string::npos) << daemon;
}

TEST_F(ApiDaemon, AnOperatorsWalkOverHttpLeavesTheKeysOfTheSameWalkThroughPvc) {
    start("hv1");
    start("hv2");
    std::string p;
    ASSERT_TRUE(eventually([&] { p = primary(); return p == "hv1" || p == "hv2"; }, 30s));
    ASSERT_TRUE(eventually([&] { return value("node.state.router", {p}) == "primary"; }, 30s));
    ASSERT_TRUE(eventually([&] { return api(p, "GET", "/node").status == 200; }, 5s)) << log_of(p);
    for (const auto& n : {"hv1", "hv2"}) {
        auto r = api(p, "POST", std::string("/node/") + n + "/domain-state?state=ready&wait=true");
        ASSERT_EQ(r.status, 200u) << r.body;
    }

    struct Walk {
        std::string name, uuid;
        std::map<std::string, std::map<std::string, std::string>> keys;  // step -> keys
    };
    Walk http{"walk-http", "5a0e1d2c-0000-4000-8000-0000000000c1", {}};
    Walk cli{"walk-cli", "5a0e1d2c-0000-4000-8000-0000000000c2", {}};

    // Over HTTP, as an operator's client does.
    EXPECT_EQ(api(p, "GET", "/status").status, 200u);
    ASSERT_EQ(api(p, "GET", "/node").json().size(), 2u);
    auto d = api(p, "POST", "/vm?node=hv1", form({{"xml", test_vm_xml(http.name, http.uuid)}}));
    ASSERT_EQ(d.status, 200u) << d.body;
    http.keys["define"] = vm_keys(http.uuid, http.name);
    ASSERT_EQ(api(p, "POST", "/vm/" + http.name + "/state?state=start").status, 200u);
    ASSERT_TRUE(eventually([&] { return running_on("hv1", http.uuid); }, 30s)) << log_of("hv1");
    http.keys["start"] = vm_keys(http.uuid, http.name);
    // A node task through the real daemons: the device route's 202, the VM's
    // node claims it; libvirt's test driver cannot hot-plug, so it ends with
    // libvirt's own refusal, read back as the reference client reads it.
    auto dev = api(p, "POST", "/vm/" + http.name + "/device",
                   form({{"xml", "<disk type='file' device='disk'><source file='/nonexistent.img'/>"
                                 "<target dev='vdb' bus='virtio'/></disk>"}}));
    ASSERT_EQ(dev.status, 202u) << dev.body;
    EXPECT_EQ(dev.json()["run_on"], "hv1");
    nlohmann::json task;
    ASSERT_TRUE(eventually([&] {
        task = api(p, "GET", "/tasks/" + dev.json()["task_id"].get<std::string>()).json();
        return task["state"] == "FAILURE" || task["state"] == "SUCCESS";
    }, 30s)) << task.dump() << log_of("hv1");
    EXPECT_NE(task["status"].get<std::string>().find("virDomainAttachDevice"), std::string::npos) << task.dump();
    auto m = api(p, "POST", "/vm/" + http.name + "/node?action=migrate&node=hv2&wait=true");
    ASSERT_EQ(m.status, 200u) << m.body;
    EXPECT_EQ(m.json()["message"], "Migrated VM '" + http.name + "' to node 'hv2'");
    ASSERT_TRUE(eventually([&] { return running_on("hv2", http.uuid); }, 30s)) << log_of("hv2");
    http.keys["migrate"] = vm_keys(http.uuid, http.name);
    auto f = api(p, "POST", "/node/hv2/domain-state?state=flush&wait=true");
    EXPECT_EQ(f.json()["message"], "Removed node hv2 from active service.");
    ASSERT_TRUE(eventually([&] { return running_on("hv1", http.uuid); }, 30s));
    auto rd = api(p, "POST", "/node/hv2/domain-state?state=ready&wait=true");
    EXPECT_EQ(rd.json()["message"], "Restored node hv2 to active service.");
    // Back in service: the VM runs where the flush's bookkeeping says (its home is hv1).
    ASSERT_TRUE(eventually([&] { return runs(http.uuid); }, 30s)) << value("domain.node", {http.uuid});
    http.keys["flush-ready"] = vm_keys(http.uuid, http.name);
    ASSERT_EQ(api(p, "POST", "/vm/" + http.name + "/state?state=stop").status, 200u);
    ASSERT_TRUE(eventually([&] { return !running_on("hv1", http.uuid) && !running_on("hv2", http.uuid); }, 30s));
    http.keys["stop"] = vm_keys(http.uuid, http.name);
    EXPECT_EQ(api(p, "GET", "/vm/" + http.name + "/console").status, 200u);
    auto log = api(p, "GET", "/node/hv1/log?lines=5");
    EXPECT_EQ(log.status, 200u);
    auto rm = api(p, "DELETE", "/vm/" + http.name);
    EXPECT_EQ(rm.json()["message"], "Undefined VM '" + http.name + "' from the cluster.");
    EXPECT_FALSE(session->exists(path("domain.name", {http.uuid})));

    // The same walk through our pvc.
    auto pvc_cmd = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", zk->hosts()};
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = pvc::test::run_command(argv, std::chrono::seconds(120));
        EXPECT_EQ(r.status, 0) << r.out << r.err;
        return r;
    };
    auto xml = dir.path() / "cli.xml";
    std::ofstream(xml) << test_vm_xml(cli.name, cli.uuid);
    pvc_cmd({"vm", "define", xml.string(), "--node", "hv1"});
    cli.keys["define"] = vm_keys(cli.uuid, cli.name);
    pvc_cmd({"vm", "start", cli.name, "--wait"});
    ASSERT_TRUE(eventually([&] { return running_on("hv1", cli.uuid); }, 30s));
    cli.keys["start"] = vm_keys(cli.uuid, cli.name);
    pvc_cmd({"vm", "migrate", cli.name, "--node", "hv2", "--wait"});
    ASSERT_TRUE(eventually([&] { return running_on("hv2", cli.uuid); }, 30s));
    cli.keys["migrate"] = vm_keys(cli.uuid, cli.name);
    pvc_cmd({"node", "flush", "hv2", "--wait"});
    ASSERT_TRUE(eventually([&] { return running_on("hv1", cli.uuid); }, 30s));
    pvc_cmd({"node", "ready", "hv2", "--wait"});
    // Back in service: the VM runs where the flush's bookkeeping says (its home is hv1).
    ASSERT_TRUE(eventually([&] { return runs(cli.uuid); }, 30s)) << value("domain.node", {cli.uuid});
    cli.keys["flush-ready"] = vm_keys(cli.uuid, cli.name);
    pvc_cmd({"vm", "stop", cli.name, "--wait"});
    ASSERT_TRUE(eventually([&] { return !running_on("hv1", cli.uuid) && !running_on("hv2", cli.uuid); }, 30s));
    cli.keys["stop"] = vm_keys(cli.uuid, cli.name);
    pvc_cmd({"vm", "remove", cli.name, "--yes"});
    EXPECT_FALSE(session->exists(path("domain.name", {cli.uuid})));

    for (const auto& step : {"define", "start", "migrate", "flush-ready", "stop"}) {
        SCOPED_TRACE(step);
        EXPECT_EQ(http.keys[step], cli.keys[step]);
    }
}

TEST_F(ApiDaemon, CheckConfigReportsTheApiBlocksProblemsWithTheirKeys) {
    auto file = config_of("hv1");
    std::string yaml = slurp(file);
    replace(yaml, "listen_port: " + std::to_string(api_port()), "listen_port: 99999\n    colour: blue");
    std::ofstream(file) << yaml;
    auto r = pvc::test::run_command({pvc::test::pvcnoded_binary(), "--check-config", file.string()});
    EXPECT_EQ(r.status, 78) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("pvc.api.listen_port"), std::string::npos) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find("pvc.api.colour"), std::string::npos) << r.out << r.err;
}

// The shape against a real primary: one client's slow requests (8,
// as many as there are workers: `wait=true` flushes of a node that has no
// daemon, which never end) leave another client's request answered within
// 1 s, and SIGTERM ends the daemon within its bound while they run.
TEST_F(ApiDaemon, EightSlowRequestsLeaveOthersServedAndSigtermEndsWithinItsBound) {
    // Whatever an earlier test left: no primary, so hv1 contends and takes over.
    ASSERT_TRUE(session->write(path("base.config.primary_node", {}), "none"));
    start("hv1");
    ASSERT_TRUE(eventually([&] { return value("node.state.router", {"hv1"}) == "primary"; }, 30s)) << log_of("hv1");
    ASSERT_TRUE(eventually([&] { return api("hv1", "GET", "/node").status == 200; }, 5s)) << log_of("hv1");
    // hv3: registered, no daemon: a flush of it never ends.
    ASSERT_TRUE(session->write({{path("node.name", {"hv3"}), "coordinator"},
                                {path("node.mode", {"hv3"}), "coordinator"},
                                {path("node.state.daemon", {"hv3"}), "stop"},
                                {path("node.state.router", {"hv3"}), "secondary"},
                                {path("node.state.domain", {"hv3"}), "ready"}}));
    const std::string domain_state = path("node.state.domain", {"hv3"});
    auto writes = [&] {
        zk::Stat st;
        session->get(domain_state, &st);
        return st.version;
    };
    const int32_t v0 = writes();
    std::vector<std::thread> slow;
    for (int i = 0; i < 8; ++i)
        slow.emplace_back([&] {
            Call c;
            c.method = "POST";
            c.target = "/api/v1/node/hv3/domain-state?state=flush&wait=true";
            c.api_key = token;
            c.source_address = "127.0.0.2";
            request(address_of("hv1"), api_port(), c);
        });
    // Each running one wrote `flush` once (4 at most run for one client).
    ASSERT_TRUE(eventually([&] { return writes() >= v0 + 4; }, 10s));

    Call normal;
    normal.target = "/api/v1/";
    normal.source_address = "127.0.0.3";
    normal.step_deadline = 5s;
    auto t0 = Clock::now();
    auto r = request(address_of("hv1"), api_port(), normal);
    auto answered = Clock::now() - t0;
    EXPECT_EQ(r.status, 200u) << "another client's request was not answered";
    EXPECT_LT(answered, 1s);

    auto t1 = Clock::now();
    daemons["hv1"]->signal(SIGTERM);
    int status = daemons["hv1"]->wait(60s);
    auto stopped = Clock::now() - t1;
    EXPECT_EQ(status, 0) << log_of("hv1");
    EXPECT_LT(stopped, pvc::test::scaled(15s)) << log_of("hv1");
    daemons.erase("hv1");
    for (auto& t : slow) t.join();  // their connections went with the daemon
    session->remove_recursive(path("node.name", {"hv3"}));
    std::printf("figures: another client's request answered in %.3f s; SIGTERM to exit %.2f s\n",
                std::chrono::duration<double>(answered).count(), std::chrono::duration<double>(stopped).count());
}

// A value larger than ZooKeeper takes (issue 26: a 1.2 MB description had
// ZooKeeper close the daemon's connection, the API sharing its session):
// 413, nothing written, and the daemon's connection is never lost; its
// keepalive goes on.
TEST_F(ApiDaemon, AValueZooKeeperCannotHoldLeavesTheDaemonsSessionAlone) {
    start("hv1");
    ASSERT_TRUE(eventually([&] { return value("node.state.router", {"hv1"}) == "primary"; }, 30s)) << log_of("hv1");
    ASSERT_TRUE(eventually([&] { return api("hv1", "GET", "/node").status == 200; }, 5s)) << log_of("hv1");
    const std::string uuid = "5a0e1d2c-0000-4000-8000-0000000000b1";
    std::string xml = test_vm_xml("big1", uuid);
    xml.insert(xml.find("<memory"), "<description>" + std::string(1200000, 'd') + "</description>");
    auto r = api("hv1", "POST", "/vm?node=hv1", form({{"xml", xml}}));
    EXPECT_EQ(r.status, 413u) << r.body.substr(0, 300);
    EXPECT_FALSE(session->exists(path("domain.name", {uuid})));
    const std::string before = value("node.keepalive", {"hv1"});
    EXPECT_TRUE(eventually([&] { return value("node.keepalive", {"hv1"}) != before; }, 30s)) << "no keepalive since";
    EXPECT_EQ(log_of("hv1").find("Connection to ZooKeeper lost"), std::string::npos) << log_of("hv1");
}
