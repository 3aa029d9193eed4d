// pvc::zk::Session's watches: kazoo-style data and children watches (re-armed
// after each fire, the callback gets the latest value), session-event
// subscriptions, and the one-shot waits of the lock recipes.
//
// All watches go through the handle's global watcher: libzookeeper's thread
// only queues the event; the session's event thread re-reads (re-arming the
// watch) and calls the callbacks, one at a time, in order.
#include "zk/request.hpp"
#include "zk/session_impl.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

namespace pvc::zk::detail {

struct WatchState {
    std::string path;
    bool children = false;
    DataCallback dcb;
    ChildrenCallback ccb;
    std::atomic<bool> cancelled{false};
    std::recursive_mutex cb_m;  // held while the callback runs; cancel() from another thread waits on it
    // last value delivered (event thread only)
    bool have_last = false;
    bool last_exists = false;
    int64_t last_mzxid = 0;
    int32_t last_version = -1;
    std::optional<std::vector<std::string>> last_children;
};

struct SubState {
    SessionCallback cb;
    std::atomic<bool> cancelled{false};
};

namespace {

class WatchHandle final : public Watch {
public:
    WatchHandle(std::weak_ptr<SessionImpl> s, std::shared_ptr<WatchState> w) : s_(std::move(s)), w_(std::move(w)) {}
    ~WatchHandle() override { cancel(); }
    void cancel() override {
        if (w_->cancelled.exchange(true)) return;
        if (auto s = s_.lock()) {
            s->cancel_watch(w_);
            // Wait for a callback running on another thread, so none runs after cancel() returns.
            if (!s->on_event_thread()) {
                std::lock_guard l(w_->cb_m);
            }
        }
    }
private:
    std::weak_ptr<SessionImpl> s_;
    std::shared_ptr<WatchState> w_;
};

class SubHandle final : public Watch {
public:
    SubHandle(std::weak_ptr<SessionImpl> s, std::shared_ptr<SubState> sub) : s_(std::move(s)), sub_(std::move(sub)) {}
    ~SubHandle() override { cancel(); }
    void cancel() override {
        if (sub_->cancelled.exchange(true)) return;
        if (auto s = s_.lock()) s->cancel_sub(sub_);
    }
private:
    std::weak_ptr<SessionImpl> s_;
    std::shared_ptr<SubState> sub_;
};

}  // namespace

// ---------------------------------------------------------------- session events

void SessionImpl::emit(SessionEvent e) {
    std::vector<std::shared_ptr<SubState>> subs;
    {
        std::lock_guard l(reg_m_);
        subs = subs_;
    }
    for (const auto& s : subs) {
        if (s->cancelled) continue;
        try {
            s->cb(e);
        } catch (const std::exception& ex) {
            spdlog::error("ZooKeeper session callback failed: {}", ex.what());
        }
    }
}

// ---------------------------------------------------------------- watches and one-shot waits

void SessionImpl::fire_all_oneshots() {
    std::multimap<std::string, std::shared_ptr<OneShot>> all;
    {
        std::lock_guard l(reg_m_);
        all.swap(oneshots_);
    }
    for (auto& [p, o] : all) o->fire();
}

void SessionImpl::dispatch_node_event(int type, const std::string& path) {
    std::vector<std::shared_ptr<WatchState>> ws;
    std::vector<std::shared_ptr<OneShot>> os;
    {
        std::lock_guard l(reg_m_);
        auto [b, e] = watches_.equal_range(path);
        for (auto it = b; it != e; ++it) ws.push_back(it->second);
        auto [ob, oe] = oneshots_.equal_range(path);
        for (auto it = ob; it != oe; ++it) os.push_back(it->second);
        oneshots_.erase(ob, oe);
    }
    for (auto& o : os) o->fire();
    for (auto& w : ws) {
        bool relevant = w->children ? (type == ZOO_CHILD_EVENT || type == ZOO_DELETED_EVENT || type == ZOO_CREATED_EVENT)
                                    : (type == ZOO_CHANGED_EVENT || type == ZOO_DELETED_EVENT || type == ZOO_CREATED_EVENT);
        if (relevant) refresh(w, false);
    }
}

void SessionImpl::refresh_all(bool force) {
    force = force || std::exchange(force_pending_, false);
    std::vector<std::shared_ptr<WatchState>> ws;
    {
        std::lock_guard l(reg_m_);
        for (auto& [p, w] : watches_) ws.push_back(w);
    }
    for (auto& w : ws) refresh(w, force);
}

// Re-reads the watched value with the watch set and calls back with it.
// Runs on the event thread only.
//
// Disconnected, nothing is read: every watch is re-read by the reconnection's
// refresh_all(), which comes after the session-state handler already queued
// behind this task. Waiting here instead would hold the event thread an
// operation timeout per watch, and after a session expiry the new session is
// only opened by that queued handler (thousands of watches: hours).
void SessionImpl::refresh(const std::shared_ptr<WatchState>& w, bool force) {
    if (w->cancelled) return;
    if (ever_connected_ && !connected()) {
        force_pending_ = force_pending_ || force;
        return;
    }
    // Nor does a read wait out, or retry after, a lost connection (the
    // reconnection re-reads).
    const bool retry = !ever_connected_;
    for (int attempt = 0; attempt < 10; ++attempt) {
        auto st = std::make_shared<OpState>();
        int rc;
        reads_++;
        if (w->children)
            rc = call(st, [&](zhandle_t* zh, const void* d) {
                    return zoo_aget_children(zh, w->path.c_str(), 1, strings_done, d);
                }, retry, !retry);
        else
            rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aget(zh, w->path.c_str(), 1, data_done, d); },
                      retry, !retry);
        bool exists_now = rc == ZOK;
        if (rc == ZNONODE) {
            // Watch for its creation.
            auto es = std::make_shared<OpState>();
            reads_++;
            int erc = call(es, [&](zhandle_t* zh, const void* d) {
                return zoo_aexists(zh, w->path.c_str(), 1, stat_done, d);
            }, retry, !retry);
            if (erc == ZOK) continue;  // created in between: read it
            if (erc != ZNONODE) rc = erc;
        }
        if (rc != ZOK && rc != ZNONODE) {
            spdlog::warn("ZooKeeper: cannot re-arm watch on {}: {}", w->path, zerror(rc));
            force_pending_ = force_pending_ || force;
            return;  // re-armed on reconnection
        }
        std::lock_guard cb(w->cb_m);
        if (w->cancelled) return;
        try {
            if (w->children) {
                std::optional<std::vector<std::string>> kids;
                if (exists_now) kids = without_contenders(st->strings);
                if (!force && w->have_last && kids == w->last_children) return;
                w->have_last = true;
                w->last_children = kids;
                w->ccb(kids);
            } else {
                std::optional<std::string> data;
                Stat stat;
                if (exists_now) { data = st->value; stat = st->stat; }
                if (!force && w->have_last && w->last_exists == exists_now &&
                    (!exists_now || (w->last_mzxid == stat.mzxid && w->last_version == stat.version)))
                    return;
                w->have_last = true;
                w->last_exists = exists_now;
                w->last_mzxid = stat.mzxid;
                w->last_version = stat.version;
                w->dcb(data, stat);
            }
        } catch (const std::exception& e) {
            spdlog::error("ZooKeeper watch callback on {} failed: {}", w->path, e.what());
        }
        return;
    }
}

std::shared_ptr<Watch> SessionImpl::add_watch(std::shared_ptr<WatchState> w) {
    {
        std::lock_guard l(reg_m_);
        watches_.emplace(w->path, w);
    }
    // Raw `this`: a queued task always runs before the destructor's close() lets the thread stop.
    run_on_event_thread([this, w] { refresh(w, true); });
    return std::make_shared<WatchHandle>(std::static_pointer_cast<SessionImpl>(shared_from_this()), w);
}

std::shared_ptr<Watch> SessionImpl::watch_data(const std::string& path, DataCallback cb) {
    auto w = std::make_shared<WatchState>();
    w->path = path;
    w->dcb = std::move(cb);
    return add_watch(std::move(w));
}

std::shared_ptr<Watch> SessionImpl::watch_children(const std::string& path, ChildrenCallback cb) {
    auto w = std::make_shared<WatchState>();
    w->path = path;
    w->children = true;
    w->ccb = std::move(cb);
    return add_watch(std::move(w));
}

std::shared_ptr<Watch> SessionImpl::on_session_event(SessionCallback cb) {
    auto s = std::make_shared<SubState>();
    s->cb = std::move(cb);
    {
        std::lock_guard l(reg_m_);
        subs_.push_back(s);
    }
    return std::make_shared<SubHandle>(std::static_pointer_cast<SessionImpl>(shared_from_this()), s);
}

void SessionImpl::cancel_watch(const std::shared_ptr<WatchState>& w) {
    std::lock_guard l(reg_m_);
    auto [b, e] = watches_.equal_range(w->path);
    for (auto it = b; it != e; ++it)
        if (it->second == w) { watches_.erase(it); break; }
}

void SessionImpl::cancel_sub(const std::shared_ptr<SubState>& s) {
    std::lock_guard l(reg_m_);
    subs_.erase(std::remove(subs_.begin(), subs_.end(), s), subs_.end());
}

WaitResult SessionImpl::wait_for_change(const std::string& path, Clock::time_point deadline,
                                        const std::function<bool()>& stop) {
    auto o = std::make_shared<OneShot>();
    {
        std::lock_guard l(reg_m_);
        oneshots_.emplace(path, o);
    }
    auto drop = [&] {
        std::lock_guard l(reg_m_);
        auto [b, e] = oneshots_.equal_range(path);
        for (auto it = b; it != e; ++it)
            if (it->second == o) { oneshots_.erase(it); break; }
    };
    auto st = std::make_shared<OpState>();
    reads_++;
    int rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aexists(zh, path.c_str(), 1, stat_done, d); },
                  true);
    if (rc != ZOK) {
        drop();
        if (closed_ || rc == ZCLOSING) return WaitResult::closed;
        if (rc == ZNONODE) return WaitResult::changed;
        return Clock::now() >= deadline ? WaitResult::timeout : WaitResult::changed;  // caller re-checks
    }
    std::unique_lock l(o->m);
    while (!o->fired && !closed_ && Clock::now() < deadline) {
        o->cv.wait_until(l, std::min(deadline, Clock::now() + std::chrono::milliseconds(100)));
        if (stop && !o->fired) {
            l.unlock();
            bool stopping = stop();
            l.lock();
            if (stopping) break;
        }
    }
    bool fired = o->fired;
    l.unlock();
    if (!fired) drop();
    if (closed_) return WaitResult::closed;
    return fired ? WaitResult::changed : WaitResult::timeout;
}

}  // namespace pvc::zk::detail
