// The hypervisor function of a node (hypervisor.md): one Domain per child of
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
        std::unique_ptr<RbdLocks> rbd_locks;   // default: NoRbdLocks
        unsigned procedure_threads = 16;
    };

    Hypervisor(NodeContext& ctx, Options options);
    Hypervisor(NodeContext& ctx);
    ~Hypervisor();

    void start();
    // Orderly stop: watches cancelled, procedures end at their next wait,
    // console watchers do a final upload. Running VMs are not touched.
    void stop();
    void contribute(KeepaliveReport& report);

    // One keepalive collection (§14), blocking. Normally run on each keepalive tick.
    void collect();
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
    bool cancelled(const Job& job) const { return job.cancel || stopper_.stopping(); }
    bool wait_settled(Job& job, std::vector<std::pair<std::string, std::chrono::steady_clock::time_point>>& inflight,
                      size_t keep);
    void write_stats(virDomainPtr dom, const std::string& uuid);

    NodeContext& ctx_;
    Logger log_;
    Stopper stopper_;
    std::unique_ptr<RbdLocks> rbd_;
    std::unique_ptr<Connection> lv_;
    boost::asio::thread_pool procedures_;
    Semaphore migrations_;
    RunningList running_;
    std::unique_ptr<Shared> shared_;
    Strand strand_;   // the domain table and the flush worker bookkeeping

    std::shared_ptr<zk::Watch> children_watch_, domainstate_watch_;
    mutable std::mutex table_m_;
    std::map<std::string, std::shared_ptr<Domain>> domains_;
    std::vector<std::string> order_;   // discovery order (unflush)

    // strand only
    std::shared_ptr<Job> worker_;
    std::shared_ptr<Job> queued_;
    std::atomic<bool> worker_active_{false};

    // The keepalive signal cannot unsubscribe: its slot reaches us through this.
    struct TickTarget {
        std::mutex m;
        Hypervisor* hv = nullptr;
    };
    std::shared_ptr<TickTarget> tick_target_ = std::make_shared<TickTarget>();
    std::atomic<bool> collecting_{false};
    std::atomic<bool> started_{false};
    mutable std::mutex figures_m_;
    bool have_figures_ = false;
    int domains_count_ = 0;
    long memalloc_ = 0, memprov_ = 0;
    int vcpualloc_ = 0;
};

}  // namespace pvc::hv
