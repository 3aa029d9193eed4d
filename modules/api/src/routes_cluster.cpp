// The cluster routes: POST /initialize, GET /backup, POST /restore, in the
// reference's shapes (a backup is a JSON object of every znode's path and
// value, sent as a JSON string holding that JSON text: the reference's
// client decodes it twice). Differences: /initialize always writes the
// schema-10 layout and reads `overwrite` as a lenient boolean; /restore
// skips kazoo lock contenders and our node task keys (an ephemeral
// advertisement restored as a persistent key would name a runner that is
// not there), and writes in batches under ZooKeeper's request limit rather
// than in one transaction that a real cluster's backup outgrows. The walk
// and the restore are pvc/backup.hpp's (shared with `pvc cluster backup`
// and `pvc cluster restore`); the body of POST /restore may be larger than
// other requests' (`max_restore_body_bytes`, 64 MiB) and its cluster_data
// larger than one ZooKeeper value (each key's value is checked).
#include "objects.hpp"
#include "pvc/backup.hpp"
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

}  // namespace

HttpResponse Api::cluster_initialize(Ctx& c) {
    bool overwrite = zk::lenient_bool(c.p("overwrite").value_or("")).value_or(false);
    auto a = backup::cluster_initialize(*zk_, overwrite);
    if (a.ok()) log_.info("API: cluster initialized{}", overwrite ? " (existing data deleted)" : "");
    else log_.warn("API: initialize: {}", a.message);
    return cluster_message(static_cast<unsigned>(a.status), a.message);
}

HttpResponse Api::cluster_backup(Ctx&) {
    Json data;
    try {
        data = backup::cluster_backup(*zk_);
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
    auto a = backup::cluster_restore(*zk_, data);
    if (a.ok()) log_.info("API: restored a cluster backup of {} keys", data.size());
    else log_.warn("API: restore: {}", a.message);
    return cluster_message(static_cast<unsigned>(a.status), a.message);
}

}  // namespace pvc::api
