// Statistics collection: one collection per keepalive, on
// the module's own worker, never on the keepalive's path. The primary
// coordinator publishes /ceph, /ceph/health, /ceph/util and the pool and OSD
// stats; other nodes need no Ceph call (their OSD count comes from the
// mirrors). A Ceph that is slow or gone leaves the previous figures in place
// and is logged once per change of its condition.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "ceph_call.hpp"
#include "ceph_objects.hpp"
#include "pvc/log.hpp"
#include "pvc/zk.hpp"
#include "rados.hpp"

namespace pvc::storage {

class StatsCollector {
public:
    struct Options {
        std::string node;
        ClientOptions client;
        std::chrono::milliseconds deadline{std::chrono::seconds(4)};  // per Ceph call
    };
    StatsCollector(std::shared_ptr<zk::Session> zk, Logger log, const CephObjects& objects, CephCalls& calls,
                   Options options);

    // One collection (blocking; bounded by the per-call deadline).
    void collect();

    uint64_t collections() const { return collections_.load(); }
    uint64_t published() const { return published_.load(); }  // primary collections that reached Ceph

private:
    // The condition of the last collection ("" = fine); logs only changes.
    void condition(const std::string& problem);
    std::string command(const std::shared_ptr<RadosClient>& client, const std::string& json, bool mgr = false);
    void publish_status(const std::shared_ptr<RadosClient>& client);
    void publish_pools(const std::shared_ptr<RadosClient>& client);
    void publish_osds(const std::shared_ptr<RadosClient>& client);

    std::shared_ptr<zk::Session> zk_;
    Logger log_;
    const CephObjects& objects_;
    CephCalls& calls_;
    Options options_;
    std::string problem_;
    std::atomic<uint64_t> collections_{0}, published_{0};
};

}  // namespace pvc::storage
