// Threads for the hypervisor's long procedures (dispatches, shutdowns that
// wait on guests, migrations, console attach/detach): at most `max` at once,
// started when work is queued and ended after a spell without work. A fixed
// pool kept all of them (16 threads, their stacks and malloc arenas) on a
// node where nothing happens between VM changes.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "pvc/log.hpp"

namespace pvc::hv {

class ProcedurePool {
public:
    ProcedurePool(unsigned max, Logger log, std::chrono::milliseconds idle = std::chrono::seconds(30))
        : max_(max ? max : 1), idle_(idle), log_(std::move(log)) {}
    ~ProcedurePool() { join(); }
    ProcedurePool(const ProcedurePool&) = delete;
    ProcedurePool& operator=(const ProcedurePool&) = delete;

    // Queued work runs in order of posting, up to `max` at a time. While
    // join() waits, work posted by running procedures still runs; once every
    // thread has ended nothing more is accepted (as a joined asio::thread_pool).
    void post(std::function<void()> work) {
        std::lock_guard g(m_);
        if (joining_ && threads_ == 0) return;
        queue_.push_back(std::move(work));
        if (waiting_ > 0) {
            cv_.notify_one();
            return;
        }
        if (threads_ >= max_ || joining_) return;  // a running thread takes it before it ends
        try {
            std::thread([this] { run(); }).detach();
            ++threads_;
        } catch (const std::system_error& e) {
            // No thread now: a running one (if any) takes the work later.
            log_.error("Cannot start a procedure thread: {}", e.what());
        }
    }

    // Runs what is queued, then waits until every thread has ended.
    void join() {
        std::unique_lock lk(m_);
        joining_ = true;
        cv_.notify_all();
        done_cv_.wait(lk, [this] { return threads_ == 0; });
    }

    unsigned threads() const {
        std::lock_guard g(m_);
        return threads_;
    }

private:
    void run() {
        std::unique_lock lk(m_);
        for (;;) {
            if (queue_.empty()) {
                ++waiting_;
                bool woke = cv_.wait_for(lk, idle_, [this] { return !queue_.empty() || joining_; });
                --waiting_;
                if (!woke || queue_.empty()) break;  // idle for a while, or joining with nothing left
            }
            auto work = std::move(queue_.front());
            queue_.pop_front();
            lk.unlock();
            try {
                work();
            } catch (const std::exception& e) {
                log_.error("Procedure failed: {}", e.what());
            } catch (...) {
                log_.error("Procedure failed: unknown exception");
            }
            work = nullptr;  // its captures are released outside the lock
            lk.lock();
        }
        --threads_;
        // The last access to this object: join() returns only after m_ is released.
        if (threads_ == 0) done_cv_.notify_all();
    }

    const unsigned max_;
    const std::chrono::milliseconds idle_;
    Logger log_;
    mutable std::mutex m_;
    std::condition_variable cv_, done_cv_;
    std::deque<std::function<void()>> queue_;
    unsigned threads_ = 0, waiting_ = 0;
    bool joining_ = false;
};

}  // namespace pvc::hv
