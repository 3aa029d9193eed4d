// Long procedures wait on the state watch, libvirt lifecycle events and their
// deadline, not by reading ZooKeeper in a loop (issue 9 item 5): a guest that
// takes its time to power off costs no ZooKeeper reads while it does, the wait
// ends on its power-off event, on a state change, and on the daemon's stop.
#include <iostream>

#include "hv_fixture.hpp"

namespace pvc::hv::test {

class SlowGuestNode : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
    }
    void start(int shutdown_timeout_s) {
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri());
        n1->config.vm_shutdown_timeout = shutdown_timeout_s;
        n1->start();
    }
    void TearDown() override { n1.reset(); }
    bool running(const std::string& uuid) { return n1->hv->libvirt().running(uuid); }
    // A running VM whose start dispatch has finished.
    void running_vm(const std::string& u, const std::string& name) {
        define(u, name, "hv1", "start");
        ASSERT_TRUE(eventually([&] { return running(u) && n1->hv->domain(u) && n1->hv->domain(u)->idle(); }));
    }
    std::unique_ptr<TestNode> n1;
};

TEST_F(SlowGuestNode, AShutdownReadsNoZooKeeperKeyWhileTheGuestTakesItsTime) {
    start(60);
    auto u = uuid_n(901);
    running_vm(u, "slow1");
    // 3 s of waiting: polling every 200 ms read `state` about 15 times.
    SlowGuests guests(n1->hv->libvirt(), 3s, n1->session);
    set("domain.state", u, "shutdown");
    EXPECT_TRUE(state_is(u, "stop", 30s));
    EXPECT_FALSE(running(u));
    EXPECT_EQ(guests.requests(), 1);
    std::cout << "[ figures  ] ZooKeeper reads while the guest took 3 s: " << guests.reads_while_waiting() << "\n";
    EXPECT_LE(guests.reads_while_waiting(), 2u);
}

TEST_F(SlowGuestNode, AShutdownEndsOnTheGuestsPowerOffEvent) {
    start(60);
    auto u = uuid_n(902);
    running_vm(u, "slow2");
    SlowGuests guests(n1->hv->libvirt(), 1s);
    set("domain.state", u, "shutdown");
    ASSERT_TRUE(eventually([&] { return !running(u); }, 30s));
    // Woken by libvirt's STOPPED event, not by the deadline (60 s) nor by the
    // libvirt re-check (every 5 s): `stop` follows the power-off at once.
    EXPECT_TRUE(state_is(u, "stop", 3s));
}

TEST_F(SlowGuestNode, AStateChangeEndsAWaitingShutdownAndTheVmKeepsRunning) {
    start(60);
    auto u = uuid_n(903);
    running_vm(u, "slow3");
    SlowGuests guests(n1->hv->libvirt(), std::nullopt);  // ignores ACPI
    set("domain.state", u, "shutdown");
    ASSERT_TRUE(eventually([&] { return guests.requests() == 1; }));
    set("domain.state", u, "start");
    // The wait ends on the watch's delivery, far within the 60 s deadline.
    EXPECT_TRUE(eventually([&] { return n1->hv->domain(u)->idle(); }, 10s));
    EXPECT_TRUE(running(u));
    EXPECT_EQ(get("domain.state", u), "start");
    EXPECT_NE(get("node.running_domains", "hv1").find(u), std::string::npos);
}

TEST_F(SlowGuestNode, TheDaemonsStopEndsAWaitingShutdown) {
    start(120);
    auto u = uuid_n(904);
    running_vm(u, "slow4");
    SlowGuests guests(n1->hv->libvirt(), std::nullopt);
    set("domain.state", u, "shutdown");
    ASSERT_TRUE(eventually([&] { return guests.requests() == 1; }));
    auto t0 = std::chrono::steady_clock::now();
    n1->hv->stop();
    // Far within the 120 s the shutdown would otherwise wait.
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 30s);
    EXPECT_TRUE(running(u));   // a stop never touches running VMs
    EXPECT_EQ(get("domain.state", u), "shutdown");
}

TEST_F(SlowGuestNode, AShutdownTimeoutStillDestroys) {
    start(2);
    auto u = uuid_n(905);
    running_vm(u, "slow5");
    SlowGuests guests(n1->hv->libvirt(), std::nullopt);
    set("domain.state", u, "shutdown");
    EXPECT_TRUE(state_is(u, "stop", 30s));
    EXPECT_FALSE(running(u));
}

TEST_F(SlowGuestNode, AShutdownWaitingThroughAZooKeeperOutageIsNotAbortedAndEndsInStop) {
    // Operations give up after 1 s while ZooKeeper is down.
    n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri(), 1, 1000ms);
    n1->config.vm_shutdown_timeout = 60;
    n1->start();
    auto u = uuid_n(906);
    running_vm(u, "slow6");
    SlowGuests guests(n1->hv->libvirt(), 2s);
    set("domain.state", u, "shutdown");
    ASSERT_TRUE(eventually([&] { return guests.requests() == 1; }));
    // The watch cannot deliver and the state cannot be read: no reason to abort.
    server.stop();
    ASSERT_TRUE(eventually([&] { return !running(u); }, 10s));  // the guest powered off meanwhile
    std::this_thread::sleep_for(1500ms);
    server.start();
    EXPECT_TRUE(eventually([&] {
        try { return get("domain.state", u) == "stop"; } catch (const std::exception&) { return false; }
    }, 30s));
    EXPECT_FALSE(running(u));
    EXPECT_EQ(guests.requests(), 1);   // never asked again, never restarted
}

class SlowGuestFlush : public HvTest {
protected:
    void SetUp() override {
        HvTest::SetUp();
        register_node("hv1");
        register_node("hv2");
        n1 = std::make_unique<TestNode>("hv1", server.hosts(), dir.path(), private_uri());
        n2 = std::make_unique<TestNode>("hv2", server.hosts(), dir.path(), private_uri());
        n1->config.vm_shutdown_timeout = 60;
        n1->start();
        n2->start();
    }
    void TearDown() override {
        n1.reset();
        n2.reset();
    }
    std::unique_ptr<TestNode> n1, n2;
};

TEST_F(SlowGuestFlush, AFlushWaitsForAMigrationByShutdownWithoutReadingZooKeeper) {
    auto u = uuid_n(910);
    define(u, "fslow", "hv1", "start", "shutdown");
    ASSERT_TRUE(eventually([&] {
        return n1->hv->libvirt().running(u) && n1->hv->domain(u) && n1->hv->domain(u)->idle();
    }));
    n1->hv->collect();
    // While the guest takes 3 s, the flush (wait_settled) and the shutdown
    // both wait: polling read ZooKeeper about 30 times meanwhile.
    SlowGuests guests(n1->hv->libvirt(), 3s, n1->session);
    set("node.state.domain", "hv1", "flush");
    ASSERT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "flushed"; }, 60s));
    // The flush is done once the VM has left `migrate` (here `stop`); the target starts it then.
    EXPECT_TRUE(eventually([&] { return n2->hv->libvirt().running(u) && get("domain.state", u) == "start"; }, 30s));
    EXPECT_EQ(guests.requests(), 1);
    std::cout << "[ figures  ] ZooKeeper reads while the guest took 3 s: " << guests.reads_while_waiting() << "\n";
    EXPECT_LE(guests.reads_while_waiting(), 2u);
}

TEST_F(SlowGuestFlush, AnUnflushCancelsAFlushWaitingForASlowGuest) {
    auto u = uuid_n(911);
    define(u, "fslow2", "hv1", "start", "shutdown");
    ASSERT_TRUE(eventually([&] {
        return n1->hv->libvirt().running(u) && n1->hv->domain(u) && n1->hv->domain(u)->idle();
    }));
    n1->hv->collect();
    SlowGuests guests(n1->hv->libvirt(), std::nullopt);
    set("node.state.domain", "hv1", "flush");
    ASSERT_TRUE(eventually([&] { return guests.requests() == 1; }, 30s));
    set("node.state.domain", "hv1", "unflush");
    // The flush worker's wait ends on the cancellation: `ready` well before
    // the 60 s shutdown deadline or the flush's 120 s bound.
    EXPECT_TRUE(eventually([&] { return get("node.state.domain", "hv1") == "ready"; }, 30s));
}

}  // namespace pvc::hv::test
