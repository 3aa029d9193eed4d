// The cluster routes: POST /initialize, GET /backup, POST /restore, in the
// reference's shapes (a backup is a JSON object of every znode's path and
// value, sent as a JSON string holding that JSON text: the reference's
// client decodes it twice). Differences: /initialize always writes the
// schema-10 layout and reads `overwrite` as a lenient boolean; /restore
// skips kazoo lock contenders and our node task keys (an ephemeral
// advertisement restored as a persistent key would name a runner that is
// not there), and writes in batches under ZooKeeper's request limit rather
// than in one transaction that a real cluster's backup outgrows.
#include "objects.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"

namespace pvc::api {

using schema::path;

namespace {

HttpResponse cluster_message(unsigned status, const std::string& text) {
    return {status, "application/json", dump(Json{{"message", text}}) + "\n", {}};
}

// The top-level trees a backup leaves out (ZooKeeper's own, Patroni's).
bool skipped_top(const std::string& p) { return p == "/zookeeper" || p == "/patroni"; }

// Depth-first from "/", children in ZooKeeper's order, parents first.
void walk(zk::Session& zk, const std::string& at, Json& out) {
    auto kids = zk.raw_children(at);
    if (!kids || kids->empty()) return;
    std::vector<std::string> paths;
    for (const auto& k : *kids) {
        std::string p = (at == "/" ? "" : at) + "/" + k;
        if (at == "/" && skipped_top(p)) continue;
        paths.push_back(std::move(p));
    }
    if (paths.empty()) return;
    auto values = zk.get_many(paths);
    for (size_t i = 0; i < paths.size(); ++i) {
        if (!values[i]) continue;  // removed meanwhile
        out[paths[i]] = *values[i];
        walk(zk, paths[i], out);
    }
}

bool lock_or_task_key(const std::string& p) {
    if (p == path("task.root") || p.rfind(path("task.root") + "/", 0) == 0) return true;
    size_t slash = p.rfind('/');
    return schema::is_lock_contender(p.substr(slash == std::string::npos ? 0 : slash + 1));
}

}  // namespace

HttpResponse Api::cluster_initialize(Ctx& c) {
    bool overwrite = zk::lenient_bool(c.p("overwrite").value_or("")).value_or(false);
    if (zk_->exists(path("base.config.primary_node")) && !overwrite)
        return cluster_message(400, "ERROR: Cluster contains data and overwrite not set.");
    if (overwrite) {
        try {
            for (const char* key : {"base.schema", "base.config", "base.logs", "base.node", "base.domain",
                                    "base.network", "base.storage"})
                zk_->remove_recursive(path(key));
        } catch (const std::exception& e) {
            log_.warn("API: initialize: deleting the cluster's data failed: {}", e.what());
            return cluster_message(400, "ERROR: Failed to delete data in cluster; running nodes perhaps?");
        }
    }
    try {
        init_cluster(*zk_);
    } catch (const SchemaError& e) {
        return cluster_message(400, std::string("ERROR: ") + e.what());
    }
    log_.info("API: cluster initialized{}", overwrite ? " (existing data deleted)" : "");
    return cluster_message(200, "Successfully initialized cluster");
}

HttpResponse Api::cluster_backup(Ctx&) {
    Json data = Json::object();
    data["/"] = "";
    try {
        walk(*zk_, "/", data);
    } catch (const std::exception& e) {
        return cluster_message(400, std::string("ERROR: Failed to obtain backup: ") + e.what());
    }
    return {200, "application/json", dump(Json(dump(data))) + "\n", {}};
}

HttpResponse Api::cluster_restore(Ctx& c) {
    Json data;
    try {
        data = Json::parse(c.p("cluster_data").value_or(""));
    } catch (const std::exception& e) {
        return cluster_message(400, std::string("ERROR: Failed to parse JSON data: ") + e.what());
    }
    if (!data.is_object()) return cluster_message(400, "ERROR: Failed to parse JSON data: not a JSON object");
    const std::string version_key = path("base.schema.version");
    std::string current = read_key(version_key);
    std::string theirs = data.contains(version_key) && data[version_key].is_string() ? data[version_key].get<std::string>()
                                                                                     : std::string("none");
    auto as_int = [](const std::string& s) { return to_int(s); };
    if (!as_int(theirs) || as_int(theirs) != as_int(current))
        return cluster_message(400, "ERROR: Schema version of backup (" + theirs +
                                        ") does not match cluster schema version (" + current + ").");
    // Parents come before their children in a backup; each batch is one
    // transaction under ZooKeeper's request limit.
    std::vector<zk::KeyValue> batch;
    size_t written = 0, skipped = 0;
    auto flush = [&] {
        if (batch.empty()) return true;
        bool ok = zk_->write(batch);
        written += ok ? batch.size() : 0;
        batch.clear();
        return ok;
    };
    for (const auto& [p, v] : data.items()) {
        if (p == "/" || p.empty() || p[0] != '/' || !v.is_string()) continue;
        if (lock_or_task_key(p) || skipped_top(p.substr(0, p.find('/', 1)))) {
            ++skipped;
            continue;
        }
        batch.emplace_back(p, v.get<std::string>());
        if (zk::write_request_bytes(batch) > zk::max_request_bytes / 2 && !flush()) {
            log_.warn("API: restore failed after {} keys", written);
            return cluster_message(400, "Restore failed.");
        }
    }
    if (!flush()) {
        log_.warn("API: restore failed after {} keys", written);
        return cluster_message(400, "Restore failed.");
    }
    log_.info("API: restored {} keys from a backup ({} lock or task keys skipped)", written, skipped);
    return cluster_message(200, "Restore completed successfully.");
}

}  // namespace pvc::api
