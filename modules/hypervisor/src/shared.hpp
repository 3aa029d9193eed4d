// What the hypervisor's objects share: configuration, sessions, the
// procedure pool, the running list and the stop signal.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>


#include "inotify_hub.hpp"
#include "libvirt.hpp"
#include "pvc/module.hpp"
#include "pvc/services/rbd_locks.hpp"
#include "settings.hpp"
#include "procedure_pool.hpp"

namespace pvc::hv {

using RbdLocks = services::RbdLocks;

class Wakeup;

// The daemon is stopping: every wait in a procedure ends early, sleeps and
// Wakeup waits alike.
class Stopper {
public:
    // Sleeps `d`; false when stopping (at once or during the sleep).
    bool sleep(std::chrono::milliseconds d) {
        std::unique_lock l(m_);
        return !cv_.wait_for(l, d, [&] { return stopping_.load(); });
    }
    void stop();
    bool stopping() const { return stopping_; }

private:
    friend class Wakeup;
    struct Waiter;
    void add(const std::shared_ptr<Waiter>& w);

    std::mutex m_;
    std::condition_variable cv_;
    std::atomic<bool> stopping_{false};
    std::vector<std::weak_ptr<Waiter>> waiters_;
};

// What a long procedure waits on instead of polling ZooKeeper: notify() comes
// from a ZooKeeper watch, a libvirt lifecycle event or a job's cancellation;
// the wait's own deadline is the timer; the Stopper ends every wait.
// Usage, so no notification between the check and the wait is lost:
//     for (auto seen = w.seen(); !done(); seen = w.seen()) if (!w.wait_until(seen, deadline)) break;
class Wakeup {
public:
    using Clock = std::chrono::steady_clock;
    explicit Wakeup(Stopper& stopper);
    Wakeup(const Wakeup&) = delete;
    Wakeup& operator=(const Wakeup&) = delete;

    // The count of notifications so far: take it before checking what the wait is for.
    uint64_t seen() const;
    void notify();
    // Waits until a notification after `seen`, or `deadline`. False when the daemon is stopping.
    bool wait_until(uint64_t seen, Clock::time_point deadline);

private:
    // Shared with the Stopper, which holds it weakly: a Wakeup (and the
    // Domain holding it) may outlive the Stopper's owner.
    std::shared_ptr<Stopper::Waiter> w_;
};

// Bounds concurrent live-migration sends (max_parallel_migrations).
class Semaphore {
public:
    explicit Semaphore(int n) : n_(n < 1 ? 1 : n) {}
    void acquire() {
        std::unique_lock l(m_);
        cv_.wait(l, [&] { return n_ > 0; });
        n_--;
    }
    void release() {
        std::lock_guard g(m_);
        n_++;
        cv_.notify_one();
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    int n_;
};

// This node's running list (/nodes/<me>/runningdomains, space-separated).
class RunningList {
public:
    bool add(const std::string& uuid);      // true if it was missing
    bool remove(const std::string& uuid);   // true if it was present
    bool contains(const std::string& uuid) const;
    std::vector<std::string> snapshot() const;
    std::string text() const;

private:
    mutable std::mutex m_;
    std::vector<std::string> list_;
};

// One ZooKeeper read: a value, "absent" (no such key), or "error" (the key
// could not be read). A failed read is never taken as absent: nothing is
// decided, let alone destroyed, on a value the daemon could not confirm.
class Read {
public:
    static Read of(std::string value) { return Read(Kind::value, std::move(value)); }
    static Read absent() { return Read(Kind::absent, {}); }
    static Read error() { return Read(Kind::failed, {}); }

    bool failed() const { return kind_ == Kind::failed; }
    bool present() const { return kind_ == Kind::value; }
    // The value, `fallback` when absent. Only meaningful when !failed().
    std::string value_or(std::string fallback) const { return present() ? value_ : std::move(fallback); }
    // True when read and equal to `v` (a failed or absent read equals nothing).
    bool is(std::string_view v) const { return present() && value_ == v; }

private:
    enum class Kind { value, absent, failed };
    Read(Kind k, std::string v) : kind_(k), value_(std::move(v)) {}
    Kind kind_;
    std::string value_;
};

struct Shared {
    const Config& config;
    const Settings& settings;
    Logger log;
    std::shared_ptr<zk::Session> zk;
    Executor& ex;
    std::string me;
    Connection& lv;
    RbdLocks& rbd;
    Stopper& stopper;
    ProcedurePool& procedures;  // long, sleeping, lock-holding procedures
    Semaphore& migrations;
    RunningList& running;
    // Notified whenever a domain's state watch delivers (the flush waits on it).
    Wakeup& state_changes;
    // The console logs' one inotify instance (null: they poll).
    std::shared_ptr<InotifyHub> inotify;

    // A read that never throws; a ZooKeeper error is Read::error(), not absent.
    Read get(const std::string& path, zk::Stat* stat = nullptr) const;
    // Several reads in one round trip (zk::Session::get_many): all failed
    // when ZooKeeper could not answer them all.
    std::vector<Read> get_many(const std::vector<std::string>& paths, std::vector<zk::Stat>* stats = nullptr) const;
    // The reference write (multi); false on failure (logged).
    bool write(const std::vector<zk::KeyValue>& kvs) const;
    // Sets `key` only if it and the domain root exist (never re-creates keys
    // under a domain being deleted).
    bool set_existing(const std::string& uuid, const std::string& key_path, const std::string& value) const;
    // Writes /nodes/<me>/runningdomains from the list whenever the published
    // value differs from it, whoever changed the list (a procedure or the
    // keepalive's statistics pass).
    void publish_running() const;
    // Serialises publish_running(): a stale list is never written after a newer one.
    mutable std::mutex publish_m;
};

}  // namespace pvc::hv
