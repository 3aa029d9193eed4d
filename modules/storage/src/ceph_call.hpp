// Ceph calls with a deadline the caller can rely on.
//
// librados' own timeouts (rados.hpp) bound most calls, but not every path
// honours them (a connect racing a monitor restart, a hung OSD op before the
// timeout is armed). CephCalls runs each call on a thread of its own and
// waits for it up to the deadline; past it the caller gets a CephError
// (-ETIMEDOUT) while the call finishes in the background, owning everything
// it uses. At most `max_abandoned` such calls run at once: beyond that new
// calls fail at once instead of piling up threads on a dead cluster.
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "rados.hpp"

namespace pvc::storage {

class CephCalls {
public:
    explicit CephCalls(unsigned max_abandoned = 4) : state_(std::make_shared<State>()), max_abandoned_(max_abandoned) {}
    // Waits for the calls still running (each is bounded by librados' own timeouts).
    ~CephCalls() { wait_idle(std::chrono::seconds(30)); }
    CephCalls(const CephCalls&) = delete;
    CephCalls& operator=(const CephCalls&) = delete;

    // Runs fn() (returning T) on a worker; its result, or its exception
    // rethrown, or CephError(-ETIMEDOUT) once `deadline` passed.
    template <class T>
    T run(const std::string& what, std::chrono::milliseconds deadline, std::function<T()> fn) {
        struct Call {
            std::mutex m;
            std::condition_variable cv;
            bool done = false;
            std::optional<T> value;
            std::exception_ptr error;
        };
        {
            std::lock_guard g(state_->m);
            if (state_->running >= max_abandoned_ + 1)
                throw CephError(what + ": earlier Ceph calls still hang", -EBUSY);
            ++state_->running;
        }
        auto call = std::make_shared<Call>();
        struct Undo {  // the thread could not be created: not running after all
            State& s;
            bool armed = true;
            ~Undo() {
                if (!armed) return;
                std::lock_guard g(s.m);
                --s.running;
            }
        } undo{*state_};
        std::thread([call, fn = std::move(fn), state = state_] {
            std::optional<T> value;
            std::exception_ptr error;
            try {
                value.emplace(fn());
            } catch (...) {
                error = std::current_exception();
            }
            {
                std::lock_guard g(call->m);
                call->value = std::move(value);
                call->error = error;
                call->done = true;
            }
            call->cv.notify_all();
            std::lock_guard g(state->m);
            --state->running;
            state->cv.notify_all();
        }).detach();
        undo.armed = false;
        std::unique_lock l(call->m);
        if (!call->cv.wait_for(l, deadline, [&] { return call->done; }))
            throw CephError(what + ": no answer within " + std::to_string(deadline.count()) + " ms", -ETIMEDOUT);
        if (call->error) std::rethrow_exception(call->error);
        return std::move(*call->value);
    }

    // Calls still running (the abandoned ones included).
    unsigned running() const {
        std::lock_guard g(state_->m);
        return state_->running;
    }

    bool wait_idle(std::chrono::milliseconds timeout) {
        std::unique_lock l(state_->m);
        return state_->cv.wait_for(l, timeout, [&] { return state_->running == 0; });
    }

private:
    struct State {
        mutable std::mutex m;
        std::condition_variable cv;
        unsigned running = 0;
    };
    std::shared_ptr<State> state_;
    unsigned max_abandoned_;
};

}  // namespace pvc::storage
