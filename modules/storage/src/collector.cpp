#include "collector.hpp"

#include "pvc/schema.hpp"
#include "stats.hpp"

namespace pvc::storage {

StatsCollector::StatsCollector(std::shared_ptr<zk::Session> zk, Logger log, const CephObjects& objects,
                               CephCalls& calls, Options options)
    : zk_(std::move(zk)), log_(std::move(log)), objects_(objects), calls_(calls), options_(std::move(options)) {}

void StatsCollector::condition(const std::string& problem) {
    // A change is a different kind of failure (the text before its detail),
    // not the detail: a monitor that stays down is one warning.
    auto kind = [](const std::string& p) { return p.substr(0, p.find(':')); };
    if (kind(problem) == kind(problem_)) {
        problem_ = problem;
        return;
    }
    if (problem.empty()) log_.info("Ceph statistics collected again");
    else log_.warn("{}; previous Ceph figures kept", problem);
    problem_ = problem;
}

std::string StatsCollector::command(const std::shared_ptr<RadosClient>& client, const std::string& json, bool mgr) {
    auto reply = calls_.run<CommandReply>("Ceph command " + json, options_.deadline, [client, json, mgr] {
        return mgr ? client->mgr_command(json) : client->mon_command(json);
    });
    if (reply.rc < 0) throw CephError("Ceph command " + json + " (" + reply.status + ")", reply.rc);
    return reply.out;
}

void StatsCollector::collect() {
    struct Count {
        std::atomic<uint64_t>& n;
        ~Count() { ++n; }
    } count{collections_};
    // Primary parts only in state exactly `primary`, checked at the start.
    std::optional<std::string> router;
    try {
        router = zk_->get(schema::path("node.state.router", {options_.node}));
    } catch (const std::exception& e) {
        return;  // ZooKeeper unreachable: nothing could be written anyway
    }
    if (router.value_or("") != "primary") return;

    std::shared_ptr<RadosClient> client;
    try {
        auto opts = options_.client;
        client = calls_.run<std::shared_ptr<RadosClient>>("connecting to Ceph", options_.deadline,
                                                          [opts] { return std::make_shared<RadosClient>(opts); });
    } catch (const std::exception& e) {
        condition(std::string("Failed to open connection to Ceph cluster: ") + e.what());
        return;
    }
    try {
        publish_status(client);
    } catch (const std::exception& e) {
        condition(std::string("Failed to obtain Ceph status: ") + e.what());
        return;
    }
    publish_pools(client);
    publish_osds(client);
    ++published_;
    condition("");
}

void StatsCollector::publish_status(const std::shared_ptr<RadosClient>& client) {
    // All three read first: a failing cluster leaves every text as it was.
    std::string status = command(client, R"({"prefix": "status", "format": "pretty"})");
    std::string health = command(client, R"({"prefix": "health", "format": "json"})");
    std::string df = command(client, R"({"prefix": "df", "format": "pretty"})");
    // /ceph/health is parsed by cluster health: only valid JSON goes there.
    if (!nlohmann::json::accept(health)) throw std::runtime_error("health is not JSON: " + health.substr(0, 80));
    if (status.empty()) throw std::runtime_error("empty status");
    if (!zk_->write(schema::path("base.storage"), status)) log_.error("Failed to set Ceph status data");
    if (!zk_->write(schema::path("base.storage.health"), health)) log_.error("Failed to set Ceph health data");
    if (!df.empty() && !zk_->write(schema::path("base.storage.util"), df))
        log_.error("Failed to set Ceph utilization data");
}

void StatsCollector::publish_pools(const std::shared_ptr<RadosClient>& client) {
    auto pools = objects_.pools();
    if (pools.empty()) return;
    std::map<std::string, nlohmann::json> df;
    try {
        df = df_pools(command(client, R"({"prefix": "df", "format": "json"})"));
    } catch (const std::exception& e) {
        log_.warn("Failed to obtain Pool data (ceph df): {}", e.what());
        return;
    }
    for (const auto& pool : pools) {
        auto entry = df.find(pool);
        if (entry == df.end()) continue;  // in ZooKeeper, not (yet) in Ceph
        try {
            auto counters = calls_.run<PoolCounters>("statistics of pool " + pool, options_.deadline,
                                                     [client, pool] { return client->open_pool(pool).counters(); });
            std::string text = python_json(pool_stats(entry->second, counters));
            // Only under a pool that still exists: the write creates the
            // leaf at most, never the pool.
            if (!zk_->exists(schema::path("pool.name", {pool}))) continue;
            zk_->write(schema::path("pool.stats", {pool}), text);
        } catch (const std::exception& e) {
            log_.warn("Failed to format and send pool data: {}", e.what());
        }
    }
}

void StatsCollector::publish_osds(const std::shared_ptr<RadosClient>& client) {
    auto ids = objects_.osd_ids();
    // As the reference: no OSDs, no OSD calls (`osd df` may hang then).
    if (ids.empty()) return;
    std::map<std::string, OrderedJson> dump, df;
    std::map<std::string, OsdStatusRow> status;
    try {
        dump = osd_dump_fields(command(client, R"({"prefix": "osd dump", "format": "json"})"));
        df = osd_df_fields(command(client, R"({"prefix": "osd df", "format": "json"})"));
    } catch (const std::exception& e) {
        log_.warn("Failed to obtain OSD data: {}", e.what());
        return;
    }
    try {
        status = parse_osd_status(command(client, R"({"prefix": "osd status", "format": "pretty"})"));
    } catch (const std::exception& e) {
        log_.warn("Failed to obtain OSD status data: {}", e.what());
        return;
    }
    for (const auto& id : ids) {
        auto stats = osd_stats(id, dump, df, status);
        if (!stats) {
            log_.warn("Failed to parse OSD stats into dictionary: OSD {} missing from Ceph's reports", id);
            continue;
        }
        try {
            if (!zk_->exists(schema::path("osd.id", {id}))) continue;
            if (!zk_->write(schema::path("osd.stats", {id}), python_json(*stats)))
                log_.warn("Failed to upload OSD stats from dictionary: OSD {}", id);
        } catch (const std::exception& e) {
            log_.warn("Failed to upload OSD stats from dictionary: {}", e.what());
        }
    }
}

}  // namespace pvc::storage
