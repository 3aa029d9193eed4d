// Daemon: the node daemon's lifecycle (docs/architecture.md §7):
// start-up in the reference's order, registration, the keepalive, the
// coordinator's router state, and the orderly shutdown. Modules fill the
// steps they own (networking, libvirt, firewall, objects) from start().
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "config_reader.hpp"
#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/zk.hpp"

namespace pvc::tasks {
class Runner;
}  // namespace pvc::tasks

namespace pvc {

class ModuleHost;
class HealthHost;
struct HostFigures;

// Exit statuses of run().
inline constexpr int exit_ok = 0;
inline constexpr int exit_failure = 1;

class Daemon {
public:
    Daemon(Config cfg, std::shared_ptr<LogSink> sink);
    ~Daemon();

    // Runs until a shutdown is requested (signal or request_shutdown()).
    int run();
    // Thread-safe; starts the orderly shutdown.
    void request_shutdown();

private:
    // A failure during start-up: its message and the exit status of run().
    struct Startup : std::runtime_error {
        Startup(const std::string& what, int status) : std::runtime_error(what), status(status) {}
        int status;
    };

    void start();
    void make_directories();
    void banner();
    void connect_zookeeper();
    void register_node();
    struct NodeGuard {
        std::unique_ptr<zk::Lock> lock;  // null: not acquired
        bool keepalive_advanced = false;  // the holder's keepalive moved while we waited
    };
    NodeGuard acquire_node_guard();
    void retake_node_guard();
    bool holds_node_guard() {
        std::lock_guard g(guard_m_);
        return node_guard_ && node_guard_->held();
    }
    void claim_primary();
    void watch_cluster();
    void on_primary_node(const std::optional<std::string>& value, const zk::Stat& stat);
    void on_router_state(const std::string& state);
    void contend_for_primary(int32_t version, const std::function<bool()>& still);
    // The primary hand-over sequences (daemon_handover.cpp).
    void take_over();
    void relinquish();
    // Another coordinator holds or is giving up the primary role (it will take the sync_lock's read locks).
    bool old_primary_expected();
    // Polls the sync_lock's contenders until one of `read` (or write) kind
    // with a sequence after `after` shows up, at most `bound`.
    bool wait_for_contender(bool read, const std::string& after, std::chrono::milliseconds bound);
    void until_done(const char* what, const std::function<bool()>& wanted, const std::function<bool()>& step);
    // Sleeps `d`; false when the daemon is stopping (its keepalive is stopped).
    bool pause(std::chrono::milliseconds d);
    bool stopping() {
        std::lock_guard g(ka_m_);
        return ka_stop_;
    }
    std::string cached_router_state() const;
    void keepalive_loop();
    // One keepalive: the state, the figures and the modules' parts in one
    // transaction, then the health pass and the log lines.
    void keepalive_tick(bool final_tick);
    // What the tick reads of the cached cluster state.
    struct TickState {
        std::string router, daemon, primary;
        bool schema_ok = true, maintenance = false;
    };
    TickState tick_state();
    // The primary's key repair in `tx` (keepalive thread).
    void primary_duties(const TickState& st, zk::Transaction& tx);
    // Every module's contribution (writes, log fields, health items) to `report`.
    void collect_contributions(KeepaliveReport& report);
    // Commits the tick's transaction; recreates missing keys. OK or not.
    bool commit_keepalive(zk::Transaction& tx);
    // The keepalive log lines of one tick.
    void log_keepalive(const TickState& st, const std::string& started, std::chrono::steady_clock::time_point t0,
                       const KeepaliveReport& report, const HostFigures& host);
    void shutdown();
    bool successor_may_exist();
    // Keepalive ticks in a row that saw /config/primary_node = none while primary (keepalive thread only).
    int primary_unclaimed_ticks_ = 0;
    void notify(const char* state);

    // The keepalive timestamp (seconds since the epoch), also registration's first value.
    static long unix_now();
    std::string node_path(const char* key) const;
    bool write_own(const char* key, const std::string& value);

    Config cfg_;
    std::shared_ptr<LogSink> sink_;
    Logger log_;
    Executor executor_{4};
    CoreEvents events_;
    ServiceRegistry services_;
    Strand core_strand_{executor_.make_strand()};  // where every core event and transition hook runs
    std::shared_ptr<zk::Session> zk_;
    std::mutex guard_m_;  // node_guard_: start-up, re-take after a session expiry, shutdown
    std::unique_ptr<zk::Lock> node_guard_;
    std::unique_ptr<ModuleHost> modules_;
    std::unique_ptr<HealthHost> health_;
    // The node's task runner (pvc/tasks.hpp): the modules register their
    // task handlers through it (service pvc.tasks.v1) in start(); it claims
    // once every module has started, and stops before they do.
    std::shared_ptr<tasks::Runner> tasks_;
    std::vector<std::shared_ptr<zk::Watch>> watches_;

    // Cached cluster state (watch callbacks write, the keepalive reads).
    mutable std::mutex state_m_;
    std::string daemon_state_;
    std::string router_state_;
    std::string primary_node_;
    int32_t primary_node_version_ = -1;
    bool maintenance_ = false;
    bool schema_ok_ = true;

    std::thread keepalive_thread_;
    std::mutex ka_m_;
    std::condition_variable ka_cv_;
    bool ka_stop_ = false;
    std::mutex tick_m_;  // one tick at a time

    std::mutex lifecycle_m_;        // orders start-up completion and shutdown requests
    bool started_ = false;
    bool shutdown_pending_ = false;  // a signal arrived during start-up
    std::atomic<bool> shutting_down_{false};
    std::thread shutdown_thread_;
    std::atomic<int> exit_status_{exit_ok};  // also set by the node lock's re-take (a pool thread)
    bool ready_notified_ = false;
};

}  // namespace pvc
