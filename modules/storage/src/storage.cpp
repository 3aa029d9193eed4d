#include "storage.hpp"

#include "lock_task.hpp"

#include "pvc/address.hpp"
#include "pvc/command.hpp"
#include "pvc/schema.hpp"

namespace pvc::storage {

namespace {

// This node's address on the storage network, as the network module derives
// it (pvc/address.hpp: by-id or addr/prefix in pvc.cluster.networks.storage.network);
// without a usable network (a storage-only node), the address part of an
// addr/prefix as written. The network module validates these keys: nothing
// is reported here.
std::string own_storage_address(const Config& config) {
    const ConfigNode& doc = config.document;
    const std::string& written = doc.at("pvc.system.configuration.networking.storage.address").scalar();
    const std::string& network_text = doc.at("pvc.cluster.networks.storage.network").scalar();
    std::string why;
    std::optional<std::string> address;
    if (auto network = address::parse_network(network_text, why))
        address = address::node_address(*network, written, config.host.node_id, config.host.hostname, why);
    if (!address && written.find('/') != std::string::npos && written.find('/') > 0) address = written;
    return address ? address->substr(0, address->find('/')) : std::string();
}

}  // namespace

void StorageModule::configure(const Config& config, ConfigProblems& problems) {
    settings_.node = config.node;
    settings_.coordinator = config.daemon_mode == "coordinator";
    settings_.own_address = own_storage_address(config);

    // pvc.system.configuration.storage: required with enable_storage (this
    // module is loaded only then); pvc.system.configuration is the core's.
    constexpr const char* because = " (required when pvc.functions.enable_storage is true)";
    ConfigNode configuration = config.document.at("pvc.system.configuration");
    if (!configuration.is_map() && !configuration.is_null()) return;
    ConfigNode storage = configuration.child("storage", problems);
    if (!storage.section(problems, because)) return;
    if (auto v = storage.child("ceph_config_file", problems).required_string(problems, because)) {
        settings_.client.config_file = *v;
        ceph_config_file_ = *v;
    }
    if (auto v = storage.child("ceph_admin_keyring", problems).required_string(problems, because)) {
        settings_.client.keyring = *v;
        ceph_admin_keyring_ = *v;
    }
    int timeout = 3;
    storage.child("ceph_timeout", problems).read(problems, timeout, 1, 60);
    settings_.client.op_timeout = std::chrono::seconds(timeout);
    settings_.client.mount_timeout = std::chrono::seconds(timeout);
    storage.child("start_ceph_daemons", problems).read(problems, settings_.start_ceph_daemons);
}

void StorageModule::start(NodeContext& ctx) {
    log_ = ctx.logger;
    executor_ = &ctx.executor;
    services_ = &ctx.services;
    calls_ = std::make_shared<CephCalls>();
    // A call's own deadline: librados' timeout plus a margin for its reply.
    const auto deadline = std::chrono::milliseconds(settings_.client.op_timeout) + std::chrono::seconds(1);

    if (settings_.own_address.empty())
        log_.warn("No storage network address (storage_dev_ip): no RBD lock counts as this node's");
    locks_ = std::make_shared<RbdLockService>(settings_.client, settings_.own_address, log_, calls_, deadline);
    ctx.services.provide<services::RbdLocks>(std::static_pointer_cast<services::RbdLocks>(locks_));
    // The node task that flushes a stopped VM's locks (docs/sdk-guide.md §8).
    if (auto tasks = ctx.services.get<services::TaskHandlers>())
        flush_locks_ = tasks->handle("vm.flush_locks", flush_locks_task(ctx.zk, locks_, log_));
    // The OSD tasks on the node that holds the disk, the benchmark on the primary.
    if (auto tasks = ctx.services.get<services::TaskHandlers>()) {
        OsdTaskOptions o;
        o.node = settings_.node;
        o.ceph_config_file = settings_.client.config_file;
        o.ceph_admin_keyring = settings_.client.keyring;
        osd_tasks_ = register_osd_tasks(*tasks, ctx.zk, o, log_);
    }
    // Removing an image deletes its data objects: bounded by a longer deadline.
    volumes_ = std::make_shared<RbdVolumeService>(settings_.client, log_, calls_, deadline, std::chrono::seconds(120));
    ctx.services.provide<services::RbdVolumes>(std::static_pointer_cast<services::RbdVolumes>(volumes_));

    objects_ = std::make_unique<CephObjects>(ctx.zk, log_, ctx.executor, CephObjects::Options{settings_.node});
    objects_->start();
    collector_ = std::make_unique<StatsCollector>(ctx.zk, log_, *objects_, *calls_,
                                                  StatsCollector::Options{settings_.node, settings_.client, deadline});
    pool_ = std::make_unique<ModulePool>(ctx.executor, "storage", 1);

    // Coordinators run the cluster's monitor and manager; as the
    // reference, the result is logged, never fatal.
    if (settings_.coordinator && settings_.start_ceph_daemons) {
        for (std::string unit : {"ceph-mon@" + settings_.node + ".service", "ceph-mgr@" + settings_.node + ".service"}) {
            pool_->post("start " + unit, [log = log_, unit](std::stop_token) {
                auto r = run_command({"systemctl", "start", unit}, {}, std::chrono::seconds(60));
                if (r.exit_status != 0) log.warn("Starting {} failed: {}", unit, r.output);
                else log.info("Started {}", unit);
            });
        }
    }
    tick_ = ctx.events.keepalive_tick.subscribe([this] { on_tick(); });
}

void StorageModule::on_tick() {
    // A collection still running (a slow Ceph) is not doubled up: this tick
    // is skipped and the previous figures stay.
    if (busy_.exchange(true)) {
        if (!skipping_.exchange(true)) log_.warn("Ceph statistics collection still running; keepalive's collection skipped");
        return;
    }
    pool_->post("statistics", [this](std::stop_token stop) {
        struct Done {
            StorageModule& m;
            ~Done() {
                if (m.skipping_.exchange(false)) m.log_.info("Ceph statistics collection finished; collections resume");
                m.busy_ = false;
            }
        } done{*this};
        if (!stop.stop_requested()) collector_->collect();
    });
}

void StorageModule::stop() {
    tick_.reset();
    flush_locks_.reset();
    osd_tasks_.handles.clear();
    if (services_ && locks_) services_->withdraw<services::RbdLocks>(std::static_pointer_cast<services::RbdLocks>(locks_));
    if (services_ && volumes_)
        services_->withdraw<services::RbdVolumes>(std::static_pointer_cast<services::RbdVolumes>(volumes_));
    if (pool_) pool_->stop();
    if (collector_) collector_->disconnect();  // the pool is stopped: no collection runs
    if (objects_) objects_->stop();
    if (calls_) calls_->wait_idle(std::chrono::seconds(15));
}

void StorageModule::contribute(KeepaliveReport& report) {
    // The count of this node's OSDs comes from the mirrors (ZooKeeper), never
    // from Ceph. After the hypervisor's VMs on the line, as the reference's.
    report.log_field("OSDs", std::to_string(objects_ ? objects_->own_osds() : 0), 20);
}

void StorageModule::flat_keys(nlohmann::json& j) const {
    auto or_null = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    j["ceph_config_file"] = or_null(ceph_config_file_);
    j["ceph_admin_keyring"] = or_null(ceph_admin_keyring_);
}

}  // namespace pvc::storage
