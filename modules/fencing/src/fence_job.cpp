#include "fence_job.hpp"

#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "pvc/schema.hpp"
#include "recovery.hpp"

namespace pvc::fencing {

const char* to_string(FenceOutcome o) {
    switch (o) {
        case FenceOutcome::saved: return "saved";
        case FenceOutcome::fenced: return "fenced";
        case FenceOutcome::failed: return "failed";
        case FenceOutcome::stopped: return "stopped";
    }
    return "?";
}

FenceJob::FenceJob(std::shared_ptr<zk::Session> zk, Ipmi& ipmi, services::RbdLocks& locks, Logger log,
                   FenceSettings settings, std::string node, Clock::time_point last_seen, int32_t dead_version)
    : zk_(std::move(zk)), ipmi_(ipmi), locks_(locks), log_(std::move(log)), s_(std::move(settings)),
      node_(std::move(node)), last_seen_(last_seen), dead_version_(dead_version) {}

bool FenceJob::sleep(std::stop_token& stop, Clock::duration d) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lk(m);
    cv.wait_for(lk, stop, d, [] { return false; });
    return !stop.stop_requested();
}

// The saving throws: the node may write `run` again before it is fenced.
// A state that cannot be read says nothing about the node: the
// throw is taken again after the next interval instead of being counted.
FenceOutcome FenceJob::saving_throws(std::stop_token& stop) {
    for (int k = 1; k <= s_.saving_throws;) {
        if (!sleep(stop, s_.interval)) return FenceOutcome::stopped;
        std::optional<std::string> state;
        try {
            state = zk_->get(schema::path("node.state.daemon", {node_}));
        } catch (const std::exception& e) {
            log_.warn("Cannot read the state of {} for a saving throw, trying again: {}", node_, e.what());
            continue;
        }
        if (state.value_or("") != "dead") {
            log_.ok("Node {} passed a saving throw; cancelling fence", node_);
            return FenceOutcome::saved;
        }
        log_.warn("Node {} failed {}/{} saving throws", node_, k, s_.saving_throws);
        ++k;
    }
    return FenceOutcome::fenced;  // "go on"
}

bool FenceJob::mark_fenced() {
    if (set_keys(*zk_, {{schema::path("node.state.daemon", {node_}), "fenced"}})) {
        log_.ok("Node {} is fenced", node_);
        return true;
    }
    log_.error("Could not write daemonstate fenced for {}: its VMs are NOT moved", node_);
    return false;
}

FenceOutcome FenceJob::hand_back(const char* when) {
    zk::Status st = zk::Status::other;
    try {
        zk::Transaction tx(*zk_);
        tx.set(schema::path("node.state.daemon", {node_}), "run", dead_version_);
        st = tx.commit();
    } catch (const std::exception& e) {
        log_.error("Fence job for {} stopped {}: {}", node_, when, e.what());
    }
    if (st == zk::Status::ok)
        log_.warn("Fence job for {} stopped {}: the node is handed back to the coordinators (daemonstate run) to be "
                  "judged again",
                  node_, when);
    else if (st == zk::Status::bad_version)
        log_.info("Fence job for {} stopped {}: its daemonstate changed meanwhile, left as it is", node_, when);
    else
        log_.error("Fence job for {} stopped {}, and its daemonstate could not be set back to run ({}): it stays "
                   "dead and NO COORDINATOR WILL FENCE IT; check the node by hand",
                   node_, when, zk::to_string(st));
    return FenceOutcome::stopped;
}

// After the fence, whatever its result: a dead coordinator cannot stay primary.
void FenceJob::demote_router() {
    bool coordinator = false;
    for (const auto& c : s_.coordinators) coordinator = coordinator || c == node_;
    if (!coordinator) return;
    try {
        zk_->write(schema::path("node.state.router", {node_}), "secondary");
        if (zk_->get(schema::path("base.config.primary_node")).value_or("") == node_)
            zk_->write(schema::path("base.config.primary_node"), "none");
    } catch (const std::exception& e) {
        log_.error("Could not demote dead coordinator {}: {}", node_, e.what());
    }
}

void FenceJob::recover(const std::function<bool()>& before_writes, std::optional<RecoveryReads> reads) {
    recover_node(*zk_, node_, locks_, log_, s_.recovery_parallelism, before_writes, std::move(reads));
    times_.recovery_done = Clock::now();
}

BmcAccess FenceJob::read_bmc() {
    BmcAccess bmc;
    // The three keys at once: one round trip before the power off, not three.
    auto keys = read_keys(*zk_,
                          {schema::path("node.ipmi.hostname", {node_}), schema::path("node.ipmi.username", {node_}),
                           schema::path("node.ipmi.password", {node_})},
                          3);
    for (auto& k : keys) {
        if (!k.error) continue;
        try {
            std::rethrow_exception(k.error);
        } catch (const std::exception& e) {
            log_.error("Cannot read the IPMI details of {}: {}", node_, e.what());
        }
        break;
    }
    bmc.host = keys[0].error ? "" : keys[0].value.value_or("");
    bmc.user = keys[1].error ? "" : keys[1].value.value_or("");
    bmc.password = keys[2].error ? "" : keys[2].value.value_or("");
    return bmc;
}

// Confirmation by polling, not a fixed sleep: recovery may begin the moment
// the BMC reports the chassis off. The first status goes at once (most BMCs
// are off by the time `off` returns), then the pauses grow to poll_period: a
// BMC that takes a moment is asked again soon.
bool FenceJob::confirm_off(std::stop_token& stop, const BmcAccess& bmc, IpmiResult& status) {
    const auto confirm_end = Clock::now() + s_.confirm_window;
    auto pause = std::min<std::chrono::milliseconds>(s_.poll_first_pause, s_.poll_period);
    for (;;) {
        status = ipmi_.chassis_power(bmc, "status");
        if (status.state == PowerState::off) return true;
        if (Clock::now() >= confirm_end || !sleep(stop, pause)) return false;
        pause = std::min<std::chrono::milliseconds>(pause * 2, s_.poll_period);
    }
}

void FenceJob::power_on(const BmcAccess& bmc) {
    IpmiResult on = ipmi_.chassis_power(bmc, "on");
    if (on.exit_status != 0) log_.warn("IPMI power on of {} failed: {}", node_, on.output);
}

FenceOutcome FenceJob::fenced_confirmed(const BmcAccess& bmc, std::future<RecoveryReads>& prefetch) {
    times_.confirmed_off = Clock::now();
    log_.ok("Node {} is confirmed powered off", node_);
    // Recovery starts at once: it reads what it needs while `fenced` is
    // written, and writes nothing before that write is done (the reference's
    // order). It then runs while the dead coordinator is demoted and the node
    // powered on again (neither touches its VMs).
    std::promise<bool> fenced_written;
    std::shared_future<bool> fenced = fenced_written.get_future().share();
    std::jthread recovery;
    if (s_.migrate_on_success) recovery = std::jthread([this, fenced, &prefetch] {
        std::optional<RecoveryReads> reads;
        if (prefetch.valid()) {
            try {
                reads = prefetch.get();
            } catch (const std::exception&) {
            }
            if (reads && Clock::now() - reads->started > s_.interval) reads.reset();
        }
        recover(
            [&] {
                try {
                    return fenced.get();
                } catch (const std::exception&) {
                    return false;
                }
            },
            std::move(reads));
    });
    // Confirmed off, the job completes even if stopped meanwhile: every step
    // left is bounded (ZooKeeper writes, one `on`).
    bool written = false;
    try {
        written = mark_fenced();
    } catch (...) {
        fenced_written.set_exception(std::current_exception());
        throw;
    }
    fenced_written.set_value(written);
    demote_router();
    power_on(bmc);
    return FenceOutcome::fenced;
}

// Not seen off: the reference's decision table decides, from `off`'s exit
// status and the status after power on.
FenceOutcome FenceJob::not_confirmed(std::stop_token& stop, const BmcAccess& bmc, const IpmiResult& off,
                                     const IpmiResult& status) {
    log_.warn("IPMI did not confirm {} off within {} ms (last status: {})", node_, s_.confirm_window.count(),
              status.output);
    power_on(bmc);
    IpmiResult after;
    const auto after_end = Clock::now() + std::chrono::seconds(2);
    do after = ipmi_.chassis_power(bmc, "status");
    while (after.state == PowerState::unknown && Clock::now() < after_end && sleep(stop, s_.poll_period));
    if (after.state == PowerState::unknown && stop.stop_requested()) return hand_back("after its power cycle");
    bool success = after.state == PowerState::off || (off.exit_status == 0 && after.state == PowerState::on);
    demote_router();
    if (success) {
        times_.confirmed_off = Clock::now();
        log_.ok("Node {} was power cycled (status after power on: {})", node_, after.output);
        if (mark_fenced() && s_.migrate_on_success) recover();
        return FenceOutcome::fenced;
    }
    log_.error("FAILED TO FENCE NODE {}: BMC {} did not confirm power off (off: exit {}, {}; status: {})", node_,
               bmc.host, off.exit_status, off.output, after.output);
    return after_failed_fence(stop);
}

// failed_fence: migrate moves the VMs only once the node has surely reset
// itself (self-fencing on), and only if it did not come back meanwhile.
FenceOutcome FenceJob::after_failed_fence(std::stop_token& stop) {
    if (!s_.migrate_on_failure) {
        log_.error("failed_fence is not migrate: the VMs of {} are NOT moved; check the node by hand", node_);
        return FenceOutcome::failed;
    }
    if (s_.suicide_intervals <= 0) {
        log_.error("failed_fence is migrate, but self-fencing is off (suicide_intervals 0): the VMs of {} are NOT "
                   "moved, the node may still run them",
                   node_);
        return FenceOutcome::failed;
    }
    // The dead node resets itself suicide_intervals after its last keepalive;
    // one more interval covers the reset itself.
    auto suicide_deadline = last_seen_ + s_.interval * (s_.suicide_intervals + 1);
    log_.warn("Waiting for the self-fence deadline of {} before moving its VMs", node_);
    if (!sleep(stop, suicide_deadline - Clock::now())) return hand_back("waiting for the self-fence deadline");
    try {
        if (zk_->get(schema::path("node.state.daemon", {node_})).value_or("") != "dead") {
            log_.ok("Node {} is back; its VMs are not moved", node_);
            return FenceOutcome::failed;
        }
    } catch (const std::exception& e) {
        log_.error("Cannot read the state of {}; its VMs are not moved: {}", node_, e.what());
        return FenceOutcome::failed;
    }
    recover();
    return FenceOutcome::failed;
}

FenceOutcome FenceJob::run(std::stop_token stop) {
    times_.started = Clock::now();
    log_.warn("Node {} seems dead; starting fence job ({} saving throws)", node_, s_.saving_throws);
    if (auto o = saving_throws(stop); o != FenceOutcome::fenced)
        return o == FenceOutcome::stopped ? hand_back("during its saving throws") : o;
    times_.throws_done = Clock::now();

    const BmcAccess bmc = read_bmc();
    log_.warn("Fencing node {} via IPMI power off (BMC {} as {})", node_, bmc.host, bmc.user);
    IpmiResult off = ipmi_.chassis_power(bmc, "off");
    if (off.exit_status != 0)
        log_.error("IPMI power off of {} failed (exit {}): {}", node_, off.exit_status, off.output);
    // The BMC took the power off: what the recovery reads is read while its
    // status is polled (the node no longer writes). Used only if the power
    // off is confirmed within one keepalive interval, the age of the nodes'
    // own figures; otherwise the recovery reads afresh.
    std::future<RecoveryReads> prefetch;
    if (off.exit_status == 0 && s_.migrate_on_success)
        prefetch = std::async(std::launch::async,
                              [this] { return read_for_recovery(*zk_, node_, s_.recovery_parallelism); });

    IpmiResult status;
    bool confirmed = confirm_off(stop, bmc, status);
    // Stopped while `off` was being confirmed: the node is never left
    // powered off by a job that gives up; powered on and handed back, it is
    // judged again (its next fence job power cycles it if it is still silent).
    if (!confirmed && stop.stop_requested()) {
        power_on(bmc);
        return hand_back("after its power off");
    }
    return confirmed ? fenced_confirmed(bmc, prefetch) : not_confirmed(stop, bmc, off, status);
}

}  // namespace pvc::fencing
