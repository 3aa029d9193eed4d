// FenceMonitor: which nodes are dead, given what a coordinator observed
// (the reference's detection, made skew-proof; modules/fencing/README.md).
//
// A node's age is the time, on the fencer's monotonic clock, since the
// fencer first saw the node's keepalive znode at its current modification
// (its mzxid, ZooKeeper's own record of the last write). Neither the
// timestamp the node wrote nor the fencer's wall clock takes part, so a
// skewed clock on either side can neither cause nor delay a fence.
//
// A keepalive is seen either by a scan or, at once, by a watch on the node's
// keepalive znode (observe()); a node is judged at its deadline, not at the
// next scan after it: next_judgement() tells the fencer when to scan.
//
// After the fencer's own trouble (its ZooKeeper session lost and back, a
// scan that failed, a tick that came late) the monitor distrusts what it
// knows: nobody is judged until a full deadline of fresh observations has
// passed. Pure: time and observations are given; no I/O.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace pvc::fencing {

using Clock = std::chrono::steady_clock;

// One node as read in one scan; nullopt = the read failed.
struct Observation {
    std::string node;
    std::optional<std::string> daemon_state;
    std::optional<int64_t> keepalive_mzxid;
    // The timestamp the node wrote (its own clock): logged, never judged on.
    std::optional<long long> keepalive_written = std::nullopt;
};

class FenceMonitor {
public:
    // `interval` = keepalive_interval; dead after `interval` × `fence_intervals`.
    FenceMonitor(std::chrono::milliseconds interval, int fence_intervals);

    // Forget the trust in past observations: no node is judged before `now` + deadline.
    void distrust(Clock::time_point now);

    // Why the fencer scans: after one of its own keepalive ticks, or because
    // a node's deadline (next_judgement) has come between two ticks.
    enum class Cause { tick, deadline };

    // One scan at `now`: updates what is known and returns the nodes judged
    // dead (state `run` and older than the deadline), in name order. A tick
    // later than a tick and a half after the previous one distrusts first; a
    // deadline scan while our own next tick is that late already judges
    // nobody (the fencer may be the one that was stalled: its late tick will
    // distrust when it comes).
    std::vector<std::string> scan(Clock::time_point now, const std::vector<Observation>& observations,
                                  Cause cause = Cause::tick);

    // `node`'s keepalive znode seen at modification `mzxid` at `now` (a watch
    // fired): a new mzxid restarts its age; the same one changes nothing.
    void observe(const std::string& node, int64_t mzxid, Clock::time_point now);

    // The earliest moment strictly after `after` at which a scan could judge
    // some node dead if nothing fresh is seen meanwhile (its first sight, or
    // the end of distrust, + the deadline, + 1 ms since the age must exceed
    // the deadline); nullopt when no such moment is ahead.
    std::optional<Clock::time_point> next_judgement(Clock::time_point after) const;

    // Age of `node` at `now` as defined above (nullopt = never observed).
    std::optional<Clock::duration> age(const std::string& node, Clock::time_point now) const;
    // When the node's current keepalive was first seen (nullopt = never observed).
    std::optional<Clock::time_point> last_seen(const std::string& node) const;

    Clock::duration deadline() const { return deadline_; }
    // True while the monitor judges nobody (after distrust, before a deadline of fresh observations).
    bool distrusting(Clock::time_point now) const;
    // How many times the monitor distrusted (own reconnection, failed scan, late tick).
    int distrust_count() const { return distrust_count_; }

private:
    struct Seen {
        int64_t mzxid = 0;
        Clock::time_point changed_at;
    };
    Clock::duration interval_;
    Clock::duration deadline_;
    std::optional<Clock::time_point> last_tick_;
    std::optional<Clock::time_point> trusted_since_;
    std::map<std::string, Seen> seen_;
    int distrust_count_ = 0;
};

}  // namespace pvc::fencing
