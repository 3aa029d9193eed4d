// libvirt, owned: one connection with reconnect, RAII domain handles, and
// lifecycle events delivered through libvirt's default event loop.
#pragma once

#include <libvirt/libvirt.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"

namespace pvc::hv {

struct DomainFree { void operator()(virDomainPtr d) const { if (d) virDomainFree(d); } };
struct ConnectClose { void operator()(virConnectPtr c) const { if (c) virConnectClose(c); } };
// An owned reference to a libvirt domain / connection.
using DomainHandle = std::unique_ptr<virDomain, DomainFree>;
using ConnectHandle = std::unique_ptr<virConnect, ConnectClose>;

// Text of libvirt's last error on this thread ("unknown libvirt error" if none).
std::string last_error();

// libvirt's default event implementation, registered once per process, run
// by one thread while at least one EventLoop reference is alive.
class EventLoop {
public:
    static std::shared_ptr<EventLoop> acquire();
    ~EventLoop();
    EventLoop(const EventLoop&) = delete;
    EventLoop& operator=(const EventLoop&) = delete;
    struct Impl;
    explicit EventLoop(std::unique_ptr<Impl> impl);

private:
    std::unique_ptr<Impl> impl_;
};

// virDomainState as text (NOSTATE, RUNNING, ...).
const char* state_name(int state);
// Why a domain is PAUSED (virDomainPausedReason as text: "paused by a user", "I/O error",
// ...); "" for other states.
std::string paused_reason(int state, int reason);

// Whether a domain occupies this node: every libvirt state but SHUTOFF and
// CRASHED (a PAUSED or PMSUSPENDED QEMU still holds the guest and its locks;
// it is never destroyed to start the VM again).
inline bool active_state(int state) { return state != VIR_DOMAIN_SHUTOFF && state != VIR_DOMAIN_CRASHED; }

// What libvirt says of one domain. A lookup or state query that fails for any
// reason but "no such domain" is `unknown`, never "not running": nothing is
// started, destroyed or written on it.
struct DomainStatus {
    enum class Presence {
        active,     // found in an active state (active_state)
        inactive,   // confirmed: no such domain, or SHUTOFF/CRASHED
        unknown,    // libvirt could not be asked (connection, other error)
    };
    Presence presence = Presence::unknown;
    int state = VIR_DOMAIN_NOSTATE;   // when found
    int reason = 0;
    DomainHandle dom;                 // when found
    std::string error;                // unknown: libvirt's message

    bool active() const { return presence == Presence::active; }
    bool inactive() const { return presence == Presence::inactive; }
    bool unknown() const { return presence == Presence::unknown; }
};

class Connection {
public:
    // Called on the event-loop thread for every lifecycle event: UUID string,
    // virDomainEventType, detail. Must only post work.
    using LifecycleCallback = std::function<void(const std::string& uuid, int event, int detail)>;

    Connection(std::string uri, Logger log, LifecycleCallback on_event = {});
    ~Connection();
    Connection(const Connection&) = delete;
    Connection& operator=(const Connection&) = delete;

    const std::string& uri() const { return uri_; }
    // A reference to a live connection, reconnecting if needed; nullptr (and
    // `error` set) when libvirt cannot be reached.
    ConnectHandle get(std::string* error = nullptr);

    // Domain by UUID string; nullptr when absent or libvirt is unreachable.
    DomainHandle lookup(const std::string& uuid);
    // The domain's presence here (tri-state, see DomainStatus).
    DomainStatus status(const std::string& uuid);
    // The presence of a domain already looked up (the result holds its own reference).
    static DomainStatus status_of(virDomainPtr d);
    // libvirt reports RUNNING for `uuid` (tests, benchmarks; decisions use status()).
    bool running(const std::string& uuid) {
        auto s = status(uuid);
        return s.active() && s.state == VIR_DOMAIN_RUNNING;
    }
    // Asks the guest to power off (ACPI); libvirt's return code. A real guest
    // takes seconds to answer, libvirt's test driver powers off at once:
    // tests and benchmarks replace how the guest answers (a slow guest is a
    // domain destroyed later) through set_guest_shutdown.
    using GuestShutdown = std::function<int(virDomainPtr)>;
    int request_shutdown(virDomainPtr d);
    void set_guest_shutdown(GuestShutdown fn);
    // Creates a transient domain; error text on failure. `connection_error`
    // (if given) tells a libvirt that could not be reached or whose connection
    // died during the call (the domain's definition is not at fault) from a
    // refused domain.
    std::optional<std::string> create_xml(const std::string& xml, bool* connection_error = nullptr);
    // Active domains (VIR_CONNECT_LIST_DOMAINS_ACTIVE); nullopt when libvirt
    // cannot be asked (an empty list would claim nothing runs here).
    std::optional<std::vector<DomainHandle>> list_active();
    // Stops delivering events (before destruction of the receiver).
    void close();

    struct EventTarget;  // the receiver of events, shared with libvirt's callback

    // libvirt keepalive on every connection: a silent libvirtd is declared
    // dead after about 3 × (3 + 1) = 12 s.
    static constexpr int keepalive_interval_s = 3;
    static constexpr unsigned keepalive_count = 3;

private:
    void register_events(virConnectPtr c);
    void start_keepalive(virConnectPtr c);

    std::string uri_;
    Logger log_;
    std::shared_ptr<EventLoop> loop_;
    std::shared_ptr<EventTarget> target_;
    std::mutex m_;
    virConnectPtr conn_ = nullptr;
    int callback_id_ = -1;
    std::mutex shutdown_m_;
    GuestShutdown guest_shutdown_;
};

std::string uuid_of(virDomainPtr d);

}  // namespace pvc::hv
