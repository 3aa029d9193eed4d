// Sizes, `rbd info --format json` built from librbd, and JSON in Python's
// encoding (what the reference writes after changing a volume's stats).
#include "rbd_info.hpp"

#include <cerrno>
#include <cmath>
#include <ctime>
#include <vector>

namespace pvc::ceph {

std::optional<std::uint64_t> parse_size(const std::string& text, bool* unit_error) {
    if (unit_error) *unit_error = false;
    static const std::string units = "BKMGTPEZYRQ";
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    bool has_letter = false;
    for (char ch : text) has_letter = has_letter || (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z');
    if (digits == 0 || digits > 19) return std::nullopt;
    std::uint64_t n = std::stoull(text.substr(0, digits));
    if (!has_letter) {
        if (digits != text.size()) return std::nullopt;  // "1.5", "10 "
        return n;
    }
    if (digits == text.size()) return std::nullopt;
    char unit = text[digits];
    auto pos = units.find(unit);
    if (pos == std::string::npos) {
        // a letter right after the digits that is no unit ("10k"); anything else ("1.5G") is not a size
        if ((unit >= 'A' && unit <= 'Z') || (unit >= 'a' && unit <= 'z')) {
            if (unit_error) *unit_error = true;
        }
        return std::nullopt;
    }
    unsigned __int128 bytes = n;
    for (size_t i = 0; i < pos; ++i) bytes *= 1024;
    if (bytes > UINT64_MAX) return std::nullopt;
    return static_cast<std::uint64_t>(bytes);
}

std::string human_size(std::uint64_t bytes) {
    static const char* units = "BKMGTPEZYRQ";
    long double unit = 1;
    for (int i = 0; units[i]; ++i) {
        long double n = std::ceil(static_cast<long double>(bytes) / unit);
        if (n <= 9999) return std::to_string(static_cast<unsigned long long>(n)) + units[i];
        unit *= 1024;
    }
    return std::to_string(bytes) + "B";
}

namespace {

void check(int rc, const std::string& what) {
    if (rc < 0) throw CephFailure(rc, "rbd: " + what + ": " + errno_text(rc));
}

std::string ctime_text(const timespec& ts) {
    if (ts.tv_sec == 0) return {};
    char buf[64] = {};
    time_t t = ts.tv_sec;
    if (!ctime_r(&t, buf)) return {};
    std::string s(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
}

Json names_of(std::uint64_t bits, const std::vector<std::pair<std::uint64_t, const char*>>& table) {
    Json a = Json::array();
    for (const auto& [bit, name] : table)
        if (bits & bit) a.push_back(name);
    return a;
}

}  // namespace

std::vector<std::string> snapshot_names(rbd_image_t image) {
    std::vector<rbd_snap_info_t> snaps(16);
    int max = static_cast<int>(snaps.size());
    int n = 0;
    for (int attempt = 0; attempt < 4; ++attempt) {
        n = rbd_snap_list(image, snaps.data(), &max);
        if (n != -ERANGE) break;
        snaps.resize(static_cast<size_t>(max) + 1);
        max = static_cast<int>(snaps.size());
    }
    check(n, "listing snapshots");
    std::vector<std::string> names;
    for (int i = 0; i < n; ++i) names.emplace_back(snaps[static_cast<size_t>(i)].name);
    rbd_snap_list_end(snaps.data());
    return names;
}

std::string rbd_info_json(Connection& c, Io& io, const std::string& name) {
    Image image(io, name, true);
    rbd_image_info_t info{};
    check(rbd_stat(image.get(), &info, sizeof info), "error getting information");
    char id[128] = {};
    check(rbd_get_id(image.get(), id, sizeof id), "error getting the image id");
    char prefix[128] = {};
    check(rbd_get_block_name_prefix(image.get(), prefix, sizeof prefix), "error getting the block name prefix");
    uint8_t old_format = 0;
    check(rbd_get_old_format(image.get(), &old_format), "error getting the image format");
    std::uint64_t features = 0, op_features = 0, flags = 0;
    check(rbd_get_features(image.get(), &features), "error getting the features");
    check(rbd_get_op_features(image.get(), &op_features), "error getting the op features");
    check(rbd_get_flags(image.get(), &flags), "error getting the flags");
    auto snaps = snapshot_names(image.get());

    Json j = Json::object();
    j["name"] = name;
    j["id"] = std::string(id);
    j["size"] = info.size;
    j["objects"] = info.num_objs;
    j["order"] = info.order;
    j["object_size"] = info.obj_size;
    j["snapshot_count"] = snaps.size();
    int64_t data_pool = rbd_get_data_pool_id(image.get());
    if (data_pool >= 0 && data_pool != rados_ioctx_get_id(io.get())) {
        char pool_name[256] = {};
        if (rados_pool_reverse_lookup(c.cluster, data_pool, pool_name, sizeof pool_name) >= 0)
            j["data_pool"] = std::string(pool_name);
    }
    j["block_name_prefix"] = std::string(prefix);
    j["format"] = old_format ? 1 : 2;
    if (!old_format) {
        j["features"] = names_of(features, {{RBD_FEATURE_LAYERING, "layering"},
                                            {RBD_FEATURE_STRIPINGV2, "striping"},
                                            {RBD_FEATURE_EXCLUSIVE_LOCK, "exclusive-lock"},
                                            {RBD_FEATURE_OBJECT_MAP, "object-map"},
                                            {RBD_FEATURE_FAST_DIFF, "fast-diff"},
                                            {RBD_FEATURE_DEEP_FLATTEN, "deep-flatten"},
                                            {RBD_FEATURE_JOURNALING, "journaling"},
                                            {RBD_FEATURE_DATA_POOL, "data-pool"},
                                            {RBD_FEATURE_OPERATIONS, "operations"},
                                            {RBD_FEATURE_MIGRATING, "migrating"},
                                            {RBD_FEATURE_NON_PRIMARY, "non-primary"}});
        j["op_features"] = names_of(op_features, {{RBD_OPERATION_FEATURE_CLONE_PARENT, "clone-parent"},
                                                  {RBD_OPERATION_FEATURE_CLONE_CHILD, "clone-child"},
                                                  {RBD_OPERATION_FEATURE_GROUP, "group"},
                                                  {RBD_OPERATION_FEATURE_SNAP_TRASH, "snap-trash"}});
        j["flags"] = names_of(flags, {{RBD_FLAG_OBJECT_MAP_INVALID, "object map invalid"},
                                      {RBD_FLAG_FAST_DIFF_INVALID, "fast diff invalid"}});
        timespec ts{};
        if (rbd_get_create_timestamp(image.get(), &ts) >= 0)
            if (auto s = ctime_text(ts); !s.empty()) j["create_timestamp"] = s;
        ts = {};
        if (rbd_get_access_timestamp(image.get(), &ts) >= 0)
            if (auto s = ctime_text(ts); !s.empty()) j["access_timestamp"] = s;
        ts = {};
        if (rbd_get_modify_timestamp(image.get(), &ts) >= 0)
            if (auto s = ctime_text(ts); !s.empty()) j["modify_timestamp"] = s;
    }
    if (features & RBD_FEATURE_STRIPINGV2) {
        std::uint64_t unit = 0, count = 0;
        if (rbd_get_stripe_unit(image.get(), &unit) >= 0 && rbd_get_stripe_count(image.get(), &count) >= 0) {
            j["stripe_unit"] = unit;
            j["stripe_count"] = count;
        }
    }
    return j.dump() + "\n";
}

std::string py_dumps(const Json& j) {
    switch (j.type()) {
    case Json::value_t::object: {
        std::string s = "{";
        bool first = true;
        for (const auto& [k, v] : j.items()) {
            s += (first ? "" : ", ") + Json(k).dump(-1, ' ', true) + ": " + py_dumps(v);
            first = false;
        }
        return s + "}";
    }
    case Json::value_t::array: {
        std::string s = "[";
        bool first = true;
        for (const auto& v : j) {
            s += (first ? "" : ", ") + py_dumps(v);
            first = false;
        }
        return s + "]";
    }
    default:
        return j.dump(-1, ' ', true);
    }
}

}  // namespace pvc::ceph
