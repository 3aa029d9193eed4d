// pvcnoded when things go wrong around it (core/README.md, "Failure model"):
// ZooKeeper lost during primary contention and takeover, the node guard after
// a crash or a restore of a backup, a schema change while running.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::DaemonProcess;
using pvc::test::eventually;
using pvc::test::slurp;

namespace {

int port_of(const std::string& host) { return std::stoi(host.substr(host.rfind(':') + 1)); }

pvc::test::NodeConfigOptions options(const pvc::test::TempDir& dir, const std::string& node, int port) {
    pvc::test::NodeConfigOptions o;
    o.node = node;
    o.coordinators = "[" + node + ":" + std::to_string(port) + "]";
    o.base_dir = dir.path() / node;
    o.module_dir = pvc::test::build_dir() + "/test-modules/none";
    return o;
}

std::string read(pvc::zk::Session& zk, const std::string& p) { return zk.get(p).value_or("<absent>"); }

// The guard contender's data as pvcnoded writes it, for a holder with these facts.
std::string guard_data(const std::string& node, long pid, const std::string& boot) {
    auto first_line = [](const std::string& f) {
        std::ifstream in(f);
        std::string l;
        std::getline(in, l);
        return l;
    };
    std::string stat = first_line("/proc/" + std::to_string(pid) + "/stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 1));
    std::string field, start = "0";
    for (int i = 3; i <= 22 && rest >> field; ++i)
        if (i == 22) start = field;
    char ns[128] = {};
    ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    return "pvcnoded node=" + node + " pid=" + std::to_string(pid) + " start=" + start + " boot=" + boot +
           " pidns=" + std::string(ns, n > 0 ? static_cast<size_t>(n) : 0) + " host=" + node + ".test";
}

std::string boot_id() {
    std::ifstream in("/proc/sys/kernel/random/boot_id");
    std::string l;
    std::getline(in, l);
    return l;
}

// Lock contenders (children named <hex>__lock__<seq>) under `key`.
std::vector<std::string> contenders(pvc::zk::Session& zk, const std::string& key) {
    std::vector<std::string> out;
    for (const auto& c : zk.raw_children(key).value_or(std::vector<std::string>{}))
        if (pvc::schema::is_lock_contender(c)) out.push_back(c);
    return out;
}

// ---------------------------------------------------------------- ZooKeeper lost (issue 8 item 2)

// The daemon talks to one follower of a three-member ensemble; the test to
// another. Killing the daemon's member cuts only the daemon off, while the
// test keeps writing.
class DaemonZkLoss : public ::testing::Test {
protected:
    void SetUp() override {
        ens.wait_quorum();
        int leader = ens.leader();
        ASSERT_GE(leader, 0);
        daemon_member = (leader + 1) % 3;
        test_member = (leader + 2) % 3;
        zk = pvc::zk::Session::connect({ens.host(test_member)});
        pvc::init_cluster(*zk);
        // Another (absent) coordinator is primary: ours starts as secondary.
        zk->write(path("base.config.primary_node"), "hvz");
    }
    void start_daemon(const std::string& node) {
        o = options(dir, node, port_of(ens.host(daemon_member)));
        d = std::make_unique<DaemonProcess>(node, pvc::test::write_node_config(o), o.base_dir / "out.log");
        ASSERT_TRUE(eventually([&] { return read(*zk, path("node.state.daemon", {node})) == "run"; }, 20s))
            << slurp(o.base_dir / "out.log");
        ASSERT_EQ(read(*zk, path("node.state.router", {node})), "secondary");
    }
    std::string log() { return slurp(o.base_dir / "out.log") + slurp(o.base_dir / "out.log.err"); }
    // The old primary's lock is still held (`held`): `node`'s takeover, once
    // asked for, waits in phase 0.
    void takeover_waiting_on_the_old_primary(const std::string& node) {
        const std::string key = path("base.config.primary_node");
        held = std::make_unique<pvc::zk::Lock>(zk, key, pvc::zk::LockKind::exclusive);
        ASSERT_TRUE(held->acquire(30s));
        zk->write(key, node);
        ASSERT_TRUE(eventually([&] { return read(*zk, path("node.state.router", {node})) == "takeover"; }, 10s))
            << log();
        ASSERT_TRUE(eventually([&] { return contenders(*zk, key).size() >= 2; }, 5s)) << "the takeover never waited";
    }

    pvc::test::ZkEnsemble ens{3};
    int daemon_member = 0, test_member = 1;
    pvc::test::TempDir dir{"degraded"};
    std::shared_ptr<pvc::zk::Session> zk;
    pvc::test::NodeConfigOptions o;
    std::unique_ptr<DaemonProcess> d;
    std::unique_ptr<pvc::zk::Lock> held;
};

TEST_F(DaemonZkLoss, ContentionInterruptedByZooKeeperLossIsRetriedAndTheRoleSettles) {
    start_daemon("hv1");
    const std::string key = path("base.config.primary_node");
    // A slow contender holds the lock, so the daemon's contention (0.4 s) is waiting when ZooKeeper goes.
    auto held = std::make_unique<pvc::zk::Lock>(zk, key, pvc::zk::LockKind::exclusive);
    ASSERT_TRUE(held->acquire(30s));
    zk->write(key, "none");
    ASSERT_TRUE(eventually([&] { return contenders(*zk, key).size() >= 2; }, 5s)) << "the daemon never contended";
    ens.kill(daemon_member);
    held.reset();  // the slow contender gives up while the daemon is cut off
    // Longer than the daemon's operation timeout and session timeout (10 s):
    // its contention ends in errors, and its session expires meanwhile.
    std::this_thread::sleep_for(13s);
    EXPECT_TRUE(d->running()) << log();
    ens.start(daemon_member);

    // Back: the interrupted contention is retried, wins, and the node takes over.
    EXPECT_TRUE(eventually([&] { return read(*zk, key) == "hv1"; }, 30s)) << log();
    EXPECT_TRUE(eventually([&] { return read(*zk, path("node.state.router", {"hv1"})) == "primary"; }, 30s))
        << read(*zk, path("node.state.router", {"hv1"})) << "\n" << log();
    EXPECT_TRUE(d->running());
    d->signal(SIGTERM);
    EXPECT_EQ(d->wait(30s), 0) << log();
}

TEST_F(DaemonZkLoss, TakeoverInterruptedByZooKeeperLossCompletes) {
    start_daemon("hv2");
    takeover_waiting_on_the_old_primary("hv2");
    if (HasFatalFailure()) return;
    ens.kill(daemon_member);
    held.reset();
    std::this_thread::sleep_for(4s);
    EXPECT_TRUE(d->running()) << log();
    ens.start(daemon_member);

    EXPECT_TRUE(eventually([&] { return read(*zk, path("node.state.router", {"hv2"})) == "primary"; }, 30s))
        << read(*zk, path("node.state.router", {"hv2"})) << "\n" << log();
    EXPECT_TRUE(d->running());
    d->signal(SIGTERM);
    EXPECT_EQ(d->wait(30s), 0) << log();
}

// The node lock (one daemon per node name) is an ephemeral of the daemon's
// session: a session that expired while the daemon was cut off took it along.
// Once back, the daemon takes it again; if another daemon for the same node
// took it meanwhile, this one stops.
TEST_F(DaemonZkLoss, TheNodeLockIsTakenAgainAfterTheSessionExpired) {
    start_daemon("hv1");
    const std::string root = path("node.name", {"hv1"});
    ASSERT_EQ(contenders(*zk, root).size(), 1u);
    ens.kill(daemon_member);
    // Longer than the session timeout (10 s): the session expires, its ephemerals go.
    ASSERT_TRUE(eventually([&] { return contenders(*zk, root).empty(); }, 20s)) << "the session never expired";
    ens.start(daemon_member);
    EXPECT_TRUE(eventually([&] { return contenders(*zk, root).size() == 1; }, 30s)) << log();
    EXPECT_TRUE(eventually([&] { return log().find("Node lock of hv1 held again") != std::string::npos; }, 10s))
        << log();
    EXPECT_TRUE(d->running());
    d->signal(SIGTERM);
    EXPECT_EQ(d->wait(30s), 0) << log();
}

TEST_F(DaemonZkLoss, ADaemonWhoseNodeLockWasTakenMeanwhileStops) {
    start_daemon("hv1");
    const std::string root = path("node.name", {"hv1"});
    ens.kill(daemon_member);
    ASSERT_TRUE(eventually([&] { return contenders(*zk, root).empty(); }, 20s)) << "the session never expired";
    // Another pvcnoded for hv1 (here: the test) takes the node lock while this one is cut off.
    pvc::zk::Lock other(zk, root, pvc::zk::LockKind::exclusive, "pvcnoded node=hv1 pid=1 start=1 boot=x pidns=y host=z");
    ASSERT_TRUE(other.acquire(30s));
    ens.start(daemon_member);
    int status = d->wait(60s);
    EXPECT_NE(status, -1) << "still running\n" << log();
    EXPECT_NE(status, 0) << log();
    EXPECT_NE(log().find("Another pvcnoded took the node lock of hv1"), std::string::npos) << log();
    EXPECT_EQ(contenders(*zk, root).size(), 1u) << "the other daemon's lock must stay";
}

// `systemctl stop` with every ZooKeeper member of the daemon gone (its one
// member killed): nothing can be written, so nothing is waited for. Before,
// each step waited an operation timeout (10 s) for a connection and the
// shutdown took 80-100 s (with the wait for a successor, over systemd's 180 s
// stop timeout). Now the process ends within 10 s, with status 0.
TEST_F(DaemonZkLoss, ShutdownWithZooKeeperGoneEndsWithinTenSeconds) {
    start_daemon("hv1");
    zk->write(path("base.config.primary_node"), "hv1");
    ASSERT_TRUE(eventually([&] { return read(*zk, path("node.state.router", {"hv1"})) == "primary"; }, 30s)) << log();
    // The daemon itself knows it is primary (its keepalive line shows its
    // cached router state): ZooKeeper showing `primary` comes a little before
    // the takeover's last steps, and a cut then leaves the daemon in takeover.
    ASSERT_TRUE(eventually([&] { return log().find(" [primary] in ") != std::string::npos; }, 10s)) << log();
    // Another coordinator in run: a successor may exist (the wait for it is skipped too).
    zk->ensure_path(path("node.mode", {"hvz"}));
    zk->ensure_path(path("node.state.daemon", {"hvz"}));
    ASSERT_TRUE(zk->write({{path("node.mode", {"hvz"}), "coordinator"}, {path("node.state.daemon", {"hvz"}), "run"}}));
    ens.kill(daemon_member);
    ASSERT_TRUE(eventually([&] { return log().find("Connection to ZooKeeper lost") != std::string::npos; }, 10s))
        << log();
    const auto t0 = std::chrono::steady_clock::now();
    d->signal(SIGTERM);
    int status = d->wait(pvc::test::scaled(10s));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NE(status, -1) << "still shutting down after " << took << " s\n" << log();
    EXPECT_EQ(status, 0) << log();
    EXPECT_NE(log().find("ZooKeeper unavailable; shutting down without it"), std::string::npos) << log();
    EXPECT_NE(log().find("Terminated pvcnoded"), std::string::npos) << log();
    std::printf("shutdown with ZooKeeper gone: %.2f s\n", took);
}

// The same while a hand-over is in progress (a takeover waiting for the old
// primary's lock): it cannot complete without ZooKeeper and is not waited for.
TEST_F(DaemonZkLoss, ShutdownWithZooKeeperGoneDuringATakeoverEndsWithinTenSeconds) {
    start_daemon("hv2");
    takeover_waiting_on_the_old_primary("hv2");
    if (HasFatalFailure()) return;
    ens.kill(daemon_member);
    ASSERT_TRUE(eventually([&] { return log().find("Connection to ZooKeeper lost") != std::string::npos; }, 10s))
        << log();
    const auto t0 = std::chrono::steady_clock::now();
    d->signal(SIGTERM);
    int status = d->wait(pvc::test::scaled(10s));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_NE(status, -1) << "still shutting down after " << took << " s\n" << log();
    EXPECT_EQ(status, 0) << log();
    EXPECT_NE(log().find("ZooKeeper unavailable; shutting down without it"), std::string::npos) << log();
    EXPECT_NE(log().find("Terminated pvcnoded"), std::string::npos) << log();
    std::printf("shutdown with ZooKeeper gone during a takeover: %.2f s\n", took);
}

// `systemctl stop` while the node is taking the primary role over (here
// waiting for the old primary's lock): the takeover is completed, then the
// role is handed on as any primary's is, never left half-done with
// /config/primary_node naming a stopped node.
TEST_F(DaemonZkLoss, ShutdownDuringATakeoverCompletesItAndHandsTheRoleOn) {
    start_daemon("hv2");
    // hvz, the old primary, is a coordinator in run (a successor may exist).
    zk->ensure_path(path("node.mode", {"hvz"}));
    zk->ensure_path(path("node.state.daemon", {"hvz"}));
    ASSERT_TRUE(zk->write({{path("node.mode", {"hvz"}), "coordinator"}, {path("node.state.daemon", {"hvz"}), "run"}}));
    takeover_waiting_on_the_old_primary("hv2");
    if (HasFatalFailure()) return;
    const std::string key = path("base.config.primary_node");
    d->signal(SIGTERM);
    ASSERT_TRUE(eventually([&] { return log().find("Completing the primary takeover in progress") != std::string::npos; },
                           5s))
        << log();
    held.reset();
    // Completed, then released to the other coordinator...
    EXPECT_TRUE(eventually([&] { return read(*zk, key) == "none"; }, 20s)) << log();
    EXPECT_NE(log().find("Node is now primary"), std::string::npos) << log();
    // ... which takes it: the node relinquishes and ends.
    zk->write(key, "hvz");
    EXPECT_EQ(d->wait(60s), 0) << log();
    std::string l = log();
    auto primary_at = l.find("Node is now primary");
    auto release_at = l.find("Relinquishing primary role before shutdown");
    EXPECT_LT(primary_at, release_at) << l;
    EXPECT_NE(release_at, std::string::npos) << l;
    EXPECT_EQ(read(*zk, path("node.state.router", {"hv2"})), "secondary") << l;
    EXPECT_EQ(read(*zk, path("node.state.daemon", {"hv2"})), "stop") << l;
    EXPECT_EQ(read(*zk, key), "hvz");
}

// `systemctl stop` while the primary is handing its role over (here its
// relinquish waits for the new primary's hand-over lock): the relinquish is
// completed (its part of every phase done, the node `secondary`), never left
// half-done.
TEST_F(DaemonZkLoss, ShutdownDuringARelinquishCompletesIt) {
    start_daemon("hv1");
    const std::string key = path("base.config.primary_node");
    zk->write(key, "hv1");
    ASSERT_TRUE(eventually([&] { return log().find("Node is now primary") != std::string::npos; }, 30s)) << log();
    // The new primary (played here) holds the hand-over's write lock.
    const std::string sync = path("base.config.primary_node.sync_lock");
    held = std::make_unique<pvc::zk::Lock>(zk, sync, pvc::zk::LockKind::write);
    ASSERT_TRUE(held->acquire(30s));
    zk->write(key, "hvz");
    ASSERT_TRUE(eventually([&] { return read(*zk, path("node.state.router", {"hv1"})) == "relinquish"; }, 10s))
        << log();
    ASSERT_TRUE(eventually([&] { return contenders(*zk, sync).size() >= 2; }, 5s)) << "the relinquish never waited";
    d->signal(SIGTERM);
    ASSERT_TRUE(
        eventually([&] { return log().find("Completing the primary relinquish in progress") != std::string::npos; }, 5s))
        << log();
    held.reset();
    EXPECT_EQ(d->wait(60s), 0) << log();
    EXPECT_NE(log().find("Node is now secondary"), std::string::npos) << log();
    EXPECT_EQ(read(*zk, path("node.state.router", {"hv1"})), "secondary") << log();
    EXPECT_EQ(read(*zk, path("node.state.daemon", {"hv1"})), "stop") << log();
}

// ---------------------------------------------------------------- the node guard (8.6, 14.3, 14.7)

class DaemonGuard : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    std::string state(const std::string& node) { return read(*zk, path("node.state.daemon", {node})); }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"guard"};
    std::shared_ptr<pvc::zk::Session> zk;
};

TEST_F(DaemonGuard, ARestoredPersistentContenderDoesNotBlockTheStart) {
    auto o = options(dir, "hv3", server.port());
    auto cfg = pvc::test::write_node_config(o);
    {
        DaemonProcess first("hv3", cfg, o.base_dir / "first.log");
        ASSERT_TRUE(eventually([&] { return state("hv3") == "run"; }, 15s));
        first.signal(SIGTERM);
        ASSERT_EQ(first.wait(20s), 0);
    }
    // What the reference's `cluster restore` leaves: the guard contender written back as a persistent znode.
    const std::string stale = path("node.name", {"hv3"}) + "/0123456789abcdef0123456789abcdef__lock__0000000003";
    zk->create(stale, "pvcnoded node=hv3 pid=1 start=1 boot=x pidns=y host=old", false, false);
    pvc::zk::Stat st;
    ASSERT_TRUE(zk->exists(stale, &st));
    ASSERT_EQ(st.ephemeral_owner, 0);

    auto t0 = std::chrono::steady_clock::now();
    DaemonProcess again("hv3", cfg, o.base_dir / "again.log");
    // The guard alone would make it wait session timeout + 2 s (12 s) and then refuse.
    ASSERT_TRUE(eventually([&] { return state("hv3") == "run" && !zk->exists(stale); }, 8s))
        << slurp(o.base_dir / "again.log");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 8s);
    EXPECT_NE(slurp(o.base_dir / "again.log").find("Removing stale node lock contender"), std::string::npos);
    again.signal(SIGTERM);
    EXPECT_EQ(again.wait(20s), 0);
}

TEST_F(DaemonGuard, RestartAfterKillNineTakesOverAtOnceWhenTheOldProcessIsProvablyGone) {
    auto o = options(dir, "hv4", server.port());
    auto cfg = pvc::test::write_node_config(o);
    {
        DaemonProcess crashed("hv4", cfg, o.base_dir / "crashed.log");
        ASSERT_TRUE(eventually([&] { return state("hv4") == "run"; }, 15s));
        crashed.signal(SIGKILL);
        crashed.wait(5s);
    }
    // The crashed session's contender is still there (10 s session timeout).
    ASSERT_EQ(contenders(*zk, path("node.name", {"hv4"})).size(), 1u);
    long dead_ka = std::stol(zk->get(path("node.keepalive", {"hv4"})).value());
    auto t0 = std::chrono::steady_clock::now();
    DaemonProcess again("hv4", cfg, o.base_dir / "again.log");
    // Without the proof it reaches run only after the old session expired (about 10 s after the kill).
    ASSERT_TRUE(eventually(
        [&] {
            return state("hv4") == "run" && std::stol(zk->get(path("node.keepalive", {"hv4"})).value()) > dead_ka;
        },
        20s))
        << slurp(o.base_dir / "again.log");
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, 6s) << "waited for the old session to expire";
    std::cout << "restart after kill -9 reached run in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms\n";
    auto log = slurp(o.base_dir / "again.log");
    EXPECT_NE(log.find("is gone"), std::string::npos) << log;
    again.signal(SIGTERM);
    EXPECT_EQ(again.wait(20s), 0);
}

TEST_F(DaemonGuard, AHolderNotProvablyGoneIsWaitedForAndTheWaitIsLogged) {
    auto o = options(dir, "hv5", server.port());
    auto cfg = pvc::test::write_node_config(o);
    {
        DaemonProcess first("hv5", cfg, o.base_dir / "first.log");
        ASSERT_TRUE(eventually([&] { return state("hv5") == "run"; }, 15s));
        first.signal(SIGTERM);
        ASSERT_EQ(first.wait(20s), 0);
    }
    // Two holders in another session: one whose process is alive (this test), one whose
    // pid is dead but which was recorded on another boot. Neither may be removed.
    auto other = pvc::zk::Session::connect({server.hosts()});
    const std::string root = path("node.name", {"hv5"});
    other->create(root + "/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__lock__", guard_data("hv5", ::getpid(), boot_id()), true,
                  true);
    std::string other_boot = "00000000-0000-0000-0000-000000000000";
    other->create(root + "/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb__lock__",
                  "pvcnoded node=hv5 pid=999999 start=1 boot=" + other_boot + " pidns=pid:[1] host=x", true, true);

    DaemonProcess again("hv5", cfg, o.base_dir / "again.log");
    ASSERT_TRUE(eventually([&] { return slurp(o.base_dir / "again.log").find("Waiting for the node lock") !=
                                        std::string::npos; },
                           10s))
        << slurp(o.base_dir / "again.log");
    std::this_thread::sleep_for(3s);
    EXPECT_EQ(state("hv5"), "stop") << "started while another holder may be alive";
    EXPECT_EQ(contenders(*zk, root).size(), 3u);
    auto log = slurp(o.base_dir / "again.log");
    auto line = log.substr(log.find("Waiting for the node lock"));
    line = line.substr(0, line.find('\n'));
    EXPECT_NE(line.find("pid=" + std::to_string(::getpid())), std::string::npos) << line;  // what it waits for
    EXPECT_NE(line.find(" until "), std::string::npos) << line;                             // and until when
    EXPECT_EQ(log.find("Waiting for the node lock", log.find("Waiting for the node lock") + 1), std::string::npos)
        << "logged more than once";

    other->close();  // the holders go: it starts at once
    EXPECT_TRUE(eventually([&] { return state("hv5") == "run"; }, 8s)) << slurp(o.base_dir / "again.log");
    again.signal(SIGTERM);
    EXPECT_EQ(again.wait(20s), 0);
}

}  // namespace

namespace {

// ---------------------------------------------------------------- schema change (issue 8 item 7)

using DaemonSchema = DaemonGuard;

TEST_F(DaemonSchema, ASchemaChangeKeepsProvingLivenessButStopsActing) {
    auto o = options(dir, "hv6", server.port());
    auto cfg = pvc::test::write_node_config(o);
    DaemonProcess d("hv6", cfg, o.base_dir / "out.log");
    ASSERT_TRUE(eventually([&] { return state("hv6") == "run"; }, 15s));
    auto mzxid = [&](const char* key) {
        pvc::zk::Stat st;
        zk->get(path(key, {"hv6"}), &st);
        return st.mzxid;
    };

    zk->write(path("base.schema.version"), "11");
    ASSERT_TRUE(eventually([&] { return slurp(o.base_dir / "out.log").find("stops acting") != std::string::npos; },
                           10s));
    std::this_thread::sleep_for(1500ms);  // a tick already under way when the watch fired may still finish
    long ka0 = std::stol(read(*zk, path("node.keepalive", {"hv6"})));
    auto ka_m0 = mzxid("node.keepalive");
    auto load_m0 = mzxid("node.cpu.load");
    std::this_thread::sleep_for(3500ms);  // three keepalive intervals (1 s)
    // Liveness: the timestamp advances and the node stays `run` (a coordinator would otherwise fence it) ...
    EXPECT_NE(mzxid("node.keepalive"), ka_m0);
    EXPECT_GE(std::stol(read(*zk, path("node.keepalive", {"hv6"}))), ka0 + 2);
    EXPECT_EQ(state("hv6"), "run");
    // ... but nothing else is written.
    EXPECT_EQ(mzxid("node.cpu.load"), load_m0) << "the keepalive still acts";
    EXPECT_TRUE(d.running());

    zk->write(path("base.schema.version"), "10");
    EXPECT_TRUE(eventually([&] { return mzxid("node.cpu.load") != load_m0; }, 10s)) << "never resumed";
    d.signal(SIGTERM);
    EXPECT_EQ(d.wait(20s), 0);
}

}  // namespace
