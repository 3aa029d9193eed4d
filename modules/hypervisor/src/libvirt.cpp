#include "libvirt.hpp"

#include <libvirt/virterror.h>

#include <atomic>
#include <thread>

namespace pvc::hv {

std::string last_error() {
    virErrorPtr e = virGetLastError();
    if (e && e->message) return e->message;
    return "unknown libvirt error";
}

const char* state_name(int state) {
    static const char* names[] = {"NOSTATE", "RUNNING", "BLOCKED", "PAUSED", "SHUTDOWN", "SHUTOFF", "CRASHED", "PMSUSPENDED"};
    if (state < 0 || state > 7) return "NOSTATE";
    return names[state];
}

std::string paused_reason(int state, int reason) {
    if (state != VIR_DOMAIN_PAUSED) return {};
    switch (reason) {
    case VIR_DOMAIN_PAUSED_USER: return "paused by a user";
    case VIR_DOMAIN_PAUSED_MIGRATION: return "migration";
    case VIR_DOMAIN_PAUSED_SAVE: return "save";
    case VIR_DOMAIN_PAUSED_DUMP: return "dump";
    case VIR_DOMAIN_PAUSED_IOERROR: return "I/O error";
    case VIR_DOMAIN_PAUSED_WATCHDOG: return "watchdog";
    case VIR_DOMAIN_PAUSED_FROM_SNAPSHOT: return "restored from a snapshot";
    case VIR_DOMAIN_PAUSED_SHUTTING_DOWN: return "shutting down";
    case VIR_DOMAIN_PAUSED_SNAPSHOT: return "snapshot";
    case VIR_DOMAIN_PAUSED_CRASHED: return "guest crashed";
    case VIR_DOMAIN_PAUSED_STARTING_UP: return "starting up";
    case VIR_DOMAIN_PAUSED_POSTCOPY: return "post-copy migration";
    case VIR_DOMAIN_PAUSED_POSTCOPY_FAILED: return "post-copy migration failed";
    default: return "unknown reason";
    }
}

std::string uuid_of(virDomainPtr d) {
    char buf[VIR_UUID_STRING_BUFLEN] = {};
    if (virDomainGetUUIDString(d, buf) < 0) return {};
    return buf;
}

// ---- event loop ----

namespace {
void silence_errors(void*, virErrorPtr) {}  // errors are read with virGetLastError where they matter
std::once_flag g_register_once;
std::mutex g_loop_mutex;
std::weak_ptr<EventLoop> g_loop;
}  // namespace

struct EventLoop::Impl {
    std::atomic<bool> stop{false};
    int timer = -1;
    std::thread thread;
};

EventLoop::EventLoop(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::shared_ptr<EventLoop> EventLoop::acquire() {
    std::call_once(g_register_once, [] {
        virSetErrorFunc(nullptr, silence_errors);
        virEventRegisterDefaultImpl();
    });
    std::lock_guard g(g_loop_mutex);
    if (auto l = g_loop.lock()) return l;
    auto impl = std::make_unique<Impl>();
    // A disabled no-op timer: stopping enables it (fires at once), which wakes
    // virEventRunDefaultImpl so the thread notices `stop` (no periodic wake-ups).
    impl->timer = virEventAddTimeout(-1, [](int, void*) {}, nullptr, nullptr);
    auto* raw = impl.get();
    impl->thread = std::thread([raw] {
        while (!raw->stop.load()) virEventRunDefaultImpl();
    });
    auto l = std::make_shared<EventLoop>(std::move(impl));
    g_loop = l;
    return l;
}

EventLoop::~EventLoop() {
    impl_->stop = true;
    if (impl_->timer >= 0) virEventUpdateTimeout(impl_->timer, 0);
    if (impl_->thread.joinable()) impl_->thread.join();
    if (impl_->timer >= 0) virEventRemoveTimeout(impl_->timer);
}

// ---- connection ----

struct Connection::EventTarget {
    std::mutex m;
    LifecycleCallback cb;
};

namespace {
int lifecycle_cb(virConnectPtr, virDomainPtr d, int event, int detail, void* opaque) {
    auto* holder = static_cast<std::shared_ptr<Connection::EventTarget>*>(opaque);
    auto uuid = uuid_of(d);
    std::lock_guard g((*holder)->m);
    if ((*holder)->cb && !uuid.empty()) (*holder)->cb(uuid, event, detail);
    return 0;
}
void free_target(void* opaque) { delete static_cast<std::shared_ptr<Connection::EventTarget>*>(opaque); }
}  // namespace

Connection::Connection(std::string uri, Logger log, LifecycleCallback on_event)
    : uri_(std::move(uri)), log_(std::move(log)), target_(std::make_shared<EventTarget>()) {
    target_->cb = std::move(on_event);
    if (target_->cb) loop_ = EventLoop::acquire();
    else virSetErrorFunc(nullptr, silence_errors);
}

Connection::~Connection() {
    close();
    std::lock_guard g(m_);
    if (conn_) {
        if (callback_id_ >= 0) virConnectDomainEventDeregisterAny(conn_, callback_id_);
        virConnectClose(conn_);
        conn_ = nullptr;
    }
}

void Connection::close() {
    std::lock_guard g(target_->m);
    target_->cb = nullptr;
}

void Connection::register_events(virConnectPtr c) {
    if (!loop_) return;
    auto* opaque = new std::shared_ptr<EventTarget>(target_);
    callback_id_ = virConnectDomainEventRegisterAny(c, nullptr, VIR_DOMAIN_EVENT_ID_LIFECYCLE,
                                                    VIR_DOMAIN_EVENT_CALLBACK(lifecycle_cb), opaque, free_target);
    if (callback_id_ < 0) {
        delete opaque;
        log_.warn("Failed to register libvirt lifecycle events on {}: {}", uri_, last_error());
    }
}

void Connection::start_keepalive(virConnectPtr c) {
    // libvirt's own keepalive (it needs the event loop): a libvirtd that stops
    // answering is noticed within about interval × (count + 1) seconds, the
    // calls blocked on it fail, and the next get() reconnects.
    if (!loop_) return;
    if (virConnectSetKeepAlive(c, keepalive_interval_s, keepalive_count) != 0)
        log_.debug("libvirt keepalive not available on {}: {}", uri_, last_error());
}

ConnectHandle Connection::get(std::string* error) {
    std::lock_guard g(m_);
    if (conn_ && virConnectIsAlive(conn_) == 1) {
        virConnectRef(conn_);
        return ConnectHandle(conn_);
    }
    if (conn_) {
        log_.warn("libvirt connection to {} lost; reconnecting", uri_);
        if (callback_id_ >= 0) virConnectDomainEventDeregisterAny(conn_, callback_id_);
        callback_id_ = -1;
        virConnectClose(conn_);
        conn_ = nullptr;
    }
    conn_ = virConnectOpen(uri_.c_str());
    if (!conn_) {
        if (error) *error = "Failed to open libvirt connection " + uri_ + ": " + last_error();
        return nullptr;
    }
    register_events(conn_);
    start_keepalive(conn_);
    virConnectRef(conn_);
    return ConnectHandle(conn_);
}

DomainHandle Connection::lookup(const std::string& uuid) {
    auto c = get();
    if (!c) return nullptr;
    return DomainHandle(virDomainLookupByUUIDString(c.get(), uuid.c_str()));
}

DomainStatus Connection::status(const std::string& uuid) {
    DomainStatus s;
    std::string err;
    auto c = get(&err);
    if (!c) {
        s.error = err;
        return s;
    }
    DomainHandle d(virDomainLookupByUUIDString(c.get(), uuid.c_str()));
    if (!d) {
        if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) s.presence = DomainStatus::Presence::inactive;
        else s.error = last_error();
        return s;
    }
    return status_of(d.get());
}

DomainStatus Connection::status_of(virDomainPtr d) {
    DomainStatus s;
    int st = 0, reason = 0;
    if (virDomainGetState(d, &st, &reason, 0) < 0) {
        // Gone since the lookup (a transient domain destroyed): confirmed absent.
        if (virGetLastErrorCode() == VIR_ERR_NO_DOMAIN) s.presence = DomainStatus::Presence::inactive;
        else s.error = last_error();
        return s;
    }
    if (virDomainRef(d) < 0) {
        s.error = last_error();
        return s;
    }
    s.dom = DomainHandle(d);
    s.presence = active_state(st) ? DomainStatus::Presence::active : DomainStatus::Presence::inactive;
    s.state = st;
    s.reason = reason;
    return s;
}

int Connection::request_shutdown(virDomainPtr d) {
    GuestShutdown fn;
    {
        std::lock_guard g(shutdown_m_);
        fn = guest_shutdown_;
    }
    return fn ? fn(d) : virDomainShutdown(d);
}

void Connection::set_guest_shutdown(GuestShutdown fn) {
    std::lock_guard g(shutdown_m_);
    guest_shutdown_ = std::move(fn);
}

std::optional<std::string> Connection::create_xml(const std::string& xml, bool* connection_error) {
    if (connection_error) *connection_error = false;
    std::string err;
    auto c = get(&err);
    if (!c) {
        if (connection_error) *connection_error = true;
        return err;
    }
    DomainHandle d(virDomainCreateXML(c.get(), xml.c_str(), 0));
    if (d) return std::nullopt;
    err = last_error();
    if (connection_error) *connection_error = virConnectIsAlive(c.get()) != 1;
    return err;
}

std::optional<std::vector<DomainHandle>> Connection::list_active() {
    std::vector<DomainHandle> out;
    auto c = get();
    if (!c) return std::nullopt;
    virDomainPtr* doms = nullptr;
    int n = virConnectListAllDomains(c.get(), &doms, VIR_CONNECT_LIST_DOMAINS_ACTIVE);
    if (n < 0) return std::nullopt;
    for (int i = 0; i < n; i++) out.emplace_back(doms[i]);
    free(doms);
    return out;
}

}  // namespace pvc::hv
