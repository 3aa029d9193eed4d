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

void Api::reconcile_storage() {
    if (ceph::Client* ceph = ceph_client()) {
        if (std::size_t left = ceph->reconcile())
            log_.local().debug("API: storage: {} object(s) still to bring in line (Ceph or ZooKeeper unreachable)", left);
    }
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

std::optional<std::uint64_t> Api::streamed_body(std::string_view method, std::string_view target) {
    if (method != "POST") return std::nullopt;
    Target t = parse_target(target);
    const auto& s = t.segments;
    if (t.under_api && s.size() == 6 && s[0] == "storage" && s[1] == "ceph" && s[2] == "volume" && s[5] == "upload")
        return UINT64_MAX;  // an image of any size; memory stays bounded (one piece at a time)
    return std::nullopt;
}

namespace {

// A body already read whole (a request the server did not stream).
class WholeBody : public BodyStream {
public:
    explicit WholeBody(const std::string& body) : body_(body) {}
    std::int64_t read(char* out, std::size_t n) override {
        n = std::min(n, body_.size() - pos_);
        std::memcpy(out, body_.data() + pos_, n);
        pos_ += n;
        return static_cast<std::int64_t>(n);
    }
    std::string error() const override { return {}; }
    std::optional<std::uint64_t> content_length() const override { return body_.size(); }
    std::uint64_t received() const override { return body_.size(); }

private:
    const std::string& body_;
    std::size_t pos_ = 0;
};

// The uploaded file, read through as it arrives: the first part with a
// file name of a multipart/form-data body (as the reference's client sends
// it, part `file`), or the whole body of an application/octet-stream one.
// At most one piece of the body and a delimiter's length are held.
class UploadFile {
public:
    UploadFile(BodyStream& in, std::string boundary) : in_(in), multipart_(!boundary.empty()), boundary_(std::move(boundary)) {}

    // Multipart: reads up to the file's first byte. The reason when it cannot.
    std::optional<std::string> open() {
        if (!multipart_) return std::nullopt;
        const std::string first = "--" + boundary_;
        std::size_t at = std::string::npos;
        for (;;) {
            at = buf_.find(first, start_);
            if (at != std::string::npos && buf_.size() >= at + first.size() + 2) break;
            if (buf_.size() - start_ > kHeadMax) return "no multipart delimiter in the body's first bytes";
            if (!more()) return eof_reason("the body ended before its first part");
        }
        start_ = at + first.size();
        for (;;) {  // each part: its header, then the file or the next part
            if (buf_.compare(start_, 2, "--") == 0) return std::string("the body has no part with a file");
            std::size_t head_end;
            while ((head_end = buf_.find("\r\n\r\n", start_)) == std::string::npos) {
                if (buf_.size() - start_ > kHeadMax) return "a part's header is over " + std::to_string(kHeadMax) + " bytes";
                if (!more()) return eof_reason("the body ended in a part's header");
            }
            std::string head = buf_.substr(start_, head_end - start_);
            start_ = head_end + 4;
            std::transform(head.begin(), head.end(), head.begin(), [](unsigned char ch) { return std::tolower(ch); });
            if (head.find("filename=") != std::string::npos) {
                file_start_ = consumed_ + start_;
                return std::nullopt;
            }
            // Not the file (a form field): skipped, held whole (small).
            std::size_t next;
            while ((next = buf_.find(delim(), start_)) == std::string::npos || buf_.size() < next + delim().size() + 2) {
                if (buf_.size() - start_ > kHeadMax) return "a part without a file is over " + std::to_string(kHeadMax) + " bytes";
                if (!more()) return eof_reason("the body ended in a part");
            }
            start_ = next + delim().size();
        }
    }

    // The file's length, when the body's announced length tells it: the
    // whole body, or (multipart) what follows the file's header less the
    // closing delimiter the reference's client and curl end it with.
    std::optional<std::uint64_t> length() const {
        auto cl = in_.content_length();
        if (!cl) return std::nullopt;
        if (!multipart_) return *cl;
        std::uint64_t tail = delim().size() + 4;  // "\r\n--<boundary>--\r\n"
        if (*cl < file_start_ + tail) return std::nullopt;
        return *cl - file_start_ - tail;
    }

    std::int64_t read(char* out, std::size_t n) {
        if (!multipart_) {
            if (start_ < buf_.size()) return take(out, std::min(n, buf_.size() - start_));
            std::int64_t got = in_.read(out, n);
            if (got < 0) error_ = in_.error();
            return got;
        }
        for (;;) {
            if (ended_) return 0;
            std::size_t at = buf_.find(delim(), start_);
            if (at == start_) {
                ended_ = true;
                drain();
                return 0;
            }
            if (at != std::string::npos) return take(out, std::min(n, at - start_));
            // Bytes that cannot be the start of a delimiter.
            std::size_t avail = buf_.size() - start_;
            if (avail >= delim().size()) return take(out, std::min(n, avail - (delim().size() - 1)));
            if (!more()) {
                if (error_.empty()) error_ = "the body ended without the closing multipart delimiter";
                return -1;
            }
        }
    }
    std::string error() const { return error_; }

private:
    static constexpr std::size_t kHeadMax = 64 * 1024;

    std::string delim() const { return "\r\n--" + boundary_; }
    std::string eof_reason(const std::string& what) { return error_.empty() ? what : error_; }

    std::int64_t take(char* out, std::size_t n) {
        std::memcpy(out, buf_.data() + start_, n);
        start_ += n;
        return static_cast<std::int64_t>(n);
    }

    // Appends a piece of the body; false at its end or on an error (error_).
    bool more() {
        if (start_ > 0 && start_ >= buf_.size() / 2) {
            consumed_ += start_;
            buf_.erase(0, start_);
            start_ = 0;
        }
        std::size_t old = buf_.size();
        buf_.resize(old + kRead);
        std::int64_t got = in_.read(buf_.data() + old, kRead);
        buf_.resize(old + static_cast<std::size_t>(std::max<std::int64_t>(got, 0)));
        if (got < 0) error_ = in_.error();
        return got > 0;
    }
    // What follows the file (the closing delimiter, other parts) is read
    // and dropped, so the request ends where its body does.
    void drain() {
        std::vector<char> scratch(kRead);
        while (in_.read(scratch.data(), scratch.size()) > 0) {
        }
    }

    static constexpr std::size_t kRead = 256 * 1024;
    BodyStream& in_;
    const bool multipart_;
    const std::string boundary_;
    std::string buf_;
    std::size_t start_ = 0;
    std::uint64_t consumed_ = 0;  // body bytes dropped from the front of buf_
    std::uint64_t file_start_ = 0;
    bool ended_ = false;
    std::string error_;
};

// The multipart boundary of a Content-Type; "" for application/octet-stream;
// nullopt for anything else.
std::optional<std::string> upload_boundary(const std::string& content_type) {
    std::string type = content_type;
    std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return std::tolower(ch); });
    if (type.rfind("application/octet-stream", 0) == 0) return std::string();
    if (type.rfind("multipart/form-data", 0) != 0) return std::nullopt;
    auto b = type.find("boundary=");
    if (b == std::string::npos) return std::nullopt;
    std::string boundary = content_type.substr(b + 9);
    if (auto semi = boundary.find(';'); semi != std::string::npos) boundary.resize(semi);
    while (!boundary.empty() && (boundary.back() == ' ' || boundary.back() == '\t')) boundary.pop_back();
    if (boundary.size() >= 2 && boundary.front() == '"' && boundary.back() == '"')
        boundary = boundary.substr(1, boundary.size() - 2);
    if (boundary.empty()) return std::nullopt;
    return boundary;
}

}  // namespace

HttpResponse Api::volume_upload(Ctx& c) {
    // Parameters from the query string only, as the reference.
    Params query;
    query.parse(parse_target(c.req.target).query);
    auto format = query.get("image_format");
    if (!format) return json_answer(400, Json{{"message", Json{{"image_format", "A source image format must be specified."}}}});
    PVC_CEPH_OR_503(ceph);
    auto boundary = upload_boundary(c.req.content_type);
    const char* const no_file =
        "ERROR: No file found in the upload: send it as the file part of a multipart/form-data body "
        "(as `pvc storage volume upload` does) or as an application/octet-stream body.";
    if (!boundary) return msg(400, no_file);
    // The body as it arrives (the server streams this route), or whole.
    std::optional<WholeBody> whole;
    BodyStream* in = c.req.body_stream.get();
    if (!in) in = &whole.emplace(c.req.body);
    UploadFile file(*in, *boundary);
    // The body is read only once the library has checked the format and the
    // volume (a refusal reads nothing of it).
    std::optional<std::string> not_opened;
    bool opened = false;
    auto open = [&] {
        if (!opened) not_opened = file.open();
        opened = true;
        return !not_opened;
    };
    ceph::Client::Upload up;
    up.read = [&](char* buf, std::size_t n) -> std::int64_t {
        if (c.stop.stop_requested() || !open()) return -1;
        return file.read(buf, n);
    };
    up.length = [&]() -> std::optional<std::uint64_t> {
        if (!open()) return std::nullopt;
        return file.length();
    };
    up.error = [&]() -> std::string {
        if (not_opened) return "no file found in the upload: " + *not_opened;
        if (c.stop.stop_requested() && file.error().empty()) return "the request was stopped";
        return file.error();
    };
    auto r = ceph->upload_volume(c.args[0], c.args[1], *format, query.get("file_size"), up);
    if (!r.ok() && r.status < 500) log_.warn("API: upload to {}/{}: {}", c.args[0], c.args[1], r.message);
    return storage_answer(r);
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
