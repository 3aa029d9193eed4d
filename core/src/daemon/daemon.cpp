#include "daemon/daemon.hpp"

#include <csignal>
#include <ctime>
#include <filesystem>
#include <map>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/process.hpp>
#include <fmt/chrono.h>

#ifdef PVC_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

#include "daemon/host_figures.hpp"
#include "daemon/module_host.hpp"
#include "daemon/transition.hpp"
#include "daemon/node_guard.hpp"
#include "health/health_host.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"

namespace pvc {

namespace {

long unix_now() { return static_cast<long>(std::time(nullptr)); }

std::string join(const std::vector<std::string>& v, const char* sep) {
    std::string out;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) out += sep;
        out += v[i];
    }
    return out;
}

std::string tick_timestamp() { return timestamp_us("%Y-%m-%d %H:%M:%S"); }

}  // namespace

struct Daemon::Startup : std::runtime_error {
    Startup(const std::string& what, int status) : std::runtime_error(what), status(status) {}
    int status;
};

Daemon::Daemon(Config cfg, std::shared_ptr<LogSink> sink)
    : cfg_(std::move(cfg)), sink_(std::move(sink)), log_(sink_, "") {
    executor_.set_logger(log_);
    deliver_core_events(events_, executor_, core_strand_);
}

Daemon::~Daemon() {
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
    {
        std::lock_guard g(ka_m_);
        ka_stop_ = true;
    }
    ka_cv_.notify_all();
    if (keepalive_thread_.joinable()) keepalive_thread_.join();
}

std::string Daemon::node_path(const char* key) const { return schema::path(key, {cfg_.host.hostname}); }

bool Daemon::write_own(const char* key, const std::string& value) {
    try {
        return zk_->write(node_path(key), value);
    } catch (const std::exception& e) {
        log_.error("Failed to write {}: {}", node_path(key), e.what());
        return false;
    }
}

void Daemon::notify([[maybe_unused]] const char* state) {
#ifdef PVC_HAVE_SYSTEMD
    sd_notify(0, state);
#endif
}

// ---------------------------------------------------------------- start-up

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
    log_.info("    IPMI hostname: {}", cfg_.ipmi_hostname);
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

void Daemon::register_node() {
    const auto& h = cfg_.host;
    const std::string root = node_path("node.name");
    const std::string router = cfg_.daemon_mode == "coordinator" ? "secondary" : "client";
    const std::string staticdata = join(h.static_data, " ");
    const std::string version = std::to_string(schema::version);

    // One daemon per node name: an exclusive lock inside the node root,
    // ephemeral to our session (README Decisions). Readers ignore lock children.
    // Its data says who we are, so that a restart after a crash can prove us gone.
    auto take_guard = [&] {
        node_guard_ = std::make_unique<zk::Lock>(zk_, root, zk::LockKind::exclusive,
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
        if (!node_guard_->acquire(wait)) {
            std::string ka_after = zk_->get(node_path("node.keepalive")).value_or("");
            throw Startup(fmt::format("another pvcnoded is already running for node {} (it holds the node lock{}); "
                                      "refusing to start",
                                      h.hostname,
                                      ka_after != ka_before ? " and its keepalive advances" : ""),
                          exit_failure);
        }
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
            {node_path("node.ipmi.hostname"), cfg_.ipmi_hostname},
            {node_path("node.ipmi.username"), cfg_.ipmi_username},
            {node_path("node.ipmi.password"), cfg_.ipmi_password},
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
        {node_path("node.ipmi.hostname"), cfg_.ipmi_hostname},
        {node_path("node.ipmi.username"), cfg_.ipmi_username},
        {node_path("node.ipmi.password"), cfg_.ipmi_password},
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

void Daemon::check_own_ipmi() {
    if (cfg_.ipmi_hostname.empty()) return;
    // Off the start-up path: only a warning can come of it.
    executor_.blocking([this] {
        namespace bp = boost::process;
        try {
            bp::ipstream out;
            // The password goes through the environment (-E), never argv, which
            // every user can read; the extra arguments are those fencers use.
            std::vector<std::string> args{"-I", "lanplus"};
            args.insert(args.end(), cfg_.ipmitool_args.begin(), cfg_.ipmitool_args.end());
            args.insert(args.end(), {"-H", cfg_.ipmi_hostname, "-U", cfg_.ipmi_username, "-E", "chassis", "power",
                                     "status"});
            bp::child c(bp::search_path("ipmitool"), bp::args(args), bp::env["IPMI_PASSWORD"] = cfg_.ipmi_password,
                        bp::std_out > out, bp::std_err > bp::null, bp::std_in < bp::null);
            bool done = c.wait_for(std::chrono::seconds(2));
            if (!done) c.terminate();
            std::string line, all;
            while (done && std::getline(out, line)) all += line;
            while (!all.empty() && isspace(static_cast<unsigned char>(all.back()))) all.pop_back();
            if (done && c.exit_code() == 0 && all == "Chassis Power is on")
                log_.ok("Our IPMI interface is reachable; fencing of this node is possible");
            else
                log_.warn("Our IPMI interface {} is not reachable; fencing of this node will fail until corrected",
                          cfg_.ipmi_hostname);
        } catch (const std::exception& e) {
            log_.warn("Cannot check our IPMI interface ({}); fencing of this node will likely fail", e.what());
        }
    });
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

std::string Daemon::cached_router_state() const {
    std::lock_guard g(state_m_);
    return router_state_;
}

bool Daemon::pause(std::chrono::milliseconds d) {
    std::unique_lock lk(ka_m_);
    return !ka_cv_.wait_for(lk, d, [this] { return ka_stop_; });
}

// An action the spec says must complete (takeover, relinquish, the router
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

// node-lifecycle.md §7.2. Blocking steps run on the pool, never in the callback.
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

// §7.2 "contend". A timeout means another contender holds the lock and will
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

// The hand-over itself. The network module (when built) moves the floating
// addresses and primary services on the router_state event; the core only
// serialises through the primary_node lock and completes the state change, so
// a coordinator without networking never stays in takeover/relinquish
// (the reference's defect, node-lifecycle.md §13.7). Both must complete: an
// interruption (ZooKeeper unreachable) is retried until they do, or until
// the router state has moved on (a fencer forcing `secondary`).
void Daemon::on_router_state(const std::string& state) {
    if (state == "takeover") {
        executor_.blocking("takeover", [this] {
            log_.system("Taking over primary coordinator role");
            // The modules' part first (the network module's floating addresses):
            // `primary` is published only once they are done or overran.
            run_transition(modules_->modules(), Transition::takeover, executor_, core_strand_, transition_deadline, log_);
            auto wanted = [this] { return cached_router_state() == "takeover"; };
            bool done = false;
            until_done("Takeover", wanted, [&] {
                zk::Lock lock(zk_, schema::path("base.config.primary_node"), zk::LockKind::exclusive);
                if (!lock.acquire(std::nullopt, [&] { return !wanted() || stopping(); })) return !wanted();
                zk_->ensure_path(schema::path("base.config.primary_node.sync_lock"));
                done = write_own("node.state.router", "primary");
                return done;
            });
            if (done) log_.ok("Node is now primary");
        });
    } else if (state == "relinquish") {
        executor_.blocking("relinquish", [this] {
            log_.system("Relinquishing primary coordinator role");
            run_transition(modules_->modules(), Transition::relinquish, executor_, core_strand_, transition_deadline,
                           log_);
            bool done = false;
            until_done("Relinquish", [this] { return cached_router_state() == "relinquish"; }, [&] {
                done = write_own("node.state.router", "secondary");
                return done;
            });
            if (done) log_.ok("Node is now secondary");
        });
    }
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
    if (!problems.empty()) {
        for (const auto& p : problems.sorted()) log_.error("{}", p.to_string("configuration"));
        throw Startup(fmt::format("invalid configuration ({} module problem{})", problems.size(),
                                  problems.size() == 1 ? "" : "s"),
                      exit_config_error);
    }
    log_.info("Node is a {}", cfg_.daemon_mode);
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
    check_own_ipmi();
    watch_cluster();
    modules_->start_all(cfg_, sink_, zk_, executor_, events_, services_);
    health_ = std::make_unique<HealthHost>(cfg_, log_, zk_, executor_);
    health_->load();
    keepalive_thread_ = std::thread([this] { keepalive_loop(); });
}

// ---------------------------------------------------------------- keepalive

void Daemon::keepalive_loop() {
    using clock = std::chrono::steady_clock;
    const auto interval = std::chrono::seconds(cfg_.keepalive_interval);
    // The first tick runs at once (not one interval later as in the
    // reference): it is what moves the node to `run`.
    auto next = clock::now();
    // systemd's watchdog (WatchdogSec in the unit) restarts a daemon whose
    // keepalive loop is stuck, before peers fence the node for it.
    bool watchdog = false;
#ifdef PVC_HAVE_SYSTEMD
    uint64_t watchdog_usec = 0;
    watchdog = sd_watchdog_enabled(0, &watchdog_usec) > 0;
#endif
    std::unique_lock lk(ka_m_);
    while (!ka_stop_) {
        if (ka_cv_.wait_until(lk, next, [this] { return ka_stop_; })) break;
        lk.unlock();
        try {
            keepalive_tick(false);
        } catch (const std::exception& e) {
            // The next tick tries again; the loop (and the process) must go on.
            log_.error("Keepalive tick failed: {}", e.what());
        }
        if (watchdog) notify("WATCHDOG=1");
        lk.lock();
        // Coalescing: a tick that overran skips the missed slots.
        auto now = clock::now();
        do next += interval;
        while (next <= now);
    }
}

void Daemon::keepalive_tick(bool final_tick) {
    std::lock_guard tick_guard(tick_m_);
    const auto t0 = std::chrono::steady_clock::now();
    const std::string started = tick_timestamp();
    std::string router, dstate, primary;
    bool schema_ok, maintenance;
    {
        std::lock_guard g(state_m_);
        router = router_state_;
        dstate = daemon_state_;
        primary = primary_node_;
        schema_ok = schema_ok_;
        maintenance = maintenance_;
    }
    if (!schema_ok) {
        // Keep proving liveness, refuse to act (core/README.md, "Failure
        // model"): a silent keepalive while our daemonstate stays `run` would
        // get this node fenced. Only the timestamp is written (a key every
        // schema version has); no figures, no primary duties, no module or
        // health hooks, no keepalive_tick event (so no fencing scan either).
        zk::Transaction tx(*zk_);
        tx.set(node_path("node.keepalive"), std::to_string(unix_now()));
        zk::Status st = zk_->commit(tx);
        if (st != zk::Status::ok) log_.error("Failed to set keepalive timestamp: {}", zk::to_string(st));
        return;
    }
    const std::string& me = cfg_.host.hostname;
    zk::Transaction tx(*zk_);

    // Primary publications and primary key repair (§5.2 steps 2 and 4).
    if (router == "primary") {
        if (cfg_.enable_hypervisor) {
            auto sel = zk_->get(schema::path("base.config.migration_target_selector"));
            if (sel.value_or("") != cfg_.migration_target_selector)
                tx.set(schema::path("base.config.migration_target_selector"), cfg_.migration_target_selector);
        }
        if (primary != me) tx.set(schema::path("base.config.primary_node"), me);
    }
    // Daemon state (§5.2 step 3): init/dead/fenced become run.
    bool became_run = false;
    if (!final_tick && dstate != "run" && dstate != "shutdown") {
        tx.set(node_path("node.state.daemon"), "run");
        became_run = true;
    }

    KeepaliveReport report;
    report.router_state = router;
    for (Module* m : modules_->modules()) {
        try {
            m->contribute(report);
        } catch (const std::exception& e) {
            log_.error("Module {} failed to contribute to the keepalive: {}", m->name(), e.what());
        }
    }
    auto host = read_host_figures().value_or(HostFigures{});
    tx.set(node_path("node.memory.total"), std::to_string(host.memtotal_mib));
    tx.set(node_path("node.memory.used"), std::to_string(host.memused_mib));
    tx.set(node_path("node.memory.free"), std::to_string(host.memfree_mib));
    tx.set(node_path("node.cpu.load"), zk::py_float(host.cpuload));
    for (auto& [path, value] : report.writes) tx.set(path, value);
    tx.set(node_path("node.keepalive"), std::to_string(unix_now()));

    zk::Status st = zk::Status::other;
    try {
        st = zk_->commit(tx);
    } catch (const std::exception& e) {
        log_.error("Failed to set keepalive data: {}", e.what());
    }
    if (st == zk::Status::no_node) {
        // A key of ours was deleted behind our back: recreate what is missing.
        std::vector<zk::KeyValue> kvs;
        for (const auto& op : tx.ops()) kvs.emplace_back(op.path, op.data);
        log_.warn("Keepalive keys were missing; rewriting them with create-or-set");
        st = zk_->write(kvs) ? zk::Status::ok : zk::Status::other;
    }
    if (st != zk::Status::ok) {
        log_.error("Failed to set keepalive data: {}", zk::to_string(st));
    } else if (became_run) {
        {
            std::lock_guard g(state_m_);
            daemon_state_ = "run";
        }
        log_.ok("Node is in daemon state run");
        events_.daemon_state.emit("run");
        if (!ready_notified_) {
            ready_notified_ = true;
            notify("READY=1");
        }
    }
    if (!final_tick) health_->on_keepalive(router);

    if (cfg_.log_keepalives) {
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const char* rcol = router == "primary" ? ansi::green : router == "secondary" ? ansi::blue : ansi::cyan;
        if (cfg_.log_colours)
            log_.tick("{}{} keepalive @ {}{} [{}{}{}{}] in {:.2f} seconds", ansi::purple, me, started, ansi::end,
                      ansi::bold, rcol, router, ansi::end, secs);
        else
            log_.tick("{} keepalive @ {} [{}] in {:.2f} seconds", me, started, router, secs);
        if (cfg_.log_keepalive_cluster_details) {
            auto h = health_->health();
            std::string health = h ? std::to_string(*h) + "%" : "N/A";
            if (cfg_.log_colours) {
                const char* hcol = !h ? ansi::blue : *h > 90 ? ansi::green : *h > 50 ? ansi::yellow : ansi::red;
                health = std::string(hcol) + health + ansi::end;
            }
            std::string fields;
            for (const auto& f : keepalive_log_fields) {
                auto it = report.log_fields.find(f.label);
                fields += fmt::format("  {}: {}", f.label, it == report.log_fields.end() ? f.unset : it->second);
            }
            log_.tick("  Maintenance: {}  Health: {}{}  Load: {}  Memory [MiB]: Used: {}  Free: {}",
                      maintenance ? "True" : "False", health, fields, zk::py_float(host.cpuload), host.memused_mib,
                      host.memfree_mib);
        }
    }
    events_.keepalive_tick.emit();
}

// ---------------------------------------------------------------- shutdown

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

void Daemon::shutdown() {
    log_.system("Terminating pvcnoded and cleaning up");
    notify("STOPPING=1");
    if (!zk_) return;
    write_own("node.state.daemon", "shutdown");
    {
        std::lock_guard g(state_m_);
        daemon_state_ = "shutdown";
    }
    events_.daemon_state.emit("shutdown");

    // Hand the primary role over if another node can take it (§4 step 4).
    std::string router;
    {
        std::lock_guard g(state_m_);
        router = router_state_;
    }
    auto nodes = zk_->children(schema::path("base.node")).value_or(std::vector<std::string>{});
    if (router == "primary" && nodes.size() > 1) {
        log_.info("Relinquishing primary role before shutdown");
        zk_->write(schema::path("base.config.primary_node"), "none");
        for (int i = 0; i < 240; ++i) {
            {
                std::lock_guard g(state_m_);
                if (router_state_ == "secondary") break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
    }

    // Stop the keepalive and run one last tick (it keeps `shutdown`).
    {
        std::lock_guard g(ka_m_);
        ka_stop_ = true;
    }
    ka_cv_.notify_all();
    if (keepalive_thread_.joinable()) keepalive_thread_.join();
    if (modules_ && health_) keepalive_tick(true);

    if (health_) health_->shutdown(std::chrono::seconds(10));
    if (modules_) modules_->stop_all();  // never touches running VMs
    write_own("node.state.daemon", "stop");
    events_.daemon_state.emit("stop");
    log_.ok("Node is in daemon state stop");
    watches_.clear();
    shutdown_log_sink(sink_);
    node_guard_.reset();
    zk_->close();
    log_.ok("Terminated pvcnoded");
}

// ---------------------------------------------------------------- run

int Daemon::run() {
    auto& io = executor_.io();
    auto guard = boost::asio::make_work_guard(io);
    boost::asio::signal_set signals(io, SIGTERM, SIGINT, SIGQUIT);
    std::function<void(const boost::system::error_code&, int)> on_signal;
    on_signal = [&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        log_.system("Received signal {}", sig);
        request_shutdown();
        signals.async_wait(on_signal);
    };
    signals.async_wait(on_signal);
    boost::asio::signal_set hup(io, SIGHUP);
    std::function<void(const boost::system::error_code&, int)> on_hup;
    on_hup = [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        reopen_log_file(sink_);
        hup.async_wait(on_hup);
    };
    hup.async_wait(on_hup);

    std::thread loop([this] { executor_.run_io(); });
    try {
        start();
        bool pending;
        {
            std::lock_guard g(lifecycle_m_);
            started_ = true;
            pending = shutdown_pending_;
        }
        if (pending) request_shutdown();
    } catch (const Startup& e) {
        log_.error("{}", e.what());
        exit_status_ = e.status;
    } catch (const std::exception& e) {
        log_.error("Start-up failed: {}", e.what());
        exit_status_ = exit_failure;
    }
    if (exit_status_ != exit_ok) {
        // Leave the cluster as consistent as we can: a registered node goes to stop.
        if (!shutting_down_.exchange(true)) {
            if (zk_ && node_guard_ && node_guard_->held()) shutdown();
            io.stop();
        }
    }
    guard.reset();
    loop.join();
    if (shutdown_thread_.joinable()) shutdown_thread_.join();
    signals.cancel();
    hup.cancel();
    executor_.stop_pool();
    return exit_status_;
}

}  // namespace pvc
