#include "self_fence.hpp"

#include <condition_variable>

#include "pvc/command.hpp"
#include "pvc/schema.hpp"

namespace pvc::fencing {

SelfFence::SelfFence(std::shared_ptr<zk::Session> zk, Logger log, std::string node, std::chrono::milliseconds interval,
                     int suicide_intervals, std::string reset_command)
    : zk_(std::move(zk)), log_(std::move(log)), node_(std::move(node)), interval_(interval),
      suicide_intervals_(suicide_intervals), command_(std::move(reset_command)) {}

SelfFence::~SelfFence() { stop(); }

void SelfFence::start() {
    watch_ = zk_->watch_data(schema::path("node.keepalive", {node_}),
                             [this](const std::optional<std::string>&, const zk::Stat& st) {
        bool first = false;
        {
            std::lock_guard g(m_);
            if (!mzxid_) {
                mzxid_ = st.mzxid;  // the first answer: what was there before our first keepalive
                return;
            }
            if (st.mzxid == *mzxid_) return;
            mzxid_ = st.mzxid;
            last_write_ = Clock::now();
            first = !counting_;
            counting_ = true;
        }
        if (first) log_.info("Self-fencing counts from this node's first keepalive on");
    });
    log_.info("Self-fencing is on: this node resets itself after {} s without a keepalive reaching ZooKeeper, "
              "counted from its first keepalive",
              std::chrono::duration_cast<std::chrono::seconds>(interval_ * suicide_intervals_).count());
    thread_ = std::jthread([this](std::stop_token st) { loop(st); });
}

void SelfFence::on_run() {
    {
        std::lock_guard g(m_);
        if (counting_) return;
        counting_ = true;
        last_write_ = Clock::now();
    }
    log_.info("Self-fencing counts from this node's first keepalive on");
}

bool SelfFence::counting() const {
    std::lock_guard g(m_);
    return counting_;
}

void SelfFence::disarm() { armed_ = false; }

void SelfFence::stop() {
    armed_ = false;
    if (thread_.joinable()) {
        thread_.request_stop();
        thread_.join();
    }
    watch_.reset();
}

void SelfFence::loop(std::stop_token stop) {
    const auto limit = interval_ * suicide_intervals_;
    const auto period = std::min<std::chrono::milliseconds>(interval_ / 4, std::chrono::milliseconds(250));
    std::mutex m;
    std::condition_variable_any cv;
    bool fired = false;  // once per outage; re-armed by the next keepalive seen
    while (!stop.stop_requested()) {
        {
            std::unique_lock lk(m);
            cv.wait_for(lk, stop, period, [] { return false; });
        }
        if (stop.stop_requested() || !armed_) continue;
        Clock::duration silent;
        {
            std::lock_guard g(m_);
            if (!counting_) continue;  // no keepalive of ours yet: start-up is not counted
            silent = Clock::now() - last_write_;
        }
        if (silent <= limit) {
            fired = false;
            continue;
        }
        if (fired) continue;
        fired = true;
        ++resets_;
        log_.error("NO KEEPALIVE REACHED ZOOKEEPER FOR {} ms ({} intervals): SELF-FENCING with `{}`",
                   std::chrono::duration_cast<std::chrono::milliseconds>(silent).count(), suicide_intervals_,
                   command_);
        auto r = run_command({"/bin/sh", "-c", command_}, {}, std::chrono::seconds(60));
        if (r.exit_status != 0)
            log_.error("Self-fence command failed (exit {}): {}", r.exit_status, r.output);
    }
}

}  // namespace pvc::fencing
