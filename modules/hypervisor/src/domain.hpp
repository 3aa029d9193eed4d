// One VM as seen by this node (modules/hypervisor/README.md): a state watch on
// /domains/<uuid>/state, a strand that serialises its transitions, and the
// procedures (start, restart, shutdown, stop, terminate, send, receive) run
// one at a time on the procedure pool.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include <boost/asio/steady_timer.hpp>

#include "console_log.hpp"
#include "shared.hpp"

namespace pvc::hv {

// Every state string of schema 10 the node daemon knows.
enum class VmState { start, restart, shutdown, stop, disable, fail, migrate, migrate_live, unmigrate,
                     provision, restore, remove /* "delete" */, invalid };
VmState parse_vm_state(std::string_view s);
// migrate, migrate-live or unmigrate.
bool is_migrate(VmState s);

class Domain : public std::enable_shared_from_this<Domain> {
public:
    // Values of the last dispatch, for the keepalive and the flush.
    struct Cached {
        std::string name;
        std::string state;
        std::string node;
        std::string lastnode;
        long memory_mib = 0;   // from /xml's <memory>
    };

    Domain(Shared& shared, std::string uuid);
    const std::string& uuid() const { return uuid_; }

    // Reads the initial values, prepares the console log file and arms the
    // state watch (which dispatches once at once). Blocking: call off the
    // ZooKeeper event thread.
    void attach();
    // No further dispatch, console stopped (module stop, or the domain was removed).
    void detach();
    // Its keys were removed from the cluster (the /domains child is gone):
    // detach, then destroy its QEMU if one still runs here (a VM undefined
    // while it ran; nobody would ever stop it) once the removal is confirmed.
    void removed();
    // Queues a dispatch; while one runs, it is coalesced into one more
    // dispatch afterwards (never dropped).
    void request_dispatch();
    // Stops the console watcher (final upload) if this node owns the VM.
    void stop_console();

    Cached cached() const;
    bool idle() const { return !busy_flag_; }

    // `state` as its watch last delivered it, and that value's version:
    // Read::error() until the watch has delivered (or when it could not be
    // set up). Waiting procedures read this, not ZooKeeper.
    struct Seen {
        Read state = Read::error();
        int32_t version = -1;
    };
    Seen seen() const;
    // A libvirt lifecycle event of this domain: wakes its waiting procedure.
    void on_libvirt_event() { wake_.notify(); }
    // libvirt's state of the domain as a dispatch or the keepalive collection
    // found it active here: a PAUSED or PMSUSPENDED domain is logged once
    // (with libvirt's reason), and again when it runs again.
    void note_libvirt_state(int state, int reason);

private:
    struct Snapshot {
        std::optional<std::string> state;   // nullopt: the VM is being deleted
        std::string node, lastnode, method, name, xml;
        std::string volumes;    // storage.volumes: the RBD volumes a start locks
        int32_t version = -1;   // of `state`
    };

    void on_state(const std::optional<std::string>& value, const zk::Stat& stat);
    void run_dispatch();
    // The VM's keys as of one moment (no view torn across a client's
    // transaction); nullopt when ZooKeeper could not be read.
    std::optional<Snapshot> read();
    // Re-reads `node` and `state` right before a destructive act on a running
    // VM: true only if they still say what the dispatch decided on (the
    // decision's version becomes the one just read).
    bool confirm(const char* act);
    // A dispatch that could not read (or confirm) its keys, or could not ask
    // libvirt about the domain, does nothing and runs again later, with a
    // doubling delay (each cause logged once until it clears).
    enum class Retry { zookeeper, libvirt };
    void retry_later(Retry why = Retry::zookeeper, const std::string& detail = {});
    void libvirt_answered();
    void decide(const Snapshot& s);   // decision_ = s without its XML
    void remember(const Snapshot& s);
    void owner_dispatch(const Snapshot& s, VmState st, bool running);
    void warn_unknown_state(const std::string& state);
    void refresh_vnc();
    void ensure_console(const std::string& name);
    std::shared_ptr<ConsoleLog> console() const;

    // Procedures (procedure pool, one at a time per domain).
    void adopt();
    // `volumes_read`: storage.volumes as the dispatch just read it (null: read it now).
    void start_vm(const std::string* volumes_read);
    void restart_vm();
    enum class ShutdownResult { off, timed_out, aborted };
    ShutdownResult graceful_shutdown(bool restarting);
    // While a shutdown waits, libvirt is asked again this often in case a
    // lifecycle event was lost; ZooKeeper is read this often only while the
    // state watch has not delivered.
    static constexpr std::chrono::seconds libvirt_recheck{5}, unwatched_recheck{1};
    struct StateNow {
        Read state;     // error: unknown, or nothing newer than `since`
        bool watched;   // from the watch (else read from ZooKeeper)
    };
    StateNow seen_state(int32_t since);
    void hard_stop(bool write_stop);
    // Destroys the domain here: true once libvirt confirms it is gone (or
    // inactive); false (logged, a retry scheduled) when it could not be confirmed.
    bool destroy_sequence();
    void destroy_if_removed();
    void send(const Snapshot& s, bool live_required);
    void receive();
    // Waits for the sync lock after the source's turn (no time limit); false
    // when the daemon stops or the state leaves the migration meanwhile.
    bool await_source(zk::Lock& lock);
    bool acquire_unbounded(zk::Lock& lock);
    void set_fail(const std::string& reason);
    // Writes `state=value` only while the state is still one of `expected`
    // (a client's newer request is never overwritten by a procedure's result).
    bool write_state_from(std::initializer_list<std::string_view> expected, const std::string& value);

    std::string path(std::string_view key) const;

    Shared& sh_;
    const std::string uuid_;
    Logger log_;
    Strand strand_;
    // Written by attach (procedure pool) and dispatches, read by detach and
    // stop_console on other threads.
    mutable std::mutex console_m_;
    std::shared_ptr<zk::Watch> watch_;
    std::shared_ptr<ConsoleLog> console_;
    std::string console_name_;

    // strand only
    bool busy_ = false;
    bool pending_ = false;
    boost::asio::steady_timer retry_timer_;
    // dispatch only (dispatches never overlap)
    std::optional<Snapshot> decision_;   // what the running dispatch acts on
    std::atomic<unsigned> read_failures_{0};
    std::atomic<unsigned> libvirt_failures_{0};
    std::atomic<bool> paused_warned_{false};
    std::string warned_state_;           // an unknown state already logged
    std::atomic<bool> busy_flag_{false};
    std::atomic<bool> gone_{false};

    // Woken by the state watch and libvirt events; what graceful_shutdown and
    // destroy_sequence wait on.
    Wakeup wake_;
    mutable std::mutex seen_m_;
    Seen seen_;

    mutable std::mutex m_;
    Cached cached_;
    std::string prev_lastnode_;   // lastnode before the current migration (abort restores it)
};

}  // namespace pvc::hv
