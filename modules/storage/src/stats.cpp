#include "stats.hpp"

#include <sstream>
#include <stdexcept>

namespace pvc::storage {

std::string python_json(const OrderedJson& v) {
    switch (v.type()) {
        case OrderedJson::value_t::object: {
            std::string out = "{";
            bool first = true;
            for (const auto& [k, item] : v.items()) {
                if (!first) out += ", ";
                first = false;
                out += OrderedJson(k).dump(-1, ' ', true);
                out += ": ";
                out += python_json(item);
            }
            return out + "}";
        }
        case OrderedJson::value_t::array: {
            std::string out = "[";
            bool first = true;
            for (const auto& item : v) {
                if (!first) out += ", ";
                first = false;
                out += python_json(item);
            }
            return out + "]";
        }
        case OrderedJson::value_t::boolean:
            return v.get<bool>() ? "true" : "false";
        default:
            return v.dump(-1, ' ', true);
    }
}

std::map<std::string, nlohmann::json> df_pools(const std::string& text) {
    auto doc = nlohmann::json::parse(text);
    std::map<std::string, nlohmann::json> out;
    for (const auto& p : doc.at("pools")) out[p.at("name").get<std::string>()] = p;
    return out;
}

OrderedJson pool_stats(const nlohmann::json& df, const PoolCounters& c) {
    const auto& s = df.at("stats");
    OrderedJson j;
    j["id"] = df.at("id");
    j["stored_bytes"] = s.at("stored");
    j["free_bytes"] = s.at("max_avail");
    j["used_bytes"] = s.at("bytes_used");
    j["used_percent"] = s.at("percent_used");
    j["num_objects"] = s.at("objects");
    j["num_object_clones"] = c.num_object_clones;
    j["num_object_copies"] = c.num_object_copies;
    j["num_objects_missing_on_primary"] = c.num_objects_missing_on_primary;
    j["num_objects_unfound"] = c.num_objects_unfound;
    j["num_objects_degraded"] = c.num_objects_degraded;
    j["read_ops"] = c.read_ops;
    j["read_bytes"] = c.read_bytes;
    j["write_ops"] = c.write_ops;
    j["write_bytes"] = c.write_bytes;
    return j;
}

namespace {

std::string strip_ansi(const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
            i += 2;
            while (i < s.size() && !(s[i] >= '@' && s[i] <= '~')) ++i;
            continue;
        }
        out += s[i];
    }
    return out;
}

bool is_number(const std::string& s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

}  // namespace

std::map<std::string, OsdStatusRow> parse_osd_status(const std::string& text) {
    std::map<std::string, OsdStatusRow> out;
    std::istringstream in(strip_ansi(text));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::vector<std::string> t;
        for (std::string w; words >> w;) t.push_back(w);
        if (t.empty() || t[0] == "+") continue;
        // Ceph 14: "| id | host | used | …" (every other token a bar).
        if (t[0] == "|" && t.size() > 17 && is_number(t[1])) {
            out[t[1]] = {t[3].substr(0, t[3].find('.')), t[5], t[7], t[9], t[11], t[13], t[15], t[17]};
        } else if (is_number(t[0]) && t.size() > 8) {
            out[t[0]] = {t[1].substr(0, t[1].find('.')), t[2], t[3], t[4], t[5], t[6], t[7], t[8]};
        }
    }
    return out;
}

std::map<std::string, OrderedJson> osd_dump_fields(const std::string& text) {
    auto doc = nlohmann::json::parse(text);
    std::map<std::string, OrderedJson> out;
    for (const auto& o : doc.at("osds")) {
        OrderedJson j;
        j["uuid"] = o.at("uuid");
        j["up"] = o.at("up");
        j["in"] = o.at("in");
        j["primary_affinity"] = o.at("primary_affinity");
        out[std::to_string(o.at("osd").get<long>())] = std::move(j);
    }
    return out;
}

std::map<std::string, OrderedJson> osd_df_fields(const std::string& text) {
    auto doc = nlohmann::json::parse(text);
    std::map<std::string, OrderedJson> out;
    for (const auto& o : doc.at("nodes")) {
        OrderedJson j;
        for (const char* k : {"utilization", "var", "pgs", "kb", "kb_used", "kb_used_data", "kb_used_omap",
                              "kb_used_meta", "kb_avail"})
            j[k] = o.at(k);
        j["weight"] = o.at("crush_weight");
        j["reweight"] = o.at("reweight");
        j["class"] = o.at("device_class");
        out[std::to_string(o.at("id").get<long>())] = std::move(j);
    }
    return out;
}

std::optional<OrderedJson> osd_stats(const std::string& id, const std::map<std::string, OrderedJson>& dump,
                                     const std::map<std::string, OrderedJson>& df,
                                     const std::map<std::string, OsdStatusRow>& status) {
    auto d = dump.find(id);
    auto f = df.find(id);
    auto s = status.find(id);
    if (d == dump.end() || f == df.end() || s == status.end()) return std::nullopt;
    OrderedJson j = d->second;
    for (const auto& [k, v] : f->second.items()) j[k] = v;
    const auto& r = s->second;
    j["node"] = r.node;
    j["used"] = r.used;
    j["avail"] = r.avail;
    j["wr_ops"] = r.wr_ops;
    j["wr_data"] = r.wr_data;
    j["rd_ops"] = r.rd_ops;
    j["rd_data"] = r.rd_data;
    j["state"] = r.state;
    return j;
}

bool valid_pool_name(const std::string& name) {
    // Ceph accepts almost any text; what we refuse would break a path, a
    // `pool/volume` pair or a command: empty, '/', '@', whitespace, control
    // characters, "." and "..", and overlong names.
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    for (unsigned char c : name)
        if (c <= ' ' || c == 0x7f || c == '/' || c == '@') return false;
    return true;
}

bool valid_osd_id(const std::string& id) { return is_number(id) && id.size() < 10; }

}  // namespace pvc::storage
