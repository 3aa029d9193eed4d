// The threading contract of module.hpp: core events on the core strand,
// subscriptions end with their owner, transition hooks complete before the
// core goes on (or their deadline passes), module pools stop their tasks,
// services found by name.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>

#include "daemon/transition.hpp"
#include "pvc/module.hpp"
#include "pvc/service_registry.hpp"
#include "pvc/services/rbd_locks.hpp"

namespace pvc {
namespace {

using namespace std::chrono_literals;

// An executor whose io_context runs on two threads, as the daemon's may.
struct Loop {
    Executor ex{2};
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{ex.io().get_executor()};
    std::thread t1{[this] { ex.run_io(); }}, t2{[this] { ex.run_io(); }};
    Strand core = ex.make_strand();
    ~Loop() {
        guard.reset();
        ex.io().stop();
        t1.join();
        t2.join();
        ex.stop_pool();
    }
    // Waits until everything posted to the core strand so far has run.
    void drain() {
        std::promise<void> p;
        boost::asio::post(core, [&] { p.set_value(); });
        p.get_future().wait();
    }
};

TEST(CoreEvents, DeliveredOnTheCoreStrandNotTheEmittingThread) {
    Loop loop;
    CoreEvents events;
    deliver_core_events(events, loop.ex, loop.core);
    std::promise<std::pair<bool, std::thread::id>> seen;
    auto sub = events.router_state.subscribe([&](const std::string& s) {
        EXPECT_EQ(s, "takeover");
        seen.set_value({loop.core.running_in_this_thread(), std::this_thread::get_id()});
    });
    std::thread::id emitter;
    std::thread([&] {
        emitter = std::this_thread::get_id();
        events.router_state.emit("takeover");
    }).join();
    auto f = seen.get_future();
    ASSERT_EQ(f.wait_for(5s), std::future_status::ready);
    auto [on_strand, thread] = f.get();
    EXPECT_TRUE(on_strand);
    EXPECT_NE(thread, emitter);
}

TEST(CoreEvents, SubscriptionEndsWhenItsOwnerGoes) {
    Loop loop;
    CoreEvents events;
    deliver_core_events(events, loop.ex, loop.core);
    std::atomic<int> calls{0};
    {
        auto sub = events.keepalive_tick.subscribe([&] { ++calls; });
        events.keepalive_tick.emit();
        loop.drain();
        EXPECT_EQ(calls, 1);
        // Emitted while subscribed, delivered after the owner went: not called.
        // The core strand is held busy until the owner has gone, so the
        // delivery really comes after it.
        std::promise<void> release;
        auto released = release.get_future().share();
        boost::asio::post(loop.core, [released] { released.wait(); });
        events.keepalive_tick.emit();
        sub.reset();
        release.set_value();
    }
    events.keepalive_tick.emit();
    loop.drain();
    EXPECT_EQ(calls, 1);
}

TEST(CoreEvents, EndingASubscriptionWaitsForTheCallInProgress) {
    Loop loop;
    CoreEvents events;
    deliver_core_events(events, loop.ex, loop.core);
    std::atomic<bool> started{false}, finished{false};
    auto sub = events.keepalive_tick.subscribe([&] {
        started = true;
        std::this_thread::sleep_for(300ms);
        finished = true;
    });
    events.keepalive_tick.emit();
    while (!started) std::this_thread::sleep_for(1ms);
    sub.reset();  // the owner going away while its slot runs
    EXPECT_TRUE(finished) << "reset() returned while the slot was still running";
}

TEST(CoreEvents, AThrowingSlotIsCaughtAndCountedAndOthersStillRun) {
    Loop loop;
    CoreEvents events;
    deliver_core_events(events, loop.ex, loop.core);
    auto before = loop.ex.failed_tasks();
    std::atomic<int> calls{0};
    auto a = events.daemon_state.subscribe([](const std::string&) { throw std::runtime_error("boom"); });
    auto b = events.daemon_state.subscribe([&](const std::string&) { ++calls; });
    events.daemon_state.emit("run");
    loop.drain();
    EXPECT_EQ(loop.ex.failed_tasks(), before + 1);
    EXPECT_EQ(calls, 1);
}

// A module whose transition part finishes `after` later on another thread
// (or never), recording where its hook ran.
class SlowModule final : public Module {
public:
    SlowModule(std::string name, std::optional<std::chrono::milliseconds> after, const Strand& core)
        : name_(std::move(name)), after_(after), core_(core) {}
    ~SlowModule() override {
        if (worker_.joinable()) worker_.join();
    }
    std::string_view name() const override { return name_; }
    void start(NodeContext&) override {}
    void stop() override {}
    // Slow (or stuck) in the first phase of its transition, quick in the others.
    void transition(Transition t, TransitionPhase p, std::function<void()> done) override {
        hook_on_core_strand = core_.running_in_this_thread();
        seen = static_cast<int>(t);
        phases += static_cast<char>(p);
        if (p != (t == Transition::takeover ? TransitionPhase::C : TransitionPhase::B)) return done();
        if (!after_) return;  // never completes
        worker_ = std::thread([this, done] {
            std::this_thread::sleep_for(*after_);
            finished = true;
            done();
        });
    }
    std::atomic<bool> finished{false};
    std::atomic<bool> hook_on_core_strand{false};
    std::atomic<int> seen{-1};
    std::string phases;  // the phases its hook saw, in order (core strand only)

private:
    std::string name_;
    std::optional<std::chrono::milliseconds> after_;
    Strand core_;
    std::thread worker_;
};

TEST(TransitionHook, TheCoreGoesOnOnlyAfterEveryModuleIsDone) {
    Loop loop;
    Logger log(make_log_sink(nullptr), "test");
    SlowModule network("network", 400ms, loop.core), other("other", 0ms, loop.core);
    auto overran = run_transition({&network, &other}, Transition::takeover, loop.ex, loop.core, 20s, log);
    // What the core does next (publish `primary`) comes after this point.
    EXPECT_TRUE(network.finished);
    EXPECT_TRUE(other.finished);
    EXPECT_TRUE(overran.empty());
    EXPECT_TRUE(network.hook_on_core_strand);
    EXPECT_EQ(network.seen, static_cast<int>(Transition::takeover));
    loop.drain();
    EXPECT_EQ(network.phases, "CDEFG");  // the candidate's hand-over phases in order
}

TEST(TransitionHook, AnOverrunningHookDoesNotBlockForever) {
    Loop loop;
    Logger log(make_log_sink(nullptr), "test");
    SlowModule stuck("stuck", std::nullopt, loop.core), quick("quick", 0ms, loop.core);
    auto t0 = std::chrono::steady_clock::now();
    auto overran = run_transition({&stuck, &quick}, Transition::relinquish, loop.ex, loop.core, 500ms, log);
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(took, 500ms);
    EXPECT_LT(took, 10s);  // the deadline, not forever (generous under load)
    ASSERT_EQ(overran.size(), 1u);
    EXPECT_EQ(overran[0], "stuck");
    EXPECT_EQ(stuck.seen, static_cast<int>(Transition::relinquish));
    // Not waited for again after it overran; the later phases still ran (and were called on it).
    loop.drain();
    EXPECT_EQ(stuck.phases, "BCDEF");
    EXPECT_EQ(quick.phases, "BCDEF");
}

TEST(ModulePool, TasksSeeTheStopTokenAndStopJoinsThem) {
    Loop loop;
    ModulePool pool(loop.ex, "procedures", 2);
    std::atomic<bool> saw_stop{false}, started{false};
    pool.post("a long procedure", [&](std::stop_token stop) {
        started = true;
        while (!stop.stop_requested()) std::this_thread::sleep_for(5ms);
        saw_stop = true;
    });
    while (!started) std::this_thread::sleep_for(1ms);
    pool.stop();
    EXPECT_TRUE(saw_stop);
}

TEST(ModulePool, AThrowingTaskIsCaughtAndCounted) {
    Loop loop;
    auto before = loop.ex.failed_tasks();
    {
        ModulePool pool(loop.ex, "procedures", 1);
        pool.post("a failing procedure", [](std::stop_token) { throw std::runtime_error("libvirt gone"); });
        std::atomic<bool> ran{false};
        pool.post("the next one", [&](std::stop_token) { ran = true; });
        pool.stop();
        EXPECT_TRUE(ran);
    }
    EXPECT_EQ(loop.ex.failed_tasks(), before + 1);
}

struct FakeLocks final : services::RbdLocks {
    std::optional<std::string> prepare_start(const std::string&, const std::vector<std::string>&) override {
        return "held";
    }
    std::optional<std::string> free_all(const std::string&, const std::vector<std::string>&) override {
        return std::nullopt;
    }
};

TEST(ServiceRegistry, ProvideGetAndWithdrawByInterfaceName) {
    ServiceRegistry registry;
    EXPECT_EQ(registry.get<services::RbdLocks>(), nullptr);
    auto locks = std::make_shared<FakeLocks>();
    registry.provide<services::RbdLocks>(locks);
    auto got = registry.get<services::RbdLocks>();
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(got->prepare_start("u", {}), std::optional<std::string>("held"));
    // Withdrawing someone else's provider changes nothing.
    registry.withdraw<services::RbdLocks>(std::make_shared<FakeLocks>());
    EXPECT_NE(registry.get<services::RbdLocks>(), nullptr);
    registry.withdraw<services::RbdLocks>(locks);
    EXPECT_EQ(registry.get<services::RbdLocks>(), nullptr);
}

}  // namespace
}  // namespace pvc
