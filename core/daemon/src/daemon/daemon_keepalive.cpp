// The keepalive (docs/wire-contract.md §5.2): the loop that ticks every
// keepalive_interval and feeds systemd's watchdog, and the tick: one
// transaction with the core's figures and the modules' contributions, then
// the health plugins and the keepalive log lines.
#include "daemon/daemon.hpp"

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "daemon/host_figures.hpp"
#include "daemon/module_host.hpp"
#include "daemon/sd_notify.hpp"
#include "health/health_host.hpp"
#include "log_batch.hpp"
#include "pvc/schema.hpp"

namespace pvc {

namespace {

std::string tick_timestamp() { return timestamp_us("%Y-%m-%d %H:%M:%S"); }

}  // namespace

long Daemon::unix_now() { return static_cast<long>(std::time(nullptr)); }

void Daemon::keepalive_loop() {
    using clock = std::chrono::steady_clock;
    std::chrono::milliseconds interval = std::chrono::seconds(cfg_.keepalive_interval);
    // Benchmarks fast-forward ticks (a thousand of them in minutes) to see
    // memory that grows per tick; nothing else changes with it.
    if (const char* ms = std::getenv("PVCNODED_KEEPALIVE_MS"); ms && std::atoi(ms) > 0)
        interval = std::chrono::milliseconds(std::atoi(ms));
    // The first tick runs at once (not one interval later as in the
    // reference): it is what moves the node to `run`.
    auto next = clock::now();
    // systemd's watchdog (WatchdogSec in the unit) restarts a daemon whose
    // keepalive loop is stuck, before peers fence the node for it.
    uint64_t watchdog_usec = 0;
    bool watchdog = sd::watchdog_enabled(watchdog_usec);
    std::unique_lock lk(ka_m_);
    while (!ka_stop_) {
        if (ka_cv_.wait_until(lk, next, [this] { return ka_stop_; })) break;
        lk.unlock();
        try {
            keepalive_tick(false);
        } catch (const std::exception& e) {
            // The next tick tries again; the loop (and the process) must go on.
            log_.error("Keepalive tick failed: {}", e.what());
        }
        if (watchdog) notify("WATCHDOG=1");
        lk.lock();
        // Coalescing: a tick that overran skips the missed slots.
        auto now = clock::now();
        do next += interval;
        while (next <= now);
    }
}

Daemon::TickState Daemon::tick_state() {
    std::lock_guard g(state_m_);
    return {router_state_, daemon_state_, primary_node_, schema_ok_, maintenance_};
}

// Primary key repair, stricter than the reference: another name is a
// hand-over in progress (we relinquish), and during our own shutdown `none`
// asks the others to contend — rewriting our name there undid every
// hand-over. Only a `none` that no contender has replaced for two ticks is
// repaired (a lone coordinator keeps its role, as in the reference).
void Daemon::primary_duties(const TickState& st, zk::Transaction& tx) {
    if (st.router != "primary") {
        primary_unclaimed_ticks_ = 0;
        return;
    }
    if (st.primary == "none" && st.daemon != "shutdown") {
        if (++primary_unclaimed_ticks_ >= 2) tx.set(schema::path("base.config.primary_node"), cfg_.host.hostname);
    } else {
        primary_unclaimed_ticks_ = 0;
    }
}

void Daemon::collect_contributions(KeepaliveReport& report) {
    // Each module's health items, by module (a module whose contribute()
    // threw keeps its previous ones): the health host publishes changes.
    std::map<std::string, std::vector<KeepaliveReport::HealthItem>> module_health;
    for (Module* m : modules_->modules()) {
        const auto first = report.health.size();
        try {
            m->contribute(report);
            module_health[std::string(m->name())].assign(std::make_move_iterator(report.health.begin() + first),
                                                         std::make_move_iterator(report.health.end()));
        } catch (const std::exception& e) {
            log_.error("Module {} failed to contribute to the keepalive: {}", m->name(), e.what());
        }
        report.health.resize(first);
    }
    health_->set_module_health(std::move(module_health));
}

bool Daemon::commit_keepalive(zk::Transaction& tx) {
    zk::Status st = zk::Status::other;
    try {
        st = zk_->commit(tx);
    } catch (const std::exception& e) {
        log_.error("Failed to set keepalive data: {}", e.what());
    }
    if (st == zk::Status::no_node) {
        // A key of ours was deleted behind our back: recreate what is missing.
        std::vector<zk::KeyValue> kvs;
        for (const auto& op : tx.ops()) kvs.emplace_back(op.path, op.data);
        log_.warn("Keepalive keys were missing; rewriting them with create-or-set");
        st = zk_->write(kvs) ? zk::Status::ok : zk::Status::other;
    }
    if (st != zk::Status::ok) log_.error("Failed to set keepalive data: {}", zk::to_string(st));
    return st == zk::Status::ok;
}

void Daemon::log_keepalive(const TickState& st, const std::string& started, std::chrono::steady_clock::time_point t0,
                           const KeepaliveReport& report, const HostFigures& host) {
    // The tick's lines as one batch: the ring is written here, on this
    // thread, once they are in (no wake-up of the log writer per tick).
    struct Batch {
        const std::shared_ptr<LogSink>& sink;
        explicit Batch(const std::shared_ptr<LogSink>& s) : sink(s) { hold_zookeeper_log(sink); }
        ~Batch() { release_zookeeper_log(sink); }
    } batch(sink_);
    if (!cfg_.log_keepalives) return;
    const std::string& me = cfg_.host.hostname;
    const std::string& router = st.router;
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const char* rcol = router == "primary" ? ansi::green : router == "secondary" ? ansi::blue : ansi::cyan;
    if (cfg_.log_colours)
        log_.tick("{}{} keepalive @ {}{} [{}{}{}{}] in {:.2f} seconds", ansi::purple, me, started, ansi::end,
                  ansi::bold, rcol, router, ansi::end, secs);
    else
        log_.tick("{} keepalive @ {} [{}] in {:.2f} seconds", me, started, router, secs);
    if (!cfg_.log_keepalive_cluster_details) return;
    auto h = health_->health();
    std::string health = h ? std::to_string(*h) + "%" : "N/A";
    if (cfg_.log_colours) {
        const char* hcol = !h ? ansi::blue : *h > 90 ? ansi::green : *h > 50 ? ansi::yellow : ansi::red;
        health = std::string(hcol) + health + ansi::end;
    }
    // The loaded modules' fields (VMs, OSDs...), in their positions.
    std::vector<std::pair<int, std::string>> fields;
    for (const auto& [label, f] : report.log_fields) fields.emplace_back(f.position, fmt::format("  {}: {}", label, f.value));
    std::stable_sort(fields.begin(), fields.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::string text;
    for (const auto& f : fields) text += f.second;
    log_.tick("  Maintenance: {}  Health: {}{}  Load: {}  Memory [MiB]: Used: {}  Free: {}",
              st.maintenance ? "True" : "False", health, text, zk::py_float(host.cpuload), host.memused_mib,
              host.memfree_mib);
}

void Daemon::keepalive_tick(bool final_tick) {
    std::lock_guard tick_guard(tick_m_);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string started = tick_timestamp();
    const TickState st = tick_state();
    if (!st.schema_ok) {
        // Keep proving liveness, refuse to act (core/README.md, "Failure
        // model"): a silent keepalive while our daemonstate stays `run` would
        // get this node fenced. Only the timestamp is written (a key every
        // schema version has); no figures, no primary duties, no module or
        // health hooks, no keepalive_tick event (so no fencing scan either).
        zk::Transaction tx(*zk_);
        tx.set(node_path("node.keepalive"), std::to_string(unix_now()));
        zk::Status status = zk_->commit(tx);
        if (status != zk::Status::ok) log_.error("Failed to set keepalive timestamp: {}", zk::to_string(status));
        return;
    }
    zk::Transaction tx(*zk_);
    primary_duties(st, tx);
    // Daemon state: init/dead/fenced become run.
    bool became_run = false;
    if (!final_tick && st.daemon != "run" && st.daemon != "shutdown") {
        tx.set(node_path("node.state.daemon"), "run");
        became_run = true;
    }

    KeepaliveReport report;
    report.router_state = st.router;
    collect_contributions(report);
    auto host = read_host_figures().value_or(HostFigures{});
    tx.set(node_path("node.memory.total"), std::to_string(host.memtotal_mib));
    tx.set(node_path("node.memory.used"), std::to_string(host.memused_mib));
    tx.set(node_path("node.memory.free"), std::to_string(host.memfree_mib));
    tx.set(node_path("node.cpu.load"), zk::py_float(host.cpuload));
    for (auto& [path, value] : report.writes) tx.set(path, value);
    tx.set(node_path("node.keepalive"), std::to_string(unix_now()));

    if (commit_keepalive(tx) && became_run) {
        {
            std::lock_guard g(state_m_);
            daemon_state_ = "run";
        }
        log_.ok("Node is in daemon state run");
        events_.daemon_state.emit("run");
        if (!ready_notified_) {
            ready_notified_ = true;
            notify("READY=1");
        }
    }
    if (!final_tick) health_->on_keepalive(st.router);
    log_keepalive(st, started, t0, report, host);
    events_.keepalive_tick.emit();
}

}  // namespace pvc
