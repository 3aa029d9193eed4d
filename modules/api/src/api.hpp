// The API module (modules/api/README.md): PVC's HTTP API and Prometheus metrics served by
// pvcnoded on the primary coordinator. On a coordinator it keeps the cluster
// view (cluster_view.hpp) current from start, so a node that becomes primary
// answers at once; the listener follows the primary role through the
// transition hook (takeover: listen, then `done`; relinquish: stop
// listening, then `done`) and the router state events (a daemon that starts
// as primary, a role lost without a relinquish).
//
// Serves pvc.functions.enable_api; optional (a node without it runs, with a
// warning). Configuration: settings.hpp (`pvc.api`).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "cluster_view.hpp"
#include "http_server.hpp"
#include "metrics.hpp"
#include "pvc/module.hpp"
#include "routes.hpp"
#include "settings.hpp"

namespace pvc::api {

class ApiModule final : public Module {
public:
    ApiModule();
    ~ApiModule() override;
    std::string_view name() const override { return "api"; }
    void configure(const Config& config, ConfigProblems& problems) override;
    void start(NodeContext& ctx) override;
    void stop() override;
    void transition(Transition t, TransitionPhase phase, std::function<void()> done) override;

    const ApiSettings& settings() const { return settings_; }
    // For tests: listening now, and the bound port.
    bool serving() const;
    uint16_t port() const;

private:
    void serve();          // on the module's pool
    void stop_serving();   // on the module's pool
    void on_router_state(const std::string& state);
    void on_tick();

    ApiSettings settings_;
    Logger log_;
    std::shared_ptr<zk::Session> zk_;
    Executor* executor_ = nullptr;
    // Shared with the server's handler: a request still running when the
    // server gave up waiting for it keeps what it uses (stop_bound).
    std::shared_ptr<ClusterView> view_;
    std::shared_ptr<DaemonFigures> figures_ = std::make_shared<DaemonFigures>();
    std::shared_ptr<Api> api_;
    mutable std::mutex server_m_;
    std::unique_ptr<HttpServer> server_;
    std::unique_ptr<ModulePool> pool_;
    // The primary's storage reconciliation at each keepalive (with Ceph
    // settings only): a thread of its own, so an unreachable Ceph never holds
    // the listener's hand-over tasks on pool_.
    std::unique_ptr<ModulePool> storage_pool_;
    std::atomic<bool> probing_{false};
    std::atomic<bool> reconciling_{false};  // the storage reconciliation of a tick is running
    std::optional<std::chrono::steady_clock::time_point> last_tick_;
    Subscription router_, tick_;  // last: end before the parts go
};

}  // namespace pvc::api
