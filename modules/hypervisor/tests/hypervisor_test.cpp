// The hypervisor against real ZooKeeper and libvirt's test driver: every
// VM state for owner and non-owner, garbage, restarts, two nodes, flush/ready.
#include "hv_fixture.hpp"

namespace pvc::hv::test {

class OneNode : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri());
        n1->start();
    }
    void TearDown() override { n1.reset(); }
    bool running(const std::string& uuid) { return n1->hv->libvirt().running(uuid); }
    std::unique_ptr<TestNode> n1;
};

TEST_F(OneNode, StartCreatesTheDomainAndPublishesIt) {
    auto u = uuid_n(1);
    define(u, "vm1", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv1").find(u) != std::string::npos; }));
    EXPECT_EQ(get("domain.failed_reason", u), "");
    EXPECT_EQ(get("domain.state", u), "start");
}

TEST_F(OneNode, StoppedVmStaysStopped) {
    auto u = uuid_n(2);
    define(u, "vm2", "hv1", "stop");
    std::this_thread::sleep_for(1s);
    EXPECT_FALSE(running(u));
    EXPECT_EQ(get("domain.state", u), "stop");
}

TEST_F(OneNode, StopDestroysAndRemovesFromRunningList) {
    auto u = uuid_n(3);
    define(u, "vm3", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "stop");
    ASSERT_TRUE(eventually([&] { return !running(u); }));
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv1").find(u) == std::string::npos; }));
    EXPECT_EQ(get("domain.state", u), "stop");
}

TEST_F(OneNode, ShutdownEndsInStop) {
    auto u = uuid_n(4);
    define(u, "vm4", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "shutdown");
    EXPECT_TRUE(state_is(u, "stop"));
    EXPECT_FALSE(running(u));
}

TEST_F(OneNode, ShutdownOfANonRunningVmEndsInStop) {
    auto u = uuid_n(5);
    define(u, "vm5", "hv1", "shutdown");
    EXPECT_TRUE(state_is(u, "stop"));
}

TEST_F(OneNode, RestartEndsRunningInStart) {
    auto u = uuid_n(6);
    define(u, "vm6", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    auto id_before = virDomainGetID(n1->hv->libvirt().lookup(u).get());
    set("domain.state", u, "restart");
    zk::Stat requested;
    ASSERT_TRUE(admin->get(schema::path("domain.state", {u}), &requested));
    ASSERT_TRUE(eventually([&] {
        auto d = n1->hv->libvirt().lookup(u);
        return d && get("domain.state", u) == "start" && virDomainGetID(d.get()) != id_before && running(u);
    }));
    // `restart` goes straight to `start` (README): one write by the daemon, no transient `stop`.
    std::this_thread::sleep_for(300ms);
    zk::Stat after;
    ASSERT_TRUE(admin->get(schema::path("domain.state", {u}), &after));
    EXPECT_EQ(after.version, requested.version + 1);
}

TEST_F(OneNode, RestartOfANonRunningVmStartsIt) {
    auto u = uuid_n(7);
    define(u, "vm7", "hv1", "restart");
    EXPECT_TRUE(state_is(u, "start"));
    EXPECT_TRUE(eventually([&] { return running(u); }));
}

TEST_F(OneNode, IgnoredStatesLeaveTheVmAlone) {
    for (const char* st : {"disable", "fail", "provision", "restore", "delete"}) {
        auto u = uuid_n(100 + st[0]);
        define(u, std::string("vm-") + st, "hv1", st);
        std::this_thread::sleep_for(300ms);
        EXPECT_FALSE(running(u)) << st;
        EXPECT_EQ(get("domain.state", u), st);
    }
}

TEST_F(OneNode, DisableOfARunningVmLeavesItRunning) {
    auto u = uuid_n(8);
    define(u, "vm8", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "disable");
    std::this_thread::sleep_for(800ms);
    EXPECT_TRUE(running(u));
}

TEST_F(OneNode, UnknownStatesOnTheOwnerAreLeftAlone) {
    // Newer clients' states (and garbage) are neither acted on nor rewritten.
    auto bad = uuid_n(9), good = uuid_n(10), newer = uuid_n(25);
    define(bad, "bad", "hv1", "banana\x01");
    define(good, "good", "hv1", "start");
    define(newer, "newer", "hv1", "start");
    EXPECT_TRUE(eventually([&] { return running(good) && running(newer); }));
    set("domain.state", newer, "mirror");
    set("domain.state", good, "stop");
    EXPECT_TRUE(eventually([&] { return !running(good); }));  // dispatches ran meanwhile
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(get("domain.state", bad), "banana\x01");
    EXPECT_EQ(get("domain.failed_reason", bad), "");
    EXPECT_FALSE(running(bad));
    EXPECT_EQ(get("domain.state", newer), "mirror");
    EXPECT_EQ(get("domain.failed_reason", newer), "");
    EXPECT_TRUE(running(newer));
}

TEST_F(OneNode, MalformedXmlFailsWithTheLibvirtMessage) {
    auto u = uuid_n(11);
    define(u, "vm11", "hv1", "start", "none", "<domain type='kvm'><name>broken");
    EXPECT_TRUE(state_is(u, "fail"));
    EXPECT_FALSE(get("domain.failed_reason", u).empty());
    // Fixing the XML and starting again works.
    set("domain.xml", u, vm_xml("vm11", u));
    set("domain.state", u, "start");
    EXPECT_TRUE(eventually([&] { return running(u); }));
    EXPECT_TRUE(eventually([&] { return get("domain.failed_reason", u).empty(); }));
}

TEST_F(OneNode, MigrateStateOfAVmAlreadyHereBecomesStart) {
    auto u = uuid_n(12);
    define(u, "vm12", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "migrate");
    EXPECT_TRUE(state_is(u, "start"));
    EXPECT_TRUE(running(u));
}

TEST_F(OneNode, AVmPoweredOffOutOfBandIsStartedAgainAtOnce) {
    auto u = uuid_n(13);
    define(u, "vm13", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    auto d = n1->hv->libvirt().lookup(u);
    ASSERT_EQ(virDomainDestroy(d.get()), 0);
    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return running(u); }, 5s));
    // No keepalive ran: the lifecycle event did it.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
    EXPECT_EQ(get("domain.state", u), "start");
}

TEST_F(OneNode, KeepaliveBackstopRestartsAVmWhoseEventWasMissed) {
    auto u = uuid_n(14);
    define(u, "vm14", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    n1->hv->libvirt().close();  // no more events
    auto d = n1->hv->libvirt().lookup(u);
    ASSERT_EQ(virDomainDestroy(d.get()), 0);
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(running(u));
    n1->hv->collect();
    EXPECT_TRUE(eventually([&] { return running(u); }, 5s));
}

TEST_F(OneNode, KeepaliveFiguresUseTheIntendedAccounting) {
    auto a = uuid_n(15), b = uuid_n(16), c = uuid_n(17);
    define(a, "a", "hv1", "start", "none", vm_xml("a", a, 128));
    define(b, "b", "hv1", "start", "none", vm_xml("b", b, 256));
    define(c, "c", "hv1", "stop", "none", vm_xml("c", c, 512));
    ASSERT_TRUE(eventually([&] { return running(a) && running(b); }));
    // The stopped VM counts once its object has read its keys.
    ASSERT_TRUE(eventually([&] { auto d = n1->hv->domain(c); return d && d->cached().node == "hv1"; }));
    n1->hv->collect();
    KeepaliveReport r;
    n1->hv->contribute(r);
    std::map<std::string, std::string> w(r.writes.begin(), r.writes.end());
    auto key = [](std::string_view k) { return schema::path(k, {"hv1"}); };
    EXPECT_EQ(w.size(), 5u);
    EXPECT_EQ(w[key("node.count.provisioned_domains")], "2");
    EXPECT_EQ(w[key("node.memory.allocated")], std::to_string(128 + 256));
    EXPECT_EQ(w[key("node.memory.provisioned")], std::to_string(128 + 256 + 512));
    EXPECT_EQ(w[key("node.vcpu.allocated")], "4");
    auto running_list = w[key("node.running_domains")];
    EXPECT_EQ(std::count(running_list.begin(), running_list.end(), ' '), 1) << running_list;
    EXPECT_NE(running_list.find(a), std::string::npos);
    EXPECT_NE(running_list.find(b), std::string::npos);
    EXPECT_EQ(r.log_fields["VMs"].value, "2");
    // Stats JSON for running VMs.
    auto stats = nlohmann::json::parse(get("domain.stats", a));
    EXPECT_EQ(stats["state"], "RUNNING");
    EXPECT_EQ(stats["livemem"], 128 * 1024);
}

TEST_F(OneNode, VncKeyComesFromTheLiveGraphicsElement) {
    auto u = uuid_n(18);
    define(u, "vm18", "hv1", "start", "none", vm_xml("vm18", u, 64, true));
    EXPECT_TRUE(eventually([&] { return get("domain.console.vnc", u) == "127.0.0.1:5901"; }));
    set("domain.state", u, "stop");
    EXPECT_TRUE(eventually([&] { return get("domain.console.vnc", u) == ""; }));
}

TEST_F(OneNode, ConsoleLogIsUploaded) {
    auto u = uuid_n(19);
    define(u, "vm19", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    auto file = n1->console_log_directory() / "vm19.log";
    ASSERT_TRUE(std::filesystem::exists(file));
    EXPECT_EQ(std::filesystem::status(file).permissions() & std::filesystem::perms::all,
              std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    std::ofstream(file, std::ios::app) << "booting\r\nlogin: ";
    EXPECT_TRUE(eventually([&] { return get("domain.console.log", u) == "booting\nlogin: "; }, 5s));
}

// A log file deleted and written anew (rotation) is watched again: its new
// content is uploaded.
TEST_F(OneNode, ConsoleLogReplacedByANewFileIsStillUploaded) {
    auto u = uuid_n(922);
    define(u, "vm22", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    auto file = n1->console_log_directory() / "vm22.log";
    std::ofstream(file, std::ios::app) << "first boot\n";
    ASSERT_TRUE(eventually([&] { return get("domain.console.log", u) == "first boot\n"; }, 5s));
    std::filesystem::remove(file);
    std::this_thread::sleep_for(100ms);
    std::ofstream(file, std::ios::app) << "second boot\n";
    EXPECT_TRUE(eventually([&] { return get("domain.console.log", u) == "second boot\n"; }, 5s));
    std::ofstream(file, std::ios::app) << "login: ";
    EXPECT_TRUE(eventually([&] { return get("domain.console.log", u) == "second boot\nlogin: "; }, 5s));
}

TEST_F(OneNode, DeletedDomainIsDroppedAndItsKeysAreNotRecreated) {
    auto u = uuid_n(20);
    define(u, "vm20", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "stop");
    ASSERT_TRUE(eventually([&] { return !running(u); }));
    set("domain.state", u, "delete");
    admin->remove_recursive(schema::path("domain.name", {u}));
    EXPECT_TRUE(eventually([&] { return n1->hv->domain(u) == nullptr; }));
    n1->hv->collect();
    std::this_thread::sleep_for(700ms);
    EXPECT_FALSE(admin->exists(schema::path("domain.name", {u})));
}

TEST_F(OneNode, RapidStateChangesSettleOnTheLastOne) {
    auto u = uuid_n(21);
    define(u, "vm21", "hv1", "stop");
    for (int i = 0; i < 5; i++) {
        set("domain.state", u, "start");
        set("domain.state", u, "stop");
    }
    set("domain.state", u, "start");
    EXPECT_TRUE(eventually([&] { return running(u); }));
    std::this_thread::sleep_for(500ms);
    EXPECT_TRUE(running(u));
    EXPECT_EQ(get("domain.state", u), "start");
}

TEST_F(OneNode, RestartOfTheDaemonAdoptsAndReconciles) {
    auto keep = uuid_n(22), stop = uuid_n(23);
    define(keep, "keep", "hv1", "start");
    define(stop, "stopme", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(keep) && running(stop); }));
    // Module stop leaves VMs running; a state written while down is acted on at start.
    n1->hv->stop();
    EXPECT_TRUE(n1->hv->libvirt().running(keep));
    set("domain.state", stop, "stop");
    // A new module on the same libvirt connection state is not possible with the private
    // driver, so restart the Hypervisor object only and reuse its connection through a new one
    // on the shared process state: here, check the reconciliation of the same object type.
    n1->hv.reset();
    n1->start();
    // Fresh private connection: nothing runs; `start` VMs are started again, `stop` stays stopped.
    EXPECT_TRUE(eventually([&] { return n1->hv->libvirt().running(keep); }));
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(n1->hv->libvirt().running(stop));
    EXPECT_EQ(get("domain.state", stop), "stop");
}

TEST_F(OneNode, StopInTheMiddleOfATransitionLeavesADefinedState) {
    auto u = uuid_n(24);
    define(u, "vm24", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "restart");
    n1->stop();
    n1->start();
    EXPECT_TRUE(state_is(u, "start"));
    EXPECT_TRUE(eventually([&] { return n1->hv->libvirt().running(u); }));
}

// ---- two nodes ----

class TwoNodes : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
        register_node("hv2");
    }
    void start_nodes(int parallel = 1) {
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri(), parallel);
        n2 = std::make_unique<TestNode>("hv2", server.hosts(), dir.path(), private_uri(), parallel);
        n1->start();
        n2->start();
    }
    void TearDown() override {
        n1.reset();
        n2.reset();
    }
    bool on(TestNode& n, const std::string& u) { return n.hv->libvirt().running(u); }
    std::unique_ptr<TestNode> n1, n2;
};

TEST_F(TwoNodes, MigrateByShutdownMovesTheVm) {
    start_nodes();
    auto u = uuid_n(30);
    define(u, "m30", "hv1", "start", "shutdown");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    EXPECT_TRUE(eventually([&] { return on(*n2, u) && get("domain.state", u) == "start"; }, 30s));
    EXPECT_FALSE(on(*n1, u));
    EXPECT_EQ(get("domain.node", u), "hv2");
    EXPECT_EQ(get("domain.last_node", u), "hv1");
    EXPECT_EQ(get("domain.migrate.sync_lock", u), "");
    EXPECT_TRUE(admin->children(schema::path("domain.migrate.sync_lock", {u}))->empty());
}

TEST_F(TwoNodes, FailedLiveOnlyMigrationAbortsBackToTheSource) {
    start_nodes();
    auto u = uuid_n(31);
    define(u, "m31", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate-live"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    // The test driver cannot migrate: 3 attempts, then abort.
    EXPECT_TRUE(eventually([&] { return get("domain.state", u) == "start" && get("domain.node", u) == "hv1"; }, 30s));
    EXPECT_EQ(get("domain.last_node", u), "");
    EXPECT_TRUE(on(*n1, u));
    EXPECT_FALSE(on(*n2, u));
    EXPECT_TRUE(eventually([&] {
        auto c = admin->raw_children(schema::path("domain.migrate.sync_lock", {u}));
        return c && c->empty() && get("domain.migrate.sync_lock", u) == "";
    }, 10s));
}

TEST_F(TwoNodes, LiveMigrationFailureFallsBackToShutdown) {
    start_nodes();
    auto u = uuid_n(32);
    define(u, "m32", "hv1", "start", "none");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    EXPECT_TRUE(eventually([&] { return on(*n2, u) && get("domain.state", u) == "start"; }, 30s));
    EXPECT_FALSE(on(*n1, u));
}

TEST_F(TwoNodes, StrayOnANonOwnerIsTerminated) {
    start_nodes();
    auto u = uuid_n(33);
    define(u, "m33", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    // Re-assigned without a migration: hv1 must not keep running it, hv2 starts it.
    set("domain.node", u, "hv2");
    set("domain.state", u, "start");
    EXPECT_TRUE(eventually([&] { return on(*n2, u) && !on(*n1, u); }));
}

TEST_F(TwoNodes, UnknownStateOnANonOwnerStillTerminatesItsCopy) {
    start_nodes();
    auto u = uuid_n(34);
    define(u, "m34", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "import"}, {schema::path("domain.node", {u}), "hv2"}}));
    EXPECT_TRUE(eventually([&] { return !on(*n1, u); }));
    std::this_thread::sleep_for(500ms);
    EXPECT_FALSE(on(*n2, u));  // the owner leaves an unknown state alone
    EXPECT_EQ(get("domain.state", u), "import");
}

TEST_F(TwoNodes, FlushMovesVmsAwayAndReadyBringsThemBack) {
    start_nodes();
    std::vector<std::string> vms = {uuid_n(40), uuid_n(41), uuid_n(42)};
    for (size_t i = 0; i < vms.size(); i++) define(vms[i], "f" + std::to_string(i), "hv1", "start", "shutdown");
    auto stopped = uuid_n(43);
    define(stopped, "fstop", "hv1", "stop", "shutdown");
    for (auto& u : vms) ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    n1->hv->collect();

    set("node.state.domain", "hv1", "flush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "flushed"; }, 60s));
    for (auto& u : vms) {
        EXPECT_TRUE(eventually([&] { return on(*n2, u) && get("domain.state", u) == "start"; }, 10s)) << u;
        EXPECT_EQ(get("domain.node", u), "hv2");
        EXPECT_EQ(get("domain.last_node", u), "hv1");
        EXPECT_FALSE(on(*n1, u));
    }
    EXPECT_EQ(get("domain.node", stopped), "hv1");  // stopped VMs stay assigned

    set("node.state.domain", "hv1", "unflush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "ready"; }, 60s));
    for (auto& u : vms) {
        EXPECT_TRUE(eventually([&] { return on(*n1, u) && get("domain.state", u) == "start"; }, 10s)) << u;
        EXPECT_EQ(get("domain.node", u), "hv1");
        EXPECT_EQ(get("domain.last_node", u), "");
        EXPECT_FALSE(on(*n2, u));
    }
}

TEST_F(TwoNodes, FlushWithoutTargetShutsDownAndReadyAutostarts) {
    set("node.state.domain", "hv2", "flushed");  // no ready target
    start_nodes();
    auto u = uuid_n(44);
    define(u, "auto", "hv1", "start", "shutdown");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    n1->hv->collect();
    set("node.state.domain", "hv1", "flush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "flushed"; }, 30s));
    EXPECT_EQ(get("domain.state", u), "stop");
    EXPECT_EQ(get("domain.meta.autostart", u), "True");
    EXPECT_FALSE(on(*n1, u));
    set("node.state.domain", "hv1", "unflush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "ready"; }, 30s));
    EXPECT_TRUE(eventually([&] { return on(*n1, u) && get("domain.state", u) == "start"; }));
    EXPECT_EQ(get("domain.meta.autostart", u), "False");
}

TEST_F(TwoNodes, UnflushDuringFlushCancelsItAndEndsReady) {
    start_nodes();
    std::vector<std::string> vms;
    for (int i = 0; i < 4; i++) {
        vms.push_back(uuid_n(50 + i));
        define(vms.back(), "c" + std::to_string(i), "hv1", "start", "shutdown");
    }
    for (auto& u : vms) ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    n1->hv->collect();
    set("node.state.domain", "hv1", "flush");
    std::this_thread::sleep_for(300ms);
    set("node.state.domain", "hv1", "unflush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "ready"; }, 60s));
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(get("node.state.domain", "hv1"), "ready");  // the cancelled flush never writes `flushed`
    for (auto& u : vms) {
        EXPECT_TRUE(eventually([&] { return get("domain.state", u) == "start" && get("domain.node", u) == "hv1"; }, 20s)) << u;
    }
}

// ---- degraded modes: slow or failing ZooKeeper and libvirt ----

TEST_F(OneNode, KeepaliveTickNeverWaitsForARunningCollection) {
    auto u = uuid_n(60);
    define(u, "vm60", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    ASSERT_TRUE(n1->hv->collect());
    zk::Stat stats_before;
    ASSERT_TRUE(admin->get(schema::path("domain.stats", {u}), &stats_before));
    // ZooKeeper down: the collection's stats commit waits for the operation
    // timeout (10 s), far longer than a keepalive interval.
    server.stop();
    auto longest = std::chrono::steady_clock::duration::zero();
    for (int i = 0; i < 10; i++) {
        auto t0 = std::chrono::steady_clock::now();
        n1->events.keepalive_tick.emit();
        KeepaliveReport r;
        n1->hv->contribute(r);
        longest = std::max(longest, std::chrono::steady_clock::now() - t0);
        // The previous figures are kept.
        std::map<std::string, std::string> w(r.writes.begin(), r.writes.end());
        EXPECT_EQ(w[schema::path("node.running_domains", {"hv1"})], u);
        std::this_thread::sleep_for(200ms);
    }
    EXPECT_LT(longest, pvc::test::scaled(50ms));
    server.start();
    // Figures resume: a later tick runs a full collection that writes the stats again.
    EXPECT_TRUE(eventually([&] {
        for (int i = 0; i < 6; i++) n1->events.keepalive_tick.emit();
        zk::Stat now;
        try {
            return admin->get(schema::path("domain.stats", {u}), &now) && now.version > stats_before.version;
        } catch (const std::exception&) {
            return false;
        }
    }, 30s));
}

// ZooKeeper lost for longer than the operation timeout while dispatches run
// for a VM running on its owner: no read error is taken for "not assigned here".
class OneNodeShortTimeout : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri(), 1, 1000ms);
        n1->start();
    }
    void TearDown() override { n1.reset(); }
    bool running(const std::string& uuid) { return n1->hv->libvirt().running(uuid); }
    std::unique_ptr<TestNode> n1;
};

TEST_F(OneNodeShortTimeout, ZooKeeperOutageDuringDispatchesLeavesTheVmsRunning) {
    // Several VMs dispatching back to back, so the outage begins in the middle
    // of reads (not only between dispatches or during a write).
    std::vector<std::string> vms;
    for (int i = 0; i < 8; i++) {
        vms.push_back(uuid_n(70 + i));
        define(vms.back(), "vm7" + std::to_string(i), "hv1", "start");
    }
    std::map<std::string, unsigned> ids;
    for (auto& u : vms) {
        ASSERT_TRUE(eventually([&] { return running(u); }));
        ids[u] = virDomainGetID(n1->hv->libvirt().lookup(u).get());
    }
    std::atomic<bool> done{false};
    std::thread dispatcher([&] {
        while (!done) {
            for (auto& u : vms)
                if (auto d = n1->hv->domain(u)) d->request_dispatch();
            std::this_thread::sleep_for(1ms);
        }
    });
    for (int cycle = 0; cycle < 3; cycle++) {
        std::this_thread::sleep_for(300ms);
        server.stop();
        std::this_thread::sleep_for(2500ms);  // > the 1 s operation timeout
        server.start();
    }
    done = true;
    dispatcher.join();
    ASSERT_TRUE(eventually([&] {
        try { return get("domain.state", vms.back()) == "start"; } catch (const std::exception&) { return false; }
    }, 15s));
    std::this_thread::sleep_for(1s);
    for (auto& u : vms) {
        // Never terminated (and restarted): still the same libvirt domain.
        ASSERT_TRUE(running(u)) << u;
        EXPECT_EQ(virDomainGetID(n1->hv->libvirt().lookup(u).get()), ids[u]) << u;
        EXPECT_EQ(get("domain.state", u), "start");
    }
}

TEST_F(OneNode, ClientMigrateTransactionsRacingDispatchesNeverTerminateTheVm) {
    auto u = uuid_n(62);
    define(u, "vm62", "hv1", "start", "live");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    const auto id = virDomainGetID(n1->hv->libvirt().lookup(u).get());
    auto k = [&](std::string_view key) { return schema::path(key, {u}); };
    std::atomic<bool> done{false};
    std::thread dispatcher([&] {
        while (!done) {
            if (auto d = n1->hv->domain(u)) d->request_dispatch();
            std::this_thread::sleep_for(1ms);
        }
    });
    int lost = 0;
    for (int i = 0; i < 1000; i++) {
        // The reference client's migrate (one transaction), then its cancel back
        // home; a write that loses a race with the daemon's own is repeated.
        while (!admin->write({{k("domain.state"), "migrate"}, {k("domain.node"), "hv2"}, {k("domain.last_node"), "hv1"}})) lost++;
        while (!admin->write({{k("domain.state"), "start"}, {k("domain.node"), "hv1"}, {k("domain.last_node"), ""}})) lost++;
    }
    done = true;
    dispatcher.join();
    std::cerr << "client writes repeated after losing a race: " << lost << "\n";
    // The final keys keep the VM here: it was never terminated (same libvirt id).
    ASSERT_TRUE(eventually([&] {
        auto d = n1->hv->domain(u);
        return d && d->idle() && get("domain.state", u) == "start" && get("domain.node", u) == "hv1";
    }, 30s));
    std::this_thread::sleep_for(1s);
    ASSERT_TRUE(running(u));
    EXPECT_EQ(virDomainGetID(n1->hv->libvirt().lookup(u).get()), id);
}

TEST_F(OneNode, ANameThatIsNotAFileNameRunsWithoutConsoleLog) {
    auto u = uuid_n(63);
    const auto escape = n1->console_log_directory().parent_path().parent_path() / "escaped.log";
    // The ZooKeeper name is what names the file; the libvirt name is separate.
    define(u, "../../escaped", "hv1", "start", "none", vm_xml("vm63", u));
    ASSERT_TRUE(eventually([&] { return running(u); }));
    std::this_thread::sleep_for(300ms);
    EXPECT_FALSE(std::filesystem::exists(escape)) << escape;
    EXPECT_EQ(get("domain.failed_reason", u), "");
}

TEST_F(OneNode, ConsoleLogNeverFollowsALinkPlantedUnderTheName) {
    auto u = uuid_n(64);
    auto outside = dir.path() / "outside";
    std::ofstream(outside) << "precious\n";
    std::filesystem::permissions(outside, std::filesystem::perms(0644));
    std::filesystem::create_symlink(outside, n1->console_log_directory() / "vm64.log");
    define(u, "vm64", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(std::filesystem::status(outside).permissions() & std::filesystem::perms::all, std::filesystem::perms(0644));
}

TEST_F(TwoNodes, AReceivedVmIsPublishedEvenIfTheStatisticsPassListedItFirst) {
    start_nodes();
    auto u = uuid_n(65);
    define(u, "m65", "hv1", "stop");
    // A client's migrate to hv2; hv1 runs nothing, so hv2's receive waits its
    // 1 s after the source's turn: the VM "arrives" then (created on hv2's
    // libvirt) and hv2's statistics pass lists it before receive looks.
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    ASSERT_TRUE(eventually([&] { return get("domain.migrate.sync_lock", u) == u; }, 10s));
    ASSERT_FALSE(n2->hv->libvirt().create_xml(vm_xml("m65", u)));
    ASSERT_TRUE(n2->hv->collect());
    ASSERT_EQ(n2->hv->running(), std::vector<std::string>{u});
    EXPECT_TRUE(eventually([&] { return get("domain.state", u) == "start"; }, 15s));
    // No keepalive runs in this test: receive itself published it.
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv2").find(u) != std::string::npos; }, 2s));
}

// ---- libvirt's answers: unreachable, paused, late arrivals ----

// Counts the RBD lock preparations a start makes (each frees this node's locks).
struct CountingRbdLocks final : services::RbdLocks {
    std::atomic<int> prepares{0};
    std::optional<std::string> prepare_start(const std::string&, const std::vector<std::string>&) override {
        prepares++;
        return std::nullopt;
    }
    std::optional<std::string> free_all(const std::string&, const std::vector<std::string>&) override {
        return std::nullopt;
    }
};

// libvirt cannot be reached when the module starts (libvirtd restarting, or
// started after pvcnoded): the test driver's node file appears only later.
class OneNodeLateLibvirt : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
        late_xml = dir.path() / "late-node.xml";
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), "test://" + late_xml.string());
        n1->services.provide<services::RbdLocks>(rbd);
        n1->start();
    }
    void TearDown() override { n1.reset(); }
    bool running(const std::string& uuid) { return n1->hv->libvirt().running(uuid); }
    std::filesystem::path late_xml;
    std::shared_ptr<CountingRbdLocks> rbd = std::make_shared<CountingRbdLocks>();
    std::unique_ptr<TestNode> n1;
};

TEST_F(OneNodeLateLibvirt, AnUnreachableLibvirtIsNotANonRunningVm) {
    auto start = uuid_n(80), shutdown = uuid_n(81), restart = uuid_n(82);
    define(start, "vm80", "hv1", "start");
    define(shutdown, "vm81", "hv1", "shutdown");
    define(restart, "vm82", "hv1", "restart");
    ASSERT_TRUE(eventually([&] { return n1->hv->domain(start) && n1->hv->domain(restart); }));
    // Several retries pass: nothing is started (no lock freed), failed or stopped.
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(rbd->prepares.load(), 0);
    EXPECT_EQ(get("domain.state", start), "start");
    EXPECT_EQ(get("domain.failed_reason", start), "");
    EXPECT_EQ(get("domain.state", shutdown), "shutdown");
    EXPECT_EQ(get("domain.state", restart), "restart");
    // libvirt answers: the retries carry out what the states ask.
    std::filesystem::copy_file(node_xml, late_xml);
    EXPECT_TRUE(eventually([&] { return running(start) && running(restart); }, 20s));
    EXPECT_TRUE(state_is(shutdown, "stop", 20s));
    EXPECT_EQ(get("domain.state", start), "start");
    EXPECT_EQ(get("domain.state", restart), "start");
    EXPECT_EQ(get("domain.failed_reason", start), "");
    EXPECT_EQ(rbd->prepares.load(), 2);
}

TEST_F(OneNode, APausedVmIsKeptAndCountedNotRestarted) {
    auto u = uuid_n(83);
    define(u, "vm83", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    auto d = n1->hv->libvirt().lookup(u);
    const auto id = virDomainGetID(d.get());
    ASSERT_EQ(virDomainSuspend(d.get()), 0);  // as `virsh suspend`, or QEMU stopped on an I/O error
    // The keepalive backstop and dispatches see it present.
    ASSERT_TRUE(n1->hv->collect());
    n1->hv->domain(u)->request_dispatch();
    std::this_thread::sleep_for(1s);
    ASSERT_TRUE(n1->hv->collect());
    int st = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &st, &reason, 0), 0);
    EXPECT_EQ(st, VIR_DOMAIN_PAUSED);
    EXPECT_EQ(virDomainGetID(n1->hv->libvirt().lookup(u).get()), id);  // never destroyed and re-created
    EXPECT_EQ(get("domain.state", u), "start");
    EXPECT_EQ(n1->hv->running(), std::vector<std::string>{u});
    KeepaliveReport r;
    n1->hv->contribute(r);
    EXPECT_EQ(r.log_fields["VMs"].value, "1");
    std::map<std::string, std::string> w(r.writes.begin(), r.writes.end());
    EXPECT_EQ(w[schema::path("node.running_domains", {"hv1"})], u);
    // Resumed, it simply runs on.
    ASSERT_EQ(virDomainResume(d.get()), 0);
    EXPECT_TRUE(running(u));
    EXPECT_EQ(virDomainGetID(n1->hv->libvirt().lookup(u).get()), id);
}

TEST_F(OneNode, DeleteOfAVmRunningOnItsOwnerDestroysIt) {
    // The reference client writes `stop`, then `delete` 0.5 s later: a daemon
    // that did not handle the `stop` in between still ends the VM.
    auto u = uuid_n(84);
    define(u, "vm84", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u); }));
    set("domain.state", u, "delete");
    EXPECT_TRUE(eventually([&] { return !running(u); }));
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv1").find(u) == std::string::npos; }));
    EXPECT_EQ(get("domain.state", u), "delete");
}

TEST_F(OneNode, AVmWhoseKeysAreRemovedWhileItRunsIsDestroyed) {
    auto u = uuid_n(85), other = uuid_n(86);
    define(u, "vm85", "hv1", "start");
    define(other, "vm86", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return running(u) && running(other); }));
    admin->remove_recursive(schema::path("domain.name", {u}));
    EXPECT_TRUE(eventually([&] { return n1->hv->domain(u) == nullptr && !running(u); }));
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv1") == other; }));
    EXPECT_FALSE(admin->exists(schema::path("domain.name", {u})));
    EXPECT_TRUE(running(other));
}

TEST_F(TwoNodes, AStrayAppearingOnANonOwnerIsTerminatedByTheKeepaliveCollection) {
    start_nodes();
    auto u = uuid_n(87);
    define(u, "m87", "hv1", "start");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    ASSERT_TRUE(eventually([&] { auto d = n2->hv->domain(u); return d && d->cached().node == "hv1" && d->idle(); }));
    // A copy appears on hv2 while no state change tells hv2 (as after a
    // dispatch that could not ask libvirt).
    ASSERT_FALSE(n2->hv->libvirt().create_xml(vm_xml("m87", u)));
    ASSERT_TRUE(n2->hv->collect());
    EXPECT_TRUE(eventually([&] { return !on(*n2, u); }));
    EXPECT_TRUE(on(*n1, u));
    EXPECT_EQ(get("domain.state", u), "start");
}

// The migration source is slow to send (its daemon down, or waiting for a
// lock) while it still runs the VM: the receiver gives up after its rounds
// but leaves `migrate`, as the reference does; `fail` with the target as node would make the
// source terminate its running copy when it looks.
TEST_F(TwoNodes, AReceiverWhoseSourceIsSlowLeavesMigrateAndTheSourceKeepsTheVm) {
    // hv1 on libvirt's shared default test driver, held open here, so its
    // domains outlive a restart of hv1's module; hv2 on a private one.
    ConnectHandle keep(virConnectOpen("test:///default"));
    ASSERT_TRUE(keep);
    n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), "test:///default");
    n2 = std::make_unique<TestNode>("hv2", server.hosts(), dir.path(), private_uri());
    n1->start();
    n2->start();
    auto u = uuid_n(88);
    define(u, "m88", "hv1", "start", "live");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    DomainHandle d(virDomainLookupByUUIDString(keep.get(), u.c_str()));
    ASSERT_TRUE(d);
    const auto id = virDomainGetID(d.get());
    n1->stop();  // the source's daemon is down: the VM runs on
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    ASSERT_TRUE(eventually([&] { return get("domain.migrate.sync_lock", u) == u; }, 10s));
    // The receiver's rounds end (about 11 s) with the state left alone.
    ASSERT_TRUE(eventually([&] {
        auto r = n2->hv->domain(u);
        return get("domain.migrate.sync_lock", u) == "" && r && r->idle();
    }, 40s));
    EXPECT_EQ(get("domain.state", u), "migrate");
    EXPECT_EQ(get("domain.node", u), "hv2");
    EXPECT_EQ(get("domain.failed_reason", u), "");
    // The source comes back: it sends (live only; the test driver cannot) and
    // aborts back to itself: the VM never stopped.
    n1->start();
    EXPECT_TRUE(eventually([&] { return get("domain.state", u) == "start" && get("domain.node", u) == "hv1"; }, 30s));
    int st = 0, reason = 0;
    ASSERT_EQ(virDomainGetState(d.get(), &st, &reason, 0), 0);
    EXPECT_EQ(st, VIR_DOMAIN_RUNNING);
    EXPECT_EQ(virDomainGetID(d.get()), id);
    n1.reset();
    virDomainDestroy(d.get());
}

// A VM that arrives after its receiver gave up (state still `migrate`, node
// here) is adopted by the keepalive collection: state `start`.
TEST_F(TwoNodes, AVmArrivingAfterItsReceiverGaveUpIsAdopted) {
    start_nodes();
    auto u = uuid_n(89);
    define(u, "m89", "hv1", "stop");
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    ASSERT_TRUE(eventually([&] { return get("domain.migrate.sync_lock", u) == u; }, 10s));
    ASSERT_TRUE(eventually([&] {
        auto r = n2->hv->domain(u);
        return get("domain.migrate.sync_lock", u) == "" && r && r->idle();
    }, 40s));
    ASSERT_EQ(get("domain.state", u), "migrate");
    ASSERT_FALSE(n2->hv->libvirt().create_xml(vm_xml("m89", u)));
    ASSERT_TRUE(n2->hv->collect());
    EXPECT_TRUE(state_is(u, "start"));
    EXPECT_TRUE(eventually([&] { return get("node.running_domains", "hv2").find(u) != std::string::npos; }));
    EXPECT_TRUE(on(*n2, u));
}

// The reference's migration race lost by the receiver (a client that holds its state lock until
// the receiver's first round has looked puts the source's turn after it), then
// a source whose shutdown fallback takes longer than 30 s (a slow guest): the
// receiver still waits for the source's turn, and starts the VM here once the
// source has shut it down. With a 30 s bound it gave up, and the VM stayed in
// `stop`, down.
TEST_F(TwoNodes, AShutdownMigrationLongerThan30sAfterALostFirstRoundEndsStartedOnTheTarget) {
    n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri());
    n2 = std::make_unique<TestNode>("hv2", server.hosts(), dir.path(), private_uri());
    n1->config.vm_shutdown_timeout = 60;
    n1->start();
    n2->start();
    auto u = uuid_n(90);
    define(u, "m90", "hv1", "start", "none");
    ASSERT_TRUE(eventually([&] { return on(*n1, u); }));
    SlowGuests guests(n1->hv->libvirt(), 32s);  // powers off 32 s after the ACPI request
    const auto sync = schema::path("domain.migrate.sync_lock", {u});
    {
        zk::Lock client(admin, schema::path("domain.state", {u}), zk::LockKind::exclusive);
        ASSERT_TRUE(client.acquire(30s));
        ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                                  {schema::path("domain.last_node", {u}), "hv1"}}));
        // The receiver's phase A, then its first round's look (nobody queued
        // then: the source waits for this lock) and its 1 s pause.
        ASSERT_TRUE(eventually([&] { return get("domain.migrate.sync_lock", u) == u; }, 10s));
        ASSERT_TRUE(eventually([&] { auto c = admin->raw_children(sync); return c && !c->empty(); }, 10s));
        ASSERT_TRUE(eventually([&] { auto c = admin->raw_children(sync); return c && c->empty(); }, 10s));
    }
    // The source's live attempts fail (the test driver cannot migrate); its
    // shutdown fallback holds the sync lock until the guest is off.
    ASSERT_TRUE(eventually([&] { return guests.requests() == 1; }, 20s));
    EXPECT_EQ(get("domain.state", u), "migrate");
    EXPECT_TRUE(eventually([&] { return on(*n2, u) && get("domain.state", u) == "start"; }, 60s));
    EXPECT_FALSE(on(*n1, u));
    EXPECT_EQ(get("domain.node", u), "hv2");
    EXPECT_TRUE(eventually([&] {
        auto c = admin->raw_children(sync);
        return c && c->empty() && get("domain.migrate.sync_lock", u) == "";
    }, 10s));
}

// A source that aborts but keeps the sync lock (the reference's defect):
// the receiver, which waits for it without a time limit, ends its
// wait on the abort's `start` instead of waiting forever.
TEST_F(TwoNodes, AReceiverWaitingForASourceThatAbortedKeepingTheSyncLockEndsOnTheAbort) {
    start_nodes();
    auto u = uuid_n(91);
    define(u, "m91", "hv1", "stop");  // hv1 runs nothing: the test plays the source
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "migrate"}, {schema::path("domain.node", {u}), "hv2"},
                              {schema::path("domain.last_node", {u}), "hv1"}}));
    const auto sync = schema::path("domain.migrate.sync_lock", {u});
    ASSERT_TRUE(eventually([&] { return get("domain.migrate.sync_lock", u) == u; }, 30s));
    // The receiver's first take of the lock (phase A) queues before the
    // source's, as against a real source (which waits 500 ms before it asks):
    // taken before the receiver queued, the lock would hold the receiver in
    // phase A, which waits out its own 30 s and is not what this test is about.
    ASSERT_TRUE(eventually([&] {
        auto contenders = admin->raw_children(sync);
        return contenders && !contenders->empty();
    }, 30s));
    zk::Lock source(admin, sync, zk::LockKind::exclusive);
    ASSERT_TRUE(source.acquire(30s));
    // The receiver now waits behind it (phase C); the source aborts and keeps the lock.
    ASSERT_TRUE(admin->write({{schema::path("domain.state", {u}), "start"}, {schema::path("domain.node", {u}), "hv1"},
                              {schema::path("domain.last_node", {u}), ""}}));
    EXPECT_TRUE(eventually([&] {
        auto r = n2->hv->domain(u);
        return get("domain.migrate.sync_lock", u) == "" && r && r->idle();
    }, 30s));
    EXPECT_EQ(get("domain.state", u), "start");
    EXPECT_EQ(get("domain.node", u), "hv1");
    EXPECT_FALSE(on(*n2, u));
    source.release();
}

}  // namespace pvc::hv::test
