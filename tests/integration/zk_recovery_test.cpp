// zk::Session surviving failures: disconnection, session expiry, ensemble failover.
#include <pvc/test/zk_server.hpp>
#include <pvc/zk.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <thread>

using namespace pvc;
using namespace std::chrono_literals;
using test::eventually;

namespace {

// Records session events and the values a data watch sees.
struct Recorder {
    std::mutex m;
    std::vector<zk::SessionEvent> events;
    std::vector<std::optional<std::string>> values;
    bool has(zk::SessionEvent e) {
        std::lock_guard l(m);
        return std::find(events.begin(), events.end(), e) != events.end();
    }
    std::optional<std::string> last() {
        std::lock_guard l(m);
        return values.empty() ? std::nullopt : values.back();
    }
    size_t count() {
        std::lock_guard l(m);
        return values.size();
    }
};


}  // namespace

TEST(ZkRecovery, BlockingCallsTimeOutWhileDisconnectedAndSessionResumes) {
    test::ZkServer server;
    auto s = zk::Session::connect({server.hosts(), 6s, 15s, 1s});
    Recorder rec;
    auto sub = s->on_session_event([&](zk::SessionEvent e) {
        std::lock_guard l(rec.m);
        rec.events.push_back(e);
    });
    const std::string key = "/" + test::unique_name("disc");
    ASSERT_TRUE(s->create_ephemeral(key, "alive"));
    auto id = s->session_id();
    server.stop();
    ASSERT_TRUE(eventually([&] { return rec.has(zk::SessionEvent::suspended); }, 10s));
    EXPECT_FALSE(s->connected());
    auto t0 = std::chrono::steady_clock::now();
    try {
        s->get(key);
        ADD_FAILURE() << "read succeeded with the server down";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::timeout) << e.what();
    }
    EXPECT_FALSE(s->write(key + "x", "1"));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 4s);
    server.start();
    ASSERT_TRUE(eventually([&] { return rec.has(zk::SessionEvent::reconnected) ||
                                        rec.has(zk::SessionEvent::expired_recovered); }, 20s));
    EXPECT_TRUE(eventually([&] { return s->connected(); }));
    EXPECT_EQ(s->get(key), "alive");
    if (rec.has(zk::SessionEvent::reconnected)) {
        EXPECT_EQ(s->session_id(), id);
    }
}

TEST(ZkRecovery, ExpiredSessionIsReplacedWithEphemeralsAndWatchesRestored) {
    test::ZkServer server;
    auto s = zk::Session::connect({server.hosts(), 2s, 15s, 5s});
    auto other = zk::Session::connect({server.hosts(), 10s, 15s, 5s});
    const std::string root = "/" + test::unique_name("exp");
    s->ensure_path(root);
    ASSERT_TRUE(s->create_ephemeral(root + "/eph", "mine"));
    ASSERT_TRUE(s->write(root + "/w", "before"));

    Recorder rec;
    auto sub = s->on_session_event([&](zk::SessionEvent e) {
        std::lock_guard l(rec.m);
        rec.events.push_back(e);
    });
    auto w = s->watch_data(root + "/w", [&](const std::optional<std::string>& d, const zk::Stat&) {
        std::lock_guard l(rec.m);
        rec.values.push_back(d);
    });
    std::vector<std::string> kids_seen;
    std::mutex km;
    auto cw = s->watch_children(root, [&](const auto& k) {
        std::lock_guard l(km);
        kids_seen = k.value_or(std::vector<std::string>{});
    });
    ASSERT_EQ(rec.count(), 1u);
    const int64_t old_id = s->session_id();

    // Expire it the classic way: a second client takes over the session (same id and
    // password) and closes it. Done on the wire in one connection, because a full client
    // (kazoo) and ours keep stealing the session back from each other.
    auto r = test::close_session(server.port(), *s);
    ASSERT_EQ(r.status, 0) << r.err;

    ASSERT_TRUE(eventually([&] { return rec.has(zk::SessionEvent::expired_recovered); }, 20s)) << [&] {
        std::lock_guard l(rec.m);
        std::string ev;
        for (auto e : rec.events) ev += std::string(zk::to_string(e)) + " ";
        return "events: " + ev + " session " + std::to_string(s->session_id()) + " was " + std::to_string(old_id) +
               " connected " + std::to_string(s->connected()) + " script: " + r.err;
    }();
    EXPECT_NE(s->session_id(), old_id);
    EXPECT_TRUE(s->connected());
    // Ephemeral re-created, owned by the new session.
    zk::Stat st;
    EXPECT_EQ(other->get(root + "/eph", &st), "mine");
    EXPECT_EQ(st.ephemeral_owner, s->session_id());
    // Each watch fired once with the current value on recovery ...
    EXPECT_GE(rec.count(), 2u);
    EXPECT_EQ(rec.last(), "before");
    // ... and keeps firing on new changes.
    ASSERT_TRUE(other->write(root + "/w", "after"));
    EXPECT_TRUE(eventually([&] { return rec.last() == "after"; }));
    ASSERT_TRUE(other->write(root + "/new", ""));
    EXPECT_TRUE(eventually([&] {
        std::lock_guard l(km);
        return std::find(kids_seen.begin(), kids_seen.end(), "new") != kids_seen.end();
    }));
    // Plain operations work on the new session.
    EXPECT_TRUE(s->write(root + "/w", "ours"));
    EXPECT_EQ(other->get(root + "/w"), "ours");
}

// Watch events queued on the session's event thread when the session expires
// must not each wait an operation timeout for a connection that only a later
// task on that same thread can open: 200 queued re-reads at 2 s each held the
// recovery for minutes.
TEST(ZkRecovery, ManyQueuedWatchEventsDoNotHoldUpAnExpiredSessionsRecovery) {
    test::ZkServer server;
    auto s = zk::Session::connect({server.hosts(), 2s, 15s, 2s});
    auto other = zk::Session::connect({server.hosts(), 10s, 15s, 5s});
    const std::string root = "/" + test::unique_name("queued");
    constexpr int n = 200;
    // The keys are written by the other session (5 s per operation): `s`
    // answers within 2 s, which a loaded machine can miss for a plain write,
    // and only its recovery is under test.
    other->ensure_path(root);
    for (int i = 0; i < n; ++i) ASSERT_TRUE(other->write(root + "/k" + std::to_string(i), "before"));
    ASSERT_TRUE(other->write(root + "/gate", "open"));

    Recorder rec;
    auto sub = s->on_session_event([&](zk::SessionEvent e) {
        std::lock_guard l(rec.m);
        rec.events.push_back(e);
    });
    std::mutex vm;
    std::map<int, std::string> seen;
    std::vector<std::shared_ptr<zk::Watch>> watches;
    for (int i = 0; i < n; ++i)
        watches.push_back(s->watch_data(root + "/k" + std::to_string(i),
                                        [&, i](const std::optional<std::string>& d, const zk::Stat&) {
                                            std::lock_guard l(vm);
                                            seen[i] = d.value_or("<absent>");
                                        }));
    // The gate's callback holds the event thread while the session is taken
    // over, so the keys' change events queue up behind it.
    std::atomic<bool> blocking{false}, release{false};
    auto gate = s->watch_data(root + "/gate", [&](const std::optional<std::string>& d, const zk::Stat&) {
        if (d != "shut") return;
        blocking = true;
        for (int i = 0; i < 300 && !release; ++i) std::this_thread::sleep_for(50ms);
    });
    ASSERT_TRUE(other->write(root + "/gate", "shut"));
    ASSERT_TRUE(eventually([&] { return blocking.load(); }, 10s));
    zk::Transaction t(*other);
    for (int i = 0; i < n; ++i) t.set(root + "/k" + std::to_string(i), "after");
    ASSERT_EQ(t.commit(), zk::Status::ok);
    auto r = test::close_session(server.port(), *s);
    ASSERT_EQ(r.status, 0) << r.err;
    release = true;

    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return rec.has(zk::SessionEvent::expired_recovered); }, 30s));
    EXPECT_TRUE(eventually([&] {
        std::lock_guard l(vm);
        return std::all_of(seen.begin(), seen.end(), [](const auto& kv) { return kv.second == "after"; }) &&
               seen.size() == size_t(n);
    }, 10s));
    std::cout << "recovered and every watch delivered in "
              << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count()
              << " ms\n";
    // The watches keep watching on the new session.
    ASSERT_TRUE(other->write(root + "/k7", "later"));
    EXPECT_TRUE(eventually([&] {
        std::lock_guard l(vm);
        return seen[7] == "later";
    }));
}

TEST(ZkRecovery, EnsembleFailoverKeepsTheSession) {
    test::ZkEnsemble ens(3);
    auto s = zk::Session::connect({ens.hosts(), 6s, 15s, 10s});
    Recorder rec;
    auto sub = s->on_session_event([&](zk::SessionEvent e) {
        std::lock_guard l(rec.m);
        rec.events.push_back(e);
    });
    const std::string root = "/" + test::unique_name("ens");
    s->ensure_path(root);
    ASSERT_TRUE(s->create_ephemeral(root + "/eph", "x"));
    auto w = s->watch_data(root + "/w", [&](const std::optional<std::string>& d, const zk::Stat&) {
        std::lock_guard l(rec.m);
        rec.values.push_back(d);
    });
    const int64_t id = s->session_id();

    int leader = ens.leader();
    ASSERT_GE(leader, 0);
    ens.kill(leader);  // every client of the ensemble loses its connection (followers drop theirs too)

    auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(eventually([&] { return s->write(root + "/w", "after-failover"); }, 20s));
    auto failover = std::chrono::steady_clock::now() - t0;
    EXPECT_LT(failover, 15s);
    std::cout << "write succeeded " << std::chrono::duration_cast<std::chrono::milliseconds>(failover).count()
              << " ms after killing the leader\n";
    EXPECT_EQ(s->session_id(), id);
    EXPECT_FALSE(rec.has(zk::SessionEvent::expired_recovered));
    EXPECT_EQ(s->get(root + "/eph"), "x");
    EXPECT_TRUE(eventually([&] { return rec.last() == "after-failover"; }));

    // The killed member comes back and serves again.
    ens.start(leader);
    ens.wait_quorum(30s);
    auto direct = zk::Session::connect({ens.host(leader), 6s, 15s, 10s});
    EXPECT_TRUE(eventually([&] { return direct->get(root + "/w") == std::optional<std::string>("after-failover"); }));
}
