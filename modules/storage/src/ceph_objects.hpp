// The node daemon's mirrors of /ceph: OSD ids and their
// nodes, pools, each pool's volumes; and the OSD information refresh for
// this node's OSDs (through `ceph-volume lvm list --format json`).
//
// Watches post to one strand; the mirrors are read from any thread (the
// keepalive's OSD count, the collector's pool list). Bad names in ZooKeeper
// (an OSD id that is not a number, a pool name Ceph would not take, volumes
// of an unknown pool) are logged once and skipped; nothing else is affected.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/zk.hpp"

namespace pvc::storage {

// The keys the OSD information refresh writes, from `ceph-volume lvm list --format json`.
struct OsdDiskInfo {
    std::string device, osd_fsid, cluster_fsid, vg, lv;
};
// Selects the `block` entry tagged with `osd_id` (nullopt when absent or
// incomplete; throws on text that is not JSON).
std::optional<OsdDiskInfo> parse_ceph_volume(const std::string& json, const std::string& osd_id);

class CephObjects {
public:
    struct Options {
        std::string node;                                    // this node's name
        std::vector<std::string> ceph_volume{"ceph-volume"};  // argv prefix (tests use a stand-in)
        std::chrono::milliseconds command_timeout{std::chrono::seconds(60)};
    };
    CephObjects(std::shared_ptr<zk::Session> zk, Logger log, Executor& ex, Options options);
    ~CephObjects();
    void start();
    void stop();

    std::vector<std::string> osd_ids() const;     // valid ids under /ceph/osds
    int own_osds() const;                         // of them, those whose node is this node
    std::vector<std::string> pools() const;       // valid names under /ceph/pools
    std::vector<std::string> volumes(const std::string& pool) const;
    // OSD refreshes finished (successful or not), for tests.
    int refreshes() const;

    // The information refresh of one OSD (blocking: ZooKeeper reads, ceph-volume). True when written.
    bool refresh_osd(const std::string& id);

private:
    void on_osds(const std::optional<std::vector<std::string>>& ids);
    void on_osd_node(const std::string& id, const std::optional<std::string>& node);
    void on_pools(const std::optional<std::vector<std::string>>& names);
    void on_volume_pools(const std::optional<std::vector<std::string>>& names);
    void on_volumes(const std::string& pool, const std::optional<std::vector<std::string>>& names);
    void warn_once(const std::string& key, const std::string& text);

    std::shared_ptr<zk::Session> zk_;
    Logger log_;
    Executor& ex_;
    Options options_;
    Strand strand_;
    // Posted tasks and refreshes run only while the object lives: stop() clears it under the mutex.
    struct Life {
        std::mutex m;          // held by strand tasks
        std::mutex refresh_m;  // held by an OSD refresh (it may run a minute)
        bool alive = true;
    };
    std::shared_ptr<Life> life_ = std::make_shared<Life>();
    template <class Fn>
    void on_strand(std::string what, Fn fn);

    // Touched on the strand only.
    std::map<std::string, std::shared_ptr<zk::Watch>> osd_watches_;
    std::map<std::string, std::shared_ptr<zk::Watch>> volume_watches_;
    std::set<std::string> refreshed_;
    std::set<std::string> warned_;
    std::shared_ptr<zk::Watch> osds_watch_, pools_watch_, volume_pools_watch_;

    // Read from any thread.
    mutable std::mutex m_;
    std::map<std::string, std::string> osd_node_;  // id → node ("" while unknown)
    std::vector<std::string> pools_;
    std::set<std::string> volume_pools_;
    std::map<std::string, std::vector<std::string>> volumes_;
    int refreshes_ = 0;
};

}  // namespace pvc::storage
