// The storage module (modules/storage/README.md): Ceph statistics
// in ZooKeeper, the /ceph mirrors and the OSD information refresh,
// the RBD lock service, the RBD volume removal service (for the
// API module), ceph-mon@/ceph-mgr@ on coordinators.
//
// Its own configuration keys, under pvc.system.configuration.storage (it
// also reads the storage network's address, the network module's keys):
//   ceph_config_file, ceph_admin_keyring   the Ceph client's files (required;
//                               the flat dictionary of legacy plugins has them)
//   ceph_timeout: 3             seconds, every Ceph call (1..60)
//   start_ceph_daemons: true    coordinators run `systemctl start ceph-mon@<node>`
//                               and `ceph-mgr@<node>` at start (false in labs)
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ceph_call.hpp"
#include "ceph_objects.hpp"
#include "collector.hpp"
#include "osd_tasks.hpp"
#include "pvc/module.hpp"
#include "rbd_lock_service.hpp"
#include "rbd_volume_service.hpp"

namespace pvc::storage {

struct StorageSettings {
    ClientOptions client;
    std::string own_address;  // address part of storage_dev_ip ("" when not configured)
    bool coordinator = false;
    bool start_ceph_daemons = true;
    std::string node;
};

class StorageModule final : public Module {
public:
    std::string_view name() const override { return "storage"; }
    void configure(const Config& config, ConfigProblems& problems) override;
    void flat_keys(nlohmann::json& j) const override;
    void start(NodeContext& ctx) override;
    void stop() override;
    void contribute(KeepaliveReport& report) override;

    const StorageSettings& settings() const { return settings_; }
    // For tests: the parts, once started.
    StatsCollector* collector() { return collector_.get(); }
    CephObjects* objects() { return objects_.get(); }

private:
    void on_tick();

    StorageSettings settings_;
    std::optional<std::string> ceph_config_file_, ceph_admin_keyring_;  // as written
    Logger log_;
    std::shared_ptr<CephCalls> calls_;
    std::unique_ptr<CephObjects> objects_;
    std::unique_ptr<StatsCollector> collector_;
    std::shared_ptr<RbdLockService> locks_;
    std::shared_ptr<RbdVolumeService> volumes_;
    std::shared_ptr<void> flush_locks_;  // the vm.flush_locks task handler, while registered
    OsdTaskHandles osd_tasks_;           // osd.* and storage.benchmark (osd_tasks.hpp), while registered
    std::unique_ptr<ModulePool> pool_;
    std::atomic<bool> busy_{false}, skipping_{false};
    Executor* executor_ = nullptr;
    ServiceRegistry* services_ = nullptr;
    Subscription tick_;  // last: ends before the parts go
};

}  // namespace pvc::storage
