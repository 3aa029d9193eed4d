// zk::Lock: kazoo Lock/WriteLock/ReadLock semantics (docs/wire-contract.md §4.1),
// among our own locks and against python3-kazoo on the same keys.
#include <pvc/test/zk_server.hpp>
#include <pvc/zk.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>
#include <stop_token>
#include <regex>

using namespace pvc;
using namespace std::chrono_literals;
using test::eventually;
using zk::Lock;
using zk::LockKind;

namespace {

class ZkLock : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        a_ = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
        b_ = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
        key_ = "/" + test::unique_name("lock");
    }
    size_t contenders() { return a_->raw_children(key_).value_or(std::vector<std::string>{}).size(); }

    // Runs a kazoo script with argv[1] = hosts, argv[2] = lock key.
    test::ProcResult kazoo(const std::string& body, std::vector<std::string> extra = {}) {
        std::string script =
            "import sys, time\n"
            "from kazoo.client import KazooClient\n"
            "from kazoo.exceptions import LockTimeout\n"
            "zk = KazooClient(hosts=sys.argv[1]); zk.start(timeout=15)\n"
            "key = sys.argv[2]\n" +
            body + "\nzk.stop(); zk.close()\n";
        std::vector<std::string> args{server_->hosts(), key_};
        args.insert(args.end(), extra.begin(), extra.end());
        return test::run_python(script, args, 60s);
    }

    static test::ZkServer* server_;
    std::shared_ptr<zk::Session> a_, b_;
    std::string key_;
};
test::ZkServer* ZkLock::server_ = nullptr;

const std::regex kContender("^[0-9a-f]{32}__r?lock__\\d{10}$");

}  // namespace

TEST_F(ZkLock, ExclusiveExcludesAndTimeoutRemovesOurContender) {
    Lock la(a_, key_, LockKind::exclusive), lb(b_, key_, LockKind::exclusive);
    ASSERT_TRUE(la.acquire(30s));
    EXPECT_TRUE(std::regex_match(la.contender(), kContender)) << la.contender();
    EXPECT_NE(la.contender().find("__lock__"), std::string::npos);
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(lb.acquire(400ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 400ms);
    EXPECT_FALSE(lb.held());
    EXPECT_EQ(contenders(), 1u);  // the timed-out contender is gone
    la.release();
    EXPECT_EQ(contenders(), 0u);
    EXPECT_TRUE(lb.acquire(30s));
}

TEST_F(ZkLock, WaiterGetsTheLockWhenHolderReleases) {
    Lock la(a_, key_, LockKind::exclusive), lb(b_, key_, LockKind::exclusive);
    ASSERT_TRUE(la.acquire());
    auto waiter = std::async(std::launch::async, [&] { return lb.acquire(); });
    ASSERT_TRUE(eventually([&] { return contenders() == 2; }));
    EXPECT_EQ(waiter.wait_for(200ms), std::future_status::timeout);
    auto t0 = std::chrono::steady_clock::now();
    la.release();
    ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
    EXPECT_TRUE(waiter.get());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
}

TEST_F(ZkLock, HolderSessionCloseReleases) {
    Lock lb(b_, key_, LockKind::exclusive);
    {
        Lock la(a_, key_, LockKind::exclusive);
        ASSERT_TRUE(la.acquire());
        a_->close();
    }
    EXPECT_TRUE(lb.acquire(30s));
}

TEST_F(ZkLock, ReadLocksAreShared) {
    Lock r1(a_, key_, LockKind::read), r2(b_, key_, LockKind::read);
    ASSERT_TRUE(r1.acquire(30s));
    EXPECT_TRUE(r2.acquire(30s));
    EXPECT_NE(r1.contender().find("__rlock__"), std::string::npos);
}

TEST_F(ZkLock, WriteExcludesReadBothWays) {
    {
        Lock w(a_, key_, LockKind::write), r(b_, key_, LockKind::read);
        ASSERT_TRUE(w.acquire(30s));
        EXPECT_FALSE(r.acquire(300ms));
    }
    Lock r(a_, key_, LockKind::read), w(b_, key_, LockKind::write);
    ASSERT_TRUE(r.acquire(30s));
    EXPECT_FALSE(w.acquire(300ms));
    r.release();
    EXPECT_TRUE(w.acquire(30s));
}

TEST_F(ZkLock, ExclusiveDoesNotWaitForEarlierReaders) {
    Lock r(a_, key_, LockKind::read), e(b_, key_, LockKind::exclusive), w(b_, key_, LockKind::write);
    ASSERT_TRUE(r.acquire(30s));
    EXPECT_TRUE(e.acquire(30s));
    e.release();
    EXPECT_FALSE(w.acquire(300ms));  // a write lock does wait
}

TEST_F(ZkLock, ExclusiveAndWriteExcludeEachOther) {
    Lock e(a_, key_, LockKind::exclusive), w(b_, key_, LockKind::write);
    ASSERT_TRUE(e.acquire(30s));
    EXPECT_FALSE(w.acquire(300ms));
}

TEST_F(ZkLock, AcquireReturnsFalseWhenSessionCloses) {
    Lock la(a_, key_, LockKind::exclusive), lb(b_, key_, LockKind::exclusive);
    ASSERT_TRUE(la.acquire());
    auto waiter = std::async(std::launch::async, [&] { return lb.acquire(); });
    ASSERT_TRUE(eventually([&] { return contenders() == 2; }));
    b_->close();
    ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
    EXPECT_FALSE(waiter.get());
}

// ---------------------------------------------------------------- kazoo interop

TEST_F(ZkLock, KazooLockExcludesOursAndOursFollowsItsRelease) {
    // kazoo holds the lock for 3 s, then releases it.
    auto holder = std::async(std::launch::async, [&] {
        return kazoo("lock = zk.Lock(key, 'kazoo-holder')\n"
                     "lock.acquire(timeout=10)\n"
                     "zk.create(key + '-held', b'')\n"
                     "print(lock.node)\n"
                     "time.sleep(3)\n"
                     "lock.release()\n");
    });
    ASSERT_TRUE(eventually([&] { return a_->exists(key_ + "-held"); }, 20s)) << holder.get().err;
    Lock ours(a_, key_, LockKind::exclusive);
    EXPECT_FALSE(ours.acquire(500ms));
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_TRUE(ours.acquire(30s));
    EXPECT_GT(std::chrono::steady_clock::now() - t0, 500ms);
    auto r = holder.get();
    ASSERT_EQ(r.status, 0) << r.err;
    std::string kazoo_node = r.out.substr(0, r.out.find('\n'));
    EXPECT_TRUE(std::regex_match(kazoo_node, kContender)) << kazoo_node;
}

TEST_F(ZkLock, OurLockExcludesKazooLock) {
    Lock ours(a_, key_, LockKind::exclusive, "our-identifier");
    ASSERT_TRUE(ours.acquire(30s));
    auto r = kazoo("lock = zk.Lock(key, 'kazoo')\n"
                   "try:\n"
                   "    ok = lock.acquire(timeout=1)\n"
                   "except LockTimeout:\n"
                   "    ok = False\n"
                   "print(ok)\n"
                   "print(','.join(lock.contenders()))\n"
                   "print(len(zk.get_children(key)))\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "False\nour-identifier\n1\n");  // kazoo saw us, timed out, removed its contender
    ours.release();
    r = kazoo("lock = zk.Lock(key, 'kazoo')\nprint(lock.acquire(timeout=5))\nlock.release()\n");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "True\n");
}

TEST_F(ZkLock, ReadAndWriteLocksInteroperateWithKazoo) {
    const std::string try_both =
        "def attempt(l):\n"
        "    try:\n"
        "        ok = l.acquire(timeout=1)\n"
        "    except LockTimeout:\n"
        "        return False\n"
        "    l.release()\n"
        "    return ok\n"
        "print(attempt(zk.ReadLock(key)), attempt(zk.WriteLock(key)), attempt(zk.Lock(key)))\n";
    {
        Lock r(a_, key_, LockKind::read);
        ASSERT_TRUE(r.acquire(30s));
        auto res = kazoo(try_both);
        ASSERT_EQ(res.status, 0) << res.err;
        EXPECT_EQ(res.out, "True False True\n");  // shared read; write waits; exclusive ignores readers
    }
    {
        Lock w(a_, key_, LockKind::write);
        ASSERT_TRUE(w.acquire(30s));
        auto res = kazoo(try_both);
        ASSERT_EQ(res.status, 0) << res.err;
        EXPECT_EQ(res.out, "False False False\n");
    }
    // kazoo's WriteLock held: our read and write locks wait.
    auto holder = std::async(std::launch::async, [&] {
        return kazoo("lock = zk.WriteLock(key)\nlock.acquire(timeout=10)\nzk.create(key + '-w', b'')\n"
                     "time.sleep(2.5)\nlock.release()\n");
    });
    ASSERT_TRUE(eventually([&] { return a_->exists(key_ + "-w"); }, 20s));
    Lock r(a_, key_, LockKind::read), w(b_, key_, LockKind::write);
    EXPECT_FALSE(r.acquire(300ms));
    EXPECT_FALSE(w.acquire(300ms));
    EXPECT_TRUE(r.acquire(30s));
    EXPECT_EQ(holder.get().status, 0);
    // kazoo's ReadLock held: our read lock shares it.
    r.release();
    auto reader = std::async(std::launch::async, [&] {
        return kazoo("lock = zk.ReadLock(key)\nlock.acquire(timeout=10)\nzk.create(key + '-r', b'')\n"
                     "time.sleep(1.5)\nlock.release()\n");
    });
    ASSERT_TRUE(eventually([&] { return a_->exists(key_ + "-r"); }, 20s));
    Lock r2(a_, key_, LockKind::read), w2(b_, key_, LockKind::write);
    EXPECT_TRUE(r2.acquire(30s));
    r2.release();
    EXPECT_FALSE(w2.acquire(300ms));
    EXPECT_EQ(reader.get().status, 0);
}

// Issue 14 item 2: an unbounded wait keeps its place in the queue (it waits on
// its predecessor and never re-creates its contender), and a stop token ends it.
TEST_F(ZkLock, ThreeContendersAreServedInOrderAndKeepTheirPlaceWhileWaiting) {
    auto c_session = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
    Lock la(a_, key_, LockKind::exclusive), lb(b_, key_, LockKind::exclusive), lc(c_session, key_, LockKind::exclusive);
    std::stop_source stop;
    ASSERT_TRUE(la.acquire());
    std::mutex m;
    std::vector<char> order;
    auto wait = [&](Lock& l, char name) {
        bool ok = l.acquire(std::nullopt, stop.get_token());
        std::lock_guard g(m);
        if (ok) order.push_back(name);
        return ok;
    };
    auto b = std::async(std::launch::async, wait, std::ref(lb), 'b');
    ASSERT_TRUE(eventually([&] { return contenders() == 2; }));
    auto c = std::async(std::launch::async, wait, std::ref(lc), 'c');
    ASSERT_TRUE(eventually([&] { return contenders() == 3; }));
    auto names = a_->raw_children(key_).value();
    // Longer than the old 2 s attempts that deleted and re-created the contender.
    std::this_thread::sleep_for(2500ms);
    EXPECT_EQ(a_->raw_children(key_).value(), names) << "a waiting contender was re-created";

    la.release();
    ASSERT_EQ(b.wait_for(30s), std::future_status::ready);
    EXPECT_TRUE(b.get());
    EXPECT_EQ(c.wait_for(300ms), std::future_status::timeout) << "c overtook b";
    lb.release();
    ASSERT_EQ(c.wait_for(30s), std::future_status::ready);
    EXPECT_TRUE(c.get());
    EXPECT_EQ(order, (std::vector<char>{'b', 'c'}));
}

TEST_F(ZkLock, AStopTokenEndsAnUnboundedWaitAndRemovesTheContender) {
    Lock la(a_, key_, LockKind::exclusive), lb(b_, key_, LockKind::exclusive);
    ASSERT_TRUE(la.acquire());
    std::stop_source stop;
    auto waiter = std::async(std::launch::async, [&] { return lb.acquire(std::nullopt, stop.get_token()); });
    ASSERT_TRUE(eventually([&] { return contenders() == 2; }));
    auto t0 = std::chrono::steady_clock::now();
    stop.request_stop();
    ASSERT_EQ(waiter.wait_for(30s), std::future_status::ready);
    EXPECT_FALSE(waiter.get());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 1s);
    EXPECT_FALSE(lb.held());
    EXPECT_EQ(contenders(), 1u);
    // A predicate works the same way.
    std::atomic<bool> stopping{false};
    auto w2 = std::async(std::launch::async, [&] { return lb.acquire(std::nullopt, [&] { return stopping.load(); }); });
    ASSERT_TRUE(eventually([&] { return contenders() == 2; }));
    stopping = true;
    ASSERT_EQ(w2.wait_for(30s), std::future_status::ready);
    EXPECT_FALSE(w2.get());
    EXPECT_EQ(contenders(), 1u);
}

// A release while ZooKeeper is unreachable cannot delete the contender; left
// there it would block every later contender for as long as our session lives.
TEST_F(ZkLock, AReleaseDuringAnOutageIsCompletedOnReconnect) {
    auto s = zk::Session::connect({server_->hosts(), 10s, 15s, 1s});
    Lock held(s, key_, LockKind::exclusive);
    ASSERT_TRUE(held.acquire(30s));
    server_->stop();
    held.release();  // fails (operation timeout 1 s), handed to the session
    server_->start();
    ASSERT_TRUE(eventually([&] { return s->connected(); }, 20s));
    Lock next(b_, key_, LockKind::exclusive);
    EXPECT_TRUE(next.acquire(30s)) << "the released contender is still there";
}
