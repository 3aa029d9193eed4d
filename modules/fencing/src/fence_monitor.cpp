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

std::vector<std::string> FenceMonitor::scan(Clock::time_point now, const std::vector<Observation>& observations) {
    // The first scan starts the trust window; a late scan (the fencer was
    // starved or paused) restarts it: what happened meanwhile was not seen.
    if (!last_scan_ || now - *last_scan_ > interval_ + interval_ / 2) distrust(now);
    last_scan_ = now;

    for (const auto& o : observations) {
        if (!o.keepalive_mzxid) continue;
        auto [it, inserted] = seen_.try_emplace(o.node, Seen{*o.keepalive_mzxid, now});
        if (!inserted && it->second.mzxid != *o.keepalive_mzxid) it->second = Seen{*o.keepalive_mzxid, now};
    }

    std::vector<std::string> dead;
    if (distrusting(now)) return dead;
    for (const auto& o : observations) {
        if (!o.daemon_state || *o.daemon_state != "run" || !o.keepalive_mzxid) continue;
        auto a = age(o.node, now);
        if (a && *a > deadline_) dead.push_back(o.node);
    }
    std::sort(dead.begin(), dead.end());
    return dead;
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
