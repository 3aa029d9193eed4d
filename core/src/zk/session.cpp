// pvc::zk::Session over libzookeeper_mt.
//
// Every request uses the asynchronous C API and waits on its own completion
// with a deadline (options.op_timeout), so no call hangs while disconnected.
// All watches go through the handle's global watcher: libzookeeper's thread
// only queues the event; the session's event thread re-reads (re-arming the
// watch) and calls the callbacks, one at a time, in order.
#include "zk/session_impl.hpp"

#include <pvc/schema.hpp>

#include <zookeeper/zookeeper.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace pvc::zk {

namespace detail {

// ---------------------------------------------------------------- helpers

namespace {

Status status_of(int rc) {
    if (rc == ZOK) return Status::ok;
    if (rc == ZNONODE) return Status::no_node;
    if (rc == ZNODEEXISTS) return Status::node_exists;
    if (rc == ZBADVERSION) return Status::bad_version;
    if (rc == ZNOTEMPTY) return Status::not_empty;
    if (rc == ZCONNECTIONLOSS) return Status::connection_loss;
    if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZSESSIONMOVED) return Status::session_expired;
    if (rc == ZOPERATIONTIMEOUT) return Status::timeout;
    if (rc == ZCLOSING) return Status::closed;
    return Status::other;
}

[[noreturn]] void throw_rc(int rc, const std::string& what, const std::string& path) {
    throw Error(status_of(rc), "ZooKeeper " + what + " " + path + ": " + zerror(rc) + " (" +
                                   to_string(status_of(rc)) + ")");
}

Stat to_stat(const struct ::Stat* s) {
    Stat out;
    if (!s) return out;
    out.version = s->version;
    out.cversion = s->cversion;
    out.mzxid = s->mzxid;
    out.ephemeral_owner = s->ephemeralOwner;
    out.num_children = s->numChildren;
    return out;
}

std::string join(const std::string& parent, const std::string& child) {
    return parent == "/" ? "/" + child : parent + "/" + child;
}

void zk_log(const char* message) { spdlog::debug("libzookeeper: {}", message); }

void global_watcher(zhandle_t*, int type, int state, const char* path, void* ctx) {
    auto* c = static_cast<HandleCtx*>(ctx);
    if (c && c->impl) c->impl->zk_event(c->gen, type, state, path);
}

}  // namespace

// One in-flight request. Shared between the waiting caller and the completion.
struct OpState {
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    int rc = ZOK;
    std::string value;
    bool has_value = false;
    Stat stat;
    std::vector<std::string> strings;
    std::string created;
    // multi
    std::vector<zoo_op_t> ops;
    std::vector<zoo_op_result_t> results;
    std::vector<std::vector<char>> bufs;
    std::vector<struct ::Stat> stats;

    void finish(int r) {
        { std::lock_guard l(m); rc = r; done = true; }
        cv.notify_all();
    }
};

namespace {

using Holder = std::shared_ptr<OpState>;
Holder take(const void* data) {
    auto* h = static_cast<Holder*>(const_cast<void*>(data));
    Holder st = std::move(*h);
    delete h;
    return st;
}

void data_done(int rc, const char* value, int len, const struct ::Stat* stat, const void* data) {
    auto st = take(data);
    if (rc == ZOK) {
        st->value = (value && len > 0) ? std::string(value, static_cast<size_t>(len)) : std::string();
        st->has_value = true;
        st->stat = to_stat(stat);
    }
    st->finish(rc);
}
void stat_done(int rc, const struct ::Stat* stat, const void* data) {
    auto st = take(data);
    if (rc == ZOK) st->stat = to_stat(stat);
    st->finish(rc);
}
void strings_done(int rc, const struct String_vector* strings, const void* data) {
    auto st = take(data);
    if (rc == ZOK && strings)
        for (int32_t i = 0; i < strings->count; ++i) st->strings.emplace_back(strings->data[i]);
    st->finish(rc);
}
void string_done(int rc, const char* value, const void* data) {
    auto st = take(data);
    if (rc == ZOK && value) st->created = value;
    st->finish(rc);
}
void void_done(int rc, const void* data) { take(data)->finish(rc); }

}  // namespace

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

// ---------------------------------------------------------------- handle

ZHandle::~ZHandle() {
    if (zh) zookeeper_close(zh);
}

// ---------------------------------------------------------------- lifecycle

SessionImpl::SessionImpl(SessionOptions o) : opts_(std::move(o)) {}

SessionImpl::~SessionImpl() {
    close();
    if (event_thread_.joinable()) {
        if (on_event_thread()) event_thread_.detach();
        else event_thread_.join();
    }
}

void SessionImpl::start_and_wait() {
    static std::once_flag log_once;
    std::call_once(log_once, [] { zoo_set_debug_level(ZOO_LOG_LEVEL_WARN); });
    event_thread_ = std::thread([this] { event_loop(); });
    event_thread_id_ = event_thread_.get_id();

    auto deadline = Clock::now() + opts_.connect_timeout;
    auto backoff = std::chrono::milliseconds(100);
    while (!open_handle()) {
        if (Clock::now() + backoff >= deadline) break;
        std::this_thread::sleep_for(backoff);
        backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    }
    std::unique_lock l(m_);
    bool ok = state_cv_.wait_until(l, deadline, [&] { return handle_ && connected_; });
    l.unlock();
    if (!ok) {
        close();
        throw Error(Status::timeout, "could not connect to ZooKeeper at " + opts_.hosts + " within " +
                                         std::to_string(opts_.connect_timeout.count()) + " ms");
    }
}

std::shared_ptr<ZHandle> SessionImpl::open_handle() {
    auto h = std::make_shared<ZHandle>();
    {
        std::lock_guard l(m_);
        if (closed_) return nullptr;
        h->ctx = std::make_unique<HandleCtx>(HandleCtx{this, ++gen_});
        connected_ = false;
    }
    h->zh = zookeeper_init2(opts_.hosts.c_str(), global_watcher, static_cast<int>(opts_.session_timeout.count()),
                            nullptr, h->ctx.get(), 0, zk_log);
    if (!h->zh) {
        spdlog::warn("ZooKeeper: cannot open a handle for {}: {}", opts_.hosts, std::strerror(errno));
        return nullptr;
    }
    std::shared_ptr<ZHandle> old;  // closed outside m_: its thread may be waiting for m_ in zk_event
    {
        std::lock_guard l(m_);
        old = std::move(handle_);
        handle_ = h;
    }
    state_cv_.notify_all();
    old.reset();
    return h;
}

void SessionImpl::close() {
    if (closed_.exchange(true)) return;
    {
        std::lock_guard l(m_);
        connected_ = false;
    }
    state_cv_.notify_all();
    fire_all_oneshots();
    // Let the event thread deliver `closed`, then stop.
    post([this] {
        emit(SessionEvent::closed);
        std::lock_guard l(q_m_);
        stop_ = true;
    });
    if (event_thread_.joinable() && !on_event_thread()) event_thread_.join();
    std::shared_ptr<ZHandle> h;
    {
        std::lock_guard l(m_);
        h = std::move(handle_);
    }
    // In-flight calls notice closed_ within one wait slice and drop their reference;
    // then zookeeper_close() runs here (ephemerals go away at once).
    auto until = Clock::now() + std::chrono::seconds(5);
    while (h && h.use_count() > 1 && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    h.reset();
}

bool SessionImpl::connected() const {
    std::lock_guard l(m_);
    return connected_ && !closed_;
}

int64_t SessionImpl::session_id() const {
    std::lock_guard l(m_);
    if (!handle_ || !handle_->zh) return 0;
    const clientid_t* id = zoo_client_id(handle_->zh);
    return id ? id->client_id : 0;
}

std::string SessionImpl::session_password() const {
    std::lock_guard l(m_);
    if (!handle_ || !handle_->zh) return {};
    const clientid_t* id = zoo_client_id(handle_->zh);
    return id ? std::string(id->passwd, sizeof id->passwd) : std::string();
}

// ---------------------------------------------------------------- requests

std::shared_ptr<ZHandle> SessionImpl::acquire_handle(Clock::time_point deadline, int& rc) {
    std::unique_lock l(m_);
    while (!closed_ && !(handle_ && connected_)) {
        auto next = std::min(deadline, Clock::now() + std::chrono::milliseconds(50));
        state_cv_.wait_until(l, next);
        if (Clock::now() >= deadline) break;
    }
    if (closed_) { rc = ZCLOSING; return nullptr; }
    if (!(handle_ && connected_)) { rc = ZOPERATIONTIMEOUT; return nullptr; }
    return handle_;
}

int SessionImpl::call(const std::shared_ptr<OpState>& st, const std::function<int(zhandle_t*, const void*)>& submit,
                      bool idempotent) {
    auto deadline = Clock::now() + opts_.op_timeout;
    for (;;) {
        int rc = ZOK;
        auto h = acquire_handle(deadline, rc);
        if (!h) return rc;
        {
            std::lock_guard l(st->m);
            st->done = false;
            st->rc = ZOK;
            st->has_value = false;
            st->strings.clear();
        }
        auto* holder = new Holder(st);
        rc = submit(h->zh, holder);
        if (rc == ZOK) requests_++;
        if (rc != ZOK) {
            if (rc == ZBADARGUMENTS || rc == ZINVALIDSTATE) delete holder;
            // Not sent (the handle just expired): safe to retry on the recovered session.
            if (rc == ZINVALIDSTATE && !closed_ && Clock::now() < deadline) {
                h.reset();
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
                continue;
            }
            return rc;
        }
        h.reset();
        std::unique_lock l(st->m);
        while (!st->done && !closed_ && Clock::now() < deadline)
            st->cv.wait_until(l, std::min(deadline, Clock::now() + std::chrono::milliseconds(50)));
        if (!st->done) return closed_ ? ZCLOSING : ZOPERATIONTIMEOUT;
        rc = st->rc;
        l.unlock();
        if (idempotent && (rc == ZCONNECTIONLOSS || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) && !closed_ &&
            Clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            continue;
        }
        return rc;
    }
}

std::optional<std::string> SessionImpl::get_watched(const std::string& path, Stat* stat, bool watch, int& rc) {
    auto st = std::make_shared<OpState>();
    reads_++;
    rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aget(zh, path.c_str(), watch, data_done, d); }, true);
    if (rc != ZOK) return std::nullopt;
    if (stat) *stat = st->stat;
    return st->value;
}

std::optional<std::string> SessionImpl::get(const std::string& path, Stat* stat) {
    int rc = ZOK;
    auto v = get_watched(path, stat, false, rc);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw_rc(rc, "get", path);
    return v;
}

bool SessionImpl::exists(const std::string& path, Stat* stat) {
    auto st = std::make_shared<OpState>();
    reads_++;
    int rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aexists(zh, path.c_str(), 0, stat_done, d); },
                  true);
    if (rc == ZNONODE) return false;
    if (rc != ZOK) throw_rc(rc, "exists", path);
    if (stat) *stat = st->stat;
    return true;
}

std::optional<std::vector<std::string>> SessionImpl::raw_children(const std::string& path) {
    auto st = std::make_shared<OpState>();
    reads_++;
    int rc = call(
        st, [&](zhandle_t* zh, const void* d) { return zoo_aget_children(zh, path.c_str(), 0, strings_done, d); },
        true);
    if (rc == ZNONODE) return std::nullopt;
    if (rc != ZOK) throw_rc(rc, "get_children", path);
    return st->strings;
}

namespace {
std::vector<std::string> without_contenders(std::vector<std::string> v) {
    v.erase(std::remove_if(v.begin(), v.end(), [](const std::string& c) { return schema::is_lock_contender(c); }),
            v.end());
    std::sort(v.begin(), v.end());
    return v;
}
}  // namespace

std::optional<std::vector<std::string>> SessionImpl::children(const std::string& path) {
    auto raw = raw_children(path);
    if (!raw) return std::nullopt;
    return without_contenders(std::move(*raw));
}

std::string SessionImpl::create(const std::string& path, const std::string& data, bool ephemeral, bool sequential) {
    auto st = std::make_shared<OpState>();
    int mode = (ephemeral ? ZOO_EPHEMERAL : 0) | (sequential ? ZOO_SEQUENCE : 0);
    int rc = call(
        st,
        [&](zhandle_t* zh, const void* d) {
            return zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                               mode, string_done, d);
        },
        false);
    if (rc != ZOK) throw_rc(rc, "create", path);
    return st->created;
}

Status SessionImpl::remove(const std::string& path, int32_t version) {
    auto st = std::make_shared<OpState>();
    int rc = call(
        st, [&](zhandle_t* zh, const void* d) { return zoo_adelete(zh, path.c_str(), version, void_done, d); },
        version == -1);
    return status_of(rc);
}

void SessionImpl::ensure_path(const std::string& path) {
    if (path.empty() || path == "/") return;
    if (exists(path, nullptr)) return;
    size_t pos = 0;
    while (pos != std::string::npos) {
        pos = path.find('/', pos + 1);
        std::string prefix = path.substr(0, pos);
        auto st = std::make_shared<OpState>();
        int rc = call(
            st,
            [&](zhandle_t* zh, const void* d) {
                return zoo_acreate(zh, prefix.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, 0, string_done, d);
            },
            true);  // a repeated create of the same persistent path is harmless (node_exists)
        if (rc != ZOK && rc != ZNODEEXISTS) throw_rc(rc, "create", prefix);
    }
}

bool SessionImpl::remove_recursive(const std::string& path) {
    auto kids = raw_children(path);
    if (!kids) return false;
    for (int attempt = 0; attempt < 5; ++attempt) {
        for (const auto& k : *kids) remove_recursive(join(path, k));
        Status s = remove(path);
        if (s == Status::ok || s == Status::no_node) return true;
        if (s != Status::not_empty) throw Error(s, std::string("ZooKeeper delete ") + path + ": " + to_string(s));
        kids = raw_children(path);  // someone added a child meanwhile
        if (!kids) return true;
    }
    throw Error(Status::not_empty, "ZooKeeper delete " + path + ": children keep appearing");
}

Status SessionImpl::commit(const Transaction& tx) {
    if (tx.empty()) return Status::ok;
    const auto& ops = tx.ops();
    auto st = std::make_shared<OpState>();
    int rc = call(
        st,
        [&](zhandle_t* zh, const void* d) {
            size_t n = ops.size();
            st->ops.assign(n, zoo_op_t{});
            st->results.assign(n, zoo_op_result_t{});
            st->bufs.assign(n, std::vector<char>(1024));
            st->stats.assign(n, ::Stat{});
            for (size_t i = 0; i < n; ++i) {
                const auto& o = ops[i];
                switch (o.kind) {
                    case Transaction::Op::create:
                        zoo_create_op_init(&st->ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                           &ZOO_OPEN_ACL_UNSAFE, o.ephemeral ? ZOO_EPHEMERAL : 0, st->bufs[i].data(),
                                           static_cast<int>(st->bufs[i].size()));
                        break;
                    case Transaction::Op::set:
                        zoo_set_op_init(&st->ops[i], o.path.c_str(), o.data.data(), static_cast<int>(o.data.size()),
                                        o.version, &st->stats[i]);
                        break;
                    case Transaction::Op::check: zoo_check_op_init(&st->ops[i], o.path.c_str(), o.version); break;
                    case Transaction::Op::remove: zoo_delete_op_init(&st->ops[i], o.path.c_str(), o.version); break;
                }
            }
            return zoo_amulti(zh, static_cast<int>(n), st->ops.data(), st->results.data(), void_done, d);
        },
        false);
    if (rc != ZOK) {
        // Report the failing op's own error, not the "rolled back" code of its neighbours.
        std::lock_guard l(st->m);
        if (st->done)
            for (const auto& r : st->results)
                if (r.err != ZOK && r.err != ZRUNTIMEINCONSISTENCY) return status_of(r.err);
    }
    return status_of(rc);
}

bool SessionImpl::write(const std::vector<KeyValue>& kvs) {
    Transaction tx(*this);
    try {
        for (const auto& [path, data] : kvs) {
            Stat s;
            if (exists(path, &s)) {
                tx.set(path, data, -1);
                tx.check(path, s.version + 1);
            } else {
                tx.create(path, data);
            }
        }
    } catch (const Error& e) {
        spdlog::error("ZooKeeper write failed: {}", e.what());
        return false;
    }
    Status s = commit(tx);
    if (s != Status::ok) {
        std::string keys;
        for (const auto& kv : kvs) keys += (keys.empty() ? "" : ", ") + kv.first;
        spdlog::error("ZooKeeper write of {} failed: {}", keys, to_string(s));
        return false;
    }
    return true;
}

bool SessionImpl::create_ephemeral(const std::string& path, const std::string& data) {
    auto st = std::make_shared<OpState>();
    int rc = call(
        st,
        [&](zhandle_t* zh, const void* d) {
            return zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                               ZOO_EPHEMERAL, string_done, d);
        },
        false);
    if (rc == ZNODEEXISTS || rc == ZCONNECTIONLOSS) {
        // Ours already (an earlier attempt whose reply was lost)?
        Stat s;
        if (exists(path, &s) && s.ephemeral_owner == session_id()) rc = ZOK;
        else if (rc == ZNODEEXISTS) return false;
    }
    if (rc != ZOK) throw_rc(rc, "create", path);
    std::lock_guard l(reg_m_);
    ephemerals_[path] = data;
    return true;
}

void SessionImpl::remove_ephemeral(const std::string& path) {
    {
        std::lock_guard l(reg_m_);
        if (!ephemerals_.erase(path)) return;
    }
    Stat s;
    if (exists(path, &s) && s.ephemeral_owner == session_id()) remove(path, s.version);
}

// ---------------------------------------------------------------- event thread

void SessionImpl::post(std::function<void()> fn) {
    {
        std::lock_guard l(q_m_);
        queue_.push_back(std::move(fn));
    }
    q_cv_.notify_one();
}

void SessionImpl::run_on_event_thread(std::function<void()> fn) {
    if (on_event_thread()) { fn(); return; }
    auto done = std::make_shared<OneShot>();
    post([fn = std::move(fn), done] {
        fn();
        done->fire();
    });
    std::unique_lock l(done->m);
    // Bounded: the event thread may be stuck in a slow user callback.
    done->cv.wait_for(l, opts_.op_timeout + std::chrono::seconds(1), [&] { return done->fired || closed_.load(); });
}

void SessionImpl::event_loop() {
    for (;;) {
        std::function<void()> fn;
        {
            std::unique_lock l(q_m_);
            q_cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stop_ and drained
            fn = std::move(queue_.front());
            queue_.pop_front();
        }
        try {
            fn();
        } catch (const std::exception& e) {
            spdlog::error("ZooKeeper event handler failed: {}", e.what());
        } catch (...) {
            spdlog::error("ZooKeeper event handler failed with an unknown exception");
        }
        std::lock_guard l(q_m_);
        if (stop_) return;
    }
}

void SessionImpl::zk_event(uint64_t gen, int type, int state, const char* path) {
    std::string p = path ? path : "";
    if (type == ZOO_SESSION_EVENT) {
        {
            std::lock_guard l(m_);
            if (gen != gen_) return;
            connected_ = (state == ZOO_CONNECTED_STATE);
        }
        state_cv_.notify_all();
        if (closed_) return;
        post([this, gen, state] { handle_session_state(gen, state); });
        return;
    }
    if (closed_) return;
    post([this, gen, type, p] {
        {
            std::lock_guard l(m_);
            if (gen != gen_) return;
        }
        dispatch_node_event(type, p);
    });
}

void SessionImpl::handle_session_state(uint64_t gen, int state) {
    {
        std::lock_guard l(m_);
        if (gen != gen_ || closed_) return;
    }
    if (state == ZOO_CONNECTED_STATE) {
        if (recovering_) {
            recovering_ = false;
            suspended_ = false;
            spdlog::warn("ZooKeeper: session expired; new session {:#x} opened, restoring ephemerals and watches",
                         session_id());
            {
                std::lock_guard l(reg_m_);
                orphans_.clear();  // they were ephemerals of the expired session
            }
            restore_ephemerals();
            refresh_all(true);
            fire_all_oneshots();
            emit(SessionEvent::expired_recovered);
        } else if (!ever_connected_) {
            ever_connected_ = true;
            emit(SessionEvent::connected);
        } else if (suspended_) {
            suspended_ = false;
            remove_orphans();
            refresh_all(false);  // a watch whose re-arm failed while disconnected
            fire_all_oneshots();
            emit(SessionEvent::reconnected);
        }
    } else if (state == ZOO_EXPIRED_SESSION_STATE) {
        if (!suspended_ && ever_connected_) {
            suspended_ = true;
            emit(SessionEvent::suspended);
        }
        recovering_ = true;
        fire_all_oneshots();
        auto backoff = std::chrono::milliseconds(100);
        while (!closed_ && !open_handle()) {
            std::this_thread::sleep_for(backoff);
            backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
        }
    } else if (state == ZOO_AUTH_FAILED_STATE) {
        spdlog::error("ZooKeeper: authentication failed");
    } else {  // connecting / associating / not connected
        if (!suspended_ && ever_connected_) {
            suspended_ = true;
            fire_all_oneshots();
            emit(SessionEvent::suspended);
        }
    }
}

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

void SessionImpl::restore_ephemerals() {
    std::map<std::string, std::string> eph;
    {
        std::lock_guard l(reg_m_);
        eph = ephemerals_;
    }
    for (const auto& [path, data] : eph) {
        auto st = std::make_shared<OpState>();
        int rc = call(
            st,
            [&](zhandle_t* zh, const void* d) {
                return zoo_acreate(zh, path.c_str(), data.data(), static_cast<int>(data.size()), &ZOO_OPEN_ACL_UNSAFE,
                                   ZOO_EPHEMERAL, string_done, d);
            },
            false);
        if (rc != ZOK) spdlog::error("ZooKeeper: cannot re-create ephemeral {}: {}", path, zerror(rc));
    }
}

void SessionImpl::remove_when_reconnected(const std::string& path) {
    {
        std::lock_guard l(reg_m_);
        orphans_.push_back(path);
    }
    // Connected again meanwhile (the reconnect event may have been handled already).
    if (connected()) post([this] { remove_orphans(); });
}

void SessionImpl::remove_orphans() {
    std::vector<std::string> paths;
    {
        std::lock_guard l(reg_m_);
        paths.swap(orphans_);
    }
    for (const auto& p : paths) {
        Status s = remove(p);
        if (s == Status::ok || s == Status::no_node || s == Status::closed) continue;
        spdlog::warn("ZooKeeper: cannot remove our stale lock contender {}: {}; retrying on the next reconnect", p,
                     to_string(s));
        std::lock_guard l(reg_m_);
        orphans_.push_back(p);
    }
}

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
    std::vector<std::shared_ptr<WatchState>> ws;
    {
        std::lock_guard l(reg_m_);
        for (auto& [p, w] : watches_) ws.push_back(w);
    }
    for (auto& w : ws) refresh(w, force);
}

// Re-reads the watched value with the watch set and calls back with it.
// Runs on the event thread only.
void SessionImpl::refresh(const std::shared_ptr<WatchState>& w, bool force) {
    if (w->cancelled) return;
    for (int attempt = 0; attempt < 10; ++attempt) {
        auto st = std::make_shared<OpState>();
        int rc;
        reads_++;
        if (w->children)
            rc = call(st, [&](zhandle_t* zh, const void* d) {
                    return zoo_aget_children(zh, w->path.c_str(), 1, strings_done, d);
                }, true);
        else
            rc = call(st, [&](zhandle_t* zh, const void* d) { return zoo_aget(zh, w->path.c_str(), 1, data_done, d); },
                      true);
        bool exists_now = rc == ZOK;
        if (rc == ZNONODE) {
            // Watch for its creation.
            auto es = std::make_shared<OpState>();
            reads_++;
            int erc = call(es, [&](zhandle_t* zh, const void* d) {
                return zoo_aexists(zh, w->path.c_str(), 1, stat_done, d);
            }, true);
            if (erc == ZOK) continue;  // created in between: read it
            if (erc != ZNONODE) rc = erc;
        }
        if (rc != ZOK && rc != ZNONODE) {
            spdlog::warn("ZooKeeper: cannot re-arm watch on {}: {}", w->path, zerror(rc));
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

}  // namespace detail

// ---------------------------------------------------------------- public entry points

std::shared_ptr<Session> Session::connect(SessionOptions options) {
    auto s = std::make_shared<detail::SessionImpl>(std::move(options));
    s->start_and_wait();
    return s;
}

Transaction& Transaction::create(std::string path, std::string data, bool ephemeral) {
    ops_.push_back(Op{Op::create, std::move(path), std::move(data), -1, ephemeral});
    return *this;
}
Transaction& Transaction::set(std::string path, std::string data, int32_t version) {
    ops_.push_back(Op{Op::set, std::move(path), std::move(data), version, false});
    return *this;
}
Transaction& Transaction::check(std::string path, int32_t version) {
    ops_.push_back(Op{Op::check, std::move(path), {}, version, false});
    return *this;
}
Transaction& Transaction::remove(std::string path, int32_t version) {
    ops_.push_back(Op{Op::remove, std::move(path), {}, version, false});
    return *this;
}
Status Transaction::commit() { return session_.commit(*this); }

}  // namespace pvc::zk
