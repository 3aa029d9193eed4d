#include "objects.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <libxml/parser.h>
#include <libxml/tree.h>

#include "pvc/client.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/zk.hpp"

namespace pvc::api {

using schema::path;

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::optional<long long> to_int(const std::string& s) {
    std::string t = s;
    while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
    size_t b = 0;
    while (b < t.size() && std::isspace(static_cast<unsigned char>(t[b]))) ++b;
    long long v = 0;
    auto res = std::from_chars(t.data() + b, t.data() + t.size(), v);
    if (b == t.size() || res.ec != std::errc() || res.ptr != t.data() + t.size()) return std::nullopt;
    return v;
}

double to_float(const std::string& s) {
    try {
        size_t used = 0;
        double d = std::stod(s, &used);
        return std::isfinite(d) ? d : 0.0;
    } catch (...) {
        return 0.0;
    }
}

namespace {

Json parse_json_or(const std::string& text, Json fallback) {
    try {
        Json j = Json::parse(text);
        return j;
    } catch (...) {
        return fallback;
    }
}

// --- a small libxml2 reading of the stored domain XML ---
struct XmlDoc {
    xmlDocPtr doc = nullptr;
    // Read as the SDK's reader does (pvc/domain_xml.hpp): its bounds first
    // (no DTD, so no entity expands; depth, counts and sizes), then UTF-8,
    // no network, no entity substitution. A stored XML outside them (written
    // by another client) is a VM that cannot be read.
    explicit XmlDoc(const std::string& text) {
        try {
            check_domain_xml_bounds(text);
        } catch (const DomainXmlError&) {
            return;
        }
        doc = xmlReadMemory(text.data(), static_cast<int>(text.size()), "domain.xml", "UTF-8",
                            XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING | XML_PARSE_IGNORE_ENC);
        if (doc && (doc->intSubset || doc->extSubset)) {
            xmlFreeDoc(doc);
            doc = nullptr;
        }
    }
    ~XmlDoc() {
        if (doc) xmlFreeDoc(doc);
    }
    XmlDoc(const XmlDoc&) = delete;
    XmlDoc& operator=(const XmlDoc&) = delete;
};

bool is(xmlNodePtr n, const char* name) {
    return n && n->type == XML_ELEMENT_NODE && xmlStrcmp(n->name, reinterpret_cast<const xmlChar*>(name)) == 0;
}
xmlNodePtr child(xmlNodePtr n, const char* name) {
    if (!n) return nullptr;
    for (xmlNodePtr c = n->children; c; c = c->next)
        if (is(c, name)) return c;
    return nullptr;
}
std::vector<xmlNodePtr> children_named(xmlNodePtr n, const char* name) {
    std::vector<xmlNodePtr> out;
    if (!n) return out;
    for (xmlNodePtr c = n->children; c; c = c->next)
        if (is(c, name)) out.push_back(c);
    return out;
}
std::optional<std::string> attr(xmlNodePtr n, const char* name) {
    if (!n) return std::nullopt;
    xmlChar* v = xmlGetProp(n, reinterpret_cast<const xmlChar*>(name));
    if (!v) return std::nullopt;
    std::string s(reinterpret_cast<const char*>(v));
    xmlFree(v);
    return s;
}
std::string text(xmlNodePtr n) {
    if (!n) return "";
    xmlChar* v = xmlNodeGetContent(n);
    if (!v) return "";
    std::string s(reinterpret_cast<const char*>(v));
    xmlFree(v);
    return s;
}
// The reference's `^[vm]*br([0-9a-z]+)` on a bridge name, scanned by hand
// (a backtracking matcher recursed once per character of a client's value).
std::string bridge_vni(const std::string& bridge) {
    size_t i = bridge.find_first_not_of("vm");
    if (i == std::string::npos || bridge.compare(i, 2, "br") != 0) return "";
    size_t from = i + 2, to = from;
    while (to < bridge.size() && (std::isdigit(static_cast<unsigned char>(bridge[to])) ||
                                  (bridge[to] >= 'a' && bridge[to] <= 'z')))
        ++to;
    return bridge.substr(from, to - from);
}

Json stats_entry(const Json& list, const char* key, const std::string& value) {
    if (!list.is_array()) return Json::object();
    for (const auto& e : list)
        if (e.is_object() && e.contains(key) && e[key].is_string() && e[key].get<std::string>() == value) return e;
    return Json::object();
}
Json counter(const Json& e, const char* key) {
    if (e.is_object() && e.contains(key) && e[key].is_number()) return e[key];
    return 0;
}

}  // namespace

Json node_object(const Reader& r, const std::string& n) {
    auto st = words(r.value(path("node.data.static", {n})));
    auto tok = [&](size_t i) { return i < st.size() ? st[i] : std::string(); };
    long long cpus = to_int(tok(0)).value_or(0);
    Json health = "N/A";
    if (auto h = to_int(r.value(path("node.monitoring.health", {n})))) health = *h;
    auto plugins = words(r.value(path("node.monitoring.plugins", {n})));
    Json details = Json::array();
    for (const auto& p : plugins) {
        // A name that cannot be one znode name (a '/' in the value a node
        // wrote) has no data to read: listed, without details, instead of
        // failing the node's object (GET /node, /status and the metrics
        // answered 500 for every node).
        if (!client::is_safe_name(p)) continue;
        details.push_back({{"name", p},
                           {"last_run", to_int(r.value(path("monitoring_plugin.last_run", {n, p}))).value_or(0)},
                           {"health_delta", to_int(r.value(path("monitoring_plugin.health_delta", {n, p}))).value_or(0)},
                           {"message", r.value(path("monitoring_plugin.message", {n, p}))},
                           {"data", parse_json_or(r.value(path("monitoring_plugin.data", {n, p})), Json::object())}});
    }
    auto num = [&](std::string_view key) { return to_int(r.value(path(key, {n}))).value_or(0); };
    return {
        {"name", n},
        {"daemon_state", r.value(path("node.state.daemon", {n}))},
        {"coordinator_state", r.value(path("node.state.router", {n}))},
        {"domain_state", r.value(path("node.state.domain", {n}))},
        {"pvc_version", r.value(path("node.data.pvc_version", {n}))},
        {"cpu_count", cpus},
        {"kernel", tok(1)},
        {"os", tok(2)},
        {"arch", tok(3)},
        {"health", health},
        {"health_plugins", plugins},
        {"health_details", details},
        {"load", to_float(r.value(path("node.cpu.load", {n})))},
        {"domains_count", num("node.count.provisioned_domains")},
        {"running_domains", words(r.value(path("node.running_domains", {n})))},
        {"vcpu", {{"total", cpus}, {"allocated", num("node.vcpu.allocated")}}},
        {"memory",
         {{"total", num("node.memory.total")},
          {"allocated", num("node.memory.allocated")},
          {"provisioned", num("node.memory.provisioned")},
          {"used", num("node.memory.used")},
          {"free", num("node.memory.free")}}},
    };
}

std::optional<Json> vm_object(const Reader& r, const std::string& u) {
    if (!r.exists(path("domain.name", {u}))) return std::nullopt;
    std::string xml = r.value(path("domain.xml", {u}));
    XmlDoc doc(xml);
    if (!doc.doc) return std::nullopt;
    xmlNodePtr root = xmlDocGetRootElement(doc.doc);
    if (!is(root, "domain")) return std::nullopt;
    auto autostart = zk::lenient_bool(r.value(path("domain.meta.autostart", {u})));
    if (!autostart) return std::nullopt;  // the reference cannot read such a VM either: left out of lists

    Json stats = parse_json_or(r.value(path("domain.stats", {u})), Json::object());
    if (!stats.is_object()) stats = Json::object();
    auto stat_obj = [&](const char* k) { return stats.contains(k) && stats[k].is_object() ? stats[k] : Json::object(); };
    Json net_stats = stats.contains("net_stats") ? stats["net_stats"] : Json::array();
    Json disk_stats = stats.contains("disk_stats") ? stats["disk_stats"] : Json::array();

    std::string last_node = r.value(path("domain.last_node", {u}));
    std::string limit = r.value(path("domain.meta.node_limit", {u}));
    Json node_limit = limit.empty() ? Json(nullptr) : Json(split_all(limit, ','));

    Json tags = Json::array();
    for (const auto& t : r.children(path("domain.meta.tags", {u}))) {
        auto prot = zk::lenient_bool(r.value(path("tag.protected", {u, t})));
        if (!prot) return std::nullopt;
        tags.push_back({{"name", t}, {"type", r.value(path("tag.type", {u, t}))}, {"protected", *prot}});
    }

    xmlNodePtr desc = child(root, "description");
    long long memory = 0;
    if (xmlNodePtr m = child(root, "memory")) {
        long long v = to_int(trim(text(m))).value_or(0);
        std::string unit = attr(m, "unit").value_or("");
        memory = unit == "KiB" ? v / 1024 : unit == "GiB" ? v * 1024 : v;
    }
    long long vcpu = to_int(trim(text(child(root, "vcpu")))).value_or(0);
    std::string topology = "N/A";
    if (xmlNodePtr t = child(child(root, "cpu"), "topology"))
        topology = attr(t, "sockets").value_or("") + "/" + attr(t, "cores").value_or("") + "/" + attr(t, "threads").value_or("");

    xmlNodePtr devices = child(root, "devices");
    Json networks = Json::array();
    for (xmlNodePtr i : children_named(devices, "interface")) {
        std::string type = attr(i, "type").value_or("");
        xmlNodePtr src = child(i, "source");
        std::string source = attr(src, type.c_str()).value_or("");
        std::string vni;
        if (type == "direct") {
            source = attr(src, "dev").value_or("");
            vni = "macvtap:" + source;
        } else if (type == "hostdev") {
            source = trim(text(child(i, "sriov_device")));
            vni = "hostdev:" + source;
        } else {
            vni = bridge_vni(source);
        }
        Json e = stats_entry(net_stats, "bridge", source);
        networks.push_back({{"type", type},
                            {"vni", vni},
                            {"mac", attr(child(i, "mac"), "address").value_or("")},
                            {"source", source},
                            {"model", attr(child(i, "model"), "type").value_or("")},
                            {"rd_bytes", counter(e, "rd_bytes")},
                            {"rd_packets", counter(e, "rd_packets")},
                            {"rd_errors", counter(e, "rd_errors")},
                            {"rd_drops", counter(e, "rd_drops")},
                            {"wr_bytes", counter(e, "wr_bytes")},
                            {"wr_packets", counter(e, "wr_packets")},
                            {"wr_errors", counter(e, "wr_errors")},
                            {"wr_drops", counter(e, "wr_drops")}});
    }
    Json disks = Json::array();
    for (xmlNodePtr d : children_named(devices, "disk")) {
        std::string type = attr(d, "type").value_or("");
        xmlNodePtr src = child(d, "source");
        xmlNodePtr tgt = child(d, "target");
        if (type != "network" && type != "file") {
            disks.push_back(Json::object());
            continue;
        }
        std::string name = type == "network" ? attr(src, "name").value_or("") : attr(src, "file").value_or("");
        Json e = type == "network" ? stats_entry(disk_stats, "name", name) : Json::object();
        disks.push_back({{"type", type == "network" ? attr(src, "protocol").value_or("") : std::string("file")},
                         {"name", name},
                         {"dev", attr(tgt, "dev").value_or("")},
                         {"bus", attr(tgt, "bus").value_or("")},
                         {"rd_req", counter(e, "rd_req")},
                         {"rd_bytes", counter(e, "rd_bytes")},
                         {"wr_req", counter(e, "wr_req")},
                         {"wr_bytes", counter(e, "wr_bytes")}});
    }
    Json controllers = Json::array();
    for (xmlNodePtr c : children_named(devices, "controller")) {
        auto model = attr(c, "model");
        controllers.push_back({{"type", attr(c, "type").value_or("")}, {"model", model ? Json(*model) : Json(nullptr)}});
    }
    Json features = Json::array();
    if (xmlNodePtr f = child(root, "features"))
        for (xmlNodePtr c = f->children; c; c = c->next)
            if (c->type == XML_ELEMENT_NODE) features.push_back(reinterpret_cast<const char*>(c->name));
    xmlNodePtr ostype = child(child(root, "os"), "type");
    Json vnc = {{"listen", "None"}, {"port", "None"}};
    std::string vnc_key = r.value(path("domain.console.vnc", {u}));
    if (!vnc_key.empty()) {
        size_t colon = vnc_key.rfind(':');
        vnc = {{"listen", vnc_key.substr(0, colon)},
               {"port", colon == std::string::npos ? std::string() : vnc_key.substr(colon + 1)}};
    }
    std::string quoted = xml;
    std::replace(quoted.begin(), quoted.end(), '"', '\'');

    return Json{
        {"name", trim(text(child(root, "name")))},
        {"uuid", trim(text(child(root, "uuid")))},
        {"state", r.value(path("domain.state", {u}))},
        {"node", r.value(path("domain.node", {u}))},
        {"last_node", last_node},
        {"migrated", last_node.empty() ? std::string("no") : "from " + last_node},
        {"failed_reason", r.value(path("domain.failed_reason", {u}))},
        {"node_limit", node_limit},
        {"node_selector", r.value(path("domain.meta.node_selector", {u}))},
        {"node_autostart", *autostart},
        {"migration_method", r.value(path("domain.meta.migrate_method", {u}))},
        {"tags", tags},
        {"description", desc ? text(desc) : std::string("N/A")},
        {"profile", r.value(path("domain.profile", {u}))},
        {"memory", memory},
        {"memory_stats", stat_obj("mem_stats")},
        {"vcpu", vcpu},
        {"vcpu_topology", topology},
        {"vcpu_stats", stat_obj("cpu_stats")},
        {"networks", networks},
        {"type", trim(text(ostype))},
        {"arch", attr(ostype, "arch").value_or("")},
        {"machine", attr(ostype, "machine").value_or("")},
        {"console", attr(child(devices, "console"), "type").value_or("")},
        {"vnc", vnc},
        {"emulator", trim(text(child(devices, "emulator")))},
        {"features", features},
        {"disks", disks},
        {"controllers", controllers},
        {"xml", quoted},
    };
}

VmCache::Item& VmCache::item(const Reader& r, const std::string& uuid) {
    uint64_t gen = r.generation(path("domain.name", {uuid}));
    auto it = items_.find(uuid);
    if (it != items_.end() && it->second.generation == gen) return it->second;
    Item fresh;
    fresh.generation = gen;
    uint64_t partial = ClusterView::partial_reads();
    if (auto obj = vm_object(r, uuid)) {
        fresh.text = std::make_shared<const std::string>(dump(*obj));
        if (build_lines_) fresh.metrics = std::make_shared<const Lines>(build_lines_(*obj));
    }
    // Built from a VM still loading: given to this reader (which then
    // answers again, routes.cpp), never to a later one.
    if (ClusterView::partial_reads() != partial) fresh.generation = ~0ULL;
    return items_[uuid] = std::move(fresh);
}

std::shared_ptr<const std::string> VmCache::get(const Reader& r, const std::string& uuid) {
    // Read from ZooKeeper itself: built for this answer only, outside the
    // cache's lock (its reads wait on ZooKeeper), and never cached (the
    // cache follows the view's generations).
    if (r.through()) {
        auto obj = vm_object(r, uuid);
        return obj ? std::make_shared<const std::string>(dump(*obj)) : nullptr;
    }
    std::lock_guard g(m_);
    return item(r, uuid).text;
}

bool VmCache::readable(const Reader& r, const std::string& uuid) {
    if (r.through()) return vm_object(r, uuid).has_value();
    std::lock_guard g(m_);
    return item(r, uuid).text != nullptr;
}

std::shared_ptr<const VmCache::Lines> VmCache::metric_lines(const Reader& r, const std::string& uuid) {
    if (r.through()) {
        auto obj = vm_object(r, uuid);
        return obj && build_lines_ ? std::make_shared<const Lines>(build_lines_(*obj)) : nullptr;
    }
    std::lock_guard g(m_);
    return item(r, uuid).metrics;
}

std::shared_ptr<const std::string> VmCache::list_body(const Reader& r, const std::function<std::string()>& build) {
    if (r.through()) return std::make_shared<const std::string>(build());
    uint64_t gen = r.root_generation("/domains");
    {
        std::lock_guard g(m_);
        if (list_ && list_generation_ == gen) return list_;
    }
    uint64_t partial = ClusterView::partial_reads();
    auto body = std::make_shared<const std::string>(build());
    std::lock_guard g(m_);
    list_ = body;
    list_generation_ = ClusterView::partial_reads() == partial ? gen : ~0ULL;  // as in item()
    return body;
}

void VmCache::clear() {
    std::lock_guard g(m_);
    items_.clear();
    list_.reset();
}

namespace {
std::string upper(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return s;
}
}  // namespace

Json cluster_status(const Reader& r, VmCache& vms) {
    long long health = 100;
    std::vector<std::string> messages;
    Json node_health = Json::object();
    std::map<std::string, long long> node_states, vm_states, osd_states;
    std::vector<std::string> nodes = r.children(path("base.node"));
    std::string primary = r.value(path("base.config.primary_node"));
    std::string version = "0.0.0";
    long long mem_alloc = 0, largest = 0, mem_total_all = 0;
    for (const auto& n : nodes) {
        Json o = node_object(r, n);
        if (n == primary) version = o["pvc_version"];
        std::vector<std::string> nmsg;
        for (const auto& d : o["health_details"])
            if (d["health_delta"].get<long long>() > 0) {
                nmsg.push_back("'" + d["name"].get<std::string>() + "': " + d["message"].get<std::string>());
                messages.push_back(n + ": plugin '" + d["name"].get<std::string>() + "': " + d["message"].get<std::string>());
            }
        node_health[n] = {{"health", o["health"]}, {"messages", nmsg}};
        if (o["health"].is_number()) health -= 100 - o["health"].get<long long>();
        std::string ds = o["daemon_state"], dom = o["domain_state"];
        if (ds != "run") {
            health -= 50;
            messages.push_back("cluster: Node " + n + " in " + upper(ds) + " daemon state");
        } else if (dom != "ready") {
            health -= 10;
            messages.push_back("cluster: Node " + n + " in " + upper(dom) + " domain state");
        }
        node_states[ds + "," + dom]++;
        long long total = o["memory"]["total"];
        mem_alloc += o["memory"]["allocated"].get<long long>();
        mem_total_all += total;
        largest = std::max(largest, total);
    }
    long long vm_total = 0;
    for (const auto& u : r.children(path("base.domain"))) {
        if (!vms.readable(r, u)) continue;
        ++vm_total;
        std::string state = r.value(path("domain.state", {u}));
        vm_states[state]++;
        if (state == "stop" || state == "fail") {
            health -= 10;
            messages.push_back("cluster: VM " + r.value(path("domain.name", {u})) + " in " + upper(state) + " state");
        }
    }
    long long osd_total = 0;
    for (const auto& id : r.children(path("base.osd"))) {
        ++osd_total;
        Json s = parse_json_or(r.value(path("osd.stats", {id})), Json::object());
        auto flag = [&](const char* k) {
            return s.is_object() && s.contains(k) && s[k].is_number() ? s[k].get<long long>() : 0;
        };
        bool up = flag("up") == 1, in = flag("in") == 1;
        osd_states[std::string(up ? "up" : "down") + "," + (in ? "in" : "out")]++;
        if (!in) {
            health -= 50;
            messages.push_back("cluster: Ceph OSD " + id + " in OUT state");
        } else if (!up) {
            health -= 10;
            messages.push_back("cluster: Ceph OSD " + id + " in DOWN state");
        }
        double util = s.is_object() && s.contains("utilization") && s["utilization"].is_number() ? s["utilization"].get<double>() : 0;
        char buf[64];
        if (util >= 90) {
            health -= 50;
            std::snprintf(buf, sizeof buf, "%.1f", util);
            messages.push_back("cluster: Ceph OSD " + id + " is FULL (" + buf + "% > 90%)");
        } else if (util >= 85) {
            health -= 10;
            std::snprintf(buf, sizeof buf, "%.1f", util);
            messages.push_back("cluster: Ceph OSD " + id + " is NEARFULL (" + buf + "% > 85%)");
        }
    }
    if (!nodes.empty() && mem_alloc > mem_total_all - largest) {
        health -= 50;
        messages.push_back("cluster: Total memory is OVERPROVISIONED (" + std::to_string(mem_alloc) + " > " +
                           std::to_string(mem_total_all - largest) + " @ N-1)");
    }
    Json ceph = parse_json_or(r.value(path("base.storage.health")), Json::object());
    if (ceph.is_object()) {
        if (ceph.contains("checks") && ceph["checks"].is_object())
            for (const auto& [name, check] : ceph["checks"].items()) {
                std::string sev = check.is_object() && check.contains("severity") && check["severity"].is_string()
                                      ? check["severity"].get<std::string>() : "";
                std::string msg;
                if (check.is_object() && check.contains("summary") && check["summary"].is_object() &&
                    check["summary"].contains("message") && check["summary"]["message"].is_string())
                    msg = check["summary"]["message"];
                messages.push_back("cluster: Ceph " + std::string(sev == "HEALTH_ERR" ? "ERROR" : "WARNING") + " " + name +
                                   ": " + msg);
            }
        std::string status = ceph.contains("status") && ceph["status"].is_string() ? ceph["status"].get<std::string>() : "";
        if (status == "HEALTH_ERR") health -= 50;
        if (status == "HEALTH_WARN") health -= 10;
    }
    if (health < 0) health = 0;

    Json nodes_j = {{"total", nodes.size()}};
    for (const char* k : {"run,ready", "run,flush", "run,flushed", "run,unflush", "init,ready", "init,flush",
                          "init,flushed", "init,unflush", "stop,ready", "stop,flush", "stop,flushed", "stop,unflush",
                          "dead,ready", "dead,flush", "dead,fence-flush", "dead,flushed", "dead,unflush",
                          "fenced,ready", "fenced,flush", "fenced,flushed", "fenced,unflush"})
        if (node_states[k] > 0) nodes_j[k] = node_states[k];
    Json vms_j = {{"total", vm_total}};
    for (const char* k : {"start", "restart", "shutdown", "stop", "disable", "fail", "migrate", "unmigrate", "provision"})
        if (vm_states[k] > 0) vms_j[k] = vm_states[k];
    Json osds_j = {{"total", osd_total}};
    for (const char* k : {"up,in", "up,out", "down,in", "down,out"})
        if (osd_states[k] > 0) osds_j[k] = osd_states[k];
    long long volumes = 0, snapshots = 0;
    auto pools = r.children(path("base.pool"));
    for (const auto& p : pools) {
        auto vols = r.children(path("base.volume") + "/" + p);
        volumes += static_cast<long long>(vols.size());
        for (const auto& v : vols) snapshots += static_cast<long long>(r.children(path("base.snapshot") + "/" + p + "/" + v).size());
    }
    return {
        {"cluster_health", {{"health", health}, {"messages", messages}}},
        {"node_health", node_health},
        {"maintenance", r.value(path("base.config.maintenance"))},
        {"primary_node", primary},
        {"pvc_version", version},
        {"upstream_ip", r.value(path("base.config.upstream_ip"))},
        {"nodes", nodes_j},
        {"vms", vms_j},
        {"networks", r.children(path("base.network")).size()},
        {"osds", osds_j},
        {"pools", pools.size()},
        {"volumes", volumes},
        {"snapshots", snapshots},
    };
}

Json network_object(const Reader& r, const std::string& vni) {
    return {
        {"vni", to_int(vni).value_or(0)},
        {"description", r.value(path("network.vni", {vni}))},
        {"type", r.value(path("network.type", {vni}))},
        {"mtu", r.value(path("network.mtu", {vni}))},
        {"domain", r.value(path("network.domain", {vni}))},
        {"name_servers", split_all(r.value(path("network.nameservers", {vni})), ',')},
        {"ip6",
         {{"network", r.value(path("network.ip6.network", {vni}))},
          {"gateway", r.value(path("network.ip6.gateway", {vni}))},
          {"dhcp_flag", r.value(path("network.ip6.dhcp", {vni}))}}},
        {"ip4",
         {{"network", r.value(path("network.ip4.network", {vni}))},
          {"gateway", r.value(path("network.ip4.gateway", {vni}))},
          {"dhcp_flag", r.value(path("network.ip4.dhcp", {vni}))},
          {"dhcp_start", r.value(path("network.ip4.dhcp_start", {vni}))},
          {"dhcp_end", r.value(path("network.ip4.dhcp_end", {vni}))}}},
    };
}

Json lease_object(const Reader& r, const std::string& vni, const std::string& mac) {
    if (r.exists(path("lease.mac", {vni, mac})))
        return {{"hostname", r.value(path("lease.hostname", {vni, mac}))},
                {"ip4_address", r.value(path("lease.ip", {vni, mac}))},
                {"mac_address", mac},
                {"timestamp", r.value(path("lease.expiry", {vni, mac}))}};
    return {{"hostname", r.value(path("reservation.hostname", {vni, mac}))},
            {"ip4_address", r.value(path("reservation.ip", {vni, mac}))},
            {"mac_address", mac},
            {"timestamp", "static"}};
}

Json acl_object(const Reader& r, const std::string& vni, const std::string& direction, const std::string& d) {
    return {{"direction", direction},
            {"order", to_int(r.value(path("rule.order", {vni, direction, d}))).value_or(0)},
            {"description", d},
            {"rule", r.value(path("rule.rule", {vni, direction, d}))}};
}

Json osd_object(const Reader& r, const std::string& id) {
    return {{"id", id},
            {"fsid", r.value(path("osd.ofsid", {id}))},
            {"node", r.value(path("osd.node", {id}))},
            {"device", r.value(path("osd.device", {id}))},
            {"is_split", zk::lenient_bool(r.value(path("osd.is_split", {id}))).value_or(false)},
            {"db_device", r.value(path("osd.db_device", {id}))},
            {"stats", parse_json_or(r.value(path("osd.stats", {id})), Json::object())}};
}

Json pool_object(const Reader& r, const std::string& name) {
    auto tier = r.get(path("pool.tier", {name}));
    return {{"name", name},
            {"volume_count", r.children(path("base.volume") + "/" + name).size()},
            {"tier", tier && !tier->empty() ? *tier : std::string("default")},
            {"pgs", r.value(path("pool.pgs", {name}))},
            {"stats", parse_json_or(r.value(path("pool.stats", {name})), Json::object())}};
}

std::string human_size(uint64_t bytes) {
    static const char* units = "BKMGTPEZYRQ";
    long double unit = 1;
    for (int i = 0; units[i]; ++i) {
        long double n = std::ceil(static_cast<long double>(bytes) / unit);
        if (n <= 9999) return std::to_string(static_cast<unsigned long long>(n)) + units[i];
        unit *= 1024;
    }
    return std::to_string(bytes) + "B";
}

Json volume_object(const Reader& r, const std::string& pool, const std::string& volume) {
    Json stats = parse_json_or(r.value(path("volume.stats", {pool, volume})), Json::object());
    if (stats.is_object() && stats.contains("size") && stats["size"].is_number_unsigned())
        stats["size"] = human_size(stats["size"].get<uint64_t>());
    else if (stats.is_object() && stats.contains("size") && stats["size"].is_number_integer() && stats["size"].get<long long>() >= 0)
        stats["size"] = human_size(static_cast<uint64_t>(stats["size"].get<long long>()));
    return {{"name", volume}, {"pool", pool}, {"stats", stats}};
}

}  // namespace pvc::api
