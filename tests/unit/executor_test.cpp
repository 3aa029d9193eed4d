// Executor: an exception in any task it runs ends that task only (Boost's
// thread_pool would call std::terminate; a throwing io handler would end io.run()).
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>

#include "pvc/module.hpp"

using namespace std::chrono_literals;

namespace {

struct Running {
    pvc::Executor ex{2};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{ex.io().get_executor()};
    std::thread loop{[this] { ex.run_io(); }};
    ~Running() {
        guard.reset();
        ex.io().stop();
        loop.join();
        ex.stop_pool();
    }
};

template <class F>
bool within(std::future<F>& f) { return f.wait_for(10s) == std::future_status::ready; }

TEST(Executor, ThrowingBlockingTaskIsCountedAndThePoolGoesOn) {
    Running r;
    r.ex.blocking("a task that throws", [] { throw std::runtime_error("boom"); });
    r.ex.blocking([] { throw 42; });  // not even a std::exception
    std::promise<int> after;
    auto f = after.get_future();
    r.ex.blocking("a later task", [&] { after.set_value(7); });
    ASSERT_TRUE(within(f));
    EXPECT_EQ(f.get(), 7);
    // Both pool threads met a throwing task and still serve.
    for (int i = 0; i < 4; ++i) {
        std::promise<void> p;
        auto pf = p.get_future();
        r.ex.blocking([&] { p.set_value(); });
        ASSERT_TRUE(within(pf));
    }
    // The second throwing task may still be unwinding on the other pool thread
    // while this one served the later tasks: its count comes when it is done.
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (r.ex.failed_tasks() < 2u && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(r.ex.failed_tasks(), 2u);
}

TEST(Executor, ThrowingWorkSkipsItsCompletionAndAThrowingCompletionIsCaught) {
    Running r;
    auto strand = r.ex.make_strand();
    std::atomic<bool> done_called{false};
    r.ex.blocking("work that throws", strand, []() -> int { throw std::runtime_error("no result"); },
                  [&](int) { done_called = true; });
    r.ex.blocking("completion that throws", strand, [] { return 1; },
                  [](int) { throw std::logic_error("bad completion"); });
    std::promise<int> p;
    auto f = p.get_future();
    r.ex.blocking("a good one", strand, [] { return 5; }, [&](int v) { p.set_value(v); });
    ASSERT_TRUE(within(f));
    EXPECT_EQ(f.get(), 5);
    ASSERT_TRUE([&] {
        for (int i = 0; i < 500 && r.ex.failed_tasks() < 2; ++i) std::this_thread::sleep_for(10ms);
        return r.ex.failed_tasks() == 2;
    }());
    EXPECT_FALSE(done_called);
}

TEST(Executor, ThrowingStrandPostAndPlainIoHandlerDoNotStopTheLoop) {
    Running r;
    auto strand = r.ex.make_strand();
    r.ex.post(strand, "a strand task that throws", [] { throw std::runtime_error("strand boom"); });
    // Posted straight to the io_context, bypassing the Executor's wrapper: run_io() catches it.
    boost::asio::post(r.ex.io(), [] { throw std::runtime_error("raw handler boom"); });
    std::promise<void> p;
    auto f = p.get_future();
    r.ex.post(strand, "a later strand task", [&] { p.set_value(); });
    ASSERT_TRUE(within(f));
    EXPECT_EQ(r.ex.failed_tasks(), 2u);
}

}  // namespace
