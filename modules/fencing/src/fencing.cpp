#include "fencing.hpp"

#include "pvc/schema.hpp"

namespace pvc::fencing {

FenceSettings settings_from(const Config& cfg, const Settings& own) {
    FenceSettings s;
    s.interval = std::chrono::seconds(cfg.keepalive_interval);
    s.saving_throws = own.saving_throws;
    s.migrate_on_success = own.successful_fence == "migrate";
    s.migrate_on_failure = own.failed_fence == "migrate";
    s.suicide_intervals = own.suicide_intervals;
    s.own_node = cfg.node;
    for (const auto& c : cfg.coordinators) s.coordinators.push_back(c.substr(0, c.find(':')));
    // Long enough for a slow BMC to act on `off`; polled, so a fast one ends it early.
    s.confirm_window = std::max<std::chrono::milliseconds>(std::chrono::seconds(10),
                                                           std::chrono::seconds(2 * own.ipmi_timeout));
    return s;
}

void FencingModule::configure(const Config& config, ConfigProblems& problems) {
    settings_ = Settings::read(config, problems);
    me_ = config.host.hostname;
}

void FencingModule::registration(std::vector<zk::KeyValue>& values) const {
    values.emplace_back(schema::path("node.ipmi.hostname", {me_}), settings_.ipmi_hostname);
    values.emplace_back(schema::path("node.ipmi.username", {me_}), settings_.ipmi_username);
    values.emplace_back(schema::path("node.ipmi.password", {me_}), settings_.ipmi_password);
}

void FencingModule::register_own_bmc(NodeContext& ctx) {
    std::vector<zk::KeyValue> values;
    registration(values);
    if (!ctx.zk->write(values))
        ctx.logger.error("Cannot register this node's IPMI interface {} (see the ZooKeeper error above)",
                         settings_.ipmi_hostname);
}

void FencingModule::check_own_bmc(const Logger& log) {
    if (settings_.ipmi_hostname.empty()) return;
    log.info("IPMI hostname: {}", settings_.ipmi_hostname);
    own_check_ = std::thread([this, log] {
        try {
            // The peers' fence calls use the same arguments; 2 s: a check, not a fence.
            Ipmitool ipmitool(settings_.ipmitool_args, std::chrono::seconds(2));
            auto r = ipmitool.chassis_power({settings_.ipmi_hostname, settings_.ipmi_username, settings_.ipmi_password},
                                            "status");
            if (r.state == PowerState::on)
                log.ok("Our IPMI interface is reachable; fencing of this node is possible");
            else
                log.warn("Our IPMI interface {} is not reachable; fencing of this node will fail until corrected",
                         settings_.ipmi_hostname);
        } catch (const std::exception& e) {
            log.warn("Cannot check our IPMI interface ({}); fencing of this node will likely fail", e.what());
        }
    });
}

void FencingModule::start(NodeContext& ctx) {
    const Config& cfg = ctx.config;
    const Settings& own = settings_;
    register_own_bmc(ctx);
    ipmi_ = std::make_unique<Ipmitool>(own.ipmitool_args, std::chrono::seconds(own.ipmi_timeout));
    locks_ = std::make_unique<services::RbdLocksOrNone>(ctx.services, ctx.logger);
    if (cfg.daemon_mode == "coordinator") {
        fencer_ = std::make_unique<Fencer>(ctx.zk, *ipmi_, *locks_, ctx.logger, settings_from(cfg, own),
                                           own.fence_intervals);
        fencer_->start();
        ctx.logger.info("This coordinator fences dead nodes: dead after {} s without a keepalive, {} saving throws",
                        cfg.keepalive_interval * own.fence_intervals, own.saving_throws);
    }
    if (own.suicide_intervals > 0) {
        self_fence_ = std::make_unique<SelfFence>(ctx.zk, ctx.logger, cfg.node,
                                                  std::chrono::seconds(cfg.keepalive_interval),
                                                  own.suicide_intervals, own.suicide_command);
        self_fence_->start();
    }
    {
        std::lock_guard g(target_->m);
        target_->fencer = fencer_.get();
        target_->self_fence = self_fence_.get();
    }
    // Delivered on the core strand: on_tick only wakes the fencer's thread.
    tick_sub_ = ctx.events.keepalive_tick.subscribe([t = target_] {
        std::lock_guard g(t->m);
        if (t->fencer) t->fencer->on_tick();
    });
    state_sub_ = ctx.events.daemon_state.subscribe([t = target_](const std::string& state) {
        std::lock_guard g(t->m);
        if (!t->self_fence) return;
        if (state == "run") t->self_fence->on_run();
        else if (state == "shutdown" || state == "stop") t->self_fence->disarm();
    });
    // Last: nothing after it can throw, so stop() always joins its thread.
    check_own_bmc(ctx.logger);
}

FencingModule::~FencingModule() {
    if (own_check_.joinable()) own_check_.join();
}

void FencingModule::stop() {
    tick_sub_.reset();
    state_sub_.reset();
    {
        std::lock_guard g(target_->m);
        target_->fencer = nullptr;
        target_->self_fence = nullptr;
    }
    if (fencer_) fencer_->stop();
    if (self_fence_) self_fence_->stop();
    fencer_.reset();
    self_fence_.reset();
    if (own_check_.joinable()) own_check_.join();  // <= 2 s: its ipmitool's deadline
}

}  // namespace pvc::fencing
