// Fencing against real components: a private ZooKeeper, ipmi_sim BMCs on
// loopback addresses, nodes simulated by writing their keys (a heartbeat
// thread per live node), fencers ticked as a coordinator's keepalive would.
// Keepalive 1 s × 3 intervals: a node is dead 3 s after its last keepalive.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "bmc.hpp"
#include "daemon/module_host.hpp"
#include "fencer.hpp"
#include "pvc/cluster.hpp"
#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/zk_server.hpp"
#include "recovery.hpp"
#include "self_fence.hpp"

using namespace std::chrono_literals;
using namespace pvc::fencing;
using pvc::schema::path;
using pvc::test::eventually;

namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Calls `fn` every `period` on its own thread while not paused.
class Ticker {
public:
    Ticker(std::chrono::milliseconds period, std::function<void()> fn)
        : thread_([this, period, fn = std::move(fn)](std::stop_token st) {
              while (!st.stop_requested()) {
                  if (!paused_) fn();
                  std::this_thread::sleep_for(period);
              }
          }) {}
    void pause(bool p) { paused_ = p; }

private:
    std::atomic<bool> paused_{false};
    std::jthread thread_;
};

class Fencing : public ::testing::Test {
protected:
    pvc::test::TempDir dir{"fencing"};
    pvc::test::ZkServer zk;
    std::shared_ptr<pvc::zk::Session> session;
    int port = pvc::test::reserve_port();
    pvc::Logger log;
    std::map<std::string, std::unique_ptr<test::Bmc>> bmcs;
    std::mutex live_m;
    std::set<std::string> live;  // nodes the heartbeat keeps alive
    std::unique_ptr<Ticker> heartbeat;

    void SetUp() override {
        session = connect(client_op_timeout());
        pvc::init_cluster(*session);
        session->write(path("base.config.migration_target_selector"), "mem");
        pvc::Config cfg;
        cfg.file_logging = true;
        cfg.stdout_logging = true;
        cfg.log_directory = dir.path();
        log = pvc::Logger(pvc::make_log_sink(&cfg), "fencing");
        // Every live node writes its keepalive each interval and, as the core
        // does, turns any other daemon state back into run.
        auto hb = connect(client_op_timeout());
        heartbeat = std::make_unique<Ticker>(1000ms, [this, hb] {
            std::set<std::string> nodes;
            {
                std::lock_guard g(live_m);
                nodes = live;
            }
            for (const auto& n : nodes) {
                try {
                    std::vector<pvc::zk::KeyValue> kvs{{path("node.keepalive", {n}), std::to_string(::time(nullptr))}};
                    if (hb->get(path("node.state.daemon", {n})).value_or("") != "run")
                        kvs.emplace_back(path("node.state.daemon", {n}), "run");
                    hb->write(kvs);
                } catch (const std::exception&) {
                    // ZooKeeper down in some tests: the node cannot prove it is alive.
                }
            }
        });
    }
    void TearDown() override { heartbeat.reset(); }

    // The sessions of the fencers under test: 3 s per operation, so one
    // cut off from ZooKeeper gives up soon.
    std::shared_ptr<pvc::zk::Session> connect(std::chrono::milliseconds op_timeout = 3s) {
        pvc::zk::SessionOptions o;
        o.hosts = zk.hosts();
        o.op_timeout = op_timeout;
        return pvc::zk::Session::connect(o);
    }
    // The test's own session and the heartbeat's: a loaded machine (two
    // sanitizer tests at once on two cores) can keep ZooKeeper from answering
    // for more than 3 s, and a test's own read or write must not fail then.
    // ZooKeeper stopped, their calls wait for it (the tests that stop it start
    // it again).
    static std::chrono::milliseconds client_op_timeout() { return pvc::test::scaled(30s); }

    void set_live(const std::string& node, bool alive) {
        std::lock_guard g(live_m);
        if (alive) live.insert(node);
        else live.erase(node);
    }

    // A node in state run/ready with its BMC details; `bmc_index` picks 127.0.0.<10+index>.
    void add_node(const std::string& node, int bmc_index, const std::string& password = "pass",
                  long memfree = 4000) {
        session->ensure_path(path("node.name", {node}));
        pvc::validate_and_apply(*session, log);
        session->write({{path("node.state.daemon", {node}), "run"},
                        {path("node.state.domain", {node}), "ready"},
                        {path("node.state.router", {node}), "secondary"},
                        {path("node.memory.free", {node}), std::to_string(memfree)},
                        {path("node.ipmi.hostname", {node}), "127.0.0." + std::to_string(10 + bmc_index)},
                        {path("node.ipmi.username", {node}), "admin"},
                        {path("node.ipmi.password", {node}), password},
                        {path("node.keepalive", {node}), std::to_string(::time(nullptr))}});
    }

    test::Bmc& add_bmc(const std::string& node, int bmc_index) {
        auto b = std::make_unique<test::Bmc>(dir.path() / ("bmc-" + node), "127.0.0." + std::to_string(10 + bmc_index),
                                             port);
        auto& ref = *b;
        bmcs[node] = std::move(b);
        return ref;
    }

    void add_vm(const std::string& uuid, const std::string& node, const std::string& node_limit = "") {
        session->ensure_path(path("domain.name", {uuid}));
        pvc::validate_and_apply(*session, log);
        session->write({{path("domain.state", {uuid}), "start"},
                        {path("domain.node", {uuid}), node},
                        {path("domain.meta.node_limit", {uuid}), node_limit},
                        {path("domain.meta.node_selector", {uuid}), "none"}});  // the cluster's selector
    }

    std::string get(const std::string& p) { return session->get(p).value_or("<absent>"); }

    FenceSettings settings(int saving_throws = 1) {
        FenceSettings s;
        s.interval = 1000ms;
        s.saving_throws = saving_throws;
        s.migrate_on_success = true;
        s.coordinators = {"hv1", "hv2", "hv3"};
        s.confirm_window = 5s;
        return s;
    }

    std::unique_ptr<Ipmitool> ipmitool(std::chrono::milliseconds timeout = 5s) {
        return std::make_unique<Ipmitool>(std::vector<std::string>{"-C", "3", "-p", std::to_string(port)}, timeout);
    }

};

// Records every value of a node's daemonstate for the life of the returned watch.
struct StateRecorder {
    std::mutex m;
    std::vector<std::string> seen;
    std::shared_ptr<pvc::zk::Watch> watch;
    StateRecorder(pvc::zk::Session& s, const std::string& node) {
        watch = s.watch_data(path("node.state.daemon", {node}), [this](const std::optional<std::string>& v,
                                                                        const pvc::zk::Stat&) {
            std::lock_guard g(m);
            seen.push_back(v.value_or("<absent>"));
        });
    }
    bool saw(const std::string& v) {
        std::lock_guard g(m);
        return std::find(seen.begin(), seen.end(), v) != seen.end();
    }
};

pid_t spawn_node_process() {
    pid_t pid = ::fork();
    if (pid == 0) {
        ::execlp("sleep", "sleep", "1000", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    return pid;
}

// A BMC that takes every command (exit 0) and never reports the chassis off;
// `on_call` runs at each command, before its answer.
class StubbornIpmi final : public Ipmi {
public:
    std::function<void(std::string_view)> on_call;
    IpmiResult chassis_power(const BmcAccess&, std::string_view action) override {
        {
            std::lock_guard g(m_);
            calls_.emplace_back(action);
        }
        if (on_call) on_call(action);
        IpmiResult r;
        r.exit_status = 0;
        if (action == "status") {
            r.output = "Chassis Power is on";
            r.state = PowerState::on;
        }
        return r;
    }
    std::vector<std::string> calls() const {
        std::lock_guard g(m_);
        return calls_;
    }
    bool called(const std::string& action) const {
        auto c = calls();
        return std::find(c.begin(), c.end(), action) != c.end();
    }

private:
    mutable std::mutex m_;
    std::vector<std::string> calls_;
};

}  // namespace

TEST_F(Fencing, DeadNodeIsFencedOnceAndItsVmsStartElsewhere) {
    add_node("hv1", 1, "pass", 8000);
    add_node("hv2", 2, "pass", 4000);
    add_node("hv3", 3);
    set_live("hv1", true);
    set_live("hv2", true);
    auto& bmc = add_bmc("hv3", 3);
    pid_t node_process = spawn_node_process();
    bmc.set_node_process(node_process);
    add_vm("vm-a", "hv3");
    add_vm("vm-b", "hv3");
    add_vm("vm-limited", "hv3", "hv2");    // node_limit honoured
    add_vm("vm-nowhere", "hv3", "hv3");    // no target: stop + autostart
    session->write(path("node.running_domains", {"hv3"}), "vm-a vm-b vm-limited vm-nowhere");
    session->write(path("base.config.primary_node"), "hv3");

    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    Fencer fencer(connect(), *ipmi, locks, log, settings(1), 3);
    std::atomic<int> done{0};
    FenceOutcome outcome = FenceOutcome::stopped;
    fencer.on_job_done([&](const std::string&, FenceOutcome o, const FenceTimes&) {
        outcome = o;
        ++done;
    });
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });

    ASSERT_TRUE(eventually([&] { return done > 0; }, 40s)) << "no fence job ended";
    EXPECT_EQ(outcome, FenceOutcome::fenced);
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "fenced");
    EXPECT_TRUE(eventually([&] { return get(path("node.state.domain", {"hv3"})) == "flushed"; }, 10s));
    EXPECT_EQ(get(path("node.state.router", {"hv3"})), "secondary");
    EXPECT_EQ(get(path("base.config.primary_node")), "none");
    for (const char* vm : {"vm-a", "vm-b"}) {
        EXPECT_EQ(get(path("domain.state", {vm})), "start") << vm;
        EXPECT_EQ(get(path("domain.node", {vm})), "hv1") << vm;  // mem selector: most free memory
        EXPECT_EQ(get(path("domain.last_node", {vm})), "hv3") << vm;
    }
    EXPECT_EQ(get(path("domain.node", {"vm-limited"})), "hv2");
    EXPECT_EQ(get(path("domain.state", {"vm-limited"})), "start");
    EXPECT_EQ(get(path("domain.state", {"vm-nowhere"})), "stop");
    EXPECT_EQ(get(path("domain.meta.autostart", {"vm-nowhere"})), "True");
    EXPECT_EQ(get(path("domain.node", {"vm-nowhere"})), "hv3");

    // The power loss reached the node, and the BMC saw one off then one on.
    int status = 0;
    EXPECT_EQ(::waitpid(node_process, &status, 0), node_process);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    EXPECT_TRUE(eventually([&] { return bmc.power_commands().size() == 2; }, 5s));
    EXPECT_EQ(bmc.power_commands(), (std::vector<std::string>{"set power 0", "set power 1"}));
    std::this_thread::sleep_for(3s);  // later scans start nothing more
    EXPECT_EQ(fencer.jobs_started(), 1);
    EXPECT_EQ(done, 1);
    // The live nodes were never touched.
    EXPECT_EQ(get(path("node.state.daemon", {"hv1"})), "run");
    EXPECT_EQ(get(path("node.state.daemon", {"hv2"})), "run");
}

// Recovery books every VM it places on its target before choosing the next
// one: with one snapshot alone, all four VMs would go to hv1, the best node
// at the start under every selector.
class RecoverySpread : public Fencing, public ::testing::WithParamInterface<const char*> {};

TEST_P(RecoverySpread, VmsOfTheDeadNodeAreSpreadOverTheSurvivors) {
    const std::string selector = GetParam();
    session->write(path("base.config.migration_target_selector"), selector);
    add_node("hv1", 1, "pass", 4100);
    add_node("hv2", 2, "pass", 4000);
    add_node("hv3", 3);
    auto figures = [&](const std::string& n, long vcpus, const std::string& load) {
        session->write({{path("node.memory.used", {n}), "1000"},
                        {path("node.memory.provisioned", {n}), "0"},
                        {path("node.vcpu.allocated", {n}), std::to_string(vcpus)},
                        {path("node.count.provisioned_domains", {n}), "0"},
                        {path("node.cpu.load", {n}), load}});
    };
    figures("hv1", 0, "0.1");
    figures("hv2", 1, "0.2");
    std::string running;
    for (int i = 0; i < 4; ++i) {
        std::string uuid = "vm-" + std::to_string(i);
        add_vm(uuid, "hv3");
        session->write(path("domain.xml", {uuid}), "<domain type='kvm'><name>" + uuid +
                                                        "</name><memory unit='MiB'>1024</memory><vcpu>2</vcpu></domain>");
        running += uuid + " ";
    }
    session->write(path("node.running_domains", {"hv3"}), running);

    pvc::services::NoRbdLocks locks(log);
    auto r = recover_node(*session, "hv3", locks, log, 8);
    EXPECT_EQ(r.moved, 4);
    std::map<std::string, int> per_node;
    for (int i = 0; i < 4; ++i) {
        std::string uuid = "vm-" + std::to_string(i);
        EXPECT_EQ(get(path("domain.state", {uuid})), "start") << uuid;
        ++per_node[get(path("domain.node", {uuid}))];
    }
    EXPECT_EQ(per_node, (std::map<std::string, int>{{"hv1", 2}, {"hv2", 2}})) << "selector " << selector;
    EXPECT_EQ(get(path("node.state.domain", {"hv3"})), "flushed");
}

INSTANTIATE_TEST_SUITE_P(EverySelector, RecoverySpread, ::testing::Values("mem", "memprov", "load", "vcpus", "vms"));

// A VM is moved with one multi-op of plain sets; a key it lacks (a VM
// defined before the key existed) makes that fail, and the reference's write
// then creates it: the VM is moved all the same.
TEST_F(Fencing, RecoveryCreatesAKeyTheVmLacks) {
    add_node("hv1", 1);
    add_node("hv3", 3);
    add_vm("vm-a", "hv3");
    add_vm("vm-b", "hv3", "hv3");  // no target: stopped with autostart
    session->remove_recursive(path("domain.last_node", {"vm-a"}));
    session->remove_recursive(path("domain.meta.autostart", {"vm-b"}));
    ASSERT_EQ(get(path("domain.last_node", {"vm-a"})), "<absent>");
    session->write(path("node.running_domains", {"hv3"}), "vm-a vm-b");

    pvc::services::NoRbdLocks locks(log);
    auto r = recover_node(*session, "hv3", locks, log, 16);
    EXPECT_EQ(r.moved, 1);
    EXPECT_EQ(r.stopped, 1);
    EXPECT_EQ(r.failed, 0);
    EXPECT_EQ(get(path("domain.state", {"vm-a"})), "start");
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv1");
    EXPECT_EQ(get(path("domain.last_node", {"vm-a"})), "hv3");
    EXPECT_EQ(get(path("domain.state", {"vm-b"})), "stop");
    EXPECT_EQ(get(path("domain.meta.autostart", {"vm-b"})), "True");
    EXPECT_EQ(get(path("node.state.domain", {"hv3"})), "flushed");
}

// The fence job lets the recovery read while it writes `fenced`; if that
// write fails the recovery writes nothing at all.
TEST_F(Fencing, RecoveryWritesNothingWhenTheFenceWasNotRecorded) {
    add_node("hv1", 1);
    add_node("hv3", 3);
    add_vm("vm-a", "hv3");
    session->write(path("node.running_domains", {"hv3"}), "vm-a");

    pvc::services::NoRbdLocks locks(log);
    bool asked = false;
    auto r = recover_node(*session, "hv3", locks, log, 16, [&] {
        asked = true;
        return false;
    });
    EXPECT_TRUE(asked);
    EXPECT_EQ(r.moved, 0);
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv3");
    EXPECT_EQ(get(path("domain.state", {"vm-a"})), "start");
    EXPECT_EQ(get(path("node.state.domain", {"hv3"})), "ready");
}

// The fence job writes `fenced` before the recovery writes anything; if
// that write fails (here: the key made read-only) the recovery moves nothing.
TEST_F(Fencing, FenceJobRecoversNothingWhenFencedCannotBeWritten) {
    add_node("hv1", 1);
    set_live("hv1", true);
    add_node("hv3", 3);
    auto& bmc = add_bmc("hv3", 3);
    add_vm("vm-a", "hv3");
    session->write(path("node.running_domains", {"hv3"}), "vm-a");
    pvc::zk::Stat st;
    session->write(path("node.state.daemon", {"hv3"}), "dead");
    ASSERT_TRUE(session->get(path("node.state.daemon", {"hv3"}), &st));
    auto acl = pvc::test::run_python(R"(
import sys
from kazoo.client import KazooClient
from kazoo.security import make_acl
zk = KazooClient(hosts=sys.argv[1]); zk.start()
zk.set_acls(sys.argv[2], [make_acl('world', 'anyone', read=True)])
zk.stop(); zk.close()
)",
                                     {zk.hosts(), path("node.state.daemon", {"hv3"})});
    ASSERT_EQ(acl.status, 0) << acl.err;

    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    FenceJob job(connect(), *ipmi, locks, log, settings(0), "hv3", std::chrono::steady_clock::now(), st.version);
    EXPECT_EQ(job.run(std::stop_token{}), FenceOutcome::fenced);  // powered off, confirmed
    EXPECT_EQ(bmc.power_commands(), (std::vector<std::string>{"set power 0", "set power 1"}));
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "dead");
    std::this_thread::sleep_for(1s);  // a recovery would have written by now
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv3");
    EXPECT_EQ(get(path("domain.state", {"vm-a"})), "start");
    EXPECT_EQ(get(path("node.state.domain", {"hv3"})), "ready");
    EXPECT_NE(slurp(dir.path() / "pvc.log").find("Could not write daemonstate fenced for hv3"), std::string::npos);
}

// A keepalive written between the scan that judged a node and the write of
// `dead` (the node was only late) stops the write: the baseline is the
// keepalive the scan judged, not one read after it.
TEST_F(Fencing, MarkDeadOnlyOnTheKeepaliveTheScanJudged) {
    add_node("hv3", 3);
    pvc::zk::Stat judged;
    ASSERT_TRUE(session->exists(path("node.keepalive", {"hv3"}), &judged));
    session->write(path("node.keepalive", {"hv3"}), std::to_string(::time(nullptr)));  // the node is back
    EXPECT_FALSE(mark_dead(*session, log, "hv3", judged));
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "run");

    // Still silent since the judged keepalive: marked, and the version returned is the `dead` written.
    ASSERT_TRUE(session->exists(path("node.keepalive", {"hv3"}), &judged));
    auto version = mark_dead(*session, log, "hv3", judged);
    ASSERT_TRUE(version);
    pvc::zk::Stat st;
    EXPECT_EQ(session->get(path("node.state.daemon", {"hv3"}), &st).value_or(""), "dead");
    EXPECT_EQ(st.version, *version);
    // Not `run` any more (another coordinator's): not marked again.
    EXPECT_FALSE(mark_dead(*session, log, "hv3", judged));
}

// A fence job stopped during its saving throws (its coordinator's daemon
// restarted) hands the node back: `run` again, so that a peer judges it and
// fences it. Left `dead`, nobody would ever fence it or recover its VMs.
TEST_F(Fencing, JobStoppedDuringSavingThrowsHandsTheNodeToAPeer) {
    add_node("hv1", 1);
    set_live("hv1", true);
    add_node("hv3", 3);
    auto& bmc = add_bmc("hv3", 3);
    add_vm("vm-a", "hv3");
    session->write(path("node.running_domains", {"hv3"}), "vm-a");
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);

    auto first = std::make_unique<Fencer>(connect(), *ipmi, locks, log, settings(60), 3);
    first->start();
    auto first_ticks = std::make_unique<Ticker>(1000ms, [&] { first->on_tick(); });
    ASSERT_TRUE(eventually([&] { return get(path("node.state.daemon", {"hv3"})) == "dead"; }, 20s));
    // The job is counted just after `dead` is written.
    EXPECT_TRUE(eventually([&] { return first->jobs_started() == 1; }, 5s)) << first->jobs_started();

    Fencer peer(connect(), *ipmi, locks, log, settings(0), 3);
    std::atomic<int> done{0};
    FenceOutcome outcome = FenceOutcome::stopped;
    peer.on_job_done([&](const std::string&, FenceOutcome o, const FenceTimes&) {
        outcome = o;
        ++done;
    });
    peer.start();
    Ticker peer_ticks(1000ms, [&] { peer.on_tick(); });
    std::this_thread::sleep_for(1s);
    first_ticks.reset();
    first->stop();  // mid saving throws
    EXPECT_TRUE(bmc.power_commands().empty());
    EXPECT_NE(slurp(dir.path() / "pvc.log").find("handed back"), std::string::npos);

    ASSERT_TRUE(eventually([&] { return done > 0; }, 30s)) << "the peer never fenced the handed-back node";
    EXPECT_EQ(outcome, FenceOutcome::fenced);
    EXPECT_EQ(peer.jobs_started(), 1);
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "fenced");
    EXPECT_EQ(bmc.power_commands(), (std::vector<std::string>{"set power 0", "set power 1"}));
    EXPECT_TRUE(eventually([&] { return get(path("domain.node", {"vm-a"})) == "hv1"; }, 10s));
}

// Stopped after `off` was sent and before the BMC confirmed it: the node is
// powered on again and handed back.
TEST_F(Fencing, JobStoppedAfterPowerOffPowersTheNodeOnAndHandsItBack) {
    add_node("hv3", 3);
    pvc::zk::Stat judged;
    ASSERT_TRUE(session->exists(path("node.keepalive", {"hv3"}), &judged));
    auto version = mark_dead(*session, log, "hv3", judged);
    ASSERT_TRUE(version);
    StubbornIpmi ipmi;
    pvc::services::NoRbdLocks locks(log);
    auto s = settings(0);
    s.confirm_window = 60s;
    FenceJob job(connect(), ipmi, locks, log, s, "hv3", std::chrono::steady_clock::now(), *version);
    FenceOutcome outcome = FenceOutcome::fenced;
    std::jthread t([&](std::stop_token st) { outcome = job.run(st); });
    ASSERT_TRUE(eventually([&] { return ipmi.called("status"); }, 10s));  // `off` sent, being confirmed
    t.request_stop();
    t.join();
    EXPECT_EQ(outcome, FenceOutcome::stopped);
    auto calls = ipmi.calls();
    ASSERT_FALSE(calls.empty());
    EXPECT_EQ(calls.front(), "off");
    EXPECT_EQ(calls.back(), "on");
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "run");
}

// The hand-back writes `run` only over the job's own `dead`: a node that
// wrote its state meanwhile (here it came back and shut down cleanly) keeps it.
TEST_F(Fencing, StoppedJobLeavesAStateWrittenMeanwhile) {
    add_node("hv3", 3);
    pvc::zk::Stat judged;
    ASSERT_TRUE(session->exists(path("node.keepalive", {"hv3"}), &judged));
    auto version = mark_dead(*session, log, "hv3", judged);
    ASSERT_TRUE(version);
    StubbornIpmi ipmi;
    ipmi.on_call = [&](std::string_view action) {
        if (action == "off") session->write(path("node.state.daemon", {"hv3"}), "stop");
    };
    pvc::services::NoRbdLocks locks(log);
    auto s = settings(0);
    s.confirm_window = 60s;
    FenceJob job(connect(), ipmi, locks, log, s, "hv3", std::chrono::steady_clock::now(), *version);
    std::jthread t([&](std::stop_token st) { job.run(st); });
    ASSERT_TRUE(eventually([&] { return ipmi.called("status"); }, 10s));
    t.request_stop();
    t.join();
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "stop");
}

TEST_F(Fencing, NodeSilentForLessThanTheDeadlineIsNotFenced) {
    add_node("hv1", 1);
    add_node("hv2", 2);
    set_live("hv1", true);
    set_live("hv2", true);
    auto& bmc = add_bmc("hv2", 2);
    StateRecorder states(*session, "hv2");
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    Fencer fencer(connect(), *ipmi, locks, log, settings(0), 3);
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });
    std::this_thread::sleep_for(5s);  // a full trust window first
    // Like SIGSTOP: no keepalive for 1.9 s of the 3 s deadline. The node
    // writes its last and its next one itself: the heartbeat's 1 s grid
    // would make the silence anything up to 3 s, the deadline itself.
    auto keepalive = [&] { session->write(path("node.keepalive", {"hv2"}), std::to_string(::time(nullptr))); };
    for (int i = 0; i < 2; ++i) {
        set_live("hv2", false);
        keepalive();
        std::this_thread::sleep_for(1900ms);
        keepalive();
        set_live("hv2", true);
        std::this_thread::sleep_for(3s);
    }
    EXPECT_EQ(fencer.jobs_started(), 0);
    EXPECT_FALSE(states.saw("dead"));
    EXPECT_TRUE(bmc.power_commands().empty());
}

// The fencer follows /nodes by a watch: a node that joins after it started
// is judged like the others. Its own node is never judged (nor read): here
// hv1's keepalive is silent, as if the daemon's keepalive had stalled while
// its fencer ran on.
TEST_F(Fencing, ANodeThatJoinsLaterIsJudgedAndTheFencersOwnNodeNever) {
    add_node("hv1", 1);
    add_node("hv2", 2);
    set_live("hv2", true);
    StateRecorder own(*session, "hv1");
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    auto s = settings(0);
    s.own_node = "hv1";
    Fencer fencer(connect(), *ipmi, locks, log, s, 3);
    std::atomic<int> done{0};
    fencer.on_job_done([&](const std::string& node, FenceOutcome o, const FenceTimes&) {
        EXPECT_EQ(node, "hv3");
        EXPECT_EQ(o, FenceOutcome::fenced);
        ++done;
    });
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });
    std::this_thread::sleep_for(2s);
    add_node("hv3", 3);
    set_live("hv3", true);
    auto& bmc = add_bmc("hv3", 3);
    std::this_thread::sleep_for(2s);
    set_live("hv3", false);
    ASSERT_TRUE(eventually([&] { return done > 0; }, 30s)) << "hv3 was not fenced";
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "fenced");
    EXPECT_EQ(bmc.power_commands().front(), "set power 0");
    EXPECT_EQ(fencer.jobs_started(), 1);
    EXPECT_FALSE(own.saw("dead"));
    EXPECT_EQ(get(path("node.state.daemon", {"hv1"})), "run");
}

// The fencer and the node are paused together past the deadline (a paused
// VM holding both, or the fencer SIGSTOPped while the node hiccups); the
// fencer resumes first. Its first scan still sees the node's old keepalive.
// Here only the fencer's ticks stop (its thread runs on): its deadline scans
// see their own tick overdue and judge nobody either.
TEST_F(Fencing, FencerPausedPastTheDeadlineFencesNobody) {
    add_node("hv1", 1);
    add_node("hv2", 2);
    set_live("hv1", true);
    set_live("hv2", true);
    StateRecorder states(*session, "hv2");
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    Fencer fencer(connect(), *ipmi, locks, log, settings(0), 3);
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });
    std::this_thread::sleep_for(5s);
    ticks.pause(true);
    std::this_thread::sleep_for(200ms);
    set_live("hv2", false);
    std::this_thread::sleep_for(4800ms);  // hv2's deadline passes while the fencer's ticks are stopped
    int distrusts = fencer.distrust_count();
    fencer.on_tick();                 // the fencer's late tick
    std::this_thread::sleep_for(500ms);
    set_live("hv2", true);            // the node's next keepalive
    ticks.pause(false);
    std::this_thread::sleep_for(6s);
    EXPECT_GT(fencer.distrust_count(), distrusts) << "the late tick was not noticed";
    EXPECT_EQ(fencer.jobs_started(), 0);
    EXPECT_FALSE(states.saw("dead"));
}

// A node is judged when its deadline passes, not at the fencer's next scan
// after it. Keepalive 2 s × 3: the fencer ticks every 2 s and hv3's last
// keepalive lands 0.2 s after a tick. Judged at the scans alone, hv3 was
// first seen 1.8 s late and found dead at t0 + 7.8 s at the earliest; now it
// is marked dead at t0 + 6 s, never before.
TEST_F(Fencing, DeadNodeIsJudgedAtItsDeadlineNotAtTheNextScan) {
    add_node("hv1", 1);
    add_node("hv3", 3);
    set_live("hv1", true);
    set_live("hv3", true);
    struct DeadAt {
        std::mutex m;
        std::optional<std::chrono::steady_clock::time_point> at;
    } dead;
    auto watch = session->watch_data(path("node.state.daemon", {"hv3"}),
                                     [&](const std::optional<std::string>& v, const pvc::zk::Stat&) {
                                         std::lock_guard g(dead.m);
                                         if (v == "dead" && !dead.at) dead.at = std::chrono::steady_clock::now();
                                     });
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    auto s = settings(100);  // the job waits in its saving throws: no BMC needed
    s.interval = 2000ms;
    Fencer fencer(connect(), *ipmi, locks, log, s, 3);
    fencer.start();
    std::atomic<std::chrono::steady_clock::time_point::rep> last_tick{0};
    Ticker ticks(2000ms, [&] {
        fencer.on_tick();
        last_tick = std::chrono::steady_clock::now().time_since_epoch().count();
    });
    std::this_thread::sleep_for(8s);  // past the trust window (6 s)
    set_live("hv3", false);
    std::this_thread::sleep_for(1200ms);  // no heartbeat write of hv3 in flight
    // Just after a tick.
    auto tick_at = [&] { return std::chrono::steady_clock::time_point{std::chrono::steady_clock::duration{last_tick}}; };
    auto prev = tick_at();
    ASSERT_TRUE(eventually([&] { return tick_at() != prev; }, 5s));
    std::this_thread::sleep_until(tick_at() + 200ms);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(session->write(path("node.keepalive", {"hv3"}), std::to_string(::time(nullptr))));
    ASSERT_TRUE(eventually([&] {
        std::lock_guard g(dead.m);
        return dead.at.has_value();
    }, 20s)) << "hv3 never marked dead";
    std::lock_guard g(dead.m);
    double after = std::chrono::duration<double>(*dead.at - t0).count();
    EXPECT_GE(after, 6.0) << "marked dead before its deadline";
    // The bound we promise is the deadline; 1.5 s is room for a loaded machine,
    // and still below the 1.8 s the scans alone added at least.
    EXPECT_LT(after, 7.5) << "marked dead " << after - 6.0 << " s after its deadline";
    EXPECT_EQ(fencer.jobs_started(), 1);
}

// ZooKeeper down for 5 s: nobody can write a keepalive, and the fencer's
// reads fail. When it is back, the fencer waits for fresh keepalives.
TEST_F(Fencing, ZooKeeperOutageCausesNoFence) {
    add_node("hv1", 1);
    add_node("hv2", 2);
    set_live("hv1", true);
    set_live("hv2", true);
    auto ipmi = ipmitool();
    pvc::services::NoRbdLocks locks(log);
    Fencer fencer(connect(), *ipmi, locks, log, settings(0), 3);
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });
    std::this_thread::sleep_for(5s);
    zk.stop();
    std::this_thread::sleep_for(5s);
    zk.start();
    std::this_thread::sleep_for(8s);
    EXPECT_EQ(fencer.jobs_started(), 0);
    EXPECT_EQ(get(path("node.state.daemon", {"hv2"})), "run");
}

class FailedFence : public Fencing {
protected:
    // hv3 dead; its BMC as `bmc` says; returns the job's outcome.
    FenceOutcome fence_hv3(FenceSettings s, std::chrono::milliseconds ipmi_timeout) {
        add_node("hv1", 1);
        set_live("hv1", true);
        add_vm("vm-a", "hv3");
        session->write(path("node.running_domains", {"hv3"}), "vm-a");
        auto ipmi = ipmitool(ipmi_timeout);
        pvc::services::NoRbdLocks locks(log);
        Fencer fencer(connect(), *ipmi, locks, log, s, 3);
        std::atomic<bool> done{false};
        FenceOutcome outcome = FenceOutcome::stopped;
        fencer.on_job_done([&](const std::string&, FenceOutcome o, const FenceTimes&) {
            outcome = o;
            done = true;
        });
        fencer.start();
        Ticker ticks(1000ms, [&] { fencer.on_tick(); });
        EXPECT_TRUE(eventually([&] { return done.load(); }, 60s));
        EXPECT_EQ(fencer.jobs_started(), 1);
        return outcome;
    }
};

TEST_F(FailedFence, UnreachableBmcWithFailedFenceNoneMovesNothing) {
    add_node("hv3", 3);  // no BMC answers on 127.0.0.13
    auto s = settings(0);
    s.confirm_window = 2s;
    EXPECT_EQ(fence_hv3(s, 1500ms), FenceOutcome::failed);
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "dead");
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv3");
    EXPECT_NE(get(path("node.state.domain", {"hv3"})), "flushed");
    EXPECT_NE(slurp(dir.path() / "pvc.log").find("FAILED TO FENCE NODE hv3"), std::string::npos);
}

TEST_F(FailedFence, UnreachableBmcWithMigrateButNoSelfFencingMovesNothing) {
    add_node("hv3", 3);
    auto s = settings(0);
    s.confirm_window = 2s;
    s.migrate_on_failure = true;
    s.suicide_intervals = 0;
    EXPECT_EQ(fence_hv3(s, 1500ms), FenceOutcome::failed);
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv3");
    EXPECT_NE(slurp(dir.path() / "pvc.log").find("self-fencing is off"), std::string::npos);
}

TEST_F(FailedFence, UnreachableBmcWithMigrateMovesAfterTheSelfFenceDeadline) {
    add_node("hv3", 3);
    auto s = settings(0);
    s.confirm_window = 2s;
    s.migrate_on_failure = true;
    s.suicide_intervals = 8;  // the dead node resets itself 8 s after its last keepalive
    auto t0 = std::chrono::steady_clock::now();  // hv3's last keepalive was written by add_node
    EXPECT_EQ(fence_hv3(s, 1500ms), FenceOutcome::failed);
    EXPECT_EQ(get(path("domain.node", {"vm-a"})), "hv1");
    EXPECT_EQ(get(path("domain.state", {"vm-a"})), "start");
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "dead");  // never claimed fenced
    // Not before its suicide deadline (8 intervals after its last keepalive, plus one).
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 9s);
}

TEST_F(FailedFence, WrongCredentialsFailWithAClearLogLineWithoutThePassword) {
    add_node("hv3", 3, "wr0ngpassw0rd");
    auto& bmc = add_bmc("hv3", 3);  // expects "pass"
    auto s = settings(0);
    s.confirm_window = 2s;
    EXPECT_EQ(fence_hv3(s, 5s), FenceOutcome::failed);
    EXPECT_TRUE(bmc.powered_on());
    EXPECT_TRUE(bmc.power_commands().empty());
    std::string logged = slurp(dir.path() / "pvc.log");
    EXPECT_NE(logged.find("FAILED TO FENCE NODE hv3"), std::string::npos) << logged;
    EXPECT_NE(logged.find("IPMI power off of hv3 failed"), std::string::npos) << logged;
    EXPECT_EQ(logged.find("wr0ngpassw0rd"), std::string::npos) << logged;
    EXPECT_EQ(get(path("node.state.daemon", {"hv3"})), "dead");
}

// Every coordinator scans; the write lock on the dead node's daemonstate
// lets exactly one of them fence it.
TEST_F(Fencing, TwoAndThreeCoordinatorsStartExactlyOneFenceJob) {
    for (int coordinators : {2, 3}) {
        SCOPED_TRACE(coordinators);
        std::string dead = "hv" + std::to_string(coordinators + 1);
        for (int i = 1; i <= coordinators; ++i) {
            add_node("hv" + std::to_string(i), i);
            set_live("hv" + std::to_string(i), true);
        }
        add_node(dead, coordinators + 1);
        auto& bmc = add_bmc(dead, coordinators + 1);
        auto ipmi = ipmitool();
        pvc::services::NoRbdLocks locks(log);
        std::vector<std::unique_ptr<Fencer>> fencers;
        std::atomic<int> done{0};
        for (int i = 0; i < coordinators; ++i) {
            fencers.push_back(std::make_unique<Fencer>(connect(), *ipmi, locks, log, settings(0), 3));
            fencers.back()->on_job_done([&](const std::string&, FenceOutcome, const FenceTimes&) { ++done; });
            fencers.back()->start();
        }
        // Ticks at the same moment on every coordinator: the worst case for the lock.
        Ticker ticks(1000ms, [&] {
            for (auto& f : fencers) f->on_tick();
        });
        ASSERT_TRUE(eventually([&] { return done > 0; }, 40s));
        std::this_thread::sleep_for(4s);
        int jobs = 0;
        for (auto& f : fencers) jobs += f->jobs_started();
        EXPECT_EQ(jobs, 1);
        EXPECT_EQ(done, 1);
        EXPECT_EQ(bmc.power_commands(), (std::vector<std::string>{"set power 0", "set power 1"}));
        EXPECT_EQ(get(path("node.state.daemon", {dead})), "fenced");
        // Leave the dead node fenced and out of the next round's way.
        set_live(dead, false);
    }
}

TEST_F(Fencing, NodeCutOffFromZooKeeperRunsItsResetAction) {
    add_node("hv1", 1);
    set_live("hv1", true);
    auto marker = dir.path() / "reset-ran";
    SelfFence self(connect(), log, "hv1", 1000ms, 3, "echo reset >> " + marker.string());
    self.start();
    std::this_thread::sleep_for(5s);  // keepalives arrive: no reset
    EXPECT_EQ(self.resets(), 0);
    EXPECT_FALSE(std::filesystem::exists(marker));
    auto cut = std::chrono::steady_clock::now();
    zk.stop();
    ASSERT_TRUE(eventually([&] { return std::filesystem::exists(marker); }, 15s));
    auto after = std::chrono::steady_clock::now() - cut;
    EXPECT_GE(after, 2s);  // not before 3 intervals since the last keepalive (up to 1 s before the cut)
    EXPECT_EQ(slurp(marker), "reset\n");
    EXPECT_EQ(self.resets(), 1);
    EXPECT_NE(slurp(dir.path() / "pvc.log").find("SELF-FENCING"), std::string::npos);
    zk.start();
}

TEST_F(Fencing, ShuttingDownNodeDoesNotResetItself) {
    add_node("hv1", 1);
    set_live("hv1", true);
    auto marker = dir.path() / "reset-ran";
    SelfFence self(connect(), log, "hv1", 1000ms, 2, "echo reset >> " + marker.string());
    self.start();
    std::this_thread::sleep_for(2s);
    self.disarm();  // daemon state shutdown: the keepalive stops on purpose
    set_live("hv1", false);
    std::this_thread::sleep_for(4s);
    EXPECT_FALSE(std::filesystem::exists(marker));
}

// Start-up writes no keepalive (health plugins' setup() may take up to
// plugin_timeout before the first one): a node whose ZooKeeper is reachable
// must not reset itself then. The count starts at its first keepalive.
TEST_F(Fencing, SelfFenceCountsFromTheFirstKeepaliveNotFromStartUp) {
    add_node("hv1", 1);  // the previous run's keepalive; no heartbeat yet
    auto marker = dir.path() / "reset-ran";
    SelfFence self(connect(), log, "hv1", 1000ms, 2, "echo reset >> " + marker.string());
    self.start();
    std::this_thread::sleep_for(4500ms);  // a slow start-up: twice the 2 s limit
    EXPECT_FALSE(std::filesystem::exists(marker));
    EXPECT_EQ(self.resets(), 0);
    EXPECT_FALSE(self.counting());
    set_live("hv1", true);  // the first keepalive
    EXPECT_TRUE(eventually([&] { return self.counting(); }, 5s));
    std::this_thread::sleep_for(3s);
    EXPECT_FALSE(std::filesystem::exists(marker));
    // Counting for real now: a silence after the first keepalive still resets.
    set_live("hv1", false);
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(marker); }, 10s));
    EXPECT_EQ(self.resets(), 1);
}

// The daemon's `run` (written by its first keepalive) also starts the count.
TEST_F(Fencing, SelfFenceCountsFromRun) {
    add_node("hv1", 1);
    auto marker = dir.path() / "reset-ran";
    SelfFence self(connect(), log, "hv1", 1000ms, 2, "echo reset >> " + marker.string());
    self.start();
    EXPECT_FALSE(self.counting());
    self.on_run();
    EXPECT_TRUE(self.counting());
    EXPECT_TRUE(eventually([&] { return std::filesystem::exists(marker); }, 10s));
}

// Tier 2: the built module loads through the core's module host.
TEST(FencingModule, LoadsThroughTheModuleHost) {
    pvc::ModuleHost host(pvc::test::build_dir() + "/modules", pvc::Logger(pvc::make_log_sink(nullptr), ""));
    auto& m = host.load_file(std::filesystem::path(pvc::test::build_dir()) / "modules/libpvc-module-fencing.so");
    EXPECT_EQ(m.name(), "fencing");
}

// A 3-member ensemble loses its leader while nodes are alive: every session
// moves to another member; keepalives pause for the election. No fence.
TEST(FencingEnsemble, LeaderKilledCausesNoFence) {
    pvc::test::ZkEnsemble ensemble(3);
    ensemble.wait_quorum();
    auto connect = [&] {
        pvc::zk::SessionOptions o;
        o.hosts = ensemble.hosts();
        o.op_timeout = 3s;
        return pvc::zk::Session::connect(o);
    };
    auto s = connect();
    pvc::init_cluster(*s);
    pvc::Logger log(pvc::make_log_sink(nullptr), "fencing");
    for (const char* n : {"hv1", "hv2"}) {
        s->ensure_path(path("node.name", {n}));
        pvc::validate_and_apply(*s, log);
        s->write({{path("node.state.daemon", {n}), "run"}, {path("node.ipmi.hostname", {n}), "127.0.0.50"},
                  {path("node.keepalive", {n}), "0"}});
    }
    auto hb = connect();
    Ticker heartbeat(1000ms, [&] {
        for (const char* n : {"hv1", "hv2"}) {
            try {
                hb->write(path("node.keepalive", {n}), std::to_string(::time(nullptr)));
            } catch (const std::exception&) {
            }
        }
    });
    StateRecorder states(*s, "hv2");
    Ipmitool ipmi({}, 1s);
    pvc::services::NoRbdLocks locks(log);
    FenceSettings fs;
    fs.interval = 1000ms;
    fs.saving_throws = 0;
    Fencer fencer(connect(), ipmi, locks, log, fs, 3);
    fencer.start();
    Ticker ticks(1000ms, [&] { fencer.on_tick(); });
    std::this_thread::sleep_for(5s);
    int leader = ensemble.leader();
    ASSERT_GE(leader, 0);
    ensemble.kill(leader);
    std::this_thread::sleep_for(10s);
    ensemble.start(leader);
    std::this_thread::sleep_for(5s);
    EXPECT_EQ(fencer.jobs_started(), 0);
    EXPECT_FALSE(states.saw("dead"));
}

// A mixed cluster: no reference daemon is installable here, so its fence
// decision is EMULATED from the reference's detection rule with kazoo, on
// the same keys: each interval, every node whose written keepalive is older
// than the coordinator's clock minus interval × fence_intervals and whose
// state is `run` → kazoo WriteLock on /nodes/<n>/daemonstate (blocking) →
// re-read; not `dead` → the fence job is decided ("FENCE <n>" here), `dead`
// is written `hold` seconds later (the time the reference takes to start its
// job thread, widened), the lock released; the job ends with `fenced` an
// interval later (a successful fence, no saving throws).
namespace {

const char* reference_coordinator = R"(
import sys, time, threading
from kazoo.client import KazooClient
hosts, interval, fence_intervals, hold, duration = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
zk = KazooClient(hosts=hosts); zk.start(timeout=15)
def get(p):
    return zk.get(p)[0].decode()
def job(node):
    time.sleep(interval)
    zk.set('/nodes/%s/daemonstate' % node, b'fenced')
jobs = []
end = time.time() + duration
while time.time() < end:
    dead_line = int(time.time()) - interval * fence_intervals
    for node in zk.get_children('/nodes'):
        try:
            state = get('/nodes/%s/daemonstate' % node)
            keepalive = int(get('/nodes/%s/keepalive' % node))
        except Exception:
            state, keepalive = 'unknown', 0
        if keepalive < dead_line and state == 'run':
            print('seems dead', node, flush=True)
            with zk.WriteLock('/nodes/%s/daemonstate' % node, 'reference'):
                if get('/nodes/%s/daemonstate' % node) != 'dead':
                    print('FENCE', node, flush=True)
                    t = threading.Thread(target=job, args=(node,)); jobs.append(t)
                    time.sleep(hold)
                    zk.set('/nodes/%s/daemonstate' % node, b'dead')
                    t.start()
    time.sleep(interval)
for t in jobs: t.join()
zk.stop(); zk.close()
)";

}  // namespace

TEST_F(Fencing, EmulatedReferenceCoordinatorAndOursNeverBothFenceANode) {
    add_node("hv1", 1);
    add_node("hv2", 2);
    set_live("hv1", true);
    set_live("hv2", true);
    struct Case {
        const char* what;
        int reference_intervals;  // ours: 3
        double hold;              // seconds the reference holds the lock before writing dead
        std::chrono::milliseconds ours_later;  // our fencer starts (and begins to trust) this much later
        int reference_fences, our_fences;      // -1: either, the sum is 1
    };
    const Case cases[] = {
        // The reference finds the node dead first and holds the lock while ours judges it dead too.
        {"reference first", 3, 3.0, 2000ms, 1, 0},
        // Ours fences first (it judges 3-5 s after the last keepalive); the
        // reference's scans come while our job runs or after it.
        {"ours first", 7, 0.0, 0ms, 0, 1},
        // The same deadline: both contend for the lock in the same second.
        {"same deadline", 3, 0.2, 0ms, -1, -1},
    };
    int index = 3;
    for (const auto& c : cases) {
        SCOPED_TRACE(c.what);
        std::string dead = "hv" + std::to_string(index);
        add_node(dead, index);
        auto& bmc = add_bmc(dead, index);
        ++index;
        auto reference_run = std::async(std::launch::async, [&] {
            return pvc::test::run_python(reference_coordinator,
                                         {zk.hosts(), "1", std::to_string(c.reference_intervals),
                                          std::to_string(c.hold), "12"},
                                         60s);
        });
        std::this_thread::sleep_for(c.ours_later);
        auto ipmi = ipmitool();
        pvc::services::NoRbdLocks locks(log);
        Fencer ours(connect(), *ipmi, locks, log, settings(0), 3);
        ours.start();
        Ticker ticks(1000ms, [&] { ours.on_tick(); });
        auto reference = reference_run.get();
        ASSERT_EQ(reference.status, 0) << reference.err;
        std::this_thread::sleep_for(2s);  // our job, if any, has ended
        int reference_fences = 0;
        for (auto p = reference.out.find("FENCE " + dead + "\n"); p != std::string::npos;
             p = reference.out.find("FENCE " + dead + "\n", p + 1))
            ++reference_fences;
        EXPECT_EQ(reference_fences + ours.jobs_started(), 1) << "reference: " << reference.out;
        if (c.reference_fences >= 0) {
            EXPECT_EQ(reference_fences, c.reference_fences) << reference.out;
        }
        if (c.our_fences >= 0) {
            EXPECT_EQ(ours.jobs_started(), c.our_fences);
        }
        // Whoever fenced, the keys end as the reference sequences them.
        EXPECT_EQ(get(path("node.state.daemon", {dead})), "fenced");
        // Only our job uses the BMC (the emulation stops at the decision).
        EXPECT_EQ(bmc.power_commands().size(), ours.jobs_started() == 1 ? 2u : 0u);
        std::cout << "[ mixed    ] " << c.what << ": reference fences " << reference_fences << ", ours "
                  << ours.jobs_started() << "\n";
    }
}
