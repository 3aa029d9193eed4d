// Statistics collection: one collection per keepalive, on
// the module's own worker, never on the keepalive's path. The primary
// coordinator publishes /ceph, /ceph/health, /ceph/util and the pool and OSD
// stats; other nodes need no Ceph call (their OSD count comes from the
// mirrors). A Ceph that is slow or gone leaves the previous figures in place
// and is logged once per change of its condition.
//
// One librados connection serves every collection: connecting (the cephx
// handshake, the monitor, OSD and manager maps) was most of a collection's
// CPU. It is dropped after a call that failed for want of Ceph (a timeout,
// a lost connection, a failed status), and the next collection connects
// again. Every call stays bounded by its deadline (CephCalls).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
    uint64_t connections() const { return connections_.load(); }  // librados connections opened

    // Closes the kept connection, waiting at most the per-call deadline (the
    // shutdown then ends in the background). Not while collect() runs.
    void disconnect();

private:
    // The condition of the last collection ("" = fine); logs only changes.
    // `kind`: what makes two problems one condition (default: the text before ':').
    void condition(const std::string& problem, std::string kind = "");
    std::string command(const std::shared_ptr<RadosClient>& client, const std::string& json, bool mgr = false);
    // Several monitor commands on one worker, in order, bounded by the
    // per-call deadline times their number; their outputs, or the first
    // failure thrown.
    std::vector<std::string> commands(const std::shared_ptr<RadosClient>& client, const std::vector<std::string>& jsons);
    // After a failed call: a failure for want of Ceph (no answer in time,
    // the connection lost or refused) drops the kept connection.
    void failed(const std::exception& e);
    void publish_status(const std::shared_ptr<RadosClient>& client);
    void publish_pools(const std::shared_ptr<RadosClient>& client);
    void publish_osds(const std::shared_ptr<RadosClient>& client);
    // A stats key written only while its object (`owner`: the pool's or
    // OSD's own key) exists, never re-creating the object.
    struct Owned {
        std::string owner, key, value;
    };
    // All of them in one transaction (check owner, set key) per quarter of a
    // request's limit; a transaction that fails (an object gone, a key not
    // there yet) is redone one item at a time. False if an item's write failed.
    bool write_under(const std::vector<Owned>& items);

    std::shared_ptr<zk::Session> zk_;
    Logger log_;
    const CephObjects& objects_;
    CephCalls& calls_;
    Options options_;
    std::string problem_kind_;  // "" = fine
    std::shared_ptr<RadosClient> client_;  // the kept connection (collect() only)
    std::atomic<uint64_t> collections_{0}, published_{0}, connections_{0};
};

}  // namespace pvc::storage
