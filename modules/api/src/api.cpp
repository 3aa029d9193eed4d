#include "api.hpp"

#include <thread>

#include "pvc/schema.hpp"

namespace pvc::api {

ApiModule::ApiModule() = default;
ApiModule::~ApiModule() { stop(); }

void ApiModule::configure(const Config& config, ConfigProblems& problems) {
    settings_ = read_api_settings(config, problems);
    settings_.ceph = read_ceph_settings(config);
}

void ApiModule::start(NodeContext& ctx) {
    log_ = ctx.logger;
    zk_ = ctx.zk;
    executor_ = &ctx.executor;
    if (!settings_.coordinator) {
        log_.info("API: this node is no coordinator and never primary: nothing to serve");
        return;
    }
    if (settings_.auth_enabled && settings_.tokens.empty())
        log_.warn("API: authentication is enabled but pvc.api.authentication.tokens is empty: every protected route "
                  "answers 401");
    pool_ = std::make_unique<ModulePool>(ctx.executor, "api", 1);
    if (settings_.ceph) storage_pool_ = std::make_unique<ModulePool>(ctx.executor, "api-storage", 1);
    view_ = std::make_shared<ClusterView>(zk_);
    view_->start();
    figures_->zookeeper_requests = [zk = zk_] { return zk->stats().requests; };
    api_ = std::make_shared<Api>(zk_, *view_, settings_, log_, *figures_, &ctx.services);
    router_ = ctx.events.router_state.subscribe([this](const std::string& s) { on_router_state(s); });
    tick_ = ctx.events.keepalive_tick.subscribe([this] { on_tick(); });
    // A daemon that starts as primary (its router state already primary).
    if (zk_->get(schema::path("node.state.router", {settings_.node})).value_or("") == "primary")
        pool_->post("serve", [this](std::stop_token st) {
            if (!st.stop_requested()) serve();
        });
}

void ApiModule::stop() {
    router_.reset();
    tick_.reset();
    if (pool_) pool_->stop();
    if (storage_pool_) storage_pool_->stop();
    {
        std::lock_guard g(server_m_);
        if (server_) {
            server_->stop();
            figures_->server = nullptr;
            server_.reset();
        }
    }
    pool_.reset();
    storage_pool_.reset();
    api_.reset();
    if (view_) view_->stop();
    view_.reset();
}

bool ApiModule::serving() const {
    std::lock_guard g(server_m_);
    return server_ && server_->running();
}

uint16_t ApiModule::port() const {
    std::lock_guard g(server_m_);
    return server_ ? server_->port() : 0;
}

void ApiModule::serve() {
    std::lock_guard g(server_m_);
    if (server_ || !api_) return;
    ServerOptions o = settings_.server;
    o.streamed = &Api::streamed_body;  // a volume upload's body goes to its route as it arrives
    // A connection that sent a valid key may use the reserved connections.
    if (settings_.auth_enabled && !settings_.tokens.empty())
        o.key_valid = [tokens = settings_.tokens](std::string_view key) {
            for (const auto& t : tokens)
                if (!t.token.empty() && t.token == key) return true;
            return false;
        };
    // The listen address may be the floating address the network module is
    // adding at this moment: a few retries (the socket binds with
    // IP_FREEBIND, so this is for other transient failures).
    for (int attempt = 0; attempt < 20; ++attempt) {
        auto s = std::make_unique<HttpServer>(o, [api = api_, view = view_, figures = figures_](const HttpRequest& r,
                                                                                              std::stop_token st) {
            return api->handle(r, st);
        }, log_);
        try {
            s->start();
            figures_->server = &s->counters();
            log_.ok("API: listening on {}:{} ({})", o.address, s->port(), o.tls ? "https" : "http");
            server_ = std::move(s);
            return;
        } catch (const std::exception& e) {
            if (attempt == 19 || pool_->stopping()) {
                log_.error("API: not serving: {}", e.what());
                return;
            }
            if (attempt == 0) log_.warn("API: {}; retrying", e.what());
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    }
}

void ApiModule::stop_serving() {
    std::lock_guard g(server_m_);
    if (!server_) return;
    server_->stop();
    figures_->server = nullptr;
    server_.reset();
    log_.ok("API: stopped listening");
}

// What moves with the primary: the API starts with the primary's services (phase
// G of a takeover, after the floating addresses it may listen on) and stops
// with them (phase B of a relinquish, before the addresses go).
void ApiModule::transition(Transition t, TransitionPhase phase, std::function<void()> done) {
    bool start = t == Transition::takeover && phase == TransitionPhase::G;
    bool stop = t == Transition::relinquish && phase == TransitionPhase::B;
    if (!pool_ || (!start && !stop)) return done();
    pool_->post(start ? "takeover" : "relinquish", [this, start, done](std::stop_token st) {
        if (!st.stop_requested()) {
            if (start) serve();
            else stop_serving();
        }
        done();
    });
}

void ApiModule::on_router_state(const std::string& state) {
    if (!pool_) return;
    if (state == "primary")
        pool_->post("serve", [this](std::stop_token st) {
            if (!st.stop_requested()) serve();
        });
    else if (state != "takeover")
        pool_->post("stop serving", [this](std::stop_token st) {
            if (!st.stop_requested()) stop_serving();
        });
}

// Each keepalive: the interval since the last, and one ZooKeeper read's
// round trip (on the pool: a read may wait on a slow ZooKeeper).
void ApiModule::on_tick() {
    auto now = std::chrono::steady_clock::now();
    if (last_tick_) figures_->keepalive_interval_s = std::chrono::duration<double>(now - *last_tick_).count();
    last_tick_ = now;
    figures_->failed_tasks = executor_ ? executor_->failed_tasks() : 0;
    // The primary brings the /ceph mirrors in line with Ceph for what
    // storage writes left half-done (Ceph did its part, ZooKeeper did not, or
    // the reverse): on the pool, one at a time, bounded by the Ceph client's
    // time-outs.
    if (storage_pool_ && api_ && serving() && !reconciling_.exchange(true))
        storage_pool_->post("storage reconciliation", [this](std::stop_token) {
            try {
                api_->reconcile_storage();
            } catch (const std::exception& e) {
                log_.warn("API: storage reconciliation failed: {}", e.what());
            }
            reconciling_ = false;
        });
    if (!pool_ || probing_.exchange(true)) return;
    pool_->post("ZooKeeper latency probe", [this](std::stop_token) {
        auto t0 = std::chrono::steady_clock::now();
        try {
            zk_->exists(schema::path("base.schema.version"));
            figures_->zookeeper_latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        } catch (const std::exception&) {
        }
        probing_ = false;
    });
}

}  // namespace pvc::api
