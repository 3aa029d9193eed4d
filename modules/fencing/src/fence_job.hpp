// FenceJob: what a coordinator does to one dead node (the reference's fence
// job with the fencing README's changes): saving throws, IPMI power off confirmed
// by polling `chassis power status`, recovery as soon as the node is
// confirmed off, power on, and the reference's keys. Runs on its own thread;
// every wait ends early when the stop token is requested.
#pragma once

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "fence_monitor.hpp"
#include "ipmi.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"
#include "pvc/services/rbd_locks.hpp"
#include "recovery.hpp"

namespace pvc::fencing {

struct FenceSettings {
    std::chrono::milliseconds interval{5000};          // keepalive_interval
    int saving_throws = 6;
    bool migrate_on_success = false;                  // successful_fence: migrate
    bool migrate_on_failure = false;                  // failed_fence: migrate
    int suicide_intervals = 0;
    std::vector<std::string> coordinators;            // host names, ports stripped
    std::string own_node;                             // never judged by its own fencer ("" = none)
    std::chrono::milliseconds confirm_window{10000};  // how long `status` is polled after `off`
    std::chrono::milliseconds poll_period{200};       // the longest pause between two `status` polls
    std::chrono::milliseconds poll_first_pause{50};   // the first pause, doubled up to poll_period
    unsigned recovery_parallelism = 16;  // VMs handled at once; also the reads in flight before
};

enum class FenceOutcome {
    saved,     // the node wrote `run` again during the saving throws
    fenced,    // power off confirmed (or the reference's decision table says success)
    failed,    // the BMC could not be made to confirm
    stopped,   // the module stopped before the job ended (the node handed back: FenceJob::hand_back)
};
const char* to_string(FenceOutcome o);

// Phase times of one job, for logs and the benchmark.
struct FenceTimes {
    Clock::time_point started, throws_done, confirmed_off, recovery_done;
};

class FenceJob {
public:
    // `last_seen`: when the fencer first saw the node's last keepalive
    // (FenceMonitor::last_seen), the start of its suicide deadline.
    // `dead_version`: the version of the node's daemonstate as the fencer's
    // `dead` left it (mark_dead), so that an interrupted job hands the node
    // back only if nothing wrote its state since.
    FenceJob(std::shared_ptr<zk::Session> zk, Ipmi& ipmi, services::RbdLocks& locks, Logger log, FenceSettings settings,
             std::string node, Clock::time_point last_seen, int32_t dead_version);
    FenceOutcome run(std::stop_token stop);
    const FenceTimes& times() const { return times_; }

private:
    bool sleep(std::stop_token& stop, Clock::duration d);
    FenceOutcome saving_throws(std::stop_token& stop);
    // False (logged) if `fenced` could not be written: nothing is recovered then.
    bool mark_fenced();
    // The job was stopped before it ended (its coordinator shutting down):
    // the node's daemonstate goes back from our `dead` to `run`, so that the
    // coordinators judge it again (a `dead` node is never judged: left so, it
    // and its VMs would stay there for good). Returns `stopped`.
    FenceOutcome hand_back(const char* when);
    void demote_router();
    void recover(const std::function<bool()>& before_writes = {}, std::optional<RecoveryReads> reads = std::nullopt);
    // The dead node's BMC from its keys (the three in one round trip; "" where unreadable).
    BmcAccess read_bmc();
    // Polls `status` until the chassis is off (true), the confirm window ends or the job stops.
    bool confirm_off(std::stop_token& stop, const BmcAccess& bmc, IpmiResult& status);
    void power_on(const BmcAccess& bmc);
    // Off confirmed: fenced written, recovery, the dead coordinator demoted, power on.
    FenceOutcome fenced_confirmed(const BmcAccess& bmc, std::future<RecoveryReads>& prefetch);
    // Off not confirmed: power cycle and the reference's decision table.
    FenceOutcome not_confirmed(std::stop_token& stop, const BmcAccess& bmc, const IpmiResult& off,
                               const IpmiResult& status);
    FenceOutcome after_failed_fence(std::stop_token& stop);

    std::shared_ptr<zk::Session> zk_;
    Ipmi& ipmi_;
    services::RbdLocks& locks_;
    Logger log_;
    FenceSettings s_;
    std::string node_;
    Clock::time_point last_seen_;
    int32_t dead_version_;
    FenceTimes times_;
};

}  // namespace pvc::fencing
