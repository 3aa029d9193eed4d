// The storage module against real components: a private mini Ceph (one
// monitor, one manager, one memstore OSD; tests/support CephCluster) and a
// private ZooKeeper, both on loopback, shared by the tests of this binary.
// ZooKeeper values are read back with kazoo (/usr/bin/python3), as a
// reference client reads them.
#include <fstream>
#include <iterator>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "ceph_call.hpp"
#include "ceph_objects.hpp"
#include "collector.hpp"
#include "pvc/cluster.hpp"
#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/ports.hpp"
#include "pvc/test/zk_server.hpp"
#include "lock_task.hpp"
#include "pvc/tasks.hpp"
#include "rbd_lock_service.hpp"
#include "rbd_volume_service.hpp"
#include "storage.hpp"

using namespace std::chrono_literals;
using namespace pvc::storage;
using pvc::schema::path;
using pvc::test::eventually;

namespace {

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

size_t count_of(const std::string& text, const std::string& needle) {
    size_t n = 0;
    for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
    return n;
}

class Storage : public ::testing::Test {
protected:
    static inline pvc::test::CephCluster* ceph = nullptr;
    static inline pvc::test::ZkServer* zk = nullptr;

    static void SetUpTestSuite() {
        ceph = new pvc::test::CephCluster(1);
        ceph->create_pool("vms", 8);
        zk = new pvc::test::ZkServer();
        auto s = pvc::zk::Session::connect({zk->hosts()});
        pvc::init_cluster(*s);
    }
    static void TearDownTestSuite() {
        delete zk;
        delete ceph;
        zk = nullptr;
        ceph = nullptr;
    }

    pvc::test::TempDir dir{"storage"};
    std::shared_ptr<pvc::zk::Session> session;
    pvc::Logger log;
    std::string node = pvc::test::unique_name("hv");

    void SetUp() override {
        session = pvc::zk::Session::connect({zk->hosts()});
        pvc::Config cfg;
        cfg.file_logging = true;
        cfg.log_directory = dir.path();
        log = pvc::Logger(pvc::make_log_sink(&cfg), "storage");
        session->ensure_path(path("node.name", {node}));
        session->write(path("node.state.router", {node}), "primary");
    }

    std::string logged() { return slurp(dir.path() / "pvc.log"); }

    ClientOptions client() const {
        ClientOptions o;
        o.config_file = ceph->conf().string();
        o.keyring = ceph->keyring().string();
        o.op_timeout = 3s;
        o.mount_timeout = 3s;
        return o;
    }

    // A pool and an OSD as the API and the worker create them (their keys only).
    void define_pool(const std::string& pool) {
        session->write({{path("pool.name", {pool}), ""},
                        {path("pool.pgs", {pool}), "8"},
                        {path("pool.tier", {pool}), "default"},
                        {path("pool.stats", {pool}), "{}"}});
        session->ensure_path(path("base.volume") + "/" + pool);
    }
    void define_osd(const std::string& id, const std::string& on_node) {
        session->write({{path("osd.id", {id}), ""}, {path("osd.node", {id}), on_node}, {path("osd.stats", {id}),
                         R"({"uuid": "|", "up": 0, "in": 0, "primary_affinity": "|", "weight": "|"})"}});
    }

    // kazoo's view of a key, as a reference client reads it.
    std::string kazoo_get(const std::string& key) {
        auto r = pvc::test::run_python(
            "import sys\nfrom kazoo.client import KazooClient\n"
            "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)\n"
            "sys.stdout.write(zk.get(sys.argv[2])[0].decode())\nzk.stop()\n",
            {zk->hosts(), key});
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out;
    }

    void make_image(const std::string& image) {
        auto r = ceph->rbd({"create", "--size", "16", "vms/" + image});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    // An advisory lock held by the `rbd` tool's client, whose address is 127.0.0.1.
    void lock_image(const std::string& image, const std::string& cookie) {
        auto r = ceph->rbd({"lock", "add", "vms/" + image, cookie});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    nlohmann::json locks_of(const std::string& image) {
        auto r = ceph->rbd({"lock", "list", "--format", "json", "vms/" + image});
        EXPECT_EQ(r.status, 0) << r.err;
        return r.out.empty() ? nlohmann::json::array() : nlohmann::json::parse(r.out);
    }
};

// ------------------------------------------------------------------ statistics

TEST_F(Storage, PrimaryPublishesStatusHealthUtilAndPoolAndOsdStatsInTheReferenceEncodings) {
    define_pool("vms");
    define_osd("0", node);
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node});
    auto guard = boost::asio::make_work_guard(ex.io());  // before the thread: run() must not find the loop idle
    std::jthread io([&] { ex.run_io(); });
    objects.start();
    ASSERT_TRUE(eventually([&] { return objects.pools() == std::vector<std::string>{"vms"} && objects.own_osds() == 1; }));
    CephCalls calls;
    StatsCollector collector(session, log, objects, calls, {node, client(), 5s});
    collector.collect();
    EXPECT_EQ(collector.published(), 1u) << logged();

    // /ceph: `ceph status` as plain text; /ceph/health: JSON with a status; /ceph/util: `ceph df` text.
    auto status = kazoo_get("/ceph");
    EXPECT_NE(status.find("cluster:"), std::string::npos) << status;
    EXPECT_NE(status.find("HEALTH_OK"), std::string::npos) << status;
    auto health = nlohmann::json::parse(kazoo_get("/ceph/health"));
    EXPECT_EQ(health.at("status"), "HEALTH_OK");
    EXPECT_NE(kazoo_get("/ceph/util").find("RAW STORAGE"), std::string::npos);

    // Pool stats: the reference's fields in order, Python's separators (json.dumps of
    // json.loads gives the same text), figures matching `rados df`.
    auto r = pvc::test::run_python(
        "import sys, json\nfrom kazoo.client import KazooClient\n"
        "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=10)\n"
        "v = zk.get('/ceph/pools/vms/stats')[0].decode(); d = json.loads(v)\n"
        "assert json.dumps(d) == v, v\n"
        "print(','.join(d.keys())); print(d['free_bytes'] > 0, d['used_percent'] >= 0)\n"
        "o = json.loads(zk.get('/ceph/osds/0/stats')[0].decode())\n"
        "print(','.join(o.keys())); print(o['up'], o['in'], o['weight'] != '|', o['state'])\n",
        {zk->hosts()});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    std::istringstream lines(r.out);
    std::string pool_keys, pool_figures, osd_keys, osd_figures;
    std::getline(lines, pool_keys);
    std::getline(lines, pool_figures);
    std::getline(lines, osd_keys);
    std::getline(lines, osd_figures);
    EXPECT_EQ(pool_keys,
              "id,stored_bytes,free_bytes,used_bytes,used_percent,num_objects,num_object_clones,num_object_copies,"
              "num_objects_missing_on_primary,num_objects_unfound,num_objects_degraded,read_ops,read_bytes,write_ops,"
              "write_bytes");
    EXPECT_EQ(pool_figures, "True True");
    EXPECT_EQ(osd_keys,
              "uuid,up,in,primary_affinity,utilization,var,pgs,kb,kb_used,kb_used_data,kb_used_omap,kb_used_meta,"
              "kb_avail,weight,reweight,class,node,used,avail,wr_ops,wr_data,rd_ops,rd_data,state");
    EXPECT_EQ(osd_figures, "1 1 True exists,up");

    // The rados counters are `rados df`'s (no I/O on the pool meanwhile).
    auto pool = nlohmann::json::parse(session->get(path("pool.stats", {"vms"})).value_or("{}"));
    auto rados_df = ceph->rados({"df", "--format", "json"});
    ASSERT_EQ(rados_df.status, 0);
    for (const auto& p : nlohmann::json::parse(rados_df.out).at("pools")) {
        if (p.at("name") != "vms") continue;
        for (const char* k : {"num_object_copies", "num_objects_degraded", "write_ops", "write_bytes"})
            EXPECT_EQ(pool.at(k), p.at(k)) << k;
    }
    objects.stop();
    guard.reset();
    ex.io().stop();
}

TEST_F(Storage, StatisticsNeverRecreateAPoolOrOsdThatIsGone) {
    define_pool("vms");
    define_osd("0", node);
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node});
    auto guard = boost::asio::make_work_guard(ex.io());  // before the thread: run() must not find the loop idle
    std::jthread io([&] { ex.run_io(); });
    objects.start();
    ASSERT_TRUE(eventually([&] { return !objects.pools().empty() && !objects.osd_ids().empty(); }));
    // Gone in ZooKeeper after the mirrors saw them (the API removed them).
    session->remove_recursive(path("pool.name", {"vms"}));
    session->remove_recursive(path("osd.id", {"0"}));
    CephCalls calls;
    StatsCollector collector(session, log, objects, calls, {node, client(), 5s});
    collector.collect();
    EXPECT_FALSE(session->exists(path("pool.name", {"vms"})));
    EXPECT_FALSE(session->exists(path("osd.id", {"0"})));
    objects.stop();
    guard.reset();
    ex.io().stop();
}

// One librados connection serves every collection; a monitor restart
// under the running collector fails a collection (bounded), drops the
// connection, and the next collection once Ceph answers connects anew.
TEST_F(Storage, CollectionsShareOneConnectionAndReconnectAfterAMonitorRestart) {
    define_pool("vms");
    define_osd("0", node);
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node});
    auto guard = boost::asio::make_work_guard(ex.io());
    std::jthread io([&] { ex.run_io(); });
    objects.start();
    ASSERT_TRUE(eventually([&] { return !objects.pools().empty() && objects.own_osds() == 1; }));
    CephCalls calls;
    StatsCollector collector(session, log, objects, calls, {node, client(), 5s});
    for (int i = 0; i < 3; ++i) collector.collect();
    EXPECT_EQ(collector.published(), 3u) << logged();
    EXPECT_EQ(collector.connections(), 1u);

    ceph->stop_mon();
    pvc::zk::Stat before;
    session->get(path("base.storage.health"), &before);
    auto t0 = std::chrono::steady_clock::now();
    collector.collect();  // the kept connection's status call fails within its deadline
    EXPECT_LT(std::chrono::steady_clock::now() - t0, pvc::test::scaled(12s));
    EXPECT_EQ(collector.published(), 3u);
    ceph->start_mon();
    ASSERT_TRUE(eventually([&] {
        collector.collect();
        return collector.published() > 3;
    }, pvc::test::scaled(60s))) << logged();
    EXPECT_EQ(collector.connections(), 2u) << "a new connection after the failure, one only";
    pvc::zk::Stat after;
    session->get(path("base.storage.health"), &after);
    EXPECT_GT(after.mzxid, before.mzxid);
    EXPECT_NE(logged().find("Ceph statistics collected again"), std::string::npos) << logged();
    // Kept again from then on.
    collector.collect();
    EXPECT_EQ(collector.connections(), 2u);
    collector.disconnect();
    collector.collect();
    EXPECT_EQ(collector.connections(), 3u);
    objects.stop();
    guard.reset();
    ex.io().stop();
    ceph->wait_health_ok();
}

TEST_F(Storage, NonPrimaryCallsNoCephAndWritesNothing) {
    session->write(path("node.state.router", {node}), "secondary");
    session->write(path("base.storage.health"), "sentinel");
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node});
    CephCalls calls;
    ClientOptions unreachable = client();
    unreachable.config_file = (dir.path() / "missing.conf").string();
    StatsCollector collector(session, log, objects, calls, {node, unreachable, 5s});
    collector.collect();
    EXPECT_EQ(collector.collections(), 1u);
    EXPECT_EQ(collector.published(), 0u);
    EXPECT_EQ(session->get(path("base.storage.health")).value_or(""), "sentinel");
    EXPECT_EQ(logged().find("Failed to open connection"), std::string::npos) << "a non-primary tried Ceph";
}

// ------------------------------------------------------------------ mirrors and bad input

TEST_F(Storage, MirrorsCountThisNodesOsdsAndSkipBadNames) {
    define_pool("vms");
    define_osd("0", node);
    define_osd("7", "othernode");
    session->ensure_path(path("base.osd") + "/notanid");
    session->ensure_path(path("base.pool") + "/bad pool");
    session->ensure_path(path("base.volume") + "/nosuchpool");
    session->ensure_path(path("base.volume") + "/vms/disk0");
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node});
    auto guard = boost::asio::make_work_guard(ex.io());  // before the thread: run() must not find the loop idle
    std::jthread io([&] { ex.run_io(); });
    objects.start();
    EXPECT_TRUE(eventually([&] { return objects.osd_ids() == std::vector<std::string>{"0", "7"}; }));
    EXPECT_TRUE(eventually([&] { return objects.own_osds() == 1; }));
    EXPECT_TRUE(eventually([&] { return objects.volumes("vms") == std::vector<std::string>{"disk0"}; }));
    EXPECT_EQ(objects.pools(), std::vector<std::string>{"vms"});
    // A new OSD of this node appears: counted.
    define_osd("8", node);
    EXPECT_TRUE(eventually([&] { return objects.own_osds() == 2; }));
    auto text = logged();
    EXPECT_EQ(count_of(text, "Ignoring OSD 'notanid'"), 1u) << text;
    EXPECT_EQ(count_of(text, "Ignoring pool 'bad pool'"), 1u) << text;
    EXPECT_NE(text.find("Ignoring the volume list of 'nosuchpool'"), std::string::npos) << text;
    objects.stop();
    guard.reset();
    ex.io().stop();
    session->remove_recursive(path("osd.id", {"7"}));
    session->remove_recursive(path("osd.id", {"8"}));
    session->remove_recursive(path("base.osd") + "/notanid");
    session->remove_recursive(path("base.pool") + "/bad pool");
    session->remove_recursive(path("base.volume") + "/nosuchpool");
}

TEST_F(Storage, OsdOfThisNodeIsRefreshedFromCephVolumeJsonWithoutAShell) {
    // ceph-volume needs LVM OSDs, which the memstore lab has none of: a
    // stand-in prints what `ceph-volume lvm list --format json` prints and
    // records its arguments (one argument per item: no shell).
    auto fake = dir.path() / "ceph-volume";
    std::ofstream(fake) << "#!/bin/sh\nprintf '%s\\n' \"$@\" > " << (dir.path() / "args").string() << "\n"
                        << "cat <<'EOF'\n"
                        << R"({"5": [{"type": "block", "devices": ["/dev/sdz"], "vg_name": "ceph-v", "lv_name": "osd-block-l",)"
                        << R"( "tags": {"ceph.osd_id": "5", "ceph.osd_fsid": "of", "ceph.cluster_fsid": "cf"}}]})" << "\nEOF\n";
    std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
    session->write({{path("osd.id", {"5"}), ""}, {path("osd.device", {"5"}), "/dev/disk/by-path/x; rm -rf /"}});
    session->write({{path("osd.id", {"6"}), ""}, {path("osd.device", {"6"}), "/dev/disk/by-path/pci-1"}});
    pvc::Executor ex(1);
    CephObjects objects(session, log, ex, {node, {fake.string()}, 10s});
    // A device text with a space is refused before any command runs.
    EXPECT_FALSE(objects.refresh_osd("5"));
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "args"));
    session->write(path("osd.device", {"5"}), "/dev/disk/by-path/pci-0");
    EXPECT_TRUE(objects.refresh_osd("5")) << logged();
    EXPECT_EQ(slurp(dir.path() / "args"), "lvm\nlist\n--format\njson\n/dev/disk/by-path/pci-0\n");
    EXPECT_EQ(session->get(path("osd.device", {"5"})).value_or(""), "/dev/sdz");
    EXPECT_EQ(session->get(path("osd.ofsid", {"5"})).value_or(""), "of");
    EXPECT_EQ(session->get(path("osd.cfsid", {"5"})).value_or(""), "cf");
    EXPECT_EQ(session->get(path("osd.vg", {"5"})).value_or(""), "ceph-v");
    EXPECT_EQ(session->get(path("osd.lv", {"5"})).value_or(""), "osd-block-l");
    // The same output names no OSD 6: logged, its keys untouched.
    EXPECT_FALSE(objects.refresh_osd("6"));
    EXPECT_EQ(session->get(path("osd.device", {"6"})).value_or(""), "/dev/disk/by-path/pci-1");
    EXPECT_NE(logged().find("Failed to find updated OSD information via ceph-volume for /dev/disk/by-path/pci-1"),
              std::string::npos);
    session->remove_recursive(path("osd.id", {"5"}));
    session->remove_recursive(path("osd.id", {"6"}));
}

// ------------------------------------------------------------------ RBD locks

TEST_F(Storage, OwnStaleLockIsFreedBeforeAStart) {
    make_image("own");
    lock_image("own", "auto 1234");
    auto calls = std::make_shared<CephCalls>();
    RbdLockService locks(client(), "127.0.0.1", log, calls, 10s);
    EXPECT_EQ(locks.prepare_start("uuid-own", {"vms/own"}), std::nullopt) << logged();
    EXPECT_TRUE(locks_of("own").empty()) << locks_of("own");
    EXPECT_NE(logged().find("Flushing RBD locks"), std::string::npos);
}

TEST_F(Storage, AnotherHostsLockFailsTheStartWithTheReferenceReasonAndStays) {
    make_image("foreign");
    lock_image("foreign", "auto 99");
    auto calls = std::make_shared<CephCalls>();
    RbdLockService locks(client(), "10.200.0.7", log, calls, 10s);
    auto reason = locks.prepare_start("uuid-f", {"", "vms/foreign"});
    ASSERT_TRUE(reason);
    EXPECT_EQ(*reason, "Could not safely free RBD lock auto 99 (127.0.0.1) on volume vms/foreign; stop VM and flush "
                       "locks manually");
    EXPECT_EQ(locks_of("foreign").size(), 1u);
}

TEST_F(Storage, ForcedFreeingAfterAFenceFreesEveryLockWhoeverHoldsIt) {
    make_image("fenced");
    lock_image("fenced", "auto 5");
    auto calls = std::make_shared<CephCalls>();
    RbdLockService locks(client(), "10.200.0.7", log, calls, 10s);
    EXPECT_EQ(locks.free_all("uuid-x", {"vms/fenced"}), std::nullopt);
    EXPECT_TRUE(locks_of("fenced").empty());
    // Then a start elsewhere finds nothing to refuse.
    EXPECT_EQ(locks.prepare_start("uuid-x", {"vms/fenced"}), std::nullopt);
}

// The node task vm.flush_locks, queued and run through a real task runner:
// refused while the VM runs, then every lock of its volumes freed.
TEST_F(Storage, FlushLocksTaskFreesAStoppedVmsLocksAndRefusesARunningOne) {
    make_image("flushme");
    lock_image("flushme", "auto 77");
    std::string uuid = "f1a5e0c0-0000-4000-8000-00000000f1a5";
    std::string vm = pvc::test::unique_name("flushvm");
    session->write({{path("domain.name", {uuid}), vm},
                    {path("domain.state", {uuid}), "start"},
                    {path("domain.node", {uuid}), node},
                    {path("domain.storage.volumes", {uuid}), "vms/flushme"}});
    auto calls = std::make_shared<CephCalls>();
    auto locks = std::make_shared<RbdLockService>(client(), "10.200.0.7", log, calls, 10s);
    auto runner = std::make_shared<pvc::tasks::Runner>(pvc::zk::Session::connect({zk->hosts()}), node, log);
    auto handle = runner->handle("vm.flush_locks", flush_locks_task(session, locks, log));
    runner->start();
    auto done = [&](const std::string& id) {
        pvc::tasks::Progress p;
        eventually([&] {
            p = pvc::tasks::progress(*session, id);
            return p.state == "SUCCESS" || p.state == "FAILURE";
        }, 30s);
        return p;
    };
    nlohmann::json kwargs{{"domain", vm}, {"force_unlock", false}};
    auto refused = done(pvc::tasks::submit(*session, "vm.flush_locks", node, kwargs).id);
    EXPECT_EQ(refused.state, "FAILURE");
    EXPECT_EQ(refused.status, "TaskFailure: VM state start not in [stop, disable, fail] and not forcing");
    EXPECT_EQ(locks_of("flushme").size(), 1u);
    session->write(path("domain.state", {uuid}), "stop");
    auto flushed = done(pvc::tasks::submit(*session, "vm.flush_locks", node, kwargs).id);
    EXPECT_EQ(flushed.state, "SUCCESS") << flushed.status << logged();
    EXPECT_EQ(flushed.status, "Successfully flushed RBD locks for VM " + vm);
    EXPECT_TRUE(locks_of("flushme").empty()) << locks_of("flushme");
    runner->stop();
    session->remove_recursive(path("domain.name", {uuid}));
}

TEST_F(Storage, BadVolumeNamesAndMissingVolumesAreSkippedNotFatal) {
    make_image("fine");
    lock_image("fine", "auto 8");
    auto calls = std::make_shared<CephCalls>();
    RbdLockService locks(client(), "127.0.0.1", log, calls, 10s);
    EXPECT_EQ(locks.prepare_start("uuid-b", {"no-slash", "vms/does-not-exist", "vms/fine"}), std::nullopt);
    EXPECT_TRUE(locks_of("fine").empty());
    EXPECT_NE(logged().find("'no-slash' is not pool/volume"), std::string::npos);
    EXPECT_NE(logged().find("cannot list the RBD locks of vms/does-not-exist"), std::string::npos);
    // Forced freeing is all or nothing: a listing failure is an error.
    EXPECT_TRUE(locks.free_all("uuid-b", {"vms/does-not-exist"}));
}

// ------------------------------------------------------------------ RBD volume removal

TEST_F(Storage, VolumeServiceRemovesAnImageWithItsSnapshots) {
    make_image("gone_disk0");
    for (const char* snap : {"s1", "s2"}) {
        auto r = ceph->rbd({"snap", "create", std::string("vms/gone_disk0@") + snap});
        ASSERT_EQ(r.status, 0) << r.err;
    }
    auto calls = std::make_shared<CephCalls>();
    RbdVolumeService volumes(client(), log, calls, 10s, 60s);
    auto r = volumes.remove("vms/gone_disk0");
    EXPECT_EQ(r.outcome, pvc::services::RbdVolumes::Outcome::removed) << r.error << logged();
    auto ls = ceph->rbd({"ls", "vms"});
    ASSERT_EQ(ls.status, 0) << ls.err;
    EXPECT_EQ(ls.out.find("gone_disk0"), std::string::npos) << ls.out;
    EXPECT_NE(logged().find("Removed RBD volume vms/gone_disk0 and its 2 snapshot(s)"), std::string::npos) << logged();
    // Removed once: now absent.
    EXPECT_EQ(volumes.remove("vms/gone_disk0").outcome, pvc::services::RbdVolumes::Outcome::absent);
}

TEST_F(Storage, VolumeServiceReportsAMissingImageOrPoolAsAbsent) {
    auto calls = std::make_shared<CephCalls>();
    RbdVolumeService volumes(client(), log, calls, 10s, 60s);
    EXPECT_EQ(volumes.remove("vms/never-created").outcome, pvc::services::RbdVolumes::Outcome::absent);
    EXPECT_EQ(volumes.remove("nosuchpool/x").outcome, pvc::services::RbdVolumes::Outcome::absent);
}

TEST_F(Storage, VolumeServiceRefusesBadNamesWithoutAskingCeph) {
    make_image("kept");
    auto calls = std::make_shared<CephCalls>();
    RbdVolumeService volumes(client(), log, calls, 10s, 60s);
    for (const std::string& bad : std::vector<std::string>{"", "kept", "vms/", "/kept", "vms/kept/x", "../vms/kept", "vms/..", "vms/.", "vms/kept@s",
                            "vms/ke pt", std::string("vms/kept\n"), std::string("vms/kept\0x", 10), "vms@x/kept",
                            "vms/" + std::string(256, 'k')}) {
        auto r = volumes.remove(bad);
        EXPECT_EQ(r.outcome, pvc::services::RbdVolumes::Outcome::error) << bad;
        EXPECT_NE(r.error.find("is not a valid pool/volume name"), std::string::npos) << r.error;
    }
    EXPECT_EQ(calls->running(), 0u);
    auto ls = ceph->rbd({"ls", "vms"});
    EXPECT_NE(ls.out.find("kept"), std::string::npos) << ls.out;
}

TEST_F(Storage, VolumeServiceFailsOnAProtectedSnapshotAndKeepsTheImage) {
    make_image("prot");
    ASSERT_EQ(ceph->rbd({"snap", "create", "vms/prot@base"}).status, 0);
    auto p = ceph->rbd({"snap", "protect", "vms/prot@base"});
    ASSERT_EQ(p.status, 0) << p.err;
    auto calls = std::make_shared<CephCalls>();
    RbdVolumeService volumes(client(), log, calls, 10s, 60s);
    auto r = volumes.remove("vms/prot");
    EXPECT_EQ(r.outcome, pvc::services::RbdVolumes::Outcome::error);
    EXPECT_NE(r.error.find("removing snapshot vms/prot@base"), std::string::npos) << r.error;
    EXPECT_NE(ceph->rbd({"ls", "vms"}).out.find("prot"), std::string::npos);
    ASSERT_EQ(ceph->rbd({"snap", "unprotect", "vms/prot@base"}).status, 0);
    EXPECT_EQ(volumes.remove("vms/prot").outcome, pvc::services::RbdVolumes::Outcome::removed);
}

TEST_F(Storage, UnreachableCephNeverHoldsTheCallerPastItsDeadline) {
    ClientOptions dead = client();
    // A monitor address where nothing listens.
    auto conf = dir.path() / "dead.conf";
    std::ofstream(conf) << "[global]\nmon host = 127.0.0.1:9\nkeyring = " << ceph->keyring().string() << "\n";
    dead.config_file = conf.string();
    dead.keyring = ceph->keyring().string();
    dead.mount_timeout = 8s;  // librados would wait this long; our deadline is shorter
    auto calls = std::make_shared<CephCalls>();
    RbdLockService locks(dead, "127.0.0.1", log, calls, 1500ms);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(locks.free_all("uuid-d", {"vms/x"}));
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(took, pvc::test::scaled(5s)) << "bounded by the 1.5 s deadline";
}

}  // namespace

// ------------------------------------------------------------------ tier 2: pvcnoded loading the module

namespace {

void replace(std::string& s, const std::string& from, const std::string& to) {
    auto p = s.find(from);
    ASSERT_NE(p, std::string::npos) << from;
    s.replace(p, from.size(), to);
}

class StorageDaemon : public Storage {
protected:
    // A coordinator (or not) with storage, keepalive 1 s, Ceph calls bounded
    // at `ceph_timeout` s, no ceph-mon@/ceph-mgr@ units (the lab runs them);
    // its storage address is `address` (127.0.0.x/8 on a storage network).
    std::filesystem::path daemon_config(const std::string& name, const std::string& address, bool hypervisor,
                                        int ceph_timeout = 3) {
        pvc::test::NodeConfigOptions o;
        o.node = name;
        o.coordinators = "[" + name + ":" + std::to_string(zk->port()) + "]";
        o.base_dir = dir.path() / name;
        o.module_dir = pvc::test::build_dir() + "/modules";
        o.enable_storage = true;
        o.enable_hypervisor = hypervisor;
        o.extra_system_yaml = "      storage:\n"
                              "        ceph_config_file: " + ceph->conf().string() + "\n"
                              "        ceph_admin_keyring: " + ceph->keyring().string() + "\n"
                              "        ceph_timeout: " + std::to_string(ceph_timeout) + "\n"
                              "        start_ceph_daemons: false\n"
                              "      networking:\n"
                              "        storage:\n"
                              "          device: lo\n"
                              "          mtu: 1500\n"
                              "          address: " + address + "\n"
                              + (hypervisor ? "    hypervisor:\n      libvirt_uri: \"test:///default\"\n" : "");
        std::string yaml = pvc::test::node_config_yaml(o);
        replace(yaml, "    networks:\n", "    networks:\n      storage:\n        domain: storage.local\n"
                                          "        network: 127.0.0.0/8\n        floating_ip: 127.0.0.254/8\n");
        std::filesystem::create_directories(o.base_dir);
        auto file = o.base_dir / "pvcnoded.yaml";
        std::ofstream(file) << yaml;
        return file;
    }
    std::string log_of(const std::string& name) { return slurp(dir.path() / name / "log" / "pvc.log"); }
    std::string daemon_state(const std::string& name) {
        return session->get(path("node.state.daemon", {name})).value_or("");
    }
};

}  // namespace

TEST_F(StorageDaemon, PrimaryPublishesAndKeepsItsKeepaliveIntervalThroughAMonitorOutage) {
    // Only hv1..hv9 resolve inside the daemon's private /etc/hosts.
    const std::string name = "hv1";
    define_pool("vms");
    define_osd("0", name);
    auto cfg = daemon_config(name, "127.0.0.1/8", false, 3);
    pvc::test::DaemonProcess d(name, cfg, dir.path() / "daemon.out");
    ASSERT_TRUE(eventually([&] { return daemon_state(name) == "run"; }, 60s)) << slurp(dir.path() / "daemon.out.err")
                                                                               << log_of(name);
    ASSERT_TRUE(eventually([&] { return session->get(path("node.state.router", {name})).value_or("") == "primary"; }, 30s));
    // The primary's figures arrive; the keepalive line counts this node's OSD.
    pvc::zk::Stat before;
    ASSERT_TRUE(eventually([&] {
        auto h = session->get(path("base.storage.health"), &before);
        return h && nlohmann::json::accept(*h) && h->find("HEALTH_") != std::string::npos &&
               session->get(path("osd.stats", {"0"})).value_or("").find("exists,up") != std::string::npos;
    }, 30s)) << log_of(name);
    EXPECT_TRUE(eventually([&] { return log_of(name).find("OSDs: 1") != std::string::npos; }, 10s)) << log_of(name);
    EXPECT_EQ(log_of(name).find("No storage network address"), std::string::npos);

    // Every keepalive write, as a watcher sees it.
    std::mutex m;
    std::vector<std::chrono::steady_clock::time_point> beats;
    auto watch = session->watch_data(path("node.keepalive", {name}), [&](const auto&, const pvc::zk::Stat&) {
        std::lock_guard g(m);
        beats.push_back(std::chrono::steady_clock::now());
    });
    ceph->stop_mon();
    auto outage_start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(12s);
    std::string health_during = session->get(path("base.storage.health")).value_or("");
    ceph->start_mon();
    std::chrono::milliseconds max_gap{0};
    {
        std::lock_guard g(m);
        for (size_t i = 1; i < beats.size(); ++i)
            if (beats[i] > outage_start)
                max_gap = std::max(max_gap, std::chrono::duration_cast<std::chrono::milliseconds>(beats[i] - beats[i - 1]));
        EXPECT_GE(beats.size(), 8u) << "keepalives during a 12 s outage at a 1 s interval";
    }
    // Each Ceph call is bounded at 3 s (+1 s): a keepalive held by one would
    // show a gap of 4 s or more; the keepalive keeps its 1 s interval.
    EXPECT_LT(max_gap, pvc::test::scaled(2500ms)) << "max keepalive gap " << max_gap.count() << " ms";
    // Previous figures stay (still the JSON of a healthy cluster), one warning.
    EXPECT_TRUE(nlohmann::json::accept(health_during));
    EXPECT_NE(health_during.find("HEALTH_"), std::string::npos);
    // Figures resume once the monitor is back.
    EXPECT_TRUE(eventually([&] {
        pvc::zk::Stat now;
        session->get(path("base.storage.health"), &now);
        return now.mzxid > before.mzxid && log_of(name).find("Ceph statistics collected again") != std::string::npos;
    }, 60s)) << log_of(name);
    EXPECT_EQ(count_of(log_of(name), "previous Ceph figures kept"), 1u) << log_of(name);
    watch.reset();
    ceph->wait_health_ok();
    // (The daemon is killed by its destructor: a sole primary's orderly stop
    // waits two minutes for a successor.)
}

TEST_F(StorageDaemon, VmStartFreesOwnStaleLockRefusesAForeignOneAndStartsElsewhereAfterForcedFreeing) {
    const std::string a = "hv2", b = "hv3";
    make_image("vmdisk");
    make_image("vmdisk2");
    // A's QEMU held vmdisk when A died: the lock's address is A's (127.0.0.1).
    lock_image("vmdisk", "auto 140234567890");
    pvc::test::DaemonProcess da(a, daemon_config(a, "127.0.0.1/8", true), dir.path() / "a.out");
    pvc::test::DaemonProcess db(b, daemon_config(b, "127.0.0.2/8", true), dir.path() / "b.out");
    ASSERT_TRUE(eventually([&] { return daemon_state(a) == "run" && daemon_state(b) == "run"; }, 60s))
        << slurp(dir.path() / "a.out.err") << slurp(dir.path() / "b.out.err");
    for (const auto& n : {a, b}) session->write(path("node.state.domain", {n}), "ready");

    auto define = [&](const std::string& uuid, const std::string& vm, const std::string& volume, const std::string& on) {
        std::string xml = "<domain type='test'><name>" + vm + "</name><uuid>" + uuid +
                          "</uuid><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os>"
                          "<devices><disk type='network' device='disk'><driver name='qemu' type='raw'/>"
                          "<source protocol='rbd' name='" + volume + "'><host name='127.0.0.1' port='6789'/></source>"
                          "<target dev='vda' bus='virtio'/></disk></devices></domain>";
        auto k = [&](std::string_view key) { return path(key, {uuid}); };
        ASSERT_TRUE(session->write({{k("domain.name"), vm}, {k("domain.xml"), xml}, {k("domain.state"), "start"},
                                    {k("domain.profile"), "None"}, {k("domain.stats"), ""}, {k("domain.node"), on},
                                    {k("domain.last_node"), ""}, {k("domain.failed_reason"), ""},
                                    {k("domain.storage.volumes"), volume}, {k("domain.console.log"), ""},
                                    {k("domain.console.vnc"), ""}, {k("domain.meta.autostart"), "False"},
                                    {k("domain.meta.migrate_method"), "none"}, {k("domain.meta.node_selector"), "none"},
                                    {k("domain.meta.node_limit"), ""}, {k("domain.meta.tags"), ""},
                                    {k("domain.migrate.sync_lock"), ""}}));
    };
    auto get = [&](std::string_view key, const std::string& uuid) { return session->get(path(key, {uuid})).value_or(""); };
    auto running_on = [&](const std::string& n, const std::string& uuid) {
        return session->get(path("node.running_domains", {n})).value_or("").find(uuid) != std::string::npos;
    };

    // B is asked to start the VM whose disk A still locks: refused with the reference's reason, lock kept.
    const std::string uuid1 = "5a0e1d2c-0000-4000-8000-0000000000a1";
    define(uuid1, "rbdvm1", "vms/vmdisk", b);
    ASSERT_TRUE(eventually([&] { return get("domain.state", uuid1) == "fail"; }, 30s)) << log_of(b);
    EXPECT_EQ(get("domain.failed_reason", uuid1),
              "Could not safely free RBD lock auto 140234567890 (127.0.0.1) on volume vms/vmdisk; stop VM and flush "
              "locks manually");
    EXPECT_EQ(locks_of("vmdisk").size(), 1u);

    // A is fenced: the coordinator's forced freeing (what fencing calls through
    // the service), then the VM is started on B.
    auto calls = std::make_shared<CephCalls>();
    RbdLockService fencer(client(), "127.0.0.3", log, calls, 10s);
    ASSERT_EQ(fencer.free_all(uuid1, {"vms/vmdisk"}), std::nullopt);
    session->write({{path("domain.state", {uuid1}), "start"}, {path("domain.failed_reason", {uuid1}), ""}});
    EXPECT_TRUE(eventually([&] { return running_on(b, uuid1); }, 30s)) << log_of(b);
    EXPECT_TRUE(locks_of("vmdisk").empty());

    // A's own stale lock (its address) on another disk: freed by A, and the VM starts there.
    lock_image("vmdisk2", "auto 42");
    const std::string uuid2 = "5a0e1d2c-0000-4000-8000-0000000000a2";
    define(uuid2, "rbdvm2", "vms/vmdisk2", a);
    EXPECT_TRUE(eventually([&] { return running_on(a, uuid2); }, 30s)) << log_of(a);
    EXPECT_TRUE(locks_of("vmdisk2").empty());
    EXPECT_NE(get("domain.state", uuid2), "fail") << get("domain.failed_reason", uuid2);
}

TEST_F(StorageDaemon, ApiRemovesAVmWithItsVolumeThroughTheStorageModulesService) {
    // pvcnoded with the storage and the API modules: DELETE
    // /vm?delete_disks=true finds pvc.rbd_volumes.v1 in the daemon's registry.
    const std::string name = "hv4", uuid = "5a0e1d2c-0000-4000-8000-0000000000d1", token = "rbd-t0ken-91c2";
    define_pool("vms");
    make_image("apivm_disk0");
    ASSERT_EQ(ceph->rbd({"snap", "create", "vms/apivm_disk0@s1"}).status, 0);
    session->ensure_path("/ceph/snapshots/vms");
    ASSERT_TRUE(session->write({{path("volume.name", {"vms", "apivm_disk0"}), ""},
                                {path("volume.stats", {"vms", "apivm_disk0"}), "{}"},
                                {"/ceph/snapshots/vms/apivm_disk0", ""},
                                {"/ceph/snapshots/vms/apivm_disk0/s1", ""}}));
    std::string xml = "<domain type='kvm'><name>apivm</name><uuid>" + uuid +
                      "</uuid><memory unit='MiB'>64</memory><vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os>"
                      "<devices><disk type='network' device='disk'><source protocol='rbd' name='vms/apivm_disk0'/>"
                      "<target dev='vda' bus='virtio'/></disk></devices></domain>";
    auto k = [&](std::string_view key) { return path(key, {uuid}); };
    ASSERT_TRUE(session->write({{k("domain.name"), "apivm"}, {k("domain.xml"), xml}, {k("domain.state"), "stop"},
                                {k("domain.node"), name}, {k("domain.storage.volumes"), "vms/apivm_disk0"}}));
    auto cfg = daemon_config(name, "127.0.0.1/8", false, 3);
    const std::string api_port = std::to_string(pvc::test::reserve_port());
    {
        std::string yaml = slurp(cfg);
        replace(yaml, "enable_api: false", "enable_api: true");
        replace(yaml, "  cluster:\n", "  api:\n    listen_address: 127.0.0.77\n    listen_port: " + api_port + "\n"
                                      "    authentication:\n      enabled: true\n      tokens:\n"
                                      "        - description: tests\n          token: " + token + "\n  cluster:\n");
        std::ofstream(cfg) << yaml;
    }
    session->write(path("base.config.primary_node"), "none");
    pvc::test::DaemonProcess d(name, cfg, dir.path() / "api.out");
    ASSERT_TRUE(eventually([&] { return daemon_state(name) == "run"; }, 60s)) << slurp(dir.path() / "api.out.err")
                                                                               << log_of(name);
    ASSERT_TRUE(eventually([&] { return session->get(path("node.state.router", {name})).value_or("") == "primary"; }, 60s))
        << log_of(name);
    auto del = [&] {
        return pvc::test::run_python(
            "import sys, urllib.request, urllib.error\n"
            "r = urllib.request.Request('http://127.0.0.77:' + sys.argv[2] + '/api/v1/vm/apivm?delete_disks=true',"
            " method='DELETE', headers={'X-Api-Key': sys.argv[1]})\n"
            "try:\n    resp = urllib.request.urlopen(r, timeout=60); sys.stdout.write(str(resp.status) + ' ' + resp.read().decode())\n"
            "except urllib.error.HTTPError as e:\n    sys.stdout.write(str(e.code) + ' ' + e.read().decode())\n",
            {token, api_port});
    };
    pvc::test::ProcResult r{};
    ASSERT_TRUE(eventually([&] {
        r = del();
        return r.status == 0 && r.out.rfind("200 ", 0) == 0;
    }, 30s)) << r.out << r.err << log_of(name);
    EXPECT_NE(r.out.find("Removed VM 'apivm' and its disks from the cluster."), std::string::npos) << r.out;
    auto ls = ceph->rbd({"ls", "vms"});
    EXPECT_EQ(ls.out.find("apivm_disk0"), std::string::npos) << ls.out;
    EXPECT_FALSE(session->exists(path("volume.name", {"vms", "apivm_disk0"})));
    EXPECT_FALSE(session->exists("/ceph/snapshots/vms/apivm_disk0"));
    EXPECT_FALSE(session->exists(path("domain.name", {uuid})));
    EXPECT_NE(log_of(name).find("Removed RBD volume vms/apivm_disk0 and its 1 snapshot(s)"), std::string::npos);
}
