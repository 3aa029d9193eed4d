#include "fence_monitor.hpp"

#include <algorithm>

namespace pvc::fencing {

FenceMonitor::FenceMonitor(std::chrono::milliseconds interval, int fence_intervals)
    : interval_(interval), deadline_(interval * fence_intervals) {}

void FenceMonitor::distrust(Clock::time_point now) {
    trusted_since_ = now;
    ++distrust_count_;
}

bool FenceMonitor::distrusting(Clock::time_point now) const {
    return !trusted_since_ || now - *trusted_since_ < deadline_;
}

std::vector<std::string> FenceMonitor::scan(Clock::time_point now, const std::vector<Observation>& observations,
                                           Cause cause) {
    const auto late = interval_ + interval_ / 2;
    // The first tick starts the trust window; a late tick (the fencer was
    // starved or paused) restarts it: what happened meanwhile was not seen.
    if (cause == Cause::tick) {
        if (!last_tick_ || now - *last_tick_ > late) distrust(now);
        last_tick_ = now;
    }

    for (const auto& o : observations)
        if (o.keepalive_mzxid) observe(o.node, *o.keepalive_mzxid, now);

    std::vector<std::string> dead;
    if (distrusting(now)) return dead;
    if (cause == Cause::deadline && (!last_tick_ || now - *last_tick_ > late)) return dead;
    for (const auto& o : observations) {
        if (!o.daemon_state || *o.daemon_state != "run" || !o.keepalive_mzxid) continue;
        auto a = age(o.node, now);
        if (a && *a > deadline_) dead.push_back(o.node);
    }
    std::sort(dead.begin(), dead.end());
    return dead;
}

void FenceMonitor::observe(const std::string& node, int64_t mzxid, Clock::time_point now) {
    // Any other mzxid is a new write (a scan's read and a watch's may reach
    // us out of order: taking the older one again only makes the age smaller).
    auto [it, inserted] = seen_.try_emplace(node, Seen{mzxid, now});
    if (!inserted && it->second.mzxid != mzxid) it->second = Seen{mzxid, now};
}

std::optional<Clock::time_point> FenceMonitor::next_judgement(Clock::time_point after) const {
    if (!trusted_since_) return std::nullopt;  // before the first scan
    std::optional<Clock::time_point> next;
    for (const auto& [node, seen] : seen_) {
        auto at = std::max(seen.changed_at, *trusted_since_) + deadline_ + std::chrono::milliseconds(1);
        if (at > after && (!next || at < *next)) next = at;
    }
    return next;
}

std::optional<Clock::duration> FenceMonitor::age(const std::string& node, Clock::time_point now) const {
    auto it = seen_.find(node);
    if (it == seen_.end()) return std::nullopt;
    auto since = it->second.changed_at;
    if (trusted_since_) since = std::max(since, *trusted_since_);
    return now - since;
}

std::optional<Clock::time_point> FenceMonitor::last_seen(const std::string& node) const {
    auto it = seen_.find(node);
    if (it == seen_.end()) return std::nullopt;
    return it->second.changed_at;
}

}  // namespace pvc::fencing
