// zk::Session against a real ZooKeeper: reads, the reference's write(),
// transactions, ephemerals, kazoo-style watches.
#include <pvc/test/zk_server.hpp>
#include <pvc/zk.hpp>
#include <pvc/zk_sync.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

using namespace pvc;
using namespace std::chrono_literals;
using test::eventually;

namespace {

class ZkSession : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        session_ = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
        root_ = "/" + test::unique_name("zks");
        session_->ensure_path(root_);
    }
    void TearDown() override {
        if (session_) session_->close();
    }
    std::string key(const std::string& k) const { return root_ + "/" + k; }

    static test::ZkServer* server_;
    std::shared_ptr<zk::Session> session_;
    std::string root_;
};
test::ZkServer* ZkSession::server_ = nullptr;

}  // namespace

TEST_F(ZkSession, ConnectFailsWithTimeoutNamingHosts) {
    auto t0 = std::chrono::steady_clock::now();
    try {
        zk::Session::connect({"127.0.0.1:1", 2s, 1500ms, 1s});
        FAIL() << "connect to a closed port succeeded";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::timeout);
        EXPECT_NE(std::string(e.what()).find("127.0.0.1:1"), std::string::npos) << e.what();
    }
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST_F(ZkSession, ReadsReturnAbsentForMissingKeys) {
    EXPECT_EQ(session_->get(key("missing")), std::nullopt);
    EXPECT_FALSE(session_->exists(key("missing")));
    EXPECT_EQ(session_->children(key("missing")), std::nullopt);
}

TEST_F(ZkSession, WriteCreatesAbsentKeysAndSetsPresentOnes) {
    ASSERT_TRUE(session_->write({{key("a"), "1"}, {key("a/b"), "2"}}));  // parent created earlier in the same multi
    EXPECT_EQ(session_->get(key("a")), "1");
    EXPECT_EQ(session_->get(key("a/b")), "2");
    zk::Stat st;
    ASSERT_TRUE(session_->write({{key("a"), "one"}, {key("c"), "3"}}));
    EXPECT_EQ(session_->get(key("a"), &st), "one");
    EXPECT_EQ(st.version, 1);
    EXPECT_EQ(session_->get(key("c")), "3");
    // Binary-safe and empty values.
    std::string bin("x\0y", 3);
    ASSERT_TRUE(session_->write(key("bin"), bin));
    EXPECT_EQ(session_->get(key("bin")), bin);
    ASSERT_TRUE(session_->write(key("bin"), ""));
    EXPECT_EQ(session_->get(key("bin")), "");
}

TEST_F(ZkSession, GetManyReadsEveryPathInOrderWithItsStat) {
    ASSERT_TRUE(session_->write({{key("m1"), "one"}, {key("m2"), ""}}));
    ASSERT_TRUE(session_->write(key("m1"), "uno"));
    std::vector<zk::Stat> stats;
    auto got = session_->get_many({key("m1"), key("absent"), key("m2"), key("m1")}, &stats);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0], "uno");
    EXPECT_EQ(got[1], std::nullopt);
    EXPECT_EQ(got[2], "");
    EXPECT_EQ(got[3], "uno");
    ASSERT_EQ(stats.size(), 4u);
    EXPECT_EQ(stats[0].version, 1);
    EXPECT_EQ(stats[2].version, 0);
    EXPECT_EQ(stats[3].version, 1);
    EXPECT_TRUE(session_->get_many({}).empty());
    // A large batch answers as the single reads do.
    std::vector<std::string> many;
    for (int i = 0; i < 200; ++i) many.push_back(key(i % 2 ? "m1" : "m2"));
    auto all = session_->get_many(many);
    ASSERT_EQ(all.size(), many.size());
    for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(all[i], i % 2 ? "uno" : "") << i;
}

TEST_F(ZkSession, GetManyOnAClosedSessionThrows) {
    session_->close();
    try {
        session_->get_many({key("m1"), key("m2")});
        FAIL() << "get_many on a closed session succeeded";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::closed);
    }
}

// zk::sync: one round trip, then another client's committed write is read;
// on a closed session it throws as a read does.
TEST_F(ZkSession, SyncThenReadSeesAnotherClientsWriteAndThrowsWhenClosed) {
    auto other = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
    ASSERT_TRUE(other->write(key("synced"), "v1"));
    zk::sync(*session_);
    zk::sync(*session_, key("synced"));
    EXPECT_EQ(session_->get(key("synced")), "v1");
    other->close();
    session_->close();
    try {
        zk::sync(*session_);
        FAIL() << "sync on a closed session succeeded";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::closed);
    }
}

TEST_F(ZkSession, WriteFailsWholeMultiWhenParentMissing) {
    EXPECT_FALSE(session_->write({{key("x"), "1"}, {key("nope/child"), "2"}}));
    EXPECT_FALSE(session_->exists(key("x")));  // all-or-nothing
    EXPECT_FALSE(session_->exists(key("nope")));
}

TEST_F(ZkSession, TransactionIsAllOrNothing) {
    ASSERT_TRUE(session_->write(key("t"), "orig"));
    zk::Transaction tx(*session_);
    tx.set(key("t"), "changed").create(key("t2"), "new").remove(key("does-not-exist"));
    EXPECT_EQ(tx.commit(), zk::Status::no_node);
    EXPECT_EQ(session_->get(key("t")), "orig");
    EXPECT_FALSE(session_->exists(key("t2")));

    zk::Transaction ok(*session_);
    ok.set(key("t"), "changed").create(key("t2"), "new").check(key("t"), 1);
    EXPECT_EQ(ok.commit(), zk::Status::ok);
    EXPECT_EQ(session_->get(key("t")), "changed");
    EXPECT_EQ(session_->get(key("t2")), "new");

    zk::Transaction dup(*session_);
    dup.create(key("t2"), "again");
    EXPECT_EQ(dup.commit(), zk::Status::node_exists);
}

TEST_F(ZkSession, ConcurrentWriterBetweenReadAndCommitFailsTheCheck) {
    ASSERT_TRUE(session_->write(key("v"), "0"));
    zk::Stat st;
    ASSERT_TRUE(session_->exists(key("v"), &st));
    // The reference's pattern built by hand: set(-1) + check(v+1) ...
    zk::Transaction tx(*session_);
    tx.set(key("v"), "mine", -1).check(key("v"), st.version + 1);
    // ... and another client writes in between.
    auto other = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
    ASSERT_TRUE(other->write(key("v"), "theirs"));
    EXPECT_EQ(tx.commit(), zk::Status::bad_version);
    EXPECT_EQ(session_->get(key("v")), "theirs");
}

TEST_F(ZkSession, CreateSequentialAndRemoveRecursive) {
    auto p = session_->create(key("seq-"), "d", false, true);
    EXPECT_EQ(p.size(), key("seq-").size() + 10);
    session_->ensure_path(key("deep/er/est"));
    ASSERT_TRUE(session_->write(key("deep/er/est/leaf"), "x"));
    EXPECT_TRUE(session_->remove_recursive(key("deep")));
    EXPECT_FALSE(session_->exists(key("deep")));
    EXPECT_FALSE(session_->remove_recursive(key("deep")));
}

TEST_F(ZkSession, ChildrenHideLockContenders) {
    ASSERT_TRUE(session_->write({{key("p"), ""}, {key("p/real"), ""}}));
    session_->create(key("p/0123456789abcdef0123456789abcdef__lock__"), "", true, true);
    session_->create(key("p/0123456789abcdef0123456789abcdef__rlock__"), "", true, true);
    EXPECT_EQ(session_->children(key("p")), std::vector<std::string>{"real"});
    EXPECT_EQ(session_->raw_children(key("p"))->size(), 3u);
}

TEST_F(ZkSession, EphemeralVanishesWithTheSessionAndIsExclusive) {
    auto other = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
    ASSERT_TRUE(other->create_ephemeral(key("eph"), "theirs"));
    EXPECT_FALSE(session_->create_ephemeral(key("eph"), "mine"));
    zk::Stat st;
    EXPECT_EQ(session_->get(key("eph"), &st), "theirs");
    EXPECT_EQ(st.ephemeral_owner, other->session_id());
    other->close();
    other->close();  // idempotent
    EXPECT_FALSE(session_->exists(key("eph")));
    EXPECT_TRUE(session_->create_ephemeral(key("eph"), "mine"));
    session_->remove_ephemeral(key("eph"));
    EXPECT_FALSE(session_->exists(key("eph")));
}

TEST_F(ZkSession, OperationsOnClosedSessionFailFast) {
    session_->close();
    auto t0 = std::chrono::steady_clock::now();
    try {
        session_->get(key("x"));
        FAIL() << "read on a closed session succeeded";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::closed);
    }
    EXPECT_FALSE(session_->write(key("x"), "1"));
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

// ---------------------------------------------------------------- watches

TEST_F(ZkSession, DataWatchFiresAtOnceAndOnEveryChange) {
    std::mutex m;
    std::vector<std::optional<std::string>> seen;
    auto w = session_->watch_data(key("w"), [&](const std::optional<std::string>& d, const zk::Stat&) {
        std::lock_guard l(m);
        seen.push_back(d);
    });
    {
        std::lock_guard l(m);
        ASSERT_EQ(seen.size(), 1u);  // called before watch_data returned
        EXPECT_EQ(seen[0], std::nullopt);
    }
    ASSERT_TRUE(session_->write(key("w"), "1"));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.size() == 2; }));
    ASSERT_TRUE(session_->write(key("w"), "2"));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.size() == 3; }));
    EXPECT_TRUE(session_->remove_recursive(key("w")));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.size() == 4; }));
    ASSERT_TRUE(session_->write(key("w"), "reborn"));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.size() == 5; }));
    std::lock_guard l(m);
    EXPECT_EQ(seen[1], "1");
    EXPECT_EQ(seen[2], "2");
    EXPECT_EQ(seen[3], std::nullopt);
    EXPECT_EQ(seen[4], "reborn");
}

TEST_F(ZkSession, DataWatchAlwaysDeliversTheLastValueUnderRapidWrites) {
    ASSERT_TRUE(session_->write(key("rapid"), "start"));
    std::mutex m;
    std::string last;
    int calls = 0;
    auto w = session_->watch_data(key("rapid"), [&](const std::optional<std::string>& d, const zk::Stat&) {
        std::lock_guard l(m);
        last = d.value_or("<absent>");
        ++calls;
    });
    auto writer = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
    for (int i = 0; i < 500; ++i) {
        zk::Transaction tx(*writer);
        tx.set(key("rapid"), std::to_string(i));
        ASSERT_EQ(tx.commit(), zk::Status::ok);
    }
    EXPECT_TRUE(eventually([&] { std::lock_guard l(m); return last == "499"; }, 10s));
    std::this_thread::sleep_for(300ms);
    std::lock_guard l(m);
    EXPECT_EQ(last, "499");
    EXPECT_GE(calls, 2);
    EXPECT_LE(calls, 501);
}

TEST_F(ZkSession, CancelledWatchStopsCallingBack) {
    std::atomic<int> calls{0};
    auto w = session_->watch_data(key("c"), [&](const auto&, const auto&) { ++calls; });
    ASSERT_TRUE(session_->write(key("c"), "1"));
    ASSERT_TRUE(eventually([&] { return calls == 2; }));
    w.reset();
    ASSERT_TRUE(session_->write(key("c"), "2"));
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(calls, 2);
}

TEST_F(ZkSession, ChildrenWatchIgnoresLockContenders) {
    ASSERT_TRUE(session_->write(key("kids"), ""));
    std::mutex m;
    std::vector<std::optional<std::vector<std::string>>> seen;
    auto w = session_->watch_children(key("kids"), [&](const std::optional<std::vector<std::string>>& k) {
        std::lock_guard l(m);
        seen.push_back(k);
    });
    ASSERT_TRUE(session_->write(key("kids/b"), ""));
    ASSERT_TRUE(session_->write(key("kids/a"), ""));
    ASSERT_TRUE(eventually([&] {
        std::lock_guard l(m);
        return seen.back() == std::vector<std::string>{"a", "b"};
    }));
    size_t before;
    {
        std::lock_guard l(m);
        before = seen.size();
    }
    // A lock contender appearing and vanishing changes nothing visible.
    auto c = session_->create(key("kids/ffffffffffffffffffffffffffffffff__lock__"), "", true, true);
    zk::Transaction tx(*session_);
    tx.remove(c);
    ASSERT_EQ(tx.commit(), zk::Status::ok);
    ASSERT_TRUE(session_->write(key("kids/c"), ""));
    ASSERT_TRUE(eventually([&] {
        std::lock_guard l(m);
        return seen.back() == std::vector<std::string>{"a", "b", "c"};
    }));
    std::lock_guard l(m);
    for (const auto& k : seen) {
        if (!k) continue;
        for (const auto& n : *k) EXPECT_EQ(n.find("__lock__"), std::string::npos) << n;
    }
    EXPECT_EQ(seen.size(), before + 1);  // only the real child caused a call
}

TEST_F(ZkSession, ChildrenWatchSeesDeleteAndRecreate) {
    std::mutex m;
    std::vector<std::optional<std::vector<std::string>>> seen;
    auto w = session_->watch_children(key("dir"), [&](const auto& k) {
        std::lock_guard l(m);
        seen.push_back(k);
    });
    ASSERT_TRUE(session_->write({{key("dir"), ""}, {key("dir/x"), ""}}));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.back() == std::vector<std::string>{"x"}; }));
    ASSERT_TRUE(session_->remove_recursive(key("dir")));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.back() == std::nullopt; }));
    ASSERT_TRUE(session_->write({{key("dir"), ""}, {key("dir/y"), ""}}));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return seen.back() == std::vector<std::string>{"y"}; }));
    std::lock_guard l(m);
    EXPECT_EQ(seen.front(), std::nullopt);
}

TEST_F(ZkSession, CallbacksRunOnOneThreadInOrder) {
    std::mutex m;
    std::set<std::thread::id> threads;
    std::vector<std::string> order;
    auto w1 = session_->watch_data(key("o1"), [&](const auto& d, const auto&) {
        std::lock_guard l(m);
        threads.insert(std::this_thread::get_id());
        if (d) order.push_back("o1=" + *d);
    });
    auto w2 = session_->watch_data(key("o2"), [&](const auto& d, const auto&) {
        std::lock_guard l(m);
        threads.insert(std::this_thread::get_id());
        if (d) order.push_back("o2=" + *d);
    });
    ASSERT_TRUE(session_->write(key("o1"), "a"));
    ASSERT_TRUE(session_->write(key("o2"), "b"));
    ASSERT_TRUE(session_->write(key("o1"), "c"));
    ASSERT_TRUE(eventually([&] { std::lock_guard l(m); return order.size() == 3; }));
    std::lock_guard l(m);
    EXPECT_EQ(order, (std::vector<std::string>{"o1=a", "o2=b", "o1=c"}));
    EXPECT_EQ(threads.size(), 1u);
    EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
}

TEST_F(ZkSession, GarbageDataIsDeliveredNotFatal) {
    std::string garbage;
    for (int i = 0; i < 256; ++i) garbage += static_cast<char>(i);
    std::optional<std::string> got;
    std::mutex m;
    auto w = session_->watch_data(key("g"), [&](const auto& d, const auto&) {
        std::lock_guard l(m);
        got = d;
    });
    ASSERT_TRUE(session_->write(key("g"), garbage));
    EXPECT_TRUE(eventually([&] { std::lock_guard l(m); return got == garbage; }));
    EXPECT_EQ(session_->get(key("g")), garbage);
}

// ZooKeeper closes the connection over a request larger than its
// jute.maxbuffer; the session refuses one itself, so its connection (and
// everything else waiting on it) is never lost over a large value.
TEST_F(ZkSession, ValuesAndRequestsAtTheLimitsAreWritten) {
    std::atomic<int> lost{0};
    auto sub = session_->on_session_event([&](zk::SessionEvent e) {
        if (e != zk::SessionEvent::connected) ++lost;
    });
    std::string big(zk::max_value_bytes, 'v');
    ASSERT_TRUE(session_->write(key("big"), big));
    EXPECT_EQ(session_->get(key("big")), big);
    // Two values whose transaction is exactly max_request_bytes.
    zk::Transaction tx(*session_);
    tx.create(key("a"), std::string(500000, 'a'));
    tx.create(key("b"), "");
    std::size_t room = zk::max_request_bytes - tx.request_bytes();
    zk::Transaction full(*session_);
    full.create(key("a"), std::string(500000, 'a'));
    full.create(key("b"), std::string(room, 'b'));
    ASSERT_EQ(full.request_bytes(), zk::max_request_bytes);
    EXPECT_EQ(full.commit(), zk::Status::ok);
    EXPECT_EQ(session_->get(key("b"))->size(), room);
    EXPECT_EQ(session_->get(key("x")), std::nullopt);  // one more round trip on the same connection
    EXPECT_EQ(lost.load(), 0) << "the connection was never lost";
}

TEST_F(ZkSession, AValueOrARequestOverTheLimitIsRefusedWithoutLosingTheConnection) {
    std::atomic<int> lost{0};
    auto sub = session_->on_session_event([&](zk::SessionEvent e) {
        if (e != zk::SessionEvent::connected) ++lost;
    });
    auto id = session_->session_id();
    std::string over(zk::max_value_bytes + 1, 'v');
    EXPECT_FALSE(session_->write(key("over"), over));
    zk::Transaction one(*session_);
    one.create(key("over"), over);
    EXPECT_EQ(one.commit(), zk::Status::too_large);
    try {
        session_->create(key("over"), over);
        FAIL() << "created";
    } catch (const zk::Error& e) {
        EXPECT_EQ(e.status, zk::Status::too_large);
        EXPECT_NE(std::string(e.what()).find(std::to_string(zk::max_value_bytes)), std::string::npos) << e.what();
    }
    // Two values, each under the value limit, together over the request's.
    zk::Transaction two(*session_);
    two.create(key("a"), std::string(600000, 'a'));
    two.create(key("b"), std::string(600000, 'b'));
    EXPECT_EQ(two.commit(), zk::Status::too_large);
    EXPECT_FALSE(session_->write({{key("a"), std::string(600000, 'a')}, {key("b"), std::string(600000, 'b')}}));
    EXPECT_GT(zk::write_request_bytes({{key("a"), std::string(600000, 'a')}, {key("b"), std::string(600000, 'b')}}),
              zk::max_request_bytes);
    EXPECT_FALSE(session_->exists(key("over")));
    EXPECT_FALSE(session_->exists(key("a")));
    EXPECT_TRUE(session_->write(key("after"), "ok"));  // the same connection serves on
    EXPECT_EQ(session_->get(key("after")), "ok");
    EXPECT_EQ(session_->session_id(), id);
    EXPECT_EQ(lost.load(), 0) << "the connection was never lost";
}
