// Core events and RAII subscriptions (the threading contract: module.hpp).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>

#include "pvc/export.hpp"

namespace pvc {

using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

namespace detail {
// One subscription's slot state. `m` is held while the slot runs, so ending
// a subscription waits for a call in progress on another thread; recursive,
// so a slot may end its own subscription.
struct PVC_SDK_API SlotState {
    std::recursive_mutex m;
    std::atomic<bool> active{true};
};
}  // namespace detail

// Ends its subscription when destroyed or reset: after that returns, the slot
// is never called again (a call in progress on another thread is waited for).
class PVC_SDK_API [[nodiscard]] Subscription {
public:
    Subscription() = default;
    explicit Subscription(std::shared_ptr<detail::SlotState> state) : state_(std::move(state)) {}
    Subscription(Subscription&&) noexcept = default;
    Subscription& operator=(Subscription&& other) noexcept {
        if (this != &other) {
            reset();
            state_ = std::move(other.state_);
        }
        return *this;
    }
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;
    ~Subscription() { reset(); }

    void reset() {
        if (!state_) return;
        {
            std::lock_guard g(state_->m);
            state_->active = false;
        }
        state_.reset();
    }
    bool active() const { return state_ != nullptr; }

private:
    std::shared_ptr<detail::SlotState> state_;
};

// Runs a task on the core strand (the core gives Executor::post to it).
using EventPoster = std::function<void(std::function<void()>)>;

// A typed event the core publishes. With a poster set (the core sets it for
// CoreEvents), emit() only posts: each slot runs as its own task on the core
// strand, in subscription order, never on the emitting thread; a slot's
// exception ends its own call only (the Executor logs and counts it).
template <class... Args>
class PVC_SDK_API Signal {
public:
    using Slot = std::function<void(Args...)>;

    void deliver_with(EventPoster poster) {
        std::lock_guard g(m_);
        poster_ = std::move(poster);
    }
    Subscription subscribe(Slot slot) {
        auto state = std::make_shared<detail::SlotState>();
        std::lock_guard g(m_);
        std::erase_if(slots_, [](const auto& s) { return !s.first->active; });
        slots_.emplace_back(state, std::make_shared<Slot>(std::move(slot)));
        return Subscription(std::move(state));
    }
    void emit(Args... args) const {
        std::vector<std::pair<std::shared_ptr<detail::SlotState>, std::shared_ptr<Slot>>> copy;
        EventPoster poster;
        {
            std::lock_guard g(m_);
            copy = slots_;
            poster = poster_;
        }
        auto values = std::make_shared<std::tuple<std::decay_t<Args>...>>(std::move(args)...);
        for (auto& [state, slot] : copy) {
            // (Init-captures: clang 14 cannot capture a structured binding.)
            auto call = [state = state, slot = slot, values] {
                std::lock_guard g(state->m);
                if (state->active) std::apply(*slot, *values);
            };
            if (poster)
                poster(std::move(call));
            else
                call();
        }
    }

private:
    mutable std::mutex m_;
    std::vector<std::pair<std::shared_ptr<detail::SlotState>, std::shared_ptr<Slot>>> slots_;
    EventPoster poster_;
};

struct PVC_SDK_API CoreEvents {
    Signal<std::string> daemon_state;        // own daemonstate as written by the core
    Signal<std::string> router_state;        // own routerstate as seen in ZooKeeper
    Signal<> keepalive_tick;                 // after each keepalive write
    Signal<> session_recovered;              // ZooKeeper session expired and was re-established

    // Every event is delivered through `poster` (onto the core strand).
    void deliver_with(const EventPoster& poster) {
        daemon_state.deliver_with(poster);
        router_state.deliver_with(poster);
        keepalive_tick.deliver_with(poster);
        session_recovered.deliver_with(poster);
    }
};

}  // namespace pvc
