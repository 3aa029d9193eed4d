// Fencer: a coordinator's dead-node scan and
// its fence jobs. Scans run on the fencer's own thread after each keepalive
// and at the moment a node's deadline passes (FenceMonitor::next_judgement);
// a watch on every node's keepalive sees each write at once. Nothing here
// blocks the caller of on_tick().
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fence_job.hpp"
#include "fence_monitor.hpp"

namespace pvc::fencing {

// Under the write lock on the node's daemonstate: writes `dead`
// only if the state is `run` and the keepalive is still the write the scan
// judged (`judged`: its Stat as the scan read it), both checked in the same
// multi-op as the write. Returns the daemonstate's version after the write,
// nullopt if the node was not marked (logged).
std::optional<int32_t> mark_dead(zk::Session& zk, const Logger& log, const std::string& node,
                                 const zk::Stat& judged);

class Fencer {
public:
    Fencer(std::shared_ptr<zk::Session> zk, Ipmi& ipmi, services::RbdLocks& locks, Logger log, FenceSettings settings,
           int fence_intervals);
    ~Fencer();  // stop()

    void start();
    // After each own keepalive: a scan is due. Never blocks.
    void on_tick();
    // Stops scanning and every running job (their waits end at once). Idempotent.
    void stop();

    // For tests and the benchmark.
    int jobs_started() const { return jobs_started_; }
    int distrust_count() const;
    void on_job_done(std::function<void(const std::string&, FenceOutcome, const FenceTimes&)> cb);

private:
    void loop(std::stop_token stop);
    void scan(FenceMonitor::Cause cause);
    void watch_keepalives(const std::vector<std::string>& nodes);
    void handle_dead(const std::string& node, const zk::Stat& judged);
    void reap_jobs();

    std::shared_ptr<zk::Session> zk_;
    Ipmi& ipmi_;
    services::RbdLocks& locks_;
    Logger log_;
    FenceSettings settings_;
    FenceMonitor monitor_;
    mutable std::mutex monitor_m_;
    std::atomic<bool> session_trouble_{false};
    std::shared_ptr<zk::Watch> session_watch_;
    // The node list as the watch on /nodes last gave it (nullopt until its
    // first answer, or when its read failed: the scan then lists /nodes).
    std::mutex nodes_m_;
    std::optional<std::vector<std::string>> nodes_;
    std::shared_ptr<zk::Watch> nodes_watch_;
    // Only touched on the fencer's thread (and by stop() after it ended).
    std::map<std::string, std::shared_ptr<zk::Watch>> keepalive_watches_;

    std::mutex m_;
    std::condition_variable_any cv_;
    bool tick_pending_ = false;
    std::jthread thread_;

    struct Job {
        std::jthread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::mutex jobs_m_;
    std::map<std::string, Job> jobs_;
    std::atomic<int> jobs_started_{0};
    std::function<void(const std::string&, FenceOutcome, const FenceTimes&)> job_done_;
};

}  // namespace pvc::fencing
