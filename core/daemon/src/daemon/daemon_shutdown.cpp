// The orderly shutdown (docs/architecture.md §7.4, core/README.md "Shutdown"):
// primary hand-over, the last keepalive, health cleanup, modules stopped,
// `stop`, the ZooKeeper log drained, the session closed.
#include "daemon/daemon.hpp"

#include <atomic>
#include <thread>

#include "daemon/module_host.hpp"
#include "health/health_host.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"

namespace pvc {

namespace {
// The hand-over at shutdown, both waits together (a hand-over in progress
// completed, then a successor), as the reference's 120 s: with the rest of
// the shutdown inside systemd's 180 s stop timeout.
constexpr std::chrono::seconds handover_bound_at_shutdown{120};
constexpr std::chrono::seconds handover_wait_at_shutdown{30};  // of which completing one in progress
}

void Daemon::request_shutdown() {
    {
        // A signal during start-up is acted on once start-up is complete.
        std::lock_guard g(lifecycle_m_);
        if (!started_) {
            shutdown_pending_ = true;
            return;
        }
    }
    if (shutting_down_.exchange(true)) return;
    shutdown_thread_ = std::thread([this] {
        try {
            shutdown();
        } catch (const std::exception& e) {
            log_.error("Shutdown sequence failed: {}; exiting", e.what());
            exit_status_ = exit_failure;
        }
        executor_.io().stop();
    });
}

// Whether another coordinator could take the primary role at shutdown. The
// reference waits up to 120 s whenever any other node exists, even when every
// other coordinator is stopped or dead and nobody can contend; we wait only
// when another coordinator is in `run`. A key we cannot read counts as a
// possible successor (the reference's wait, bounded), never as "nobody".
bool Daemon::successor_may_exist() {
    try {
        auto nodes = zk_->children(schema::path("base.node"));
        if (!nodes) return false;
        for (const auto& n : *nodes) {
            if (n == cfg_.host.hostname) continue;
            auto mode = zk_->get(schema::path("node.mode", {n}));
            auto state = zk_->get(schema::path("node.state.daemon", {n}));
            if (mode.value_or("") == "coordinator" && state.value_or("") == "run") return true;
        }
        log_.info("No other coordinator is in run state; keeping the primary role through shutdown");
        return false;
    } catch (const std::exception& e) {
        log_.warn("Cannot read the other nodes' states ({}); handing the primary role over as the reference does",
                  e.what());
        return true;
    }
}

void Daemon::shutdown() {
    log_.system("Terminating pvcnoded and cleaning up");
    notify("STOPPING=1");
    if (!zk_) return;
    // ZooKeeper gone (every member down or unreachable): nothing of the
    // shutdown can reach it, and each step would wait an operation timeout
    // (10 s) for a connection, 80-100 s in all. So each step that needs
    // ZooKeeper runs only while the session is connected; the first one that
    // finds it not connected closes the session, which ends at once every call
    // still waiting for a connection on any thread (the keepalive's, the
    // modules', an API request's, the log writer's), and every later step
    // skips its ZooKeeper part. The process ends in seconds; VMs are never
    // touched either way.
    bool zk_closed = false;
    auto zk_gone = [&] {
        if (zk_closed) return true;
        if (zk_->connected()) return false;
        log_.warn("ZooKeeper unavailable; shutting down without it (nothing more is written there)");
        zk_closed = true;
        zk_->close();
        return true;
    };
    if (!zk_gone()) write_own("node.state.daemon", "shutdown");
    {
        std::lock_guard g(state_m_);
        daemon_state_ = "shutdown";
    }
    events_.daemon_state.emit("shutdown");
    // Work of a module that must end before the node lets go of anything
    // (the hypervisor's flush or unflush of this node); the keepalive goes on.
    // Bounded by ZooKeeper too: the drain runs beside this thread, which
    // closes the session if ZooKeeper goes meanwhile (the module's waits on
    // it then end at once).
    if (modules_ && !zk_gone()) {
        std::atomic<bool> drained{false};
        std::thread drain([&] {
            try {
                modules_->drain_all();
            } catch (const std::exception& e) {
                log_.error("Draining the modules at shutdown failed: {}", e.what());
            }
            drained = true;
        });
        while (!drained && !zk_gone()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
        drain.join();
    }
    // No more tasks claimed here; running ones are asked to stop and waited
    // for (their results written while ZooKeeper is there).
    if (tasks_) tasks_->stop();

    // Hand the primary role over if another node can take it.
    std::string router = cached_router_state();
    const auto handover_until = std::chrono::steady_clock::now() + handover_bound_at_shutdown;
    // A hand-over in progress is completed first. A takeover (the role was
    // given to us) is then handed on as any primary role is: left half-done,
    // the cluster would keep /config/primary_node naming a stopped node and
    // nobody primary. A relinquish left half-done would leave the router's
    // addresses here while the new primary adds them. Bounded: one that
    // cannot complete (ZooKeeper unreachable, a peer's lock held) is given
    // up, as before.
    if (router == "takeover" || router == "relinquish") {
        const std::string moving = router;
        log_.info("Completing the primary {} in progress before shutdown (at most {} s)", moving,
                  handover_wait_at_shutdown.count());
        auto until = std::chrono::steady_clock::now() + handover_wait_at_shutdown;
        while (router == moving && std::chrono::steady_clock::now() < until && !zk_gone()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            router = cached_router_state();
        }
        if (router == moving && zk_gone())
            log_.warn("The primary {} cannot complete without ZooKeeper; shutting down with it unfinished", moving);
        else if (router == moving)
            log_.warn("The primary {} did not complete within {} s; shutting down with it unfinished", moving,
                      handover_wait_at_shutdown.count());
    }
    if (router == "primary" && !zk_gone() && successor_may_exist()) {
        log_.info("Relinquishing primary role before shutdown");
        // A release nobody could see (ZooKeeper unreachable) has no successor
        // to wait for: waiting would only hold the shutdown for 120 s more,
        // past systemd's stop timeout. (A write refused while connected, by
        // a concurrent change of the key, is still waited on: the role may
        // be moving.)
        bool released = zk_->write(schema::path("base.config.primary_node"), "none");
        bool unseen = !released && zk_gone();
        if (unseen)
            log_.warn("Could not release the primary role (ZooKeeper unavailable); not waiting for a successor");
        while (!unseen && std::chrono::steady_clock::now() < handover_until && cached_router_state() != "secondary" &&
               !zk_gone())
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }

    // Stop the keepalive and run one last tick (it keeps `shutdown`).
    {
        std::lock_guard g(ka_m_);
        ka_stop_ = true;
    }
    ka_cv_.notify_all();
    zk_gone();  // a tick waiting for a connection ends at once
    if (keepalive_thread_.joinable()) keepalive_thread_.join();
    if (modules_ && health_ && !zk_gone()) keepalive_tick(true);

    if (health_) health_->shutdown(std::chrono::seconds(10));
    zk_gone();  // the modules' calls, an API request's, end at once
    if (modules_) modules_->stop_all();  // never touches running VMs
    if (!zk_gone()) {
        write_own("node.state.daemon", "stop");
        events_.daemon_state.emit("stop");
        log_.ok("Node is in daemon state stop");
    } else {
        events_.daemon_state.emit("stop");
        log_.warn("Node stopped; daemon state stop not written (ZooKeeper unavailable)");
    }
    watches_.clear();
    shutdown_log_sink(sink_);  // at once when the session is not connected
    {
        std::lock_guard g(guard_m_);
        node_guard_.reset();
    }
    zk_->close();
    log_.ok("Terminated pvcnoded");
}

}  // namespace pvc
