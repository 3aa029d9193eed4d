// The hypervisor function of a node (modules/hypervisor/README.md): one Domain per child of
// /domains, flush/unflush on this node's domainstate, keepalive figures,
// crash detection by libvirt lifecycle events with the keepalive as backstop.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "domain.hpp"
#include "shared.hpp"

namespace pvc::hv {

class Hypervisor {
public:
    struct Options {
        std::unique_ptr<RbdLocks> rbd_locks;   // default: services::RbdLocksOrNone
        std::optional<Settings> settings;      // default: read from ctx.config (already validated)
        unsigned procedure_threads = 16;
    };

    Hypervisor(NodeContext& ctx, Options options);
    Hypervisor(NodeContext& ctx);
    ~Hypervisor();

    void start();
    // Orderly stop: watches cancelled, procedures end at their next wait,
    // console watchers do a final upload. Running VMs are not touched.
    void stop();
    // The keepalive's figures, the log line's VMs, and on the primary the
    // configured migration selector when the cluster's differs.
    void contribute(KeepaliveReport& report);
    // At shutdown: waits for a flush or unflush of this node in progress to
    // end (Module::drain_before_shutdown).
    void drain_before_shutdown();

    // One keepalive collection, blocking. A full one asks libvirt about
    // every domain, runs the crash backstop and writes every running VM's stats
    // (one transaction); a light one recomputes the figures from what the last
    // full one learnt. Keepalive ticks run a full one after any libvirt
    // lifecycle event and every `full_collect_every` ticks, light ones otherwise,
    // so a tick's work follows changes, not the number of VMs.
    // A collection has its own deadline (`deadline`, default one keepalive
    // interval); one that overruns it or cannot reach libvirt keeps the
    // previous figures, and the next one is full. Returns false then.
    bool collect(bool full = true, std::optional<std::chrono::milliseconds> deadline = std::nullopt);
    void on_keepalive_tick();
    static constexpr unsigned full_collect_every = 6;
    // Test hooks.
    std::shared_ptr<Domain> domain(const std::string& uuid) const;
    std::vector<std::string> running() const { return running_.snapshot(); }
    bool flush_active() const { return worker_active_; }
    Connection& libvirt() { return *lv_; }

private:
    struct Job {
        std::string action;      // "flush" | "unflush"
        int32_t version = -1;    // domainstate version that requested it
        std::atomic<bool> cancel{false};
    };

    void on_children(const std::optional<std::vector<std::string>>& children);
    void on_domainstate(const std::optional<std::string>& value, int32_t version);
    void on_libvirt_event(const std::string& uuid, int event);
    void maybe_start_worker();
    void run_job(Job& job);
    bool flush(Job& job);
    bool unflush(Job& job);
    // Reads `path`, waiting while ZooKeeper cannot be read; nullopt when the job is cancelled.
    std::optional<Read> read_for(Job& job, const std::string& path, zk::Stat* stat = nullptr);
    bool cancelled(const Job& job) const { return job.cancel || stopper_.stopping(); }
    // A VM the job moves: settled once its state, newer than `version` (the
    // one the job read before writing), is not moving, or at `deadline`.
    struct InFlight {
        std::string uuid;
        int32_t version;
        std::chrono::steady_clock::time_point deadline;
    };
    // Waits (on the domains' state watches, not by reading ZooKeeper) until
    // at most `keep` VMs are in flight; false when cancelled.
    bool wait_settled(Job& job, std::vector<InFlight>& inflight, size_t keep);
    // Waits until the state of `uuid` has changed since `version`; false when cancelled.
    bool wait_state_change(Job& job, const std::string& uuid, int32_t version);
    // `state` of `uuid` as its watch delivered it, read from ZooKeeper when the
    // watch cannot tell (then `watched` is false).
    Domain::Seen state_of(const std::string& uuid, bool& watched);
    // The stats JSON of one running domain (/domains/<uuid>/stats), nullopt if a query failed.
    std::optional<std::string> domain_stats(virDomainPtr dom, const std::string& uuid);
    void publish_figures(int domains_count);

    NodeContext& ctx_;
    Logger log_;
    Settings settings_;
    Stopper stopper_;
    // The flush worker's wait: state watch deliveries and job cancellation.
    Wakeup flush_wake_{stopper_};
    std::unique_ptr<RbdLocks> rbd_;
    std::unique_ptr<Connection> lv_;
    std::vector<std::shared_ptr<void>> task_handles_;  // the device tasks' handlers, while registered
    ProcedurePool procedures_;
    Semaphore migrations_;
    RunningList running_;
    std::unique_ptr<Shared> shared_;
    Strand strand_;   // the domain table and the flush worker bookkeeping

    std::shared_ptr<zk::Watch> children_watch_, domainstate_watch_;
    // /config/migration_target_selector as its watch last delivered it: the
    // primary's contribution compares against it instead of reading it. The
    // watch is declared after what it touches: it ends first.
    std::mutex selector_m_;
    std::optional<std::string> selector_seen_;  // nullopt: not delivered yet
    std::shared_ptr<zk::Watch> selector_watch_;
    mutable std::mutex table_m_;
    std::map<std::string, std::shared_ptr<Domain>> domains_;
    std::vector<std::string> order_;   // discovery order (unflush)

    // strand only
    std::shared_ptr<Job> worker_;
    std::shared_ptr<Job> queued_;
    std::atomic<bool> worker_active_{false};

    // The keepalive signal cannot unsubscribe: its slot reaches us through this.
    // The emitting thread (the core's keepalive) only reads atomics and posts:
    // it never waits for a collection. A tick while one is queued or running
    // is skipped (logged once), so the keepalive keeps its interval even when
    // libvirt or ZooKeeper hangs a collection.
    struct TickTarget {
        std::mutex m;                        // held by a collection; stop() waits on it, the emitter never
        Hypervisor* hv = nullptr;
        std::atomic<bool> attached{false};
        std::atomic<bool> busy{false};       // a collection is queued or running
        std::atomic<bool> skipping{false};   // a tick was skipped since it began
        Logger log;
    };
    std::shared_ptr<TickTarget> tick_target_ = std::make_shared<TickTarget>();
    Subscription tick_sub_;
    std::atomic<bool> collecting_{false};
    std::atomic<bool> dirty_{true};       // a libvirt event (or a failed collection) since the last full one
    std::atomic<bool> degraded_{false};   // the last collection failed (logged once per episode)
    unsigned ticks_ = 0;                   // keepalive thread only
    struct Usage {
        long memory_mib = 0;
        int vcpus = 0;
    };
    std::mutex usage_m_;
    std::map<std::string, Usage> usage_;   // per running uuid, from the last full collection
    // Devices whose counters go into the stats, per uuid, from the live XML.
    struct Devices {
        unsigned libvirt_id = 0;           // the XML is re-read when the domain is recreated
        std::vector<std::pair<std::string, std::string>> disks;    // (name, target dev)
        std::vector<std::pair<std::string, std::string>> bridges;  // (target dev, bridge)
        bool ok = false;
    };
    std::map<std::string, Devices> devices_;  // collect() only (serialised by collecting_)
    std::atomic<bool> started_{false};
    mutable std::mutex figures_m_;
    bool have_figures_ = false;
    int domains_count_ = 0;
    long memalloc_ = 0, memprov_ = 0;
    int vcpualloc_ = 0;
};

}  // namespace pvc::hv
