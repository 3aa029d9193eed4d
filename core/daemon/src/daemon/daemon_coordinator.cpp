// The coordinator's router state (docs/wire-contract.md §5.3, core/README.md
// "Router state"): contention for an empty primary_node, takeover and
// relinquish requests, and the hand-overs themselves, each retried while the
// value that asked for it still holds.
#include "daemon/daemon.hpp"

#include "daemon/module_host.hpp"
#include "pvc/schema.hpp"

namespace pvc {

std::string Daemon::cached_router_state() const {
    std::lock_guard g(state_m_);
    return router_state_;
}

bool Daemon::pause(std::chrono::milliseconds d) {
    std::unique_lock lk(ka_m_);
    return !ka_cv_.wait_for(lk, d, [this] { return ka_stop_; });
}

// An action that must complete (takeover, relinquish, the router
// state writes that start them) is retried with backoff while ZooKeeper is
// unreachable, as long as it is still wanted and the daemon is not stopping.
void Daemon::until_done(const char* what, const std::function<bool()>& wanted, const std::function<bool()>& step) {
    auto delay = std::chrono::milliseconds(250);
    for (int attempt = 1;; ++attempt) {
        if (!wanted()) return;
        try {
            if (step()) return;
            log_.warn("{} did not complete (attempt {}); retrying in {} ms", what, attempt, delay.count());
        } catch (const std::exception& e) {
            log_.warn("{} failed (attempt {}): {}; retrying in {} ms", what, attempt, e.what(), delay.count());
        }
        if (!pause(delay)) return;
        delay = std::min(delay * 2, std::chrono::milliseconds(5000));
    }
}

// A coordinator's reaction to /config/primary_node: contend for an empty one,
// take over or relinquish. Blocking steps run on the pool, never in the callback.
void Daemon::on_primary_node(const std::optional<std::string>& value, const zk::Stat& stat) {
    std::string v = value.value_or("none");
    std::string router, dstate;
    {
        std::lock_guard g(state_m_);
        if (v == primary_node_ && stat.version == primary_node_version_) return;
        primary_node_ = v;
        primary_node_version_ = stat.version;
        router = router_state_;
        dstate = daemon_state_;
    }
    // Each action is wanted only while /config/primary_node still holds the value that asked for it.
    auto still = [this, v, version = stat.version] {
        std::lock_guard g(state_m_);
        return primary_node_ == v && primary_node_version_ == version;
    };
    if (cfg_.daemon_mode != "coordinator") {
        if (router != "client")
            executor_.blocking("router state write (client)", [this, still] {
                until_done("Writing router state client", [&] { return still() && cached_router_state() != "client"; },
                           [this] { return write_own("node.state.router", "client"); });
            });
        return;
    }
    const std::string& me = cfg_.host.hostname;
    int32_t version = stat.version;
    if (v == "none") {
        if (dstate != "run" || router == "primary" || router == "takeover" || router == "relinquish") return;
        executor_.blocking("primary contention", [this, version, still] { contend_for_primary(version, still); });
    } else if (v == me && router == "secondary") {
        executor_.blocking("takeover request", [this, still] {
            if (!pause(std::chrono::milliseconds(500))) return;
            until_done("Requesting takeover", [&] { return still() && cached_router_state() == "secondary"; },
                       [this] { return write_own("node.state.router", "takeover"); });
        });
    } else if (v != me && router == "primary") {
        executor_.blocking("relinquish request", [this, still] {
            if (!pause(std::chrono::milliseconds(500))) return;
            until_done("Requesting relinquish", [&] { return still() && cached_router_state() == "primary"; },
                       [this] { return write_own("node.state.router", "relinquish"); });
        });
    }
}

// Contention for an empty primary_node. A timeout means another contender holds the lock and will
// write (nothing more to do, as in the reference); an error (ZooKeeper
// unreachable) says nothing about the others, so the contention is retried
// once ZooKeeper is back while the value is still the `none` we saw. Without
// that a lone secondary would leave the cluster without a primary.
void Daemon::contend_for_primary(int32_t version, const std::function<bool()>& still) {
    const std::string key = schema::path("base.config.primary_node");
    auto eligible = [&] {
        std::lock_guard g(state_m_);
        return daemon_state_ == "run" && router_state_ != "primary" && router_state_ != "takeover" &&
               router_state_ != "relinquish";
    };
    until_done("Contending for primary", [&] { return still() && eligible(); }, [&] {
        zk::Lock lock(zk_, key, zk::LockKind::exclusive);
        if (!lock.acquire(std::chrono::milliseconds(400))) {
            if (lock.interrupted()) throw zk::Error(zk::Status::connection_loss, "ZooKeeper unreachable");
            log_.info("Timed out contending for primary");
            return true;
        }
        zk::Stat now;
        zk_->get(key, &now);
        if (now.version != version) return true;
        log_.info("Contending for primary: we won");
        return zk_->write(key, cfg_.host.hostname);
    });
}

// The hand-over itself (daemon_handover.cpp): the reference's phases under
// the sync_lock, the modules' part in its phases, then `primary` /
// `secondary`. A coordinator without networking runs the same sequence (its
// modules have nothing to move), so it never stays in takeover/relinquish
// (the reference's defect: a coordinator without networking stayed there).
void Daemon::on_router_state(const std::string& state) {
    if (state == "takeover") executor_.blocking("takeover", [this] { take_over(); });
    else if (state == "relinquish") executor_.blocking("relinquish", [this] { relinquish(); });
}

}  // namespace pvc
