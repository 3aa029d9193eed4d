// The procedure pool: threads only while there is work (an idle node keeps
// none), never more than its maximum at once, and join() runs what is queued.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "procedure_pool.hpp"
#include "pvc/log.hpp"

namespace pvc::hv {
namespace {

using namespace std::chrono_literals;

Logger test_logger() { return Logger(make_log_sink(nullptr), "pool"); }

// Waits up to `limit` for `pred` (no timing asserted: the limit only ends a hung test).
template <class P>
bool wait_for(P pred, std::chrono::seconds limit = 30s) {
    for (auto end = std::chrono::steady_clock::now() + limit; std::chrono::steady_clock::now() < end;) {
        if (pred()) return true;
        std::this_thread::sleep_for(5ms);
    }
    return pred();
}

TEST(ProcedurePool, NoThreadUntilWorkAndNoneAfterAnIdleSpell) {
    ProcedurePool pool(16, test_logger(), 200ms);
    EXPECT_EQ(pool.threads(), 0u);  // a fixed pool had 16 here
    std::atomic<int> ran{0};
    for (int i = 0; i < 5; ++i) pool.post([&] { ++ran; });
    EXPECT_TRUE(wait_for([&] { return ran == 5; }));
    EXPECT_GE(pool.threads(), 1u);
    EXPECT_TRUE(wait_for([&] { return pool.threads() == 0; }));  // idle threads end
    pool.post([&] { ++ran; });  // and start again with new work
    EXPECT_TRUE(wait_for([&] { return ran == 6; }));
}

TEST(ProcedurePool, AtMostMaxRunAtOnceAndJoinRunsWhatIsQueued) {
    std::atomic<int> running{0}, most{0}, ran{0};
    std::atomic<bool> release{false};
    {
        ProcedurePool pool(3, test_logger());
        for (int i = 0; i < 10; ++i)
            pool.post([&] {
                int now = ++running;
                for (int m = most; now > m && !most.compare_exchange_weak(m, now);) {
                }
                while (!release) std::this_thread::sleep_for(1ms);
                --running;
                ++ran;
            });
        EXPECT_TRUE(wait_for([&] { return running == 3; }));
        EXPECT_EQ(pool.threads(), 3u);
        release = true;
        pool.join();
        EXPECT_EQ(ran, 10);
        EXPECT_EQ(pool.threads(), 0u);
        pool.post([&] { ++ran; });  // after join: dropped, as a joined asio::thread_pool
    }
    EXPECT_EQ(ran, 10);
    EXPECT_EQ(most, 3);
}

TEST(ProcedurePool, WorkPostedByAProcedureWhileJoiningStillRuns) {
    std::atomic<int> ran{0};
    ProcedurePool pool(2, test_logger());
    std::atomic<bool> release{false};
    pool.post([&] {
        while (!release) std::this_thread::sleep_for(1ms);
        pool.post([&] { ++ran; });
        ++ran;
    });
    std::thread joiner([&] { pool.join(); });
    std::this_thread::sleep_for(50ms);
    release = true;
    joiner.join();
    EXPECT_EQ(ran, 2);
}

TEST(ProcedurePool, AThrowingProcedureEndsOnlyItself) {
    std::atomic<int> ran{0};
    ProcedurePool pool(1, test_logger());
    pool.post([] { throw std::runtime_error("boom"); });
    pool.post([&] { ++ran; });
    EXPECT_TRUE(wait_for([&] { return ran == 1; }));
}

}  // namespace
}  // namespace pvc::hv
