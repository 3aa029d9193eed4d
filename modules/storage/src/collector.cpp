#include "collector.hpp"

#include <cerrno>
#include <map>
#include <optional>

#include "pvc/schema.hpp"
#include "stats.hpp"

namespace pvc::storage {

StatsCollector::StatsCollector(std::shared_ptr<zk::Session> zk, Logger log, const CephObjects& objects,
                               CephCalls& calls, Options options)
    : zk_(std::move(zk)), log_(std::move(log)), objects_(objects), calls_(calls), options_(std::move(options)) {}

void StatsCollector::condition(const std::string& problem, std::string kind) {
    // A change is a different kind of failure (the text before its detail,
    // unless given), not the detail: a monitor that stays down is one
    // warning, whether the kept connection's status call or a new
    // connection fails.
    if (kind.empty()) kind = problem.substr(0, problem.find(':'));
    if (kind == problem_kind_) return;
    if (problem.empty()) log_.info("Ceph statistics collected again");
    else log_.warn("{}; previous Ceph figures kept", problem);
    problem_kind_ = kind;
}

void StatsCollector::failed(const std::exception& e) {
    auto* ceph = dynamic_cast<const CephError*>(&e);
    if (!ceph) return;  // a reply we could not read: the connection is fine
    switch (-ceph->code()) {
        case ETIMEDOUT: case ENOTCONN: case ESHUTDOWN: case ECONNREFUSED: case ECONNRESET: case EPIPE:
        case EBUSY:  // earlier calls still hang (CephCalls)
        case EIO:
            client_.reset();
            break;
        default:
            break;  // Ceph answered (a refused command): the connection works
    }
}

void StatsCollector::disconnect() {
    if (!client_) return;
    try {
        calls_.run<bool>("closing the Ceph connection", options_.deadline, [c = std::move(client_)]() mutable {
            c.reset();  // rados_shutdown, here or when an abandoned call using it ends
            return true;
        });
    } catch (const std::exception& e) {
        log_.warn("Closing the Ceph connection: {}", e.what());
    }
    client_.reset();
}

std::string StatsCollector::command(const std::shared_ptr<RadosClient>& client, const std::string& json, bool mgr) {
    auto reply = calls_.run<CommandReply>("Ceph command " + json, options_.deadline, [client, json, mgr] {
        return mgr ? client->mgr_command(json) : client->mon_command(json);
    });
    if (reply.rc < 0) throw CephError("Ceph command " + json + " (" + reply.status + ")", reply.rc);
    return reply.out;
}

std::vector<std::string> StatsCollector::commands(const std::shared_ptr<RadosClient>& client,
                                                  const std::vector<std::string>& jsons) {
    // One worker thread for all (each a thread of its own cost more CPU
    // than the commands); the first that fails ends the round.
    auto n = static_cast<std::chrono::milliseconds::rep>(jsons.size());
    auto replies = calls_.run<std::vector<CommandReply>>("Ceph commands " + jsons.front() + " ...", options_.deadline * n,
                                                         [client, jsons] {
                                                             std::vector<CommandReply> out;
                                                             for (const auto& json : jsons) {
                                                                 out.push_back(client->mon_command(json));
                                                                 if (out.back().rc < 0) break;
                                                             }
                                                             return out;
                                                         });
    std::vector<std::string> texts;
    for (size_t i = 0; i < replies.size(); ++i) {
        if (replies[i].rc < 0)
            throw CephError("Ceph command " + jsons[i] + " (" + replies[i].status + ")", replies[i].rc);
        texts.push_back(std::move(replies[i].out));
    }
    return texts;
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

    if (!client_) {
        try {
            auto opts = options_.client;
            client_ = calls_.run<std::shared_ptr<RadosClient>>("connecting to Ceph", options_.deadline,
                                                               [opts] { return std::make_shared<RadosClient>(opts); });
            ++connections_;
        } catch (const std::exception& e) {
            condition(std::string("Failed to open connection to Ceph cluster: ") + e.what(), "unreachable");
            return;
        }
    }
    auto client = client_;
    try {
        publish_status(client);
    } catch (const std::exception& e) {
        // The status is the first call: whatever failed it, the next
        // collection starts from a new connection.
        client_.reset();
        bool ceph = dynamic_cast<const CephError*>(&e) != nullptr;  // else a reply we could not use
        condition(std::string("Failed to obtain Ceph status: ") + e.what(), ceph ? "unreachable" : "");
        return;
    }
    publish_pools(client);
    publish_osds(client);
    ++published_;
    condition("");
}

void StatsCollector::publish_status(const std::shared_ptr<RadosClient>& client) {
    // All three read first: a failing cluster leaves every text as it was.
    auto texts = commands(client, {R"({"prefix": "status", "format": "pretty"})", R"({"prefix": "health", "format": "json"})",
                                   R"({"prefix": "df", "format": "pretty"})"});
    const std::string &status = texts.at(0), &health = texts.at(1), &df = texts.at(2);
    // /ceph/health is parsed by cluster health: only valid JSON goes there.
    if (!nlohmann::json::accept(health)) throw std::runtime_error("health is not JSON: " + health.substr(0, 80));
    if (status.empty()) throw std::runtime_error("empty status");
    // One transaction for the three (they exist once the cluster is
    // initialised); else each written alone, as the reference does.
    zk::Transaction tx(*zk_);
    tx.set(schema::path("base.storage"), status).set(schema::path("base.storage.health"), health);
    if (!df.empty()) tx.set(schema::path("base.storage.util"), df);
    try {
        if (tx.request_bytes() <= zk::max_request_bytes && tx.commit() == zk::Status::ok) return;
    } catch (const std::exception&) {
        // ZooKeeper failing: the writes below say so, each on its own
    }
    if (!zk_->write(schema::path("base.storage"), status)) log_.error("Failed to set Ceph status data");
    if (!zk_->write(schema::path("base.storage.health"), health)) log_.error("Failed to set Ceph health data");
    if (!df.empty() && !zk_->write(schema::path("base.storage.util"), df))
        log_.error("Failed to set Ceph utilization data");
}

bool StatsCollector::write_under(const std::vector<Owned>& items) {
    // Transactions of at most a quarter of what one request may carry.
    bool all = true;
    size_t i = 0;
    while (i < items.size()) {
        zk::Transaction tx(*zk_);
        size_t j = i;
        while (j < items.size() && (j == i || tx.request_bytes() + items[j].value.size() < zk::max_request_bytes / 4)) {
            tx.check(items[j].owner, -1).set(items[j].key, items[j].value);
            ++j;
        }
        zk::Status st = zk::Status::other;
        try {
            st = tx.commit();
        } catch (const std::exception&) {
        }
        if (st != zk::Status::ok) {
            // An object gone meanwhile, a stats key not there yet, or
            // ZooKeeper failing: each alone, only under an object that still
            // exists (the leaf created at most, never the object).
            for (size_t k = i; k < j; ++k) {
                try {
                    if (!zk_->exists(items[k].owner)) continue;
                    if (!zk_->write(items[k].key, items[k].value)) all = false;
                } catch (const std::exception& e) {
                    log_.warn("Failed to write {}: {}", items[k].key, e.what());
                    all = false;
                }
            }
        }
        i = j;
    }
    return all;
}

void StatsCollector::publish_pools(const std::shared_ptr<RadosClient>& client) {
    auto pools = objects_.pools();
    if (pools.empty()) return;
    std::map<std::string, nlohmann::json> df;
    try {
        df = df_pools(command(client, R"({"prefix": "df", "format": "json"})"));
    } catch (const std::exception& e) {
        failed(e);
        log_.warn("Failed to obtain Pool data (ceph df): {}", e.what());
        return;
    }
    // Every pool's counters in one call (one worker thread, one pool after
    // the other; a failure for want of Ceph ends the round).
    struct Counted {
        std::map<std::string, PoolCounters> counters;
        std::vector<std::string> errors;
        std::optional<CephError> lost;  // a failure for want of Ceph
    };
    std::vector<std::string> wanted;
    for (const auto& pool : pools)
        if (df.count(pool)) wanted.push_back(pool);  // in ZooKeeper, not (yet) in Ceph: skipped
    if (wanted.empty()) return;
    Counted got;
    try {
        got = calls_.run<Counted>("statistics of " + std::to_string(wanted.size()) + " pools", 2 * options_.deadline,
                                  [client, wanted] {
                                      Counted c;
                                      for (const auto& pool : wanted) {
                                          try {
                                              c.counters[pool] = client->open_pool(pool).counters();
                                          } catch (const CephError& e) {
                                              c.errors.push_back(e.what());
                                              int code = -e.code();
                                              if (code == ETIMEDOUT || code == ENOTCONN || code == ESHUTDOWN) {
                                                  c.lost = e;
                                                  break;
                                              }
                                          }
                                      }
                                      return c;
                                  });
    } catch (const std::exception& e) {
        failed(e);
        log_.warn("Failed to format and send pool data: {}", e.what());
        return;
    }
    for (const auto& e : got.errors) log_.warn("Failed to format and send pool data: {}", e);
    if (got.lost) failed(*got.lost);
    std::vector<Owned> items;
    for (const auto& [pool, counters] : got.counters) {
        try {
            items.push_back({schema::path("pool.name", {pool}), schema::path("pool.stats", {pool}),
                             python_json(pool_stats(df.at(pool), counters))});
        } catch (const std::exception& e) {
            log_.warn("Failed to format and send pool data: {}", e.what());
        }
    }
    write_under(items);
}

void StatsCollector::publish_osds(const std::shared_ptr<RadosClient>& client) {
    auto ids = objects_.osd_ids();
    // As the reference: no OSDs, no OSD calls (`osd df` may hang then).
    if (ids.empty()) return;
    std::map<std::string, OrderedJson> dump, df;
    std::map<std::string, OsdStatusRow> status;
    std::vector<std::string> texts;
    try {
        texts = commands(client, {R"({"prefix": "osd dump", "format": "json"})", R"({"prefix": "osd df", "format": "json"})",
                                  R"({"prefix": "osd status", "format": "pretty"})"});
        dump = osd_dump_fields(texts.at(0));
        df = osd_df_fields(texts.at(1));
    } catch (const std::exception& e) {
        failed(e);
        log_.warn("Failed to obtain OSD data: {}", e.what());
        return;
    }
    try {
        status = parse_osd_status(texts.at(2));
    } catch (const std::exception& e) {
        log_.warn("Failed to obtain OSD status data: {}", e.what());
        return;
    }
    std::vector<Owned> items;
    for (const auto& id : ids) {
        auto stats = osd_stats(id, dump, df, status);
        if (!stats) {
            log_.warn("Failed to parse OSD stats into dictionary: OSD {} missing from Ceph's reports", id);
            continue;
        }
        items.push_back({schema::path("osd.id", {id}), schema::path("osd.stats", {id}), python_json(*stats)});
    }
    if (!write_under(items)) log_.warn("Failed to upload OSD stats from dictionary");
}

}  // namespace pvc::storage
