// The OSD lifecycle and storage benchmark routes: each queues a node task
// (pvc/tasks.hpp) and answers 202 with its id, as the reference's Celery
// routes did. The tasks run in the storage module of the node that holds
// the disk (osd.add, osd.add_db_vg: the `node` parameter; osd.replace,
// osd.refresh, osd.remove: the OSD's node) or of the primary
// (storage.benchmark); modules/storage/README.md, "OSD tasks". Only the
// parameters and the OSD's existence are checked here; the disks are
// checked by the task, on their node.
//
// GET /storage/ceph/benchmark reads the results the benchmark task keeps in
// ZooKeeper, /ceph/benchmarks/<job> (ours: the reference used PostgreSQL).
#include <algorithm>

#include "objects.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"

namespace pvc::api {

using schema::path;

namespace {

constexpr const char* benchmarks = "/ceph/benchmarks";

HttpResponse osd_json(unsigned status, const Json& j) { return {status, "application/json", dump(j) + "\n", {}}; }
HttpResponse osd_message(unsigned status, const std::string& text) { return osd_json(status, Json{{"message", text}}); }

HttpResponse queued(const tasks::Queued& q) {
    Json j = Json::object();
    j["task_id"] = q.id;
    j["task_name"] = q.name;
    j["run_on"] = q.run_on;
    return {202, "application/json", dump(j) + "\n", {{"Location", "/api/v1/tasks/" + q.id}}};
}

// A parameter as the task reads it: its text, or null when absent.
nlohmann::json text_or_null(const std::optional<std::string>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

HttpResponse Api::queue_task(const std::string& name, const std::string& node, const nlohmann::json& kwargs) {
    try {
        return queued(tasks::submit(*zk_, name, node, kwargs));
    } catch (const tasks::SubmitError& e) {
        return osd_message(400, e.what());
    }
}

// The node of OSD `id` (children of /ceph/osds, exact), or nullopt.
std::optional<std::string> Api::osd_node(const std::string& id) {
    if (id.empty() || id.find('/') != std::string::npos || !zk_->exists(path("osd.id", {id}))) return std::nullopt;
    return read_key(path("osd.node", {id}));
}

HttpResponse Api::osd_db_vg_add(Ctx& c) {
    nlohmann::json kwargs{{"device", c.p("device").value_or("")}};
    return queue_task("osd.add_db_vg", c.p("node").value_or(""), kwargs);
}

HttpResponse Api::osd_add(Ctx& c) {
    nlohmann::json kwargs = nlohmann::json::object();
    kwargs["device"] = c.p("device").value_or("");
    kwargs["weight"] = c.p("weight").value_or("");
    kwargs["ext_db_ratio"] = text_or_null(c.p("ext_db_ratio"));
    kwargs["ext_db_size"] = text_or_null(c.p("ext_db_size"));
    kwargs["split_count"] = text_or_null(c.p("osd_count"));
    return queue_task("osd.add", c.p("node").value_or(""), kwargs);
}

HttpResponse Api::osd_replace(Ctx& c) {
    auto node = osd_node(c.args[0]);
    if (!node) return osd_message(404, "OSD not found.");
    nlohmann::json kwargs = nlohmann::json::object();
    kwargs["osd_id"] = c.args[0];
    kwargs["new_device"] = c.p("new_device").value_or("");
    kwargs["old_device"] = text_or_null(c.p("old_device"));
    kwargs["weight"] = text_or_null(c.p("weight"));
    kwargs["ext_db_ratio"] = text_or_null(c.p("ext_db_ratio"));
    kwargs["ext_db_size"] = text_or_null(c.p("ext_db_size"));
    return queue_task("osd.replace", *node, kwargs);
}

HttpResponse Api::osd_refresh(Ctx& c) {
    auto node = osd_node(c.args[0]);
    if (!node) return osd_message(404, "OSD not found.");
    nlohmann::json kwargs{{"osd_id", c.args[0]}, {"device", c.p("device").value_or("")}, {"ext_db_flag", false}};
    return queue_task("osd.refresh", *node, kwargs);
}

HttpResponse Api::osd_remove(Ctx& c) {
    auto node = osd_node(c.args[0]);
    if (!node) return osd_message(404, "OSD not found.");
    // `force` read as a boolean (the reference forced on any value, even "false").
    nlohmann::json kwargs{{"osd_id", c.args[0]}, {"force_flag", c.flag("force")}, {"skip_zap_flag", false}};
    return queue_task("osd.remove", *node, kwargs);
}

HttpResponse Api::benchmark_run(Ctx& c) {
    std::string pool = c.p("pool").value_or("");
    if (pool.empty() || pool.find('/') != std::string::npos || !zk_->exists(path("pool.name", {pool})))
        return osd_message(400, "Pool \"" + pool + "\" is not valid.");
    return queue_task("storage.benchmark", "primary", nlohmann::json{{"pool", pool}});
}

HttpResponse Api::benchmark_list(Ctx& c) {
    auto job = c.p("job");
    std::vector<Json> rows;
    for (const auto& name : zk_->children(benchmarks).value_or(std::vector<std::string>{})) {
        if (job && name != *job) continue;
        auto data = zk_->get(std::string(benchmarks) + "/" + name);
        if (!data) continue;
        Json rec;
        try {
            rec = Json::parse(*data);
        } catch (const std::exception&) {
            rec = Json::object();
        }
        Json row = Json::object();
        row["id"] = rec.is_object() ? rec.value("id", 0L) : 0L;
        row["job"] = name;
        row["test_format"] = rec.is_object() ? rec.value("test_format", 1L) : 1L;
        auto result = rec.is_object() && rec.contains("benchmark_result") ? rec["benchmark_result"] : Json::object();
        row["benchmark_result"] = result.is_string() || result.is_object() ? result : Json::object();
        rows.push_back(std::move(row));
    }
    if (rows.empty()) return osd_message(404, "No benchmark found.");
    std::sort(rows.begin(), rows.end(), [](const Json& a, const Json& b) { return a["id"].get<long>() > b["id"].get<long>(); });
    return osd_json(200, Json(rows));
}

}  // namespace pvc::api
