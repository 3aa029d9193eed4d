#include "metrics.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

#include "pvc/schema.hpp"

namespace pvc::api {

using schema::path;

void DaemonFigures::vm_action(const std::string& action, double seconds) {
    std::lock_guard g(m_);
    auto& a = actions_[action];
    ++a.first;
    a.second = seconds;
}

std::map<std::string, std::pair<uint64_t, double>> DaemonFigures::vm_actions() const {
    std::lock_guard g(m_);
    return actions_;
}

namespace {

// A label value as the exposition format reads it: `\`, `"` and a newline
// escaped (its only escapes); any other control character, and bytes that
// are no UTF-8, replaced by U+FFFD (a raw NUL or CR from a stored value
// broke parsers), so every line of the answer parses whatever was stored.
std::string escape(const std::string& v) {
    static const char* const replacement = "\xEF\xBF\xBD";
    std::string out;
    out.reserve(v.size());
    for (size_t i = 0; i < v.size();) {
        auto c = static_cast<unsigned char>(v[i]);
        if (c < 0x80) {
            if (c == '\\') out += "\\\\";
            else if (c == '"') out += "\\\"";
            else if (c == '\n') out += "\\n";
            else if (c < 0x20 || c == 0x7f) out += replacement;
            else out += static_cast<char>(c);
            ++i;
            continue;
        }
        // A UTF-8 sequence: its length from the lead byte, each continuation
        // 10xxxxxx, no overlong form, no surrogate, at most U+10FFFF.
        size_t len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        bool ok = len && i + len <= v.size();
        for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(v[i + k]) & 0xc0) == 0x80;
        if (ok && len == 3) {
            auto c1 = static_cast<unsigned char>(v[i + 1]);
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
        }
        if (ok && len == 4) {
            auto c1 = static_cast<unsigned char>(v[i + 1]);
            ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (ok) {
            out.append(v, i, len);
            i += len;
        } else {
            out += replacement;
            ++i;
        }
    }
    return out;
}

std::string num(double v) {
    char b[64];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}
std::string num(long long v) { return std::to_string(v); }
// The shortest text that reads back as `v` (the reference prints Python's
// repr): a stream's default 6 digits turned a 4 TB OSD's bytes into 4e+12.
std::string raw(double v) {
    char b[64];
    auto [end, ec] = std::to_chars(b, b + sizeof b, v);
    return ec == std::errc() ? std::string(b, end) : std::string("0");
}

void sample_to(std::string& s, const std::string& name, std::initializer_list<std::pair<const char*, std::string>> labels,
               const std::string& value) {
    s += name;
    if (labels.size()) {
        s += '{';
        bool first = true;
        for (const auto& [k, v] : labels) {
            if (!first) s += ',';
            first = false;
            s += k;
            s += "=\"" + escape(v) + "\"";
        }
        s += '}';
    }
    s += ' ' + value + '\n';
}

class Out {
public:
    void append(const std::string& text) { s_ += text; }
    void metric(const std::string& name, const std::string& help) {
        s_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n";
    }
    void sample(const std::string& name, std::initializer_list<std::pair<const char*, std::string>> labels,
                const std::string& value) {
        s_ += name;
        if (labels.size()) {
            s_ += '{';
            bool first = true;
            for (const auto& [k, v] : labels) {
                if (!first) s_ += ',';
                first = false;
                s_ += k;
                s_ += "=\"" + escape(v) + "\"";
            }
            s_ += '}';
        }
        s_ += ' ' + value + '\n';
    }
    std::string take() { return std::move(s_); }

private:
    std::string s_;
};

double jnum(const Json& j, const char* k) {
    if (!j.is_object() || !j.contains(k)) return 0;
    const Json& v = j[k];
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) return to_float(v.get<std::string>());
    return 0;
}
// `ceph osd status`'s printed sizes ("0", "1.5k", "2489M", "236G") in bytes,
// 1024-based, the unit case-insensitive; nullopt when it is no size ("|").
std::optional<double> human_bytes(const std::string& text) {
    const char* b = text.c_str();
    char* end = nullptr;
    double v = std::strtod(b, &end);
    if (end == b || !std::isfinite(v)) return std::nullopt;
    std::string unit(end);
    if (unit.size() > 1 && (unit.back() == 'b' || unit.back() == 'B')) unit.pop_back();  // "1.5KB"
    if (unit.empty() || unit == "b" || unit == "B") return v;
    if (unit.size() != 1) return std::nullopt;
    static const std::string units = "kmgtpe";
    auto at = units.find(static_cast<char>(std::tolower(static_cast<unsigned char>(unit[0]))));
    if (at == std::string::npos) return std::nullopt;
    for (size_t i = 0; i <= at; ++i) v *= 1024;
    return v;
}

std::string jstr(const Json& j, const char* k) {
    if (!j.is_object() || !j.contains(k)) return "";
    const Json& v = j[k];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_null()) return "None";
    return v.dump();
}


struct VmFamily {
    std::string declared, help;
    std::function<void(std::string&, const Json&, const std::string&)> lines;
};

std::vector<VmFamily> make_vm_families() {
    static const std::map<std::string, int> state_code = {
        {"start", 0}, {"migrate", 1}, {"unmigrate", 2}, {"provision", 3}, {"disable", 4}, {"shutdown", 5},
        {"restart", 6}, {"stop", 7}, {"fail", 8}, {"import", 9}, {"restore", 10}, {"mirror", 99}};
    auto dflt = [](const std::string& s) { return s.empty() || s == "None" ? std::string("Default") : s; };
    std::vector<VmFamily> f;
    auto label1 = [](const char* name, const char* label, const char* key) {
        return [name, label, key](std::string& o, const Json& v, const std::string& n) {
            sample_to(o, name, {{"vm", n}, {label, jstr(v, key)}}, "1");
        };
    };
    f.push_back({"pvc_vm_uuid", "PVC VM UUID", label1("pvc_vm_uuid", "uuid", "uuid")});
    f.push_back({"pvc_vm_description", "PVC VM description", label1("pvc_vm_description", "description", "description")});
    f.push_back({"pvc_vm_profile", "PVC VM profile", label1("pvc_vm_profile", "profile", "profile")});
    f.push_back({"pvc_vm_state", "PVC VM state", [](std::string& o, const Json& v, const std::string& n) {
        auto it = state_code.find(jstr(v, "state"));
        sample_to(o, "pvc_vm_state", {{"vm", n}, {"state", jstr(v, "state")}}, num(static_cast<long long>(it == state_code.end() ? 0 : it->second)));
    }});
    f.push_back({"pvc_vm_failed_reason", "PVC VM failed reason", [](std::string& o, const Json& v, const std::string& n) {
        std::string fr = jstr(v, "failed_reason");
        sample_to(o, "pvc_vm_failed_reason", {{"vm", n}, {"failed_reason", fr.empty() ? "N/A" : fr}}, "1");
    }});
    f.push_back({"pvc_vm_node_limit", "PVC VM node limit", [](std::string& o, const Json& v, const std::string& n) {
        std::string lim = "None";
        if (v["node_limit"].is_array()) {
            lim = "[";
            for (size_t i = 0; i < v["node_limit"].size(); ++i) lim += (i ? ", '" : "'") + v["node_limit"][i].get<std::string>() + "'";
            lim += "]";
        }
        sample_to(o, "pvc_vm_node_limit", {{"vm", n}, {"node_limit", lim}}, "1");
    }});
    f.push_back({"pvc_vm_node_selector", "PVC VM node selector", [dflt](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_node_selector", {{"vm", n}, {"node_selector", dflt(jstr(v, "node_selector"))}}, "1");
    }});
    f.push_back({"pvc_vm_node_autostart", "PVC VM autostart", [](std::string& o, const Json& v, const std::string& n) {
        bool a = v["node_autostart"].get<bool>();
        sample_to(o, "pvc_vm_autostart", {{"vm", n}, {"autostart", a ? "True" : "False"}}, a ? "1" : "0");
    }});
    f.push_back({"pvc_vm_migration_method", "PVC VM migration method", [dflt](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_migration_method", {{"vm", n}, {"migration_method", dflt(jstr(v, "migration_method"))}}, "1");
    }});
    f.push_back({"pvc_vm_tags", "PVC VM tags", [](std::string& o, const Json& v, const std::string& n) {
        for (const auto& t : v["tags"]) sample_to(o, "pvc_vm_tags", {{"vm", n}, {"tag", jstr(t, "name")}}, "1");
    }});
    f.push_back({"pvc_vm_active_node", "PVC VM active node", label1("pvc_vm_active_node", "node", "node")});
    f.push_back({"pvc_vm_migrated", "PVC VM migration state", [](std::string& o, const Json& v, const std::string& n) {
        std::string last = jstr(v, "last_node");
        sample_to(o, "pvc_vm_migrated", {{"vm", n}, {"last_node", last.empty() ? "No" : last}}, last.empty() ? "0" : "1");
    }});
    f.push_back({"pvc_vm_machine_type", "PVC VM machine type", label1("pvc_vm_machine_type", "machine_type", "machine")});
    f.push_back({"pvc_vm_serial_console", "PVC VM serial console", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_serial_console", {{"vm", n}}, jstr(v, "console") == "pty" ? "1" : "0");
    }});
    f.push_back({"pvc_vm_vnc_console", "PVC VM VNC console", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_vnc_console", {{"vm", n}}, jstr(v["vnc"], "listen") == "pty" ? "1" : "0");
    }});
    f.push_back({"pvc_vm_vnc_listen_address", "PVC VM VNC listen address", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_vnc_listen_address", {{"vm", n}, {"address", jstr(v["vnc"], "listen")}}, "1");
    }});
    f.push_back({"pvc_vm_vnc_listen_port", "PVC VM VNC listen port", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_vnc_listen_port", {{"vm", n}, {"port", jstr(v["vnc"], "port")}}, "1");
    }});
    f.push_back({"pvc_vm_vcpus", "PVC VM vCPUs", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_vcpus", {{"vm", n}}, num(static_cast<long long>(jnum(v, "vcpu"))));
    }});
    f.push_back({"pvc_vm_vcpu_topology", "PVC VM vCPU topology", label1("pvc_vm_vcpu_topology", "topology", "vcpu_topology")});
    for (const char* k : {"cpu_time", "user_time", "system_time"}) {
        std::string name = std::string("pvc_vm_vcpus_") + k;
        f.push_back({name, "PVC VM vCPU time", [name, k](std::string& o, const Json& v, const std::string& n) {
            sample_to(o, name, {{"vm", n}}, raw(jnum(v["vcpu_stats"], k) / 1e6));
        }});
    }
    f.push_back({"pvc_vm_memory", "PVC VM memory", [](std::string& o, const Json& v, const std::string& n) {
        sample_to(o, "pvc_vm_memory", {{"vm", n}}, num(static_cast<long long>(jnum(v, "memory"))));
    }});
    for (const char* k : {"actual", "rss", "unused", "available", "usable", "disk_caches"}) {
        std::string name = std::string("pvc_vm_memory_stats_") + k;
        f.push_back({name, "PVC VM memory statistic", [name, k](std::string& o, const Json& v, const std::string& n) {
            sample_to(o, name, {{"vm", n}}, raw(jnum(v["memory_stats"], k)));
        }});
    }
    // Declared without _stats, sampled with it (the reference's names, kept).
    for (const char* k : {"swap_in", "swap_out", "major_fault", "minor_fault", "hugetlb_pgalloc", "hugetlb_pgfail"}) {
        std::string declared = std::string("pvc_vm_memory_") + k, name = std::string("pvc_vm_memory_stats_") + k;
        f.push_back({declared, "PVC VM memory statistic", [name, k](std::string& o, const Json& v, const std::string& n) {
            sample_to(o, name, {{"vm", n}}, raw(jnum(v["memory_stats"], k)));
        }});
    }
    f.push_back({"pvc_vm_network_macaddr", "PVC VM network MAC address", [](std::string& o, const Json& v, const std::string& n) {
        for (const auto& i : v["networks"]) sample_to(o, "pvc_vm_network_macaddr", {{"vm", n}, {"vni", jstr(i, "vni")}, {"macaddr", jstr(i, "mac")}}, "1");
    }});
    f.push_back({"pvc_vm_network_model", "PVC VM network model", [](std::string& o, const Json& v, const std::string& n) {
        for (const auto& i : v["networks"]) sample_to(o, "pvc_vm_network_model", {{"vm", n}, {"vni", jstr(i, "vni")}, {"model", jstr(i, "model")}}, "1");
    }});
    for (const char* k : {"rd_packets", "rd_bits", "rd_errors", "rd_drops", "wr_packets", "wr_bits", "wr_errors", "wr_drops"}) {
        std::string name = std::string("pvc_vm_network_") + k, key = k;
        bool bits = key.find("bits") != std::string::npos;
        if (bits) key = key.substr(0, 3) + "bytes";
        f.push_back({name, "PVC VM network statistic", [name, key, bits](std::string& o, const Json& v, const std::string& n) {
            for (const auto& i : v["networks"])
                sample_to(o, name, {{"vm", n}, {"vni", jstr(i, "vni")}}, raw(jnum(i, key.c_str()) * (bits ? 8 : 1)));
        }});
    }
    for (const char* k : {"rd_req", "rd_bytes", "wr_req", "wr_bytes"}) {
        std::string name = std::string("pvc_vm_disk_") + k;
        f.push_back({name, "PVC VM disk statistic", [name, k](std::string& o, const Json& v, const std::string& n) {
            for (const auto& d : v["disks"])
                if (d.is_object() && d.contains("dev")) sample_to(o, name, {{"vm", n}, {"disk", jstr(d, "dev")}}, raw(jnum(d, k)));
        }});
    }
    return f;
}

// Built once, thread-safe (a static's initialisation).
const std::vector<VmFamily>& vm_families() {
    static const std::vector<VmFamily> families = make_vm_families();
    return families;
}

}  // namespace

VmCache::Lines vm_metric_lines(const Json& v) {
    const auto& families = vm_families();
    VmCache::Lines out(families.size());
    std::string name = jstr(v, "name");
    for (size_t i = 0; i < families.size(); ++i) families[i].lines(out[i], v, name);
    return out;
}

std::string health_metrics(const Reader& r, VmCache& vms) {
    Json st = cluster_status(r, vms);
    Out o;
    o.metric("pvc_info", "PVC cluster information");
    o.sample("pvc_info", {{"primary_node", st["primary_node"].get<std::string>()}, {"version", st["pvc_version"].get<std::string>()},
                          {"upstream_ip", st["upstream_ip"].get<std::string>()}}, "1");
    o.metric("pvc_cluster_maintenance", "PVC cluster maintenance state");
    o.sample("pvc_cluster_maintenance", {}, st["maintenance"] == "true" ? "1" : "0");
    o.metric("pvc_cluster_health", "PVC cluster health status");
    o.sample("pvc_cluster_health", {}, num(st["cluster_health"]["health"].get<long long>()));
    o.metric("pvc_cluster_faults", "PVC cluster new faults");
    o.sample("pvc_cluster_faults", {{"status", "new"}}, "0");
    o.sample("pvc_cluster_faults", {{"status", "ack"}}, "0");
    o.metric("pvc_node_health", "PVC cluster node health status");
    std::map<std::string, long long> daemon, domain;
    auto nodes = r.children(path("base.node"));
    for (const auto& n : nodes) {
        auto h = to_int(r.value(path("node.monitoring.health", {n})));
        if (h) o.sample("pvc_node_health", {{"node", n}}, num(*h));
        daemon[r.value(path("node.state.daemon", {n}))]++;
        domain[r.value(path("node.state.domain", {n}))]++;
    }
    o.metric("pvc_node_daemon_states", "PVC Node daemon state counts");
    for (const char* s : {"run", "init", "shutdown", "stop", "dead", "fenced"})
        o.sample("pvc_node_daemon_states", {{"state", s}}, num(daemon[s]));
    o.metric("pvc_node_domain_states", "PVC Node domain state counts");
    for (const char* s : {"ready", "flush", "flushed", "unflush", "fence-flush"})
        o.sample("pvc_node_domain_states", {{"state", s}}, num(domain[s]));
    std::map<std::string, long long> vm_states;
    long long vm_total = 0;
    for (const auto& u : r.children(path("base.domain"))) {
        if (!vms.readable(r, u)) continue;
        ++vm_total;
        vm_states[r.value(path("domain.state", {u}))]++;
    }
    o.metric("pvc_vm_states", "PVC VM state counts");
    for (const char* s : {"start", "restart", "shutdown", "stop", "disable", "fail", "migrate", "unmigrate", "provision",
                          "import", "restore", "mirror"})
        o.sample("pvc_vm_states", {{"state", s}}, num(vm_states[s]));
    long long up = 0, down = 0, in = 0, out = 0;
    auto osds = r.children(path("base.osd"));
    for (const auto& id : osds) {
        Json s;
        try {
            s = Json::parse(r.value(path("osd.stats", {id})));
        } catch (...) {
        }
        (jnum(s, "up") == 1 ? up : down)++;
        (jnum(s, "in") == 1 ? in : out)++;
    }
    o.metric("pvc_ceph_osd_up_states", "PVC OSD up state counts");
    o.sample("pvc_ceph_osd_up_states", {{"state", "up"}}, num(up));
    o.sample("pvc_ceph_osd_up_states", {{"state", "down"}}, num(down));
    o.metric("pvc_ceph_osd_in_states", "PVC OSD in state counts");
    o.sample("pvc_ceph_osd_in_states", {{"state", "in"}}, num(in));
    o.sample("pvc_ceph_osd_in_states", {{"state", "out"}}, num(out));
    o.metric("pvc_nodes", "PVC Node count");
    o.sample("pvc_nodes", {}, num(static_cast<long long>(nodes.size())));
    o.metric("pvc_vms", "PVC VM count");
    o.sample("pvc_vms", {}, num(vm_total));
    o.metric("pvc_osds", "PVC OSD count");
    o.sample("pvc_osds", {}, num(static_cast<long long>(osds.size())));
    o.metric("pvc_networks", "PVC Network count");
    o.sample("pvc_networks", {}, num(st["networks"].get<long long>()));
    o.metric("pvc_pools", "PVC Storage Pool count");
    o.sample("pvc_pools", {}, num(st["pools"].get<long long>()));
    o.metric("pvc_volumes", "PVC Storage Volume count");
    o.sample("pvc_volumes", {}, num(st["volumes"].get<long long>()));
    o.metric("pvc_snapshots", "PVC Storage Snapshot count");
    o.sample("pvc_snapshots", {}, num(st["snapshots"].get<long long>()));
    return o.take();
}

namespace {

// The sections of /metrics/resource, in the reference's order.

struct OsdStats {
    std::string id;
    Json stats;  // the `stats` key's JSON, null when unreadable
};

std::vector<OsdStats> read_osd_stats(const Reader& r) {
    std::vector<OsdStats> out;
    for (const auto& id : r.children(path("base.osd"))) {
        Json s;
        try {
            s = Json::parse(r.value(path("osd.stats", {id})));
        } catch (...) {
        }
        out.push_back({id, std::move(s)});
    }
    return out;
}

// Cluster figures: CPU and memory of all nodes but the largest (N-1), disk of every OSD.
void cluster_section(Out& o, const std::vector<Json>& node_objs, const std::vector<OsdStats>& osd_stats) {
    size_t largest_cpu = 0, largest_mem = 0;
    for (size_t i = 0; i < node_objs.size(); ++i) {
        if (node_objs[i]["cpu_count"].get<long long>() > node_objs[largest_cpu]["cpu_count"].get<long long>()) largest_cpu = i;
        if (node_objs[i]["memory"]["total"].get<long long>() > node_objs[largest_mem]["memory"]["total"].get<long long>())
            largest_mem = i;
    }
    double load = 0, cpus = 0, used = 0, alloc = 0, prov = 0, total = 0;
    for (size_t i = 0; i < node_objs.size(); ++i) {
        const Json& n = node_objs[i];
        load += n["load"].get<double>();
        used += n["memory"]["used"].get<double>();
        alloc += n["memory"]["allocated"].get<double>();
        prov += n["memory"]["provisioned"].get<double>();
        if (i != largest_cpu) cpus += n["cpu_count"].get<double>();
        if (i != largest_mem) total += n["memory"]["total"].get<double>();
    }
    auto pct = [](double a, double b) { return b > 0 ? a / b * 100 : 0.0; };
    double kb = 0, kb_used = 0;
    for (const auto& [id, s] : osd_stats) {
        kb += jnum(s, "kb");
        kb_used += jnum(s, "kb_used");
    }
    o.metric("pvc_cluster_cpu_utilization", "PVC cluster CPU utilization");
    o.sample("pvc_cluster_cpu_utilization", {}, num(pct(load, cpus)));
    o.metric("pvc_cluster_network_utilization", "PVC cluster network utilization");
    o.sample("pvc_cluster_network_utilization", {}, num(0.0));
    o.metric("pvc_cluster_memory_real_utilization", "PVC cluster real memory utilization");
    o.sample("pvc_cluster_memory_real_utilization", {}, num(pct(used, total)));
    o.metric("pvc_cluster_memory_allocated_utilization", "PVC cluster allocated memory utilization");
    o.sample("pvc_cluster_memory_allocated_utilization", {}, num(pct(alloc, total)));
    o.metric("pvc_cluster_memory_provisioned_utilization", "PVC cluster provisioned memory utilization");
    o.sample("pvc_cluster_memory_provisioned_utilization", {}, num(pct(prov, total)));
    o.metric("pvc_cluster_disk_utilization", "PVC cluster disk utilization");
    o.sample("pvc_cluster_disk_utilization", {}, num(pct(kb_used, kb)));
}

void node_section(Out& o, const std::vector<Json>& node_objs) {
    struct NodeMetric {
        const char* name;
        const char* help;
        std::function<std::string(const Json&)> value;
    };
    auto mem = [](const char* k) { return [k](const Json& n) { return num(n["memory"][k].get<long long>()); }; };
    auto mem_pct = [](const char* k) {
        return [k](const Json& n) {
            double t = n["memory"]["total"].get<double>();
            return raw(t > 0 ? n["memory"][k].get<double>() / t * 100 : 0.0);
        };
    };
    auto zero = [](const Json&) { return num(0.0); };
    const std::vector<NodeMetric> per_node = {
        {"pvc_node_host_cpus", "PVC node host CPUs", [](const Json& n) { return num(n["vcpu"]["total"].get<long long>()); }},
        {"pvc_node_allocated_vcpus", "PVC node allocated vCPUs", [](const Json& n) { return num(n["vcpu"]["allocated"].get<long long>()); }},
        {"pvc_node_load_average", "PVC node load average", [](const Json& n) { return raw(n["load"].get<double>()); }},
        {"pvc_node_cpu_utilization", "PVC node CPU utilization", [](const Json& n) {
             double c = n["cpu_count"].get<double>();
             return num(c > 0 ? n["load"].get<double>() / c * 100 : 0.0);
         }},
        {"pvc_node_domains_count", "PVC node running domain count", [](const Json& n) { return num(n["domains_count"].get<long long>()); }},
        {"pvc_node_network_traffic_rx", "PVC node network received traffic", zero},
        {"pvc_node_network_traffic_tx", "PVC node network transmitted traffic", zero},
        {"pvc_node_network_packets_rx", "PVC node network received packets", zero},
        {"pvc_node_network_packets_tx", "PVC node network transmitted packets", zero},
        {"pvc_node_network_utilization", "PVC node network utilization", zero},
        {"pvc_node_total_memory", "PVC node total memory", mem("total")},
        {"pvc_node_allocated_memory", "PVC node allocated memory", mem("allocated")},
        {"pvc_node_allocated_memory_utilization", "PVC node allocated memory utilization", mem_pct("allocated")},
        {"pvc_node_provisioned_memory", "PVC node provisioned memory", mem("provisioned")},
        {"pvc_node_provisioned_memory_utilization", "PVC node provisioned memory utilization", mem_pct("provisioned")},
        {"pvc_node_used_memory", "PVC node used memory", mem("used")},
        {"pvc_node_used_memory_utilization", "PVC node used memory utilization", mem_pct("used")},
        {"pvc_node_free_memory", "PVC node free memory", mem("free")},
    };
    for (const auto& m : per_node) {
        o.metric(m.name, m.help);
        for (const auto& n : node_objs) o.sample(m.name, {{"node", n["name"].get<std::string>()}}, m.value(n));
        if (std::string(m.name) == "pvc_node_domains_count") {
            o.metric("pvc_node_architecture", "PVC node architecture");
            for (const auto& n : node_objs)
                o.sample("pvc_node_architecture", {{"node", n["name"].get<std::string>()}, {"architecture", n["arch"].get<std::string>()}}, "1");
            o.metric("pvc_node_kernel", "PVC node kernel");
            for (const auto& n : node_objs)
                o.sample("pvc_node_kernel", {{"node", n["name"].get<std::string>()}, {"kernel", n["kernel"].get<std::string>()}}, "1");
        }
    }

}

void vm_section(Out& o, const Reader& r, VmCache& vms) {
    // Per VM: each VM's lines of every family are built once per change of
    // the VM (VmCache::metric_lines), a scrape only assembles them.
    const auto& families = vm_families();
    std::vector<std::shared_ptr<const VmCache::Lines>> vm_lines;
    for (const auto& u : r.children(path("base.domain")))
        if (auto l = vms.metric_lines(r, u)) vm_lines.push_back(std::move(l));
    for (size_t i = 0; i < families.size(); ++i) {
        o.metric(families[i].declared, families[i].help);
        for (const auto& l : vm_lines) o.append((*l)[i]);
    }

}

void osd_section(Out& o, const Reader& r, const std::vector<OsdStats>& osd_stats) {
    // Per OSD (a line is left out when its figure is missing).
    auto osd_line = [&](const char* name, const char* key, double scale) {
        o.metric(name, "PVC OSD statistic");
        for (const auto& [id, s] : osd_stats)
            if (s.is_object() && s.contains(key)) o.sample(name, {{"osd", id}}, raw(jnum(s, key) * scale));
    };
    o.metric("pvc_ceph_osd_device", "PVC OSD device");
    for (const auto& [id, s] : osd_stats)
        o.sample("pvc_ceph_osd_device", {{"osd", id}, {"device", r.value(path("osd.node", {id})) + ":" + r.value(path("osd.device", {id}))}}, "1");
    o.metric("pvc_ceph_osd_db_device", "PVC OSD DB device");
    for (const auto& [id, s] : osd_stats)
        o.sample("pvc_ceph_osd_db_device", {{"osd", id}, {"db_device", r.value(path("osd.db_device", {id}))}}, "1");
    o.metric("pvc_ceph_osd_device_class", "PVC OSD device class");
    for (const auto& [id, s] : osd_stats)
        if (s.is_object() && s.contains("class")) o.sample("pvc_ceph_osd_device_class", {{"osd", id}, {"device_class", jstr(s, "class")}}, "1");
    osd_line("pvc_ceph_osd_util", "utilization", 1);
    osd_line("pvc_ceph_osd_var", "var", 1);
    osd_line("pvc_ceph_osd_pgs", "pgs", 1);
    osd_line("pvc_ceph_osd_size", "kb", 1);
    osd_line("pvc_ceph_osd_used", "kb_used", 1024);
    osd_line("pvc_ceph_osd_used_data", "kb_used_data", 1024);
    osd_line("pvc_ceph_osd_used_omap", "kb_used_omap", 1024);
    osd_line("pvc_ceph_osd_used_meta", "kb_used_meta", 1024);
    osd_line("pvc_ceph_osd_avail", "kb_avail", 1024);
    osd_line("pvc_ceph_osd_weight", "weight", 1);
    osd_line("pvc_ceph_osd_reweight", "reweight", 1);
    // `ceph osd status`'s columns: the operation counts as printed, the data
    // rates' human sizes in bytes (a value that is no size, e.g. the new
    // OSD's placeholder "|", is left out).
    auto osd_data_line = [&](const char* name, const char* key) {
        o.metric(name, "PVC OSD statistic");
        for (const auto& [id, s] : osd_stats)
            if (s.is_object() && s.contains(key))
                if (auto b = human_bytes(jstr(s, key))) o.sample(name, {{"osd", id}}, raw(*b));
    };
    osd_line("pvc_ceph_osd_wr_ops", "wr_ops", 1);
    osd_data_line("pvc_ceph_osd_wr_data", "wr_data");
    osd_line("pvc_ceph_osd_rd_ops", "rd_ops", 1);
    osd_data_line("pvc_ceph_osd_rd_data", "rd_data");

}

void pool_section(Out& o, const Reader& r) {
    auto pools = r.children(path("base.pool"));
    o.metric("pvc_ceph_pool_tier", "PVC pool tier");
    for (const auto& p : pools) {
        auto tier = r.value(path("pool.tier", {p}));
        o.sample("pvc_ceph_pool_tier", {{"pool", p}, {"tier", tier.empty() ? "default" : tier}}, "1");
    }
    o.metric("pvc_ceph_pool_pgs", "PVC pool placement group count");
    for (const auto& p : pools)
        if (auto pgs = to_int(r.value(path("pool.pgs", {p})))) o.sample("pvc_ceph_pool_pgs", {{"pool", p}}, std::to_string(*pgs));
    o.metric("pvc_ceph_pool_volumes", "PVC pool volume count");
    for (const auto& p : pools)
        o.sample("pvc_ceph_pool_volumes", {{"pool", p}}, num(static_cast<long long>(r.children(path("base.volume") + "/" + p).size())));
    std::vector<Json> pool_stats;
    for (const auto& p : pools) {
        Json s;
        try {
            s = Json::parse(r.value(path("pool.stats", {p})));
        } catch (...) {
        }
        pool_stats.push_back(std::move(s));
    }
    // The metric's name and the stats key it shows (in the reference's order).
    const std::pair<const char*, const char*> pool_figures[] = {
        {"stored_bytes", "stored_bytes"},
        {"free_bytes", "free_bytes"},
        {"used_bytes", "used_bytes"},
        {"used_percent", "used_percent"},
        {"num_objects", "num_objects"},
        {"num_objects_clones", "num_object_clones"},
        {"num_objects_copies", "num_object_copies"},
        {"num_objects_missing_on_primary", "num_objects_missing_on_primary"},
        {"num_objects_unfound", "num_objects_unfound"},
        {"num_objects_degraded", "num_objects_degraded"},
        {"read_ops", "read_ops"},
        {"read_bytes", "read_bytes"},
        {"write_ops", "write_ops"},
        {"write_bytes", "write_bytes"},
    };
    for (const auto& [metric, k] : pool_figures) {
        std::string name = std::string("pvc_ceph_pool_") + metric;
        bool percent = std::string_view(k) == "used_percent";  // a ratio 0..1, shown ×100 with 2 decimals
        o.metric(name, "PVC pool statistic");
        for (size_t i = 0; i < pools.size(); ++i) {
            const Json& s = pool_stats[i];
            if (s.is_object() && s.contains(k))
                o.sample(name, {{"pool", pools[i]}}, percent ? num(jnum(s, k) * 100) : raw(jnum(s, k)));
        }
    }
}

}  // namespace

std::string resource_metrics(const Reader& r, VmCache& vms) {
    Out o;
    std::vector<Json> node_objs;
    for (const auto& n : r.children(path("base.node"))) node_objs.push_back(node_object(r, n));
    auto osd_stats = read_osd_stats(r);
    cluster_section(o, node_objs, osd_stats);
    node_section(o, node_objs);
    vm_section(o, r, vms);
    osd_section(o, r, osd_stats);
    pool_section(o, r);
    return o.take();
}

std::string daemon_metrics(const Reader& r, const DaemonFigures& f, size_t view_size) {
    Out o;
    o.metric("pvcnoded_zookeeper_latency_seconds", "Round trip of one ZooKeeper read by this daemon, measured each keepalive");
    o.sample("pvcnoded_zookeeper_latency_seconds", {}, raw(f.zookeeper_latency_s.load()));
    o.metric("pvcnoded_zookeeper_requests", "ZooKeeper requests sent by this daemon's session");
    o.sample("pvcnoded_zookeeper_requests", {}, std::to_string(f.zookeeper_requests ? f.zookeeper_requests() : 0));
    o.metric("pvcnoded_keepalive_interval_seconds", "Time between this daemon's last two keepalives");
    o.sample("pvcnoded_keepalive_interval_seconds", {}, raw(f.keepalive_interval_s.load()));
    o.metric("pvcnoded_failed_tasks", "Daemon tasks ended by an exception since start");
    o.sample("pvcnoded_failed_tasks", {}, std::to_string(f.failed_tasks.load()));
    o.metric("pvcnoded_api_view_znodes", "znodes mirrored by the API's cluster view");
    o.sample("pvcnoded_api_view_znodes", {}, std::to_string(view_size));
    o.metric("pvcnoded_api_confirmed_reads",
             "Reads of a named object the API's view did not answer, answered again from ZooKeeper");
    o.sample("pvcnoded_api_confirmed_reads", {}, std::to_string(f.confirmed_reads.load()));
    if (const HttpServer::Counters* c = f.server.load()) {
        o.metric("pvcnoded_api_requests", "API requests answered since this node became primary");
        o.sample("pvcnoded_api_requests", {}, std::to_string(c->requests.load()));
        o.metric("pvcnoded_api_request_seconds", "Total time spent answering API requests");
        o.sample("pvcnoded_api_request_seconds", {}, raw(c->total_us.load() / 1e6));
        o.metric("pvcnoded_api_errors", "API answers with an error status");
        o.sample("pvcnoded_api_errors", {{"class", "4xx"}}, std::to_string(c->errors_4xx.load()));
        o.sample("pvcnoded_api_errors", {{"class", "5xx"}}, std::to_string(c->errors_5xx.load()));
        o.metric("pvcnoded_api_connections", "Open API connections");
        o.sample("pvcnoded_api_connections", {}, std::to_string(c->open.load()));
        o.metric("pvcnoded_api_rejected_connections", "API connections refused over the connection limit");
        o.sample("pvcnoded_api_rejected_connections", {}, std::to_string(c->rejected_connections.load()));
    }
    auto actions = f.vm_actions();
    o.metric("pvcnoded_vm_action_seconds", "Duration of the last VM action written through the API (lock, write, hold)");
    for (const auto& [a, v] : actions) o.sample("pvcnoded_vm_action_seconds", {{"action", a}}, raw(v.second));
    o.metric("pvcnoded_vm_actions", "VM actions written through the API");
    for (const auto& [a, v] : actions) o.sample("pvcnoded_vm_actions", {{"action", a}}, std::to_string(v.first));
    o.metric("pvcnoded_plugin_last_run", "Last run of each node health plugin (Unix time)");
    for (const auto& n : r.children(path("base.node")))
        for (const auto& p : r.children(path("node.monitoring.data", {n})))
            if (auto t = to_int(r.value(path("monitoring_plugin.last_run", {n, p}))))
                o.sample("pvcnoded_plugin_last_run", {{"node", n}, {"plugin", p}}, std::to_string(*t));
    o.metric("pvcnoded_plugin_runtime_seconds", "Run time of each node health plugin's last run");
    for (const auto& n : r.children(path("base.node")))
        for (const auto& p : r.children(path("node.monitoring.data", {n}))) {
            auto v = r.get(path("monitoring_plugin.runtime", {n, p}));
            if (v && !v->empty()) o.sample("pvcnoded_plugin_runtime_seconds", {{"node", n}, {"plugin", p}}, raw(to_float(*v)));
        }
    o.metric("pvcnoded_keepalive_timestamp", "Last keepalive of each node (Unix time)");
    for (const auto& n : r.children(path("base.node")))
        if (auto t = to_int(r.value(path("node.keepalive", {n}))))
            o.sample("pvcnoded_keepalive_timestamp", {{"node", n}}, std::to_string(*t));
    return o.take();
}

}  // namespace pvc::api
