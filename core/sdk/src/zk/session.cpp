// pvc::zk::Session over libzookeeper_mt: the connection, the session's
// states (connected, suspended, expired and recovered, closed) and the event
// thread that handles them. Operations are in session_ops.cpp, watches in
// session_watches.cpp.
//
// libzookeeper's thread only queues its events; the session's event thread
// handles them one at a time, in order.
#include "zk/request.hpp"
#include "zk/session_impl.hpp"

#include <zookeeper/zookeeper.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

namespace pvc::zk {

namespace detail {

namespace {

void zk_log(const char* message) { spdlog::debug("libzookeeper: {}", message); }

void global_watcher(zhandle_t*, int type, int state, const char* path, void* ctx) {
    auto* c = static_cast<HandleCtx*>(ctx);
    if (c && c->impl) c->impl->zk_event(c->gen, type, state, path);
}

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
    std::call_once(log_once, [] {
        zoo_set_debug_level(ZOO_LOG_LEVEL_WARN);
        // spdlog's default logger exists before libzookeeper's threads log
        // through zk_log: created lazily on one of them, it would reach the
        // caller's thread only through libspdlog's static guard, a
        // synchronisation ThreadSanitizer cannot see in an uninstrumented library.
        spdlog::default_logger_raw();
    });
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
    // By default the client resolves the coordinators' names on every turn of
    // its I/O loop (a netlink dump and a getaddrinfo each, several per tick
    // for nothing); once a minute still follows a change, and a lost
    // connection resolves at once regardless.
    zoo_set_servers_resolution_delay(h->zh, 60000);
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

void SessionImpl::restore_ephemerals() {
    std::map<std::string, std::string> eph;
    {
        std::lock_guard l(reg_m_);
        eph = ephemerals_;
    }
    for (const auto& [path, data] : eph) {
        int rc = create_node(path, data, ZOO_EPHEMERAL);
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

}  // namespace detail

// ---------------------------------------------------------------- public entry points

std::shared_ptr<Session> Session::connect(SessionOptions options) {
    auto s = std::make_shared<detail::SessionImpl>(std::move(options));
    s->start_and_wait();
    return s;
}

}  // namespace pvc::zk
