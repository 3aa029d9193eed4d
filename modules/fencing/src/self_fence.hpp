// SelfFence (the reference's suicide, as modules/fencing/README.md decides): a node whose
// keepalive has not reached ZooKeeper for `suicide_intervals` intervals runs
// its reset action, so that peers may safely recover its VMs after a failed
// fence. "Reached" = the node's own keepalive znode changed, as reported by a
// watch: without ZooKeeper no change arrives, whatever the cause. The count
// starts at this daemon's first keepalive (or its daemon state `run`), never
// at start(): start-up (health plugins' setup() may take plugin_timeout)
// writes no keepalive, and counting it would reset a node whose ZooKeeper is
// reachable, at every boot.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fence_monitor.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"

namespace pvc::fencing {

class SelfFence {
public:
    SelfFence(std::shared_ptr<zk::Session> zk, Logger log, std::string node, std::chrono::milliseconds interval,
              int suicide_intervals, std::string reset_command);
    ~SelfFence();  // stop()

    void start();
    // The daemon entered `run` (its first keepalive was written): counting
    // starts now if no keepalive was seen yet.
    void on_run();
    // The daemon is shutting down: its keepalive stops on purpose.
    void disarm();
    void stop();
    int resets() const { return resets_; }
    // True once the count has started (first keepalive seen, or on_run()).
    bool counting() const;

private:
    void loop(std::stop_token stop);

    std::shared_ptr<zk::Session> zk_;
    Logger log_;
    std::string node_;
    std::chrono::milliseconds interval_;
    int suicide_intervals_;
    std::string command_;
    std::shared_ptr<zk::Watch> watch_;
    mutable std::mutex m_;
    // The keepalive as start() found it (the previous run's or registration's
    // write); a write after it is this daemon's first keepalive.
    std::optional<int64_t> mzxid_;
    bool counting_ = false;
    Clock::time_point last_write_;
    std::atomic<bool> armed_{true};
    std::atomic<int> resets_{0};
    std::jthread thread_;
};

}  // namespace pvc::fencing
