// Daemon start-up (docs/architecture.md §7.1, core/README.md "Start-up"): the
// steps in the reference's order, registration under the node guard, and the
// watches that feed the keepalive and the coordinator.
#include "daemon/daemon.hpp"

#include <malloc.h>

#include <filesystem>
#include <map>

#include <boost/asio/post.hpp>
#include <fmt/chrono.h>

#include "daemon/module_host.hpp"
#include "daemon/node_guard.hpp"
#include "health/health_host.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/tasks.hpp"

namespace pvc {

void Daemon::make_directories() {
    namespace fs = std::filesystem;
    for (const auto& base : {cfg_.dynamic_directory, cfg_.log_directory}) {
        if (base.empty() || fs::exists(base)) continue;
        std::error_code ec;
        fs::create_directories(base, ec);
        for (const char* sub : {"dnsmasq", "pdns", "nft"}) fs::create_directories(base / sub, ec);
        if (ec) throw Startup("cannot create directory " + base.string() + ": " + ec.message(), exit_failure);
    }
}

void Daemon::banner() {
    const auto& h = cfg_.host;
    log_.log(LogState::none, "");
    log_.info("Parallel Virtual Cluster node daemon v{}", cfg_.pvcnoded_version);
    log_.info("    Debug: {}", cfg_.debug ? "True" : "False");
    log_.info("    FQDN: {}", h.fqdn);
    log_.info("    Host: {}", h.hostname);
    log_.info("    ID: {}", h.node_id);
    if (h.static_data.size() == 4) {
        log_.info("    Machine details:");
        log_.info("      CPUs: {}", h.static_data[0]);
        log_.info("      Arch: {}", h.static_data[3]);
        log_.info("      OS: {}", h.static_data[2]);
        log_.info("      Kernel: {}", h.static_data[1]);
    }
    log_.log(LogState::none, "");
    log_.system("Starting pvcnoded");
}

void Daemon::connect_zookeeper() {
    log_.info("Connecting to ZooKeeper on coordinator nodes {}", cfg_.zookeeper_hosts);
    zk::SessionOptions opts;
    opts.hosts = cfg_.zookeeper_hosts;
    try {
        zk_ = zk::Session::connect(opts);
    } catch (const std::exception& e) {
        throw Startup(std::string("cannot connect to ZooKeeper: ") + e.what(), exit_failure);
    }
    log_.ok("Successfully connected to ZooKeeper");
    watches_.push_back(zk_->on_session_event([this](zk::SessionEvent ev) {
        switch (ev) {
            case zk::SessionEvent::suspended: log_.warn("Connection to ZooKeeper lost"); break;
            case zk::SessionEvent::reconnected: log_.ok("Connection to ZooKeeper resumed"); break;
            case zk::SessionEvent::expired_recovered:
                log_.warn("ZooKeeper session expired; new session open, ephemerals and watches restored");
                executor_.blocking("retaking the node lock", [this] { retake_node_guard(); });
                events_.session_recovered.emit();
                break;
            default: break;
        }
    }));
    try {
        check_schema_version(*zk_);
    } catch (const SchemaError& e) {
        throw Startup(e.what(), exit_failure);
    }
    watches_.push_back(zk_->watch_data(schema::path("base.schema.version"),
                                       [this](const std::optional<std::string>& v, const zk::Stat&) {
        bool ok = v && *v == std::to_string(schema::version);
        bool was;
        {
            std::lock_guard g(state_m_);
            was = schema_ok_;
            schema_ok_ = ok;
        }
        if (was && !ok)
            log_.error("Cluster schema version changed to '{}'; this daemon supports exactly version {} and "
                       "stops acting until it is restored (the keepalive only proves liveness)",
                       v.value_or("<absent>"), schema::version);
        else if (!was && ok)
            log_.ok("Cluster schema version is {} again; resuming", schema::version);
    }));
}

// Takes the node lock (docs/wire-contract.md §6.4, one daemon per node name). Its
// data says who we are, so that a restart after a crash can prove us gone.
Daemon::NodeGuard Daemon::acquire_node_guard() {
    const auto& h = cfg_.host;
    const std::string root = node_path("node.name");
    NodeGuard out;
    auto lock = std::make_unique<zk::Lock>(zk_, root, zk::LockKind::exclusive,
                                           node_guard::encode(node_guard::self(h.hostname), h.fqdn));
    auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(zk_->options().session_timeout +
                                                                      std::chrono::seconds(2));
    auto holders = node_guard::clear_stale(*zk_, root, h.hostname, log_);
    if (!holders.empty()) {
        auto until = std::chrono::system_clock::now() + wait;
        log_.info("Waiting for the node lock of {}, held by {}, until {} (the ZooKeeper session timeout of a "
                  "crashed holder, plus 2 s); then refusing to start",
                  h.hostname, join(holders, ", "),
                  fmt::format("{:%H:%M:%S}", fmt::localtime(std::chrono::system_clock::to_time_t(until))));
    }
    std::string ka_before = zk_->get(node_path("node.keepalive")).value_or("");
    if (lock->acquire(wait)) {
        out.lock = std::move(lock);
        return out;
    }
    out.keepalive_advanced = zk_->get(node_path("node.keepalive")).value_or("") != ka_before;
    return out;
}

// The node lock is an ephemeral of the session: an expired session took it
// with it, and the session restores only its registered ephemerals. Taken
// again at once; if another pvcnoded for this node took it meanwhile (started
// while we were cut off), this one stops: one daemon per node.
void Daemon::retake_node_guard() {
    {
        std::lock_guard g(guard_m_);
        if (!node_guard_ || shutting_down_) return;
    }
    log_.info("Taking the node lock of {} again (the expired session removed it)", cfg_.host.hostname);
    NodeGuard guard;
    try {
        guard = acquire_node_guard();
    } catch (const std::exception& e) {
        log_.error("Cannot take the node lock of {} again: {}; retrying at the next session recovery",
                   cfg_.host.hostname, e.what());
        return;
    }
    if (!guard.lock) {
        log_.error("Another pvcnoded took the node lock of {} while this daemon's ZooKeeper session was expired{}; "
                   "stopping this daemon (one daemon per node)",
                   cfg_.host.hostname, guard.keepalive_advanced ? " (its keepalive advances)" : "");
        exit_status_ = exit_failure;
        // On the I/O thread, as a signal's: run() joins it before it reads the shutdown thread.
        boost::asio::post(executor_.io(), [this] { request_shutdown(); });
        return;
    }
    std::lock_guard g(guard_m_);
    if (shutting_down_) return;  // the new lock is released as it goes
    node_guard_ = std::move(guard.lock);  // the old one's contender is already gone
    log_.ok("Node lock of {} held again", cfg_.host.hostname);
}

void Daemon::register_node() {
    const auto& h = cfg_.host;
    const std::string root = node_path("node.name");
    const std::string router = cfg_.daemon_mode == "coordinator" ? "secondary" : "client";
    const std::string staticdata = join(h.static_data, " ");
    const std::string version = std::to_string(schema::version);

    // One daemon per node name: an exclusive lock inside the node root,
    // ephemeral to our session (docs/wire-contract.md §4.3). Readers ignore lock children.
    auto take_guard = [&] {
        auto guard = acquire_node_guard();
        if (!guard.lock) {
            throw Startup(fmt::format("another pvcnoded is already running for node {} (it holds the node lock{}); "
                                      "refusing to start",
                                      h.hostname, guard.keepalive_advanced ? " and its keepalive advances" : ""),
                          exit_failure);
        }
        std::lock_guard g(guard_m_);
        node_guard_ = std::move(guard.lock);
    };

    bool exists = zk_->exists(root);
    if (!exists) {
        // Every node key of the schema, whatever the functions (as the
        // reference): the core's own values, then the modules', then the
        // schema's registration defaults.
        std::map<std::string, std::string> values = {
            {node_path("node.name"), cfg_.daemon_mode},
            {node_path("node.keepalive"), std::to_string(unix_now())},
            {node_path("node.mode"), cfg_.daemon_mode},
            {node_path("node.data.active_schema"), version},
            {node_path("node.data.latest_schema"), version},
            {node_path("node.data.static"), staticdata},
            {node_path("node.data.pvc_version"), cfg_.pvcnoded_version},
            {node_path("node.state.daemon"), "init"},
            {node_path("node.state.router"), router},
        };
        for (Module* m : modules_->modules()) {
            std::vector<zk::KeyValue> given;
            m->registration(given);
            for (auto& [path, value] : given) values.emplace(std::move(path), std::move(value));
        }
        zk::Transaction tx(*zk_);
        for (const auto& key : schema::keys_of(schema::Class::node)) {
            auto path = schema::path(key.name, {cfg_.host.hostname});
            auto it = values.find(path);
            tx.create(path, it != values.end() ? it->second : std::string(key.register_default));
        }
        zk::Status st = tx.commit();
        if (st == zk::Status::ok) {
            log_.ok("Registered new node {} ({})", h.hostname, cfg_.daemon_mode);
            take_guard();
            return;
        }
        if (st != zk::Status::node_exists)
            throw Startup(std::string("node registration failed: ") + zk::to_string(st), exit_failure);
        // Another starter registered it meanwhile: fall through to the existing-node path.
    }
    take_guard();
    bool ok = zk_->write({
        {root, cfg_.daemon_mode},
        {node_path("node.mode"), cfg_.daemon_mode},
        {node_path("node.state.daemon"), "init"},
        {node_path("node.state.router"), router},
        {node_path("node.data.static"), staticdata},
        {node_path("node.data.pvc_version"), cfg_.pvcnoded_version},
        {node_path("node.data.active_schema"), version},
        {node_path("node.data.latest_schema"), version},
    });
    if (!ok) throw Startup("node registration failed (see the ZooKeeper error above)", exit_failure);
    log_.ok("Updated registration of node {} ({})", h.hostname, cfg_.daemon_mode);
}

void Daemon::claim_primary() {
    if (cfg_.daemon_mode != "coordinator") return;
    auto current = zk_->get(schema::path("base.config.primary_node")).value_or("");
    if (!current.empty() && current != "none") {
        log_.info("Current primary node is {}", current);
        return;
    }
    log_.info("No primary node found; setting us as primary");
    zk_->write(schema::path("base.config.primary_node"), cfg_.host.hostname);
}

void Daemon::watch_cluster() {
    watches_.push_back(zk_->watch_data(node_path("node.state.daemon"),
                                       [this](const std::optional<std::string>& v, const zk::Stat&) {
        std::lock_guard g(state_m_);
        daemon_state_ = v.value_or("stop");
    }));
    watches_.push_back(zk_->watch_data(schema::path("base.config.maintenance"),
                                       [this](const std::optional<std::string>& v, const zk::Stat&) {
        bool m = zk::lenient_bool(v.value_or("")).value_or(false);
        bool changed;
        {
            std::lock_guard g(state_m_);
            changed = m != maintenance_;
            maintenance_ = m;
        }
        if (changed) log_.info("Maintenance mode is {}", m ? "on" : "off");
    }));
    watches_.push_back(zk_->watch_data(node_path("node.state.router"),
                                       [this](const std::optional<std::string>& v, const zk::Stat&) {
        std::string s = v.value_or("client");
        {
            std::lock_guard g(state_m_);
            if (s == router_state_) return;
            router_state_ = s;
        }
        events_.router_state.emit(s);
        on_router_state(s);
    }));
    watches_.push_back(zk_->watch_data(schema::path("base.config.primary_node"),
                                       [this](const std::optional<std::string>& v, const zk::Stat& st) {
        on_primary_node(v, st);
    }));
}

void Daemon::start() {
    make_directories();
    banner();
    // Load modules before touching the cluster: a missing enabled module must
    // stop us before anything is written.
    modules_ = std::make_unique<ModuleHost>(module_directory(cfg_), log_);
    try {
        modules_->load(cfg_);
    } catch (const ModuleLoadError& e) {
        throw Startup(e.what(), exit_failure);
    }
    ConfigProblems problems;
    cfg_.module_keys = modules_->configure_all(cfg_, problems);
    for (auto& secret : modules_->secrets()) add_log_secret(sink_, std::move(secret));
    if (!problems.empty()) {
        for (const auto& p : problems.sorted()) log_.error("{}", p.to_string("configuration"));
        throw Startup(fmt::format("invalid configuration ({} module problem{})", problems.size(),
                                  problems.size() == 1 ? "" : "s"),
                      exit_config_error);
    }
    log_.info("Node is a {}", cfg_.daemon_mode);
    modules_->prepare_host_all(cfg_, sink_);  // e.g. the cluster bridge ZooKeeper is reached over
    connect_zookeeper();
    attach_zookeeper(sink_, zk_, cfg_.node);
    validate_and_apply(*zk_, log_);
    register_node();
    validate_and_apply(*zk_, log_);  // our own node's keys, now that its root exists
    {
        std::lock_guard g(state_m_);
        daemon_state_ = "init";
    }
    events_.daemon_state.emit("init");
    claim_primary();
    watch_cluster();
    tasks_ = std::make_shared<tasks::Runner>(zk_, cfg_.host.hostname, Logger(sink_, "tasks"));
    services_.provide<services::TaskHandlers>(std::static_pointer_cast<services::TaskHandlers>(tasks_));
    modules_->start_all(cfg_, sink_, zk_, executor_, events_, services_);
    try {
        tasks_->start();
    } catch (const std::exception& e) {
        log_.error("The task runner did not start (this node runs no tasks): {}", e.what());
    }
    health_ = std::make_unique<HealthHost>(cfg_, log_, zk_, executor_);
    health_->load();
    // Start-up's transient allocations (configuration, module and plugin
    // loading, the first reads) are freed by now: return the free pages.
    malloc_trim(0);
    keepalive_thread_ = std::thread([this] { keepalive_loop(); });
}

}  // namespace pvc
