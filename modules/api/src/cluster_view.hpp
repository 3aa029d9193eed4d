// The API's view of the cluster: a mirror of the ZooKeeper subtrees the API
// reads (/config, /nodes, /domains, /networks, /ceph), kept current by
// kazoo-style watches, so no request and no scrape walks ZooKeeper. Logs
// (/logs, a VM's consolelog) are not mirrored: those routes read their one
// key when asked.
//
// Watches fire on the session's event thread; each callback updates the map
// under a unique lock and queues the new children. The view's own feeder
// thread arms the queued watches, at most `in_flight_cap` not yet answered
// at once: arming a watch is a read on the session's one event thread, and
// 20,000 of them queued at once (1,000 VMs) would hold every other watch of
// the daemon behind them for seconds. Readers take a shared lock for the
// whole of one response (a consistent picture).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <thread>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include <pthread.h>
#include <string>
#include <vector>

#include "pvc/zk.hpp"

namespace pvc::api {

// A reader-writer lock that prefers the writer: the watch callbacks (on the
// daemon's one ZooKeeper event thread) must not starve behind a stream of
// API readers. glibc's rwlock with PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP.
class WriterFirstMutex {
public:
    WriterFirstMutex();
    ~WriterFirstMutex();
    WriterFirstMutex(const WriterFirstMutex&) = delete;
    WriterFirstMutex& operator=(const WriterFirstMutex&) = delete;
    void lock();
    void unlock();
    void lock_shared();
    void unlock_shared();

private:
    pthread_rwlock_t rw_;
};

class ClusterView {
public:
    explicit ClusterView(std::shared_ptr<zk::Session> zk);
    ~ClusterView();
    ClusterView(const ClusterView&) = delete;
    ClusterView& operator=(const ClusterView&) = delete;

    static constexpr size_t in_flight_cap = 32;

    void start();
    void stop();
    // True once the first load is complete (every watch armed by then gave
    // its first value); stays true.
    bool ready() const;
    bool wait_ready(std::chrono::milliseconds timeout) const;
    // True once nothing is queued or waiting for its first answer (every
    // znode listed so far is loaded), false after `timeout`.
    bool wait_settled(std::chrono::milliseconds timeout) const;
    // Reads, by readers of the view on this thread, that met a part of the
    // view still loading: a znode listed by its parent (or waiting for its
    // first answer) whose value or children the view has not read yet. What
    // a response built from such reads shows may be less than an earlier
    // response showed (a network's two ACLs listed, one of them read), so
    // the API answers it again (routes.cpp, Api::handle). A counter: compare
    // it before and after building a response.
    static uint64_t partial_reads();
    // znodes mirrored (values and children lists), watches armed.
    size_t size() const;
    size_t watches() const { return watch_count_.load(); }

    // What one response reads: the view under its shared lock (read()), or
    // ZooKeeper itself (read_through()). Routes and object builders read
    // through this one interface, so a request is answered from either.
    class Reader {
    public:
        std::optional<std::string> get(const std::string& path) const;
        std::string value(const std::string& path) const { return get(path).value_or(""); }
        bool exists(const std::string& path) const;
        // Children names (lock contenders left out), sorted.
        std::vector<std::string> children(const std::string& path) const;
        // Reads these values at once (one round trip) before get() asks for
        // them one by one; nothing to do on the view.
        void prefetch(const std::vector<std::string>& paths) const;
        // True for a reader of ZooKeeper itself.
        bool through() const { return zk_ != nullptr; }
        // Changes seen under /<a>/<b> (an object: /domains/<uuid>, /nodes/<n>) since start.
        // A reader of ZooKeeper has no generations (0): nothing it reads is cached.
        uint64_t generation(const std::string& object_root) const;
        uint64_t generation() const { return view_ ? view_->gen_ : 0; }
        // Changes seen anywhere under a root ("/domains").
        uint64_t root_generation(const std::string& root) const;

    private:
        friend class ClusterView;
        Reader(const ClusterView& v) : view_(&v), lock_(v.m_) {}
        explicit Reader(zk::Session& zk) : zk_(&zk) {}
        const ClusterView* view_ = nullptr;
        std::shared_lock<WriterFirstMutex> lock_;
        // Reading ZooKeeper: each znode read once, kept for the reader's life
        // (one consistent enough picture for one response).
        zk::Session* zk_ = nullptr;
        mutable std::map<std::string, std::optional<std::string>> values_;
        mutable std::map<std::string, std::vector<std::string>> children_;
    };
    Reader read() const { return Reader(*this); }
    // A reader of ZooKeeper itself, holding no lock of the view: what a
    // request uses when the view may lag (see routes.cpp, Api::handle). The
    // caller syncs the session first (pvc/zk_sync.hpp). Reads throw
    // zk::Error when ZooKeeper cannot answer.
    static Reader read_through(zk::Session& zk) { return Reader(zk); }

private:
    struct Entry {
        std::optional<std::string> value;
        std::vector<std::string> children;
        bool container = false, data_seen = false, children_seen = false;
        std::chrono::steady_clock::time_point armed{};
        std::shared_ptr<zk::Watch> data_watch, children_watch;
    };
    void enqueue(const std::string& path);
    void feed();                          // the feeder thread
    void heal();                          // re-arms watches silent for too long
    size_t add(const std::string& path);  // answers accounted for (0: already there, or stopped)
    void on_data(const std::string& path, const std::optional<std::string>& data);
    void on_children(const std::string& path, const std::optional<std::vector<std::string>>& kids);
    void bump(const std::string& path);  // under m_
    void erase_subtree(const std::string& path, std::vector<std::shared_ptr<zk::Watch>>& cancel);  // under m_
    void seen();  // one armed watch gave its first value
    // Under m_: true for a path with no entry whose parent lists it (or may:
    // its children not read yet), directly or through a parent in that case.
    bool listed_not_loaded(const std::string& path) const;

    std::shared_ptr<zk::Session> zk_;
    mutable WriterFirstMutex m_;
    std::map<std::string, Entry> entries_;
    std::map<std::string, uint64_t> object_gen_, root_gen_;
    uint64_t gen_ = 0;
    bool stopped_ = false;
    // The feeder's queue and the watches armed but not yet answered.
    mutable std::mutex feed_m_;
    std::condition_variable feed_cv_;
    std::deque<std::string> queue_;
    size_t in_flight_ = 0;
    bool feeding_ = false, feed_stop_ = false;
    mutable bool loaded_ = false;
    std::thread feeder_;
    std::atomic<size_t> watch_count_{0};
    mutable std::mutex ready_m_;
    mutable std::condition_variable ready_cv_;
};

// True for a path whose children the view mirrors (a container), false for a leaf.
bool is_container(const std::string& path);
// True for a path the view does not mirror (logs, console logs).
bool is_excluded(const std::string& path);

}  // namespace pvc::api
