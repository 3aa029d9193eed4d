// The storage write routes (pools, volumes with upload, snapshots, OSD
// state and flags) through the Ceph client library (pvc/ceph_client.hpp,
// the same `pvc storage` uses): Ceph over librados/librbd on this node
// (the primary coordinator) with its Ceph settings, the /ceph mirrors in
// ZooKeeper in the same request. Api::handle has synced ZooKeeper before
// any write, and the library's checks read ZooKeeper itself.
#include <algorithm>
#include <cstring>

#include "objects.hpp"
#include "pvc/schema.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"
#include "settings.hpp"

namespace pvc::api {

using schema::path;

namespace {

HttpResponse json_answer(unsigned status, const Json& j) { return {status, "application/json", dump(j) + "\n", {}}; }
HttpResponse msg(unsigned status, const std::string& text) { return json_answer(status, Json{{"message", text}}); }

// The reference API layer's " -> ' replacement of action messages.
std::string quoted(std::string s) {
    std::replace(s.begin(), s.end(), '"', '\'');
    return s;
}

}  // namespace

std::optional<ceph::Settings> read_ceph_settings(const Config& config) {
    const ConfigNode& doc = config.document;
    const std::string& conf = doc.at("pvc.system.configuration.storage.ceph_config_file").scalar();
    if (conf.empty()) return std::nullopt;
    ceph::Settings s;
    s.config_file = conf;
    s.keyring = doc.at("pvc.system.configuration.storage.ceph_admin_keyring").scalar();
    const std::string& t = doc.at("pvc.system.configuration.storage.ceph_timeout").scalar();
    if (!t.empty() && t.size() < 3 && std::all_of(t.begin(), t.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        s.timeout = std::chrono::seconds(std::max(1, std::stoi(t)));
    if (const std::string& uri = doc.at("pvc.system.hypervisor.migration_uri").scalar(); !uri.empty()) s.vm_uri = uri;
    s.cluster_domain = doc.at("pvc.cluster.networks.cluster.domain").scalar();
    return s;
}

ceph::Client* Api::ceph_client() {
    std::call_once(ceph_once_, [this] {
        if (settings_.ceph) ceph_ = std::make_unique<ceph::Client>(zk_, *settings_.ceph);
    });
    return ceph_.get();
}

HttpResponse Api::storage_answer(const ceph::Result& r, bool keep_quotes) {
    if (r.ok()) settle(r.written);
    if (r.status >= 500) log_.warn("API: storage: {}", r.message);
    return msg(static_cast<unsigned>(r.status), keep_quotes ? r.message : quoted(r.message));
}

namespace {
const char* const no_ceph =
    "ERROR: This node has no Ceph client settings (pvc.system.configuration.storage.ceph_config_file in "
    "pvcnoded.yaml); storage changes are not possible here.";
}

#define PVC_CEPH_OR_503(var)                     \
    ceph::Client* var = ceph_client();           \
    if (!var) return msg(503, no_ceph)

// ---------------------------------------------------------------- pools

HttpResponse Api::pool_add(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    std::string pool = c.args.empty() ? c.p("pool").value_or("") : c.args[0];
    return storage_answer(ceph->add_pool(pool, c.p("pgs").value_or(""), c.p("replcfg").value_or(""), c.p("tier")), true);
}

HttpResponse Api::pool_set_pgs(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->set_pool_pgs(c.args[0], c.p("pgs").value_or("")));
}

HttpResponse Api::pool_delete(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->remove_pool(c.args[0]));
}

// ---------------------------------------------------------------- volumes

HttpResponse Api::volume_add(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    std::string pool = c.args.empty() ? c.p("pool").value_or("") : c.args[0];
    std::string volume = c.args.empty() ? c.p("volume").value_or("") : c.args[1];
    return storage_answer(ceph->add_volume(pool, volume, c.p("size").value_or("")));
}

HttpResponse Api::volume_modify(Ctx& c) {
    auto size = c.p("new_size"), name = c.p("new_name");
    bool has_size = size && !size->empty(), has_name = name && !name->empty();
    if (has_size && has_name) return msg(400, "Can only perform one modification at once");
    if (!has_size && !has_name) return msg(400, "At least one modification must be specified");
    PVC_CEPH_OR_503(ceph);
    if (has_size) return storage_answer(ceph->resize_volume(c.args[0], c.args[1], *size));
    return storage_answer(ceph->rename_volume(c.args[0], c.args[1], *name));
}

HttpResponse Api::volume_delete(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->remove_volume(c.args[0], c.args[1]));
}

HttpResponse Api::volume_clone(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->clone_volume(c.args[0], c.args[1], c.p("new_volume").value_or("")));
}

namespace {

// The uploaded file: the first part of a multipart/form-data body (as the
// reference's client sends it, part `file`), or the whole body when it is
// sent as application/octet-stream. nullopt when neither.
std::optional<std::string_view> upload_part(const HttpRequest& req) {
    std::string type = req.content_type;
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (type.rfind("application/octet-stream", 0) == 0) return std::string_view(req.body);
    if (type.rfind("multipart/form-data", 0) != 0) return std::nullopt;
    auto b = type.find("boundary=");
    if (b == std::string::npos) return std::nullopt;
    std::string boundary = req.content_type.substr(b + 9);
    if (auto semi = boundary.find(';'); semi != std::string::npos) boundary.resize(semi);
    if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"')
        boundary = boundary.substr(1, boundary.size() - 2);
    if (boundary.empty()) return std::nullopt;
    std::string_view body(req.body);
    const std::string delimiter = "--" + boundary;
    auto start = body.find(delimiter);
    while (start != std::string_view::npos) {
        auto headers = start + delimiter.size();
        if (body.substr(headers, 2) == "--") return std::nullopt;  // the closing delimiter: no part with a file
        auto content = body.find("\r\n\r\n", headers);
        if (content == std::string_view::npos) return std::nullopt;
        std::string_view head = body.substr(headers, content - headers);
        content += 4;
        auto end = body.find("\r\n" + delimiter, content);
        if (end == std::string_view::npos) return std::nullopt;
        if (head.find("filename=") != std::string_view::npos) return body.substr(content, end - content);
        start = end + 2;
    }
    return std::nullopt;
}

}  // namespace

HttpResponse Api::volume_upload(Ctx& c) {
    // Parameters from the query string only, as the reference.
    Params query;
    query.parse(parse_target(c.req.target).query);
    auto format = query.get("image_format");
    if (!format) return json_answer(400, Json{{"message", Json{{"image_format", "A source image format must be specified."}}}});
    PVC_CEPH_OR_503(ceph);
    auto part = upload_part(c.req);
    if (!part)
        return msg(400, "ERROR: No file found in the upload: send it as the file part of a multipart/form-data body "
                        "(as `pvc storage volume upload` does) or as an application/octet-stream body.");
    std::size_t offset = 0;
    auto read = [&](char* buf, std::size_t n) -> std::int64_t {
        if (c.stop.stop_requested()) return -1;
        std::size_t take = std::min(n, part->size() - offset);
        std::memcpy(buf, part->data() + offset, take);
        offset += take;
        return static_cast<std::int64_t>(take);
    };
    return storage_answer(ceph->upload_volume(c.args[0], c.args[1], *format, query.get("file_size"), read));
}

// ---------------------------------------------------------------- snapshots

HttpResponse Api::snapshot_add(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    std::string pool = c.args.empty() ? c.p("pool").value_or("") : c.args[0];
    std::string volume = c.args.empty() ? c.p("volume").value_or("") : c.args[1];
    std::string snapshot = c.args.empty() ? c.p("snapshot").value_or("") : c.args[2];
    return storage_answer(ceph->add_snapshot(pool, volume, snapshot));
}

HttpResponse Api::snapshot_get(Ctx& c) {
    // Exact, the volume checked as a volume (the reference checked it as a pool).
    auto r = reader(c);
    const auto& pool = c.args[0];
    const auto& volume = c.args[1];
    const auto& snapshot = c.args[2];
    if (!r.exists(path("pool.name", {pool})))
        return msg(400, "ERROR: No pool with name \"" + pool + "\" is present in the cluster.");
    if (!r.exists(path("volume.name", {pool, volume})))
        return msg(400, "ERROR: No volume with name \"" + volume + "\" is present in the cluster.");
    if (!r.exists(path("snapshot.name", {pool, volume, snapshot}))) return msg(404, "Volume snapshot not found.");
    return json_answer(200, Json::array({Json{{"pool", pool}, {"volume", volume}, {"snapshot", snapshot}}}));
}

HttpResponse Api::snapshot_modify(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->rename_snapshot(c.args[0], c.args[1], c.args[2], c.p("new_name").value_or("")));
}

HttpResponse Api::snapshot_delete(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->remove_snapshot(c.args[0], c.args[1], c.args[2]));
}

// ---------------------------------------------------------------- OSDs

HttpResponse Api::osd_state_get(Ctx& c) {
    // Exact, 404 when absent (the reference matched fuzzily and failed with 500).
    auto r = reader(c);
    const auto& id = c.args[0];
    if (!r.exists(path("osd.id", {id}))) return msg(404, "OSD not found.");
    auto stats = Json::parse(r.value(path("osd.stats", {id})), nullptr, false);
    if (stats.is_discarded() || !stats.is_object()) stats = Json::object();
    return json_answer(200, Json{{"id", id},
                                 {"in", stats.contains("in") ? stats["in"] : Json(nullptr)},
                                 {"up", stats.contains("up") ? stats["up"] : Json(nullptr)}});
}

HttpResponse Api::osd_state_post(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->set_osd_state(c.args[0], c.p("state").value_or("") == "in"));
}

HttpResponse Api::osd_option(Ctx& c) {
    PVC_CEPH_OR_503(ceph);
    return storage_answer(ceph->set_osd_option(c.p("option").value_or(""), c.p("action").value_or("") == "set"));
}

}  // namespace pvc::api
