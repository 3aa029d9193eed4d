#include "fencer.hpp"

#include <algorithm>

#include "pvc/schema.hpp"

namespace pvc::fencing {

Fencer::Fencer(std::shared_ptr<zk::Session> zk, Ipmi& ipmi, services::RbdLocks& locks, Logger log, FenceSettings settings,
               int fence_intervals)
    : zk_(std::move(zk)), ipmi_(ipmi), locks_(locks), log_(std::move(log)), settings_(std::move(settings)),
      monitor_(settings_.interval, fence_intervals) {}

Fencer::~Fencer() { stop(); }

void Fencer::on_job_done(std::function<void(const std::string&, FenceOutcome, const FenceTimes&)> cb) {
    job_done_ = std::move(cb);
}

int Fencer::distrust_count() const {
    std::lock_guard g(monitor_m_);
    return monitor_.distrust_count();
}

void Fencer::start() {
    // Any trouble of our own session: what we saw before is not trusted.
    session_watch_ = zk_->on_session_event([this](zk::SessionEvent ev) {
        if (ev != zk::SessionEvent::connected) session_trouble_ = true;
    });
    // The node list changes rarely: watched, not listed at every scan. A node
    // added is judged from the watch's answer on; one the list misses for a
    // moment is only judged later, never wrongly.
    nodes_watch_ = zk_->watch_children(schema::path("base.node"),
                                       [this](const std::optional<std::vector<std::string>>& nodes) {
                                           std::lock_guard g(nodes_m_);
                                           nodes_ = nodes;
                                       });
    thread_ = std::jthread([this](std::stop_token st) { loop(st); });
}

void Fencer::on_tick() {
    {
        std::lock_guard g(m_);
        tick_pending_ = true;
    }
    cv_.notify_one();
}

void Fencer::stop() {
    session_watch_.reset();
    nodes_watch_.reset();
    if (thread_.joinable()) {
        thread_.request_stop();
        thread_.join();
    }
    keepalive_watches_.clear();
    std::map<std::string, Job> jobs;
    {
        std::lock_guard g(jobs_m_);
        jobs.swap(jobs_);
    }
    for (auto& [node, job] : jobs) job.thread.request_stop();
    jobs.clear();  // joins
}

// A scan after each own keepalive (on_tick), and one at each node's deadline:
// without it a node would be judged up to an interval after its deadline.
void Fencer::loop(std::stop_token stop) {
    std::optional<Clock::time_point> last_scan;
    while (!stop.stop_requested()) {
        auto next_judgement = [&] {
            std::lock_guard g(monitor_m_);
            return last_scan ? monitor_.next_judgement(*last_scan) : std::nullopt;
        };
        auto wake = next_judgement();
        FenceMonitor::Cause cause;
        {
            std::unique_lock lk(m_);
            auto ticked = [this] { return tick_pending_; };
            bool woken = wake ? cv_.wait_until(lk, stop, *wake, ticked) : cv_.wait(lk, stop, ticked);
            if (stop.stop_requested()) break;
            if (!woken) {
                // A deadline, unless a watch saw that node's keepalive meanwhile.
                auto due = next_judgement();
                if (!due || *due > Clock::now()) continue;
            }
            cause = tick_pending_ ? FenceMonitor::Cause::tick : FenceMonitor::Cause::deadline;
            tick_pending_ = false;
        }
        last_scan = Clock::now();
        try {
            scan(cause);
        } catch (const std::exception& e) {
            log_.error("Dead node scan failed: {}", e.what());
            std::lock_guard g(monitor_m_);
            monitor_.distrust(Clock::now());
        }
        reap_jobs();
    }
}

void Fencer::reap_jobs() {
    std::lock_guard g(jobs_m_);
    for (auto it = jobs_.begin(); it != jobs_.end();) {
        if (*it->second.done) it = jobs_.erase(it);
        else ++it;
    }
}

// The dead-node scan, with the monitor's skew-proof ages.
void Fencer::scan(FenceMonitor::Cause cause) {
    std::optional<std::vector<std::string>> nodes;
    {
        std::lock_guard g(nodes_m_);
        nodes = nodes_;
    }
    if (!nodes) nodes = zk_->children(schema::path("base.node"));
    // A coordinator never judges itself (its own keepalive is written by the
    // tick that started this scan): neither read nor watched.
    if (nodes && !settings_.own_node.empty()) std::erase(*nodes, settings_.own_node);
    // Maintenance and every other node's daemonstate and keepalive in one
    // round trip (this runs after every keepalive of every coordinator). A
    // failed read throws: the scan fails and nobody is judged (the monitor
    // distrusts).
    std::vector<std::string> paths{schema::path("base.config.maintenance")};
    if (nodes)
        for (const auto& n : *nodes) {
            paths.push_back(schema::path("node.state.daemon", {n}));
            paths.push_back(schema::path("node.keepalive", {n}));
        }
    std::vector<zk::Stat> stats;
    auto values = zk_->get_many(paths, &stats);
    if (zk::lenient_bool(values[0].value_or("")).value_or(false)) return;
    std::vector<Observation> obs;
    std::map<std::string, zk::Stat> keepalives;  // as this scan read them: what a dead node is judged on
    if (nodes) {
        for (size_t i = 0; i < nodes->size(); ++i) {
            Observation o{(*nodes)[i], std::nullopt, std::nullopt};
            o.daemon_state = values[1 + 2 * i].value_or("");
            if (values[2 + 2 * i]) {
                o.keepalive_mzxid = stats[2 + 2 * i].mzxid;
                keepalives[(*nodes)[i]] = stats[2 + 2 * i];
            }
            obs.push_back(std::move(o));
        }
    }
    if (nodes) watch_keepalives(*nodes);
    std::vector<std::string> dead;
    {
        std::lock_guard g(monitor_m_);
        const auto now = Clock::now();
        if (session_trouble_.exchange(false)) {
            log_.warn("Own ZooKeeper connection was interrupted: judging no node for {} s of fresh observations",
                      std::chrono::duration_cast<std::chrono::seconds>(monitor_.deadline()).count());
            monitor_.distrust(now);
        }
        int before = monitor_.distrust_count();
        dead = monitor_.scan(now, obs, cause);
        if (monitor_.distrust_count() != before && before > 0)
            log_.warn("Own keepalive tick came late: judging no node for {} s of fresh observations",
                      std::chrono::duration_cast<std::chrono::seconds>(monitor_.deadline()).count());
    }
    for (const auto& node : dead) {
        {
            std::lock_guard g(jobs_m_);
            if (jobs_.count(node)) continue;
        }
        handle_dead(node, keepalives.at(node));
    }
}

// Each write of a node's keepalive reaches the monitor when ZooKeeper tells
// us, not at our next scan: the node's age starts then. A late or repeated
// notification (session recovery re-arms every watch) only makes it younger.
void Fencer::watch_keepalives(const std::vector<std::string>& nodes) {
    for (auto it = keepalive_watches_.begin(); it != keepalive_watches_.end();) {
        if (std::find(nodes.begin(), nodes.end(), it->first) == nodes.end()) it = keepalive_watches_.erase(it);
        else ++it;
    }
    for (const auto& n : nodes) {
        if (keepalive_watches_.count(n)) continue;
        keepalive_watches_[n] = zk_->watch_data(
            schema::path("node.keepalive", {n}), [this, n](const std::optional<std::string>& data, const zk::Stat& st) {
                if (!data) return;
                std::lock_guard g(monitor_m_);
                monitor_.observe(n, st.mzxid, Clock::now());
            });
    }
}

std::optional<int32_t> mark_dead(zk::Session& zk, const Logger& log, const std::string& node,
                                 const zk::Stat& judged) {
    const std::string state_path = schema::path("node.state.daemon", {node});
    zk::Stat state_stat;
    if (zk.get(state_path, &state_stat).value_or("") != "run") return std::nullopt;  // another coordinator took it
    // The keepalive judged, not one read now: a keepalive written since the
    // scan would otherwise become the baseline and a live node be marked dead.
    zk::Transaction tx(zk);
    tx.check(schema::path("node.keepalive", {node}), judged.version);
    tx.set(state_path, "dead", state_stat.version);
    zk::Status st = tx.commit();
    if (st == zk::Status::ok) return state_stat.version + 1;
    if (st == zk::Status::bad_version) {
        log.info("Node {} wrote its keepalive or state since it was judged; not marking it dead", node);
        return std::nullopt;
    }
    log.error("Could not mark {} dead ({}); not fencing it", node, zk::to_string(st));
    return std::nullopt;
}

// The write lock on the dead node's daemonstate makes one job
// per node across every coordinator (ours and the reference's).
void Fencer::handle_dead(const std::string& node, const zk::Stat& judged) {
    const std::string state_path = schema::path("node.state.daemon", {node});
    zk::Lock lock(zk_, state_path, zk::LockKind::write);
    // Bounded: a stuck peer holding the lock must not stop our scans.
    if (!lock.acquire(settings_.interval * 2)) {
        log_.warn("Node {} seems dead, but its state lock is busy; trying again at the next scan", node);
        return;
    }
    Clock::time_point last_seen;
    {
        std::lock_guard g(monitor_m_);
        last_seen = monitor_.last_seen(node).value_or(Clock::now());
    }
    // Written before the job's first saving throw reads it.
    auto dead_version = mark_dead(*zk_, log_, node, judged);
    if (!dead_version) return;
    log_.warn("Node {} seems dead (no keepalive for {} s)", node,
              std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - last_seen).count());
    auto done = std::make_shared<std::atomic<bool>>(false);
    auto job = std::make_shared<FenceJob>(zk_, ipmi_, locks_, log_, settings_, node, last_seen, *dead_version);
    ++jobs_started_;
    std::lock_guard g(jobs_m_);
    jobs_[node] = Job{std::jthread([this, job, node, done](std::stop_token st) {
                          FenceOutcome o = FenceOutcome::stopped;
                          try {
                              o = job->run(st);
                          } catch (const std::exception& e) {
                              log_.error("Fence job for {} failed: {}", node, e.what());
                          }
                          log_.info("Fence job for {} ended: {}", node, to_string(o));
                          if (job_done_) job_done_(node, o, job->times());
                          *done = true;
                      }),
                      done};
}

}  // namespace pvc::fencing
