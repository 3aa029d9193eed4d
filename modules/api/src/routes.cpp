#include "routes.hpp"

#include <algorithm>
#include <thread>

#include <re2/re2.h>

#include "pvc/client.hpp"
#include "pvc/client_network.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/services/rbd_volumes.hpp"
#include "pvc/strings.hpp"
#include "pvc/target.hpp"
#include "pvc/zk_sync.hpp"
#include "fetch.hpp"
#include "request.hpp"
#include "route_ctx.hpp"

namespace pvc::api {

using schema::path;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

const char* const not_found_url =
    "The requested URL was not found on the server. If you entered the URL manually please check your spelling and "
    "try again.";

HttpResponse json_response(unsigned status, const Json& j) { return {status, "application/json", dump(j) + "\n", {}}; }
HttpResponse message(unsigned status, const std::string& text) { return json_response(status, Json{{"message", text}}); }
HttpResponse param_error(const std::string& name, const std::string& text) {
    return json_response(400, Json{{"message", Json{{name, text}}}});
}
HttpResponse text_response(unsigned status, std::string body) {
    return {status, "text/plain; charset=utf-8", std::move(body), {}};
}

// The reference API layer's " -> ' replacement of action messages.
std::string quoted(std::string s) {
    std::replace(s.begin(), s.end(), '"', '\'');
    return s;
}

const char* const missing = "Missing required parameter in the query string or the post body";

// A write whose keys together are more than one ZooKeeper request holds
// (zk.hpp): 413 naming the limit, before anything is written.
std::optional<HttpResponse> over_request_limit(const std::vector<zk::KeyValue>& kvs) {
    std::size_t bytes = zk::write_request_bytes(kvs);
    if (bytes <= zk::max_request_bytes) return std::nullopt;
    return message(413, "ERROR: The values to write are " + std::to_string(bytes) +
                            " bytes together, over ZooKeeper's limit of " + std::to_string(zk::max_request_bytes) +
                            " bytes for one transaction.");
}

// Tags of one VM (each is three znodes, written one transaction per tag):
// the most a define may give, and a VM may have.
constexpr std::size_t kMaxTags = 100;

// A relayed exporter's answer serves every scrape for 5 s; a scrape waits at
// most a fetch's deadline (3 s) and a little for one in flight.
constexpr std::chrono::milliseconds kRelayReuse{5000}, kRelayWait{3500};

bool has_control(std::string_view v) {
    return std::any_of(v.begin(), v.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; });
}

// `lines` of the log routes: a non-negative integer (0 = every line), else the 400 returned.
std::optional<HttpResponse> read_lines(const std::optional<std::string>& given, long long& lines) {
    if (!given) return std::nullopt;
    auto v = to_int(*given);
    if (!v) return param_error("lines", "lines must be an integer");
    if (*v < 0) return param_error("lines", "lines must not be negative");
    lines = *v;
    return std::nullopt;
}

struct Param {
    const char* name;
    bool required = false;
    std::vector<std::string> choices = {};
    const char* help = nullptr;
    // The route splits the value into several ZooKeeper values and checks
    // each (a cluster backup): not bounded by one value's limit here.
    bool split = false;
};

struct Route {
    std::vector<std::string> pattern;  // ":x" = an argument
    std::string method;
    Api::Fn fn;
    std::vector<Param> params;
    bool open = false;  // no authentication
};

// Regex matching of `limit`: a regular expression full-matched against each
// candidate; in fuzzy mode (list routes) `.*` is added at each end unless the
// pattern is anchored there with `^`/`$`. Run by RE2, whose matching is
// linear in the candidate's length whatever the pattern (a backtracking
// matcher took seconds per name for `(N|N)*X`, and a few such requests
// held every worker). RE2 reads the syntax of Python's `re` that the
// reference uses, less backreferences and lookarounds (refused as a
// "Regex Error", like any pattern that does not compile).
constexpr size_t kMaxPatternBytes = 1024;
struct Limit {
    std::shared_ptr<const re2::RE2> re;
    std::string error;
    std::stop_token stop;  // the request's: once requested, nothing more matches
};
Limit compile(const std::string& limit, bool fuzzy, std::stop_token stop) {
    Limit l;
    l.stop = std::move(stop);
    if (limit.size() > kMaxPatternBytes) {
        l.error = "the pattern is " + std::to_string(limit.size()) + " bytes, over the limit of " +
                  std::to_string(kMaxPatternBytes) + " bytes";
        return l;
    }
    std::string pattern = limit;
    if (fuzzy) {
        if (pattern.empty() || pattern.front() != '^') pattern = ".*" + pattern;
        else pattern = pattern.substr(1);
        if (pattern.empty() || pattern.back() != '$') pattern += ".*";
        else pattern.pop_back();
    }
    re2::RE2::Options o;
    o.set_log_errors(false);
    o.set_max_mem(8 << 20);  // RE2's default: a bound on the compiled program and its DFA cache
    auto re = std::make_shared<const re2::RE2>(pattern, o);
    if (!re->ok()) l.error = re->error();
    else l.re = std::move(re);
    return l;
}
// A list route's `limit`: no filter when absent or empty, else compiled into
// `l`; a pattern that does not compile is the 400 returned.
std::optional<HttpResponse> read_limit(const std::optional<std::string>& limit, bool fuzzy, Limit& l,
                                       std::stop_token stop) {
    if (!limit || limit->empty()) return std::nullopt;
    l = compile(*limit, fuzzy, std::move(stop));
    if (!l.re) return message(400, "Regex Error: " + l.error);
    return std::nullopt;
}
// Linear, but a pattern whose DFA would explode (`.*N.{200}X`) runs on RE2's
// NFA: a few milliseconds per candidate. A request stopped (client gone, over
// its CPU budget) matches nothing more, so its loop ends at once.
bool full_match(const Limit& l, const std::string& s) {
    return l.re && !l.stop.stop_requested() && re2::RE2::FullMatch(s, *l.re);
}

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::vector<std::string> last_lines(const std::string& text, long long lines) {
    std::vector<std::string> all;
    size_t pos = 0;
    while (true) {
        size_t n = text.find('\n', pos);
        all.push_back(text.substr(pos, n == std::string::npos ? std::string::npos : n - pos));
        if (n == std::string::npos) break;
        pos = n + 1;
    }
    if (lines > 0 && static_cast<size_t>(lines) < all.size()) all.erase(all.begin(), all.end() - lines);
    return all;
}
const std::vector<std::string> kSelectors = target::vm_selector_choices();
const std::vector<std::string> kMethods = {"live", "shutdown", "none"};

const std::vector<Route>& routes() {
    static const std::vector<Route> r = {
        {{}, "GET", &Api::root, {}, true},
        {{"status"}, "GET", &Api::status_get, {}},
        {{"status"}, "POST", &Api::status_post, {{"state", true, {"true", "false"}, "A valid state must be specified."}}},
        {{"status", "primary_node"}, "GET", &Api::primary_node, {}, true},
        {{"node"}, "GET", &Api::node_list, {{"limit"}, {"daemon_state"}, {"coordinator_state"}, {"domain_state"}}},
        {{"node", ":node"}, "GET", &Api::node_get, {}},
        {{"node", ":node", "daemon-state"}, "GET", &Api::node_state_get, {}},
        {{"node", ":node", "coordinator-state"}, "GET", &Api::node_state_get, {}},
        {{"node", ":node", "coordinator-state"}, "POST", &Api::node_coordinator_post,
         {{"state", true, {"primary", "secondary"}, "A valid state must be specified"}}},
        {{"node", ":node", "domain-state"}, "GET", &Api::node_state_get, {}},
        {{"node", ":node", "domain-state"}, "POST", &Api::node_domain_post,
         {{"state", true, {"ready", "flush"}, "A valid state must be specified"}, {"wait"}}},
        {{"node", ":node", "log"}, "GET", &Api::node_log, {{"lines"}}},
        {{"vm"}, "GET", &Api::vm_list, {{"limit"}, {"node"}, {"state"}, {"tag"}, {"negate"}}},
        {{"vm"}, "POST", &Api::vm_define,
         {{"xml", true, {}, "A Libvirt XML document must be specified"}, {"node"}, {"limit"},
          {"selector", false, kSelectors, "A valid selector must be specified"}, {"autostart"},
          {"migration_method", false, kMethods, "A valid migration_method must be specified"}, {"user_tags"},
          {"protected_tags"}}},
        {{"vm", ":vm"}, "GET", &Api::vm_get, {}},
        {{"vm", ":vm"}, "POST", &Api::vm_define,
         {{"xml", true, {}, "A Libvirt XML document must be specified"}, {"node"}, {"limit"},
          {"selector", false, kSelectors, "A valid selector must be specified"}, {"autostart"},
          {"migration_method", false, kMethods, "A valid migration_method must be specified"}, {"user_tags"},
          {"protected_tags"}}},
        {{"vm", ":vm"}, "PUT", &Api::vm_modify, {{"xml", true, {}, "A Libvirt XML document must be specified"}, {"restart"}}},
        {{"vm", ":vm"}, "DELETE", &Api::vm_delete, {{"delete_disks"}}},
        {{"vm", ":vm", "state"}, "GET", &Api::vm_state_get, {}},
        {{"vm", ":vm", "state"}, "POST", &Api::vm_state_post,
         {{"state", true, {"start", "shutdown", "stop", "restart", "disable"}, "A valid state must be specified"},
          {"force"}, {"wait"}}},
        {{"vm", ":vm", "node"}, "GET", &Api::vm_node_get, {}},
        {{"vm", ":vm", "node"}, "POST", &Api::vm_node_post,
         {{"action", true, {"migrate", "unmigrate", "move"}, "A valid action must be specified"}, {"node"}, {"force"},
          {"wait"}, {"force_live"}}},
        {{"vm", ":vm", "meta"}, "GET", &Api::vm_meta_get, {}},
        {{"vm", ":vm", "meta"}, "POST", &Api::vm_meta_post,
         {{"limit"}, {"selector", false, kSelectors, "A valid selector must be specified"}, {"autostart"}, {"profile"},
          {"migration_method", false, kMethods, "A valid migration_method must be specified"}}},
        {{"vm", ":vm", "tags"}, "GET", &Api::vm_tags_get, {}},
        {{"vm", ":vm", "tags"}, "POST", &Api::vm_tags_post, {{"action"}, {"tag"}, {"protected"}}},
        {{"vm", ":vm", "console"}, "GET", &Api::vm_console, {{"lines"}}},
        {{"vm", ":vm", "locks"}, "POST", &Api::vm_locks, {}},
        {{"vm", ":vm", "device"}, "POST", &Api::vm_device,
         {{"xml", true, {}, "A Libvirt XML device document must be specified"}}},
        {{"vm", ":vm", "device"}, "DELETE", &Api::vm_device,
         {{"xml", true, {}, "A Libvirt XML device document must be specified"}}},
        {{"vm", ":vm", "rename"}, "POST", &Api::vm_rename, {{"new_name"}}},
        {{"vm", ":vm", "backup"}, "POST", &Api::vm_backup_create,
         {{"backup_path", true, {}, "A local filesystem path on the primary coordinator must be specified"},
          {"incremental_parent"},
          {"retain_snapshot"}}},
        {{"vm", ":vm", "backup"}, "DELETE", &Api::vm_backup_remove,
         {{"backup_path", true, {}, "A local filesystem path on the primary coordinator must be specified"},
          {"backup_datestring", true, {}, "A backup datestring must be specified"}}},
        {{"vm", ":vm", "restore"}, "POST", &Api::vm_restore,
         {{"backup_path", true, {}, "A local filesystem path on the primary coordinator must be specified"},
          {"backup_datestring", true, {}, "A backup datestring must be specified"},
          {"retain_snapshot"}}},
        {{"tasks"}, "GET", &Api::task_list, {}},
        {{"initialize"}, "POST", &Api::cluster_initialize,
         {{"overwrite"},
          {"yes-i-really-mean-it", true, {},
           "Initialization is destructive; please confirm with the argument 'yes-i-really-mean-it'."}}},
        {{"backup"}, "GET", &Api::cluster_backup, {}},
        {{"restore"}, "POST", &Api::cluster_restore,
         {{"yes-i-really-mean-it", true, {},
           "Restore is destructive; please confirm with the argument 'yes-i-really-mean-it'."},
          {"cluster_data", true, {}, "A cluster JSON backup must be provided.", true}}},
        {{"tasks", ":task"}, "GET", &Api::task_get, {}},
        {{"network"}, "GET", &Api::network_list, {{"limit"}}},
        {{"network", ":vni"}, "GET", &Api::network_get, {}},
        {{"network", ":vni", "lease"}, "GET", &Api::lease_list, {{"limit"}, {"static"}}},
        {{"network", ":vni", "lease", ":mac"}, "GET", &Api::lease_get, {}},
        {{"network", ":vni", "acl"}, "GET", &Api::acl_list,
         {{"limit"}, {"direction", false, {"in", "out"}, "A valid direction must be specified."}}},
        {{"network", ":vni", "acl", ":description"}, "GET", &Api::acl_get, {}},
        {{"network"}, "POST", &Api::network_add,
         {{"vni", true}, {"description", true}, {"nettype", true, {"managed", "bridged"}, "A valid nettype must be specified"},
          {"mtu"}, {"domain"}, {"name_servers"}, {"ip4_network"}, {"ip4_gateway"}, {"ip6_network"}, {"ip6_gateway"},
          {"dhcp4"}, {"dhcp4_start"}, {"dhcp4_end"}}},
        {{"network", ":vni"}, "POST", &Api::network_add,
         {{"description", true}, {"nettype", true, {"managed", "bridged"}, "A valid nettype must be specified"},
          {"mtu"}, {"domain"}, {"name_servers"}, {"ip4_network"}, {"ip4_gateway"}, {"ip6_network"}, {"ip6_gateway"},
          {"dhcp4"}, {"dhcp4_start"}, {"dhcp4_end"}}},
        {{"network", ":vni"}, "PUT", &Api::network_modify,
         {{"description"}, {"mtu"}, {"domain"}, {"name_servers"}, {"ip4_network"}, {"ip4_gateway"}, {"ip6_network"},
          {"ip6_gateway"}, {"dhcp4"}, {"dhcp4_start"}, {"dhcp4_end"}}},
        {{"network", ":vni"}, "DELETE", &Api::network_delete, {}},
        {{"network", ":vni", "lease"}, "POST", &Api::lease_add, {{"macaddress", true}, {"ipaddress", true}, {"hostname"}}},
        {{"network", ":vni", "lease", ":mac"}, "POST", &Api::lease_add, {{"ipaddress", true}, {"hostname"}}},
        {{"network", ":vni", "lease", ":mac"}, "DELETE", &Api::lease_delete, {}},
        {{"network", ":vni", "acl"}, "POST", &Api::acl_add,
         {{"description", true, {}, "A whitespace-free description must be specified."},
          {"rule", true, {}, "A rule must be specified."},
          {"direction", false, {"in", "out"}, "A valid direction must be specified."}, {"order"}}},
        {{"network", ":vni", "acl", ":description"}, "POST", &Api::acl_add,
         {{"rule", true, {}, "A rule must be specified."},
          {"direction", false, {"in", "out"}, "A valid direction must be specified."}, {"order"}}},
        {{"network", ":vni", "acl", ":description"}, "DELETE", &Api::acl_delete, {}},
        {{"sriov", "pf"}, "GET", &Api::sriov_pf_list, {{"node", true, {}, "A valid node must be specified."}}},
        {{"sriov", "pf", ":node"}, "GET", &Api::sriov_pf_list, {}},
        {{"sriov", "vf"}, "GET", &Api::sriov_vf_list,
         {{"node", true, {}, "A valid node must be specified."}, {"pf", false, {}, "A PF parent may be specified."}}},
        {{"sriov", "vf", ":node"}, "GET", &Api::sriov_vf_list, {{"pf", false, {}, "A PF parent may be specified."}}},
        {{"sriov", "vf", ":node", ":vf"}, "GET", &Api::sriov_vf_list, {}},
        {{"sriov", "vf", ":node", ":vf"}, "PUT", &Api::sriov_vf_set,
         {{"vlan_id"}, {"vlan_qos"}, {"tx_rate_min"}, {"tx_rate_max"},
          {"link_state", false, {"auto", "enable", "disable"}, "A valid state must be specified"}, {"spoof_check"},
          {"trust"}, {"query_rss"}}},
        {{"storage", "ceph", "status"}, "GET", &Api::ceph_status, {}},
        {{"storage", "ceph", "utilization"}, "GET", &Api::ceph_util, {}},
        {{"storage", "ceph", "osd"}, "GET", &Api::osd_list, {{"limit"}}},
        {{"storage", "ceph", "osd", ":osd"}, "GET", &Api::osd_get, {}},
        {{"storage", "ceph", "pool"}, "GET", &Api::pool_list, {{"limit"}}},
        {{"storage", "ceph", "pool", ":pool"}, "GET", &Api::pool_get, {}},
        {{"storage", "ceph", "volume"}, "GET", &Api::volume_list, {{"limit"}, {"pool"}}},
        {{"storage", "ceph", "volume", ":pool", ":volume"}, "GET", &Api::volume_get, {}},
        {{"storage", "ceph", "snapshot"}, "GET", &Api::snapshot_list, {{"pool"}, {"volume"}, {"limit"}}},
        // Storage writes (routes_storage.cpp)
        {{"storage", "ceph", "pool"}, "POST", &Api::pool_add,
         {{"pool", true, {}, "A pool name must be specified."},
          {"pgs", true, {}, "A placement group count must be specified."},
          {"replcfg", true, {}, "A valid replication configuration must be specified."},
          {"tier", false, {"hdd", "ssd", "nvme", "default"}, "A valid tier must be specified"}}},
        {{"storage", "ceph", "pool", ":pool"}, "POST", &Api::pool_add,
         {{"pgs", true, {}, "A placement group count must be specified."},
          {"replcfg", true, {}, "A valid replication configuration must be specified."},
          {"tier", false, {"hdd", "ssd", "nvme", "default"}, "A valid tier must be specified"}}},
        {{"storage", "ceph", "pool", ":pool"}, "PUT", &Api::pool_set_pgs,
         {{"pgs", true, {}, "A placement group count must be specified."}}},
        {{"storage", "ceph", "pool", ":pool"}, "DELETE", &Api::pool_delete,
         {{"yes-i-really-mean-it", true, {}, "Please confirm that 'yes-i-really-mean-it'."}}},
        {{"storage", "ceph", "volume"}, "POST", &Api::volume_add,
         {{"volume", true, {}, "A volume name must be specified."},
          {"pool", true, {}, "A valid pool name must be specified."},
          {"size", true, {}, "A volume size in bytes (B implied or with SI suffix k/M/G/T) must be specified."}}},
        {{"storage", "ceph", "volume", ":pool", ":volume"}, "POST", &Api::volume_add,
         {{"size", true, {}, "A volume size in bytes (or with k/M/G/T suffix) must be specified."}}},
        {{"storage", "ceph", "volume", ":pool", ":volume"}, "PUT", &Api::volume_modify, {{"new_size"}, {"new_name"}}},
        {{"storage", "ceph", "volume", ":pool", ":volume"}, "DELETE", &Api::volume_delete, {}},
        {{"storage", "ceph", "volume", ":pool", ":volume", "clone"}, "POST", &Api::volume_clone,
         {{"new_volume", true, {}, "A new volume name must be specified."}}},
        {{"storage", "ceph", "volume", ":pool", ":volume", "upload"}, "POST", &Api::volume_upload,
         {{"image_format", true, {}, "A source image format must be specified."}, {"file_size"}}},
        {{"storage", "ceph", "snapshot"}, "POST", &Api::snapshot_add,
         {{"snapshot", true, {}, "A snapshot name must be specified."},
          {"volume", true, {}, "A volume name must be specified."},
          {"pool", true, {}, "A pool name must be specified."}}},
        {{"storage", "ceph", "snapshot", ":pool", ":volume", ":snapshot"}, "POST", &Api::snapshot_add, {}},
        {{"storage", "ceph", "snapshot", ":pool", ":volume", ":snapshot"}, "GET", &Api::snapshot_get, {}},
        {{"storage", "ceph", "snapshot", ":pool", ":volume", ":snapshot"}, "PUT", &Api::snapshot_modify,
         {{"new_name", true, {}, "A new name must be specified."}}},
        {{"storage", "ceph", "snapshot", ":pool", ":volume", ":snapshot"}, "DELETE", &Api::snapshot_delete, {}},
        {{"storage", "ceph", "osd", ":osd", "state"}, "GET", &Api::osd_state_get, {}},
        {{"storage", "ceph", "osd", ":osd", "state"}, "POST", &Api::osd_state_post,
         {{"state", true, {"in", "out"}, "A valid state must be specified."}}},
        {{"storage", "ceph", "option"}, "POST", &Api::osd_option,
         {{"option", true, {}, "A valid option must be specified."},
          {"action", true, {"set", "unset"}, "A valid action must be specified."}}},
        // OSD lifecycle and the storage benchmark (routes_osd.cpp): node tasks
        {{"storage", "ceph", "osddb"}, "POST", &Api::osd_db_vg_add,
         {{"node", true, {}, "A valid node must be specified."},
          {"device", true, {}, "A valid device or detect string must be specified."}}},
        {{"storage", "ceph", "osd"}, "POST", &Api::osd_add,
         {{"node", true, {}, "A valid node must be specified."},
          {"device", true, {}, "A valid device or detect string must be specified."},
          {"weight", true, {}, "An OSD weight must be specified."}, {"ext_db_ratio"}, {"ext_db_size"}, {"osd_count"}}},
        {{"storage", "ceph", "osd", ":osd"}, "POST", &Api::osd_replace,
         {{"new_device", true, {}, "A valid device or detect string must be specified."}, {"old_device"}, {"weight"},
          {"ext_db_ratio"}, {"ext_db_size"},
          {"yes-i-really-mean-it", true, {}, "Please confirm that 'yes-i-really-mean-it'."}}},
        {{"storage", "ceph", "osd", ":osd"}, "PUT", &Api::osd_refresh,
         {{"device", true, {}, "A valid device or detect string must be specified."}}},
        {{"storage", "ceph", "osd", ":osd"}, "DELETE", &Api::osd_remove,
         {{"force"}, {"yes-i-really-mean-it", true, {}, "Please confirm that 'yes-i-really-mean-it'."}}},
        {{"storage", "ceph", "benchmark"}, "POST", &Api::benchmark_run,
         {{"pool", true, {}, "A valid pool must be specified."}}},
        {{"storage", "ceph", "benchmark"}, "GET", &Api::benchmark_list, {{"job"}}},
        {{"metrics"}, "GET", &Api::metrics_all, {}, true},
        {{"metrics", "health"}, "GET", &Api::metrics_health, {}, true},
        {{"metrics", "resource"}, "GET", &Api::metrics_resource, {}, true},
        {{"metrics", "ceph"}, "GET", &Api::metrics_ceph, {}, true},
        {{"metrics", "zookeeper"}, "GET", &Api::metrics_zookeeper, {}, true},
        {{"metrics", "daemon"}, "GET", &Api::metrics_daemon, {}, true},
    };
    return r;
}

bool match(const std::vector<std::string>& pattern, const std::vector<std::string>& segs, std::vector<std::string>& args) {
    if (pattern.size() != segs.size()) return false;
    std::vector<std::string> a;
    for (size_t i = 0; i < segs.size(); ++i) {
        if (!pattern[i].empty() && pattern[i][0] == ':') {
            // A segment holding '/' (sent as %2F) cannot be a name.
            if (segs[i].empty() || segs[i].find('/') != std::string::npos) return false;
            a.push_back(segs[i]);
        } else if (pattern[i] != segs[i]) {
            return false;
        }
    }
    args = std::move(a);
    return true;
}

}  // namespace

Api::Api(std::shared_ptr<zk::Session> zk, ClusterView& view, ApiSettings settings, Logger log, DaemonFigures& figures,
         ServiceRegistry* services)
    : zk_(std::move(zk)), view_(view), settings_(std::move(settings)), log_(std::move(log)), figures_(figures),
      services_(services), ceph_relay_(kRelayReuse, kRelayWait), zookeeper_relay_(kRelayReuse, kRelayWait) {
    vms_.set_metric_builder(vm_metric_lines);
}

HttpResponse Api::handle(const HttpRequest& req, std::stop_token stop) {
    Target t = parse_target(req.target);
    if (!t.under_api) return message(404, not_found_url);
    const Route* route = nullptr;
    bool path_known = false;
    std::vector<std::string> args;
    for (const auto& r : routes()) {
        if (!match(r.pattern, t.segments, args)) continue;
        path_known = true;
        if (r.method == req.method || (req.method == "HEAD" && r.method == "GET")) {
            route = &r;
            break;
        }
    }
    if (!route) return path_known ? message(405, "The method is not allowed for the requested URL.") : message(404, not_found_url);

    // Authentication: X-Api-Key, compared exactly; never logged.
    if (!route->open && settings_.auth_enabled) {
        if (!req.api_key) return message(401, "X-Api-Key Authentication required.");
        bool ok = false;
        for (const auto& tok : settings_.tokens) ok = ok || (!tok.token.empty() && tok.token == *req.api_key);
        if (!ok) return message(401, "X-Api-Key Authentication failed.");
    }

    // A path argument that cannot be one znode name names nothing (never a path).
    for (const auto& a : args)
        if (!client::is_safe_name(a)) return message(404, not_found_url);
    Ctx c{req, std::move(args), {}, stop};
    c.params.parse(t.query);
    if (lower(req.content_type).rfind("application/x-www-form-urlencoded", 0) == 0) c.params.parse(req.body);
    // Parameters: unknown ones ignored, as the reference's non-strict
    // parser does (a newer client sends parameters this API lacks, e.g.
    // `migration_max_downtime` on `vm define`/`vm meta`; refusing them would
    // refuse its whole request); required ones present, choices exact.
    // One debug line per request at most, in the local log only (any client
    // can send thousands of names): the first few distinct names (never a
    // value; an unprintable one not as given) and how many there were.
    std::vector<std::string> unknown;
    size_t unknown_count = 0;
    for (const auto& [k, v] : c.params.pairs()) {
        bool known = false;
        for (const auto& p : route->params) known = known || k == p.name;
        if (known) continue;
        ++unknown_count;
        bool printable = k.size() <= 64 && std::all_of(k.begin(), k.end(), [](char ch) { return ch > 0x20 && ch < 0x7f; });
        std::string name = printable ? k : std::string("(unprintable name)");
        if (unknown.size() < 8 && std::find(unknown.begin(), unknown.end(), name) == unknown.end())
            unknown.push_back(std::move(name));
    }
    if (unknown_count > 0 && log_.debug_enabled()) {
        std::string where, names;
        for (const auto& seg : route->pattern) where += "/" + seg;
        for (const auto& n : unknown) names += (names.empty() ? "" : ", ") + n;
        log_.local().debug("API {} {}: ignoring {} unknown parameter(s): {}{}", req.method, where, unknown_count, names,
                           unknown_count > unknown.size() ? ", ..." : "");
    }
    for (const auto& p : route->params) {
        // What ZooKeeper cannot hold is refused before anything is read or
        // written (the session would refuse it too, zk.hpp: this names it).
        for (const auto& each : c.params.all(p.name))
            if (!p.split && each.size() > zk::max_value_bytes)
                return message(413, "ERROR: The value of '" + std::string(p.name) + "' is " +
                                        std::to_string(each.size()) + " bytes, over ZooKeeper's limit of " +
                                        std::to_string(zk::max_value_bytes) + " bytes for one value.");
        auto v = c.params.get(p.name);
        if (!v) {
            if (p.required) return param_error(p.name, p.help ? p.help : missing);
            continue;
        }
        if (!p.choices.empty() && std::find(p.choices.begin(), p.choices.end(), *v) == p.choices.end())
            return param_error(p.name, p.help ? p.help : missing);
    }
    if (!view_.wait_ready(10s)) return message(503, "The cluster view is not loaded yet; try again");
    // Read your writes, and every other client's. The view trails
    // ZooKeeper by the time its watches take (a VM another client had just
    // defined was "not found" for 77 ms). So what ZooKeeper held when a
    // request arrived is confirmed against ZooKeeper itself (a sync, then
    // reads; docs/wire-contract.md §6.11):
    // - a write (every route but GET) reads from ZooKeeper from the start:
    //   its checks and decisions never rest on the view;
    // - a read of a named object (a GET with path arguments) that the view
    //   answers 404 or 400 (not found, or not found yet) is answered again
    //   from ZooKeeper.
    // Lists (GET without path arguments) answer from the view alone.
    //
    // Nor does a read answer from a part of the view still loading: a new
    // object's znodes arrive one watch at a time, so a network created with
    // two ACLs can be listed with its ACL names and one rule read, and an
    // answer then would show one ACL after an earlier answer (confirmed)
    // showed two. Such an answer is built again once the view has loaded
    // what it listed (≤ 2 s), else from ZooKeeper (a list, which reads the
    // view alone, then answers from the view as it is).
    bool write = route->method != "GET";
    if (write)
        if (auto bad = confirm(c)) return *bad;
    uint64_t partial = ClusterView::partial_reads();
    HttpResponse res = (this->*(route->fn))(c);
    if (!write && !c.through && ClusterView::partial_reads() != partial && !c.stop.stop_requested()) {
        if (view_.wait_settled(2s)) {
            partial = ClusterView::partial_reads();
            res = (this->*(route->fn))(c);
        }
        if (ClusterView::partial_reads() != partial && !c.stop.stop_requested()) {
            if (auto bad = confirm(c)) return *bad;
            figures_.confirmed_reads++;
            res = (this->*(route->fn))(c);
        }
    }
    if (!write && !c.through && !c.args.empty() && (res.status == 404 || res.status == 400) &&
        !c.stop.stop_requested()) {
        if (auto bad = confirm(c)) return *bad;
        figures_.confirmed_reads++;
        res = (this->*(route->fn))(c);
    }
    return res;
}

std::string Api::read_key(const std::string& p) { return zk_->get(p).value_or(""); }

ClusterView::Reader Api::reader(const Ctx& c) const {
    return c.through ? ClusterView::read_through(*zk_) : view_.read();
}

std::optional<HttpResponse> Api::confirm(Ctx& c) {
    try {
        zk::sync(*zk_);
    } catch (const zk::Error& e) {
        return message(503, std::string("ERROR: ZooKeeper could not confirm the cluster's state: ") + e.what());
    }
    c.through = true;
    return std::nullopt;
}

void Api::settle(const std::string& p, const std::optional<std::string>& value) {
    settle(std::vector<std::pair<std::string, std::optional<std::string>>>{{p, value}});
}

void Api::settle(const std::vector<zk::KeyValue>& kvs) {
    std::vector<std::pair<std::string, std::optional<std::string>>> want(kvs.begin(), kvs.end());
    settle(want);
}

void Api::settle(const std::vector<std::pair<std::string, std::optional<std::string>>>& want) {
    auto until = Clock::now() + 2s;  // one bound for all the keys
    while (Clock::now() < until) {
        {
            auto r = view_.read();
            bool all = std::all_of(want.begin(), want.end(), [&](const auto& kv) {
                const auto& [p, value] = kv;
                if (is_excluded(p)) return true;  // not mirrored (a console log)
                if (value) return r.get(p) == value;
                // A removal is settled once the parent's list of children has
                // lost it too: lists (GET /network) are read from that list,
                // which the view learns of by a watch of its own.
                if (r.exists(p)) return false;
                auto slash = p.rfind('/');
                if (slash == std::string::npos || slash == 0) return true;
                auto kids = r.children(p.substr(0, slash));
                return std::find(kids.begin(), kids.end(), p.substr(slash + 1)) == kids.end();
            });
            if (all) return;
        }
        std::this_thread::sleep_for(5ms);
    }
}

// ---------------------------------------------------------------- cluster

HttpResponse Api::root(Ctx&) { return message(200, "PVC API version 1.0"); }

HttpResponse Api::status_get(Ctx&) {
    auto r = view_.read();
    return json_response(200, cluster_status(r, vms_));
}

HttpResponse Api::status_post(Ctx& c) {
    std::string want = *c.p("state");
    if (read_key(path("base.config.maintenance")) == want)
        return message(200, want == "true" ? "Cluster is already in maintenance mode" : "Cluster is already in normal mode");
    if (!client::set_maintenance(*zk_, want == "true")) return message(500, "Internal Server Error");
    settle(path("base.config.maintenance"), want);
    return message(200, want == "true" ? "Successfully set cluster in maintenance mode"
                                       : "Successfully set cluster in normal mode");
}

HttpResponse Api::primary_node(Ctx&) {
    auto r = view_.read();
    std::string p = r.value(path("base.config.primary_node"));
    if (p.empty() || p == "none") return {204, "application/json", "", {}};
    return json_response(200, Json{{"primary_node", p}});
}

// ---------------------------------------------------------------- nodes

HttpResponse Api::node_list(Ctx& c) {
    auto limit = c.p("limit");
    Limit l;
    if (auto bad = read_limit(limit, true, l, c.stop)) return *bad;
    auto r = view_.read();
    Json out = Json::array();
    for (const auto& n : r.children(path("base.node"))) {
        if (l.re && !full_match(l, n)) continue;
        Json o = node_object(r, n);
        bool any = false, keep = false;
        for (const char* f : {"daemon_state", "coordinator_state", "domain_state"}) {
            auto v = c.p(f);
            if (!v || v->empty()) continue;
            any = true;
            keep = keep || o[f] == *v;
        }
        if (any && !keep) continue;
        out.push_back(std::move(o));
    }
    if (out.empty()) return message(404, "Node not found.");
    return json_response(200, out);
}

HttpResponse Api::node_get(Ctx& c) {
    Limit l = compile(c.args[0], false, c.stop);
    if (!l.re) return message(400, "Regex Error: " + l.error);
    auto r = reader(c);
    Json out = Json::array();
    for (const auto& n : r.children(path("base.node")))
        if (full_match(l, n)) out.push_back(node_object(r, n));
    if (out.empty()) return message(404, "Node not found.");
    return json_response(200, out);
}

HttpResponse Api::node_state_get(Ctx& c) {
    const std::string& n = c.args[0];
    auto segs = parse_target(c.req.target).segments;
    std::string which = segs.back();
    auto r = reader(c);
    if (!r.exists(path("node.name", {n}))) return message(404, "Node not found.");
    if (which == "daemon-state") return json_response(200, Json{{"name", n}, {"daemon_state", r.value(path("node.state.daemon", {n}))}});
    if (which == "coordinator-state")
        return json_response(200, Json{{"name", n}, {"coordinator_state", r.value(path("node.state.router", {n}))}});
    return json_response(200, Json{{"name", n}, {"domain_state", r.value(path("node.state.domain", {n}))}});
}

HttpResponse Api::node_coordinator_post(Ctx& c) {
    const std::string& n = c.args[0];
    std::string want = *c.p("state");
    if (!zk_->exists(path("node.name", {n})))
        return message(400, "ERROR: No node named " + n + " is present in the cluster.");
    if (read_key(path("node.mode", {n})) == "hypervisor")
        return message(400, "ERROR: Cannot change coordinator state on non-coordinator node " + n);
    if (read_key(path("node.state.daemon", {n})) != "run") return message(400, "ERROR: Node " + n + " is not active");
    if (read_key(path("node.state.router", {n})) == want)
        return message(200, "Node " + n + " is already in " + want + " coordinator state.");
    if (!client::request_router_state(*zk_, n, want == "primary")) return message(500, "Internal Server Error");
    return message(200, "Setting node " + n + " in " + want + " coordinator state.");
}

HttpResponse Api::node_domain_post(Ctx& c) {
    const std::string& n = c.args[0];
    if (!zk_->exists(path("node.name", {n})))
        return message(400, "ERROR: No node named " + n + " is present in the cluster.");
    bool flush = *c.p("state") == "flush";
    const std::string key = path("node.state.domain", {n});
    std::string current = read_key(key);
    if (flush && current == "flushed") return message(200, "Node " + n + " is already flushed.");
    if (!flush && current == "ready") return message(200, "Node " + n + " is already ready.");
    std::string request = flush ? "flush" : "unflush";
    if (!client::set_node_domain_state(*zk_, n, request)) return message(500, "Internal Server Error");
    settle(key, request);
    if (!c.flag("wait"))
        return message(200, flush ? "Removing node " + n + " from active service." : "Restoring node " + n + " to active service.");
    while (!c.stop.stop_requested() && read_key(key) == request) std::this_thread::sleep_for(1s);
    return message(200, flush ? "Removed node " + n + " from active service." : "Restored node " + n + " to active service.");
}

HttpResponse Api::node_log(Ctx& c) {
    const std::string& n = c.args[0];
    long long lines = 10;
    if (auto bad = read_lines(c.p("lines"), lines)) return *bad;
    if (!zk_->exists(path("node.name", {n})))
        return message(400, "ERROR: No node named " + n + " is present in the cluster.");
    std::string text = read_key(path("logs.messages", {n}));
    return json_response(200, Json{{"name", n}, {"data", join(last_lines(text, lines), "\n")}});
}

// ---------------------------------------------------------------- VMs

std::optional<std::string> Api::find_vm(Ctx& c, const std::string& id) {
    auto r = reader(c);
    if (is_uuid(id) && r.exists(path("domain.name", {lower(id)}))) return lower(id);
    auto uuids = r.children(path("base.domain"));
    if (r.through()) {  // from ZooKeeper: the names in one round trip, not one per VM
        std::vector<std::string> names;
        for (const auto& u : uuids) names.push_back(path("domain.name", {u}));
        r.prefetch(names);
    }
    for (const auto& u : uuids)
        if (r.value(path("domain.name", {u})) == id) return u;
    return std::nullopt;
}

HttpResponse Api::lists_vms(Ctx& c, const std::optional<std::string>& limit, bool exact) {
    Limit l;
    std::optional<std::string> uuid_limit;
    if (limit && !limit->empty()) {
        if (is_uuid(*limit)) {
            uuid_limit = lower(*limit);
        } else {
            l = compile(*limit, !exact, c.stop);
            if (!l.re) return message(400, "Regex Error: " + l.error);
        }
    }
    auto r = reader(c);
    auto node = c.p("node"), state = c.p("state"), tag = c.p("tag");
    bool negate = c.flag("negate");
    if (!exact) {
        if (node && (!client::is_safe_name(*node) || !r.exists(path("node.name", {*node}))))
            return message(400, "Specified node \"" + *node + "\" is invalid.");
        static const std::vector<std::string> states = {"start", "restart", "shutdown", "stop", "disable",
                                                        "fail", "migrate", "unmigrate", "provision"};
        if (state && std::find(states.begin(), states.end(), *state) == states.end())
            return message(400, "VM state \"" + *state + "\" is not valid.");
    }
    bool unfiltered = !exact && !l.re && !uuid_limit && !node && !state && !tag;
    auto build = [&] {
        std::vector<std::pair<std::string, std::string>> picked;  // (name, uuid)
        for (const auto& u : r.children(path("base.domain"))) {
            // The client left, ran over its budget or the server stops:
            // nobody reads the answer (the unfiltered list is kept for the
            // next request, so it is always built whole).
            if (!unfiltered && c.stop.stop_requested()) return std::string();
            std::string name = r.value(path("domain.name", {u}));
            if (uuid_limit && *uuid_limit != u && *uuid_limit != name) continue;
            if (l.re && !full_match(l, name)) continue;
            if (!exact) {
                if (tag) {
                    auto tags = r.children(path("domain.meta.tags", {u}));
                    bool has = std::find(tags.begin(), tags.end(), *tag) != tags.end();
                    if (has == negate) continue;
                }
                if (node && (r.value(path("domain.node", {u})) == *node) == negate) continue;
                if (state && (r.value(path("domain.state", {u})) == *state) == negate) continue;
            }
            picked.emplace_back(std::move(name), u);
        }
        std::sort(picked.begin(), picked.end());
        std::string body = "[";
        bool any = false;
        for (const auto& [name, u] : picked) {
            auto text = vms_.get(r, u);
            if (!text) continue;  // cannot be read: left out, as the reference does
            if (any) body += ", ";
            body += *text;
            any = true;
        }
        return any ? body + "]\n" : std::string();
    };
    // The whole list is kept until something under /domains changes.
    std::string body = unfiltered ? *vms_.list_body(r, build) : build();
    if (body.empty()) return message(404, "VM not found.");
    return {200, "application/json", std::move(body), {}};
}

HttpResponse Api::vm_list(Ctx& c) { return lists_vms(c, c.p("limit"), false); }
HttpResponse Api::vm_get(Ctx& c) { return lists_vms(c, c.args[0], true); }

std::optional<std::string> Api::choose_target(Ctx& c, const std::string& node_limit, const std::string& selector,
                                              const std::string& current) {
    auto r = reader(c);
    std::vector<target::NodeFigures> nodes;
    for (const auto& n : r.children(path("base.node"))) {
        target::NodeFigures f;
        f.name = n;
        f.daemon_state = r.value(path("node.state.daemon", {n}));
        f.domain_state = r.value(path("node.state.domain", {n}));
        auto l = [&](std::string_view k) -> std::optional<long> {
            if (auto v = to_int(r.value(path(k, {n})))) return static_cast<long>(*v);
            return std::nullopt;
        };
        f.memfree = l("node.memory.free");
        f.memused = l("node.memory.used");
        f.memprov = l("node.memory.provisioned");
        f.vcpualloc = l("node.vcpu.allocated");
        f.domainscount = l("node.count.provisioned_domains");
        auto load = r.get(path("node.cpu.load", {n}));
        if (load && !load->empty()) f.cpuload = to_float(*load);
        nodes.push_back(std::move(f));
    }
    target::Request req;
    if (!node_limit.empty()) req.node_limit = node_limit;
    if (!selector.empty()) req.node_selector = selector;
    req.cluster_selector = r.value(path("base.config.migration_target_selector"));
    req.current_node = current;
    return target::choose(nodes, req);
}

namespace {
// Memory and vCPU admission of the reference (define, modify): the raw
// <memory> number against the node's MiB total, units ignored (the reference's quirk, kept).
std::optional<std::string> admission(const Reader& r, const std::string& xml, const DomainXml& x, const std::string& node,
                                     const std::string& what) {
    // The first <memory ...>text</memory>, scanned by hand (no regex over a
    // client's document).
    std::optional<long long> raw;
    for (size_t at = xml.find("<memory"); at != std::string::npos && !raw; at = xml.find("<memory", at + 1)) {
        char after = at + 7 < xml.size() ? xml[at + 7] : '\0';
        if (after != '>' && after != ' ' && after != '\t' && after != '\n' && after != '\r') continue;
        size_t open_end = xml.find('>', at);
        size_t close = xml.find("</memory>", at);
        if (open_end == std::string::npos || close == std::string::npos || close < open_end) break;
        raw = to_int(xml.substr(open_end + 1, close - open_end - 1));
        if (!raw) break;
    }
    long long memory = raw ? *raw : (x.memory_kib ? static_cast<long long>(*x.memory_kib / 1024) : 0);
    long long total = to_int(r.value(path("node.memory.total", {node}))).value_or(0);
    if (memory >= total)
        return "ERROR: " + what + " specifies more memory (" + std::to_string(memory) + " MiB) than node '" + node +
               "' has available (" + std::to_string(total) + " MiB).";
    std::string st = r.value(path("node.data.static", {node}));
    long long cpus = to_int(st.substr(0, st.find(' '))).value_or(0);
    if (cpus - 2 <= x.vcpus.value_or(0))
        return "ERROR: " + what + " specifies more vCPUs (" + std::to_string(x.vcpus.value_or(0)) + ") than node '" + node +
               "' has available (" + std::to_string(cpus) + " minus 2).";
    return std::nullopt;
}
}  // namespace

HttpResponse Api::vm_define(Ctx& c) {
    std::string xml = *c.p("xml");
    DomainXml x;
    try {
        x = parse_domain_xml(xml);
    } catch (const DomainXmlError& e) {
        return message(400, quoted(std::string("XML is malformed or incorrect: ") + e.what()));
    }
    if (!x.uuid || !is_uuid(*x.uuid)) return message(400, "XML is malformed or incorrect: no valid <uuid> element");
    if (!client::is_safe_name(x.name) || x.name.size() > 255)
        return message(400, "XML is malformed or incorrect: no valid <name> element");
    if (!x.memory_kib || !x.vcpus) return message(400, "XML is malformed or incorrect: no valid <memory> or <vcpu> element");
    std::string uuid = lower(*x.uuid);
    auto user_tags = c.params.all("user_tags"), protected_tags = c.params.all("protected_tags");
    if (user_tags.size() + protected_tags.size() > kMaxTags)
        return param_error(user_tags.empty() ? "protected_tags" : "user_tags",
                           "Too many tags: " + std::to_string(user_tags.size() + protected_tags.size()) +
                               " given, at most " + std::to_string(kMaxTags) + " (user_tags and protected_tags together)");
    for (const auto& t : user_tags)
        if (!client::is_safe_name(t) || t.size() > 255) return param_error("user_tags", "Invalid tag name");
    for (const auto& t : protected_tags)
        if (!client::is_safe_name(t) || t.size() > 255) return param_error("protected_tags", "Invalid tag name");
    if (zk_->exists(path("domain.name", {uuid})) || find_vm(c, x.name))
        return message(400, "ERROR: Specified VM '" + x.name + "' or UUID '" + uuid + "' matches an existing VM on the cluster");
    std::string node = c.p("node").value_or("");
    {
        auto r = reader(c);
        if (!node.empty() && (!client::is_safe_name(node) || !r.exists(path("node.name", {node}))))
            return message(400, "ERROR: Specified node '" + node + "' is invalid.");
    }
    std::string selector = c.p("selector").value_or("");
    if (node.empty()) {
        auto t = choose_target(c, "", selector == "none" ? "" : selector, "");
        if (!t) return message(400, "ERROR: Could not find a valid target node for VM '" + x.name + "'.");
        node = *t;
    }
    {
        auto r = reader(c);
        if (auto refused = admission(r, xml, x, node, "VM configuration")) return message(400, *refused);
    }
    client::VmDefinition def;
    def.uuid = uuid;
    def.name = x.name;
    def.xml = xml;
    def.node = node;
    def.rbd_list = x.rbd_list();
    def.autostart = c.flag("autostart");
    def.migrate_method = lower(c.p("migration_method").value_or("none"));
    def.node_selector = lower(selector.empty() ? "none" : selector);
    for (const auto& t : user_tags) def.tags.emplace_back(t, false);
    for (const auto& t : protected_tags) def.tags.emplace_back(t, true);
    if (auto bad = over_request_limit(client::vm_define_keys(def))) return *bad;
    auto t0 = Clock::now();
    try {
        if (!client::define_vm(*zk_, def)) return message(500, "Internal Server Error");
    } catch (const client::VfInUse& e) {
        return message(400, std::string("ERROR: ") + e.what());
    }
    figures_.vm_action("define", std::chrono::duration<double>(Clock::now() - t0).count());
    // Read-your-writes: the view holds every key of the new VM before the answer.
    auto keys = client::vm_define_keys(def);
    for (const auto& [t, prot] : def.tags) {
        auto tag = client::vm_tag_keys(uuid, t, zk::py_bool(prot));
        keys.insert(keys.end(), tag.begin(), tag.end());
    }
    settle(keys);
    return message(200, "Added new VM with Name '" + x.name + "' and UUID '" + uuid + "' to database.");
}

HttpResponse Api::vm_modify(Ctx& c) {
    const std::string& vm = c.args[0];
    auto u = find_vm(c, vm);
    if (!u) return message(400, "ERROR: Could not find VM '" + vm + "' in the cluster!");
    std::string xml = *c.p("xml");
    DomainXml x;
    try {
        x = parse_domain_xml(xml);
    } catch (const DomainXmlError& e) {
        return message(400, quoted(std::string("XML is malformed or incorrect: ") + e.what()));
    }
    if (!x.memory_kib || !x.vcpus) return message(400, "XML is malformed or incorrect: no valid <memory> or <vcpu> element");
    std::string name = read_key(path("domain.name", {*u}));
    {
        auto r = reader(c);
        if (auto refused = admission(r, xml, x, r.value(path("domain.node", {*u})), "Updated VM configuration"))
            return message(400, *refused);
    }
    {
        std::string volumes;
        for (const auto& v : x.rbd_list()) volumes += (volumes.empty() ? "" : ",") + v;
        if (auto bad = over_request_limit({{path("domain.xml", {*u}), xml},
                                           {path("domain.storage.volumes", {*u}), volumes},
                                           {path("domain.name", {*u}), name}}))
            return *bad;
    }
    try {
        if (!client::write_vm_xml(*zk_, *u, name, x.rbd_list(), xml)) return message(500, "Internal Server Error");
    } catch (const client::VfInUse& e) {
        return message(400, std::string("ERROR: ") + e.what());
    }
    if (c.flag("restart")) {
        auto t0 = Clock::now();
        if (!client::change_vm_state(zk_, *u, "restart", c.stop)) return message(500, "Internal Server Error");
        figures_.vm_action("restart", std::chrono::duration<double>(Clock::now() - t0).count());
    }
    settle(path("domain.xml", {*u}), xml);
    return message(200, "Successfully modified configuration of VM '" + vm + "'.");
}

HttpResponse Api::vm_delete(Ctx& c) {
    const std::string& vm = c.args[0];
    auto u = find_vm(c, vm);
    if (!u) return message(400, "ERROR: Could not find VM '" + vm + "' in the cluster!");
    bool disks = c.flag("delete_disks");
    auto t0 = Clock::now();
    if (disks) {
        // The disk names: the domain XML's RBD disks, then the `rbdlist` key's
        // (both written by define/modify; either may be all a VM has).
        std::vector<std::string> volumes;
        auto add = [&](const std::string& v) {
            if (!v.empty() && std::find(volumes.begin(), volumes.end(), v) == volumes.end()) volumes.push_back(v);
        };
        try {
            for (const auto& v : parse_domain_xml(read_key(path("domain.xml", {*u}))).rbd_list()) add(v);
        } catch (const DomainXmlError&) {
            // An unreadable stored XML: the rbdlist key still names the disks.
        }
        std::string rbdlist = read_key(path("domain.storage.volumes", {*u}));
        for (size_t p = 0; p <= rbdlist.size();) {
            size_t comma = rbdlist.find(',', p);
            if (comma == std::string::npos) comma = rbdlist.size();
            add(rbdlist.substr(p, comma - p));
            p = comma + 1;
        }
        // Names without '/' are no RBD volumes (skipped, as the reference);
        // any other name must be a valid pool/volume, checked before anything is done.
        std::erase_if(volumes, [](const std::string& v) { return v.find('/') == std::string::npos; });
        for (const auto& v : volumes)
            if (!services::valid_rbd_volume_name(v))
                return message(400, "ERROR: Disk '" + v + "' of VM '" + vm +
                                        "' is not a valid pool/volume name; nothing was removed.");
        std::shared_ptr<services::RbdVolumes> rbd;
        if (!volumes.empty() && services_) rbd = services_->get<services::RbdVolumes>();
        if (!volumes.empty() && !rbd)
            return message(400, "ERROR: Removing a VM's RBD volumes needs the storage module on this node, which is "
                                "not running; undefine VM '" + vm + "' and remove its volumes with Ceph's tools.");
        if (!volumes.empty()) {
            if (read_key(path("domain.state", {*u})) != "stop" && !client::change_vm_state(zk_, *u, "stop", c.stop))
                return message(500, "Internal Server Error");
            std::this_thread::sleep_for(1000ms);  // the stop reaches the VM's node before its disks go
        }
        for (const auto& v : volumes) {
            auto r = rbd->remove(v);
            if (r.outcome == services::RbdVolumes::Outcome::error) {
                log_.error("API: removing VM {}: volume {} not removed: {}", vm, v, r.error);
                return message(400, "ERROR: Failed to remove volume '" + v + "' of VM '" + vm + "': " + r.error);
            }
            // Removed or absent: its ZooKeeper keys go too, as a volume's removal does.
            auto slash = v.find('/');
            std::string pool = v.substr(0, slash), name = v.substr(slash + 1);
            // (false = the key was not there: nothing to delete)
            zk_->remove_recursive(path("volume.name", {pool, name}));
            zk_->remove_recursive(path("base.snapshot") + "/" + pool + "/" + name);
            log_.info("API: removing VM {}: volume {} {}", vm, v,
                      r.outcome == services::RbdVolumes::Outcome::removed ? "removed" : "was not there");
        }
    }
    if (!client::undefine_vm(zk_, *u, disks ? 1000ms : 0ms, c.stop)) return message(500, "Internal Server Error");
    figures_.vm_action("remove", std::chrono::duration<double>(Clock::now() - t0).count());
    settle(path("domain.name", {*u}), std::nullopt);
    return message(200, disks ? "Removed VM '" + vm + "' and its disks from the cluster."
                              : "Undefined VM '" + vm + "' from the cluster.");
}

HttpResponse Api::vm_state_get(Ctx& c) {
    auto u = find_vm(c, c.args[0]);
    if (!u) return message(404, "VM not found.");
    auto r = reader(c);
    return json_response(200, Json{{"name", c.args[0]}, {"state", r.value(path("domain.state", {*u}))}});
}

HttpResponse Api::vm_state_post(Ctx& c) {
    const std::string& vm = c.args[0];
    auto u = find_vm(c, vm);
    if (!u) return message(400, "ERROR: Could not find VM '" + vm + "' in the cluster!");
    return set_vm_state(c, *u);
}

HttpResponse Api::set_vm_state(Ctx& c, const std::string& u) {
    const std::string& vm = c.args[0];
    std::string want = *c.p("state");
    const std::string key = path("domain.state", {u});
    std::string current = read_key(key);
    auto t0 = Clock::now();
    auto write = [&](const std::string& s) {
        bool ok = client::change_vm_state(zk_, u, s, c.stop);
        figures_.vm_action(s, std::chrono::duration<double>(Clock::now() - t0).count());
        return ok;
    };
    auto poll_while = [&](const std::string& s) {
        while (!c.stop.stop_requested() && read_key(key) == s) std::this_thread::sleep_for(500ms);
    };
    if (want == "start") {
        if (!write("start")) return message(500, "Internal Server Error");
        return message(200, "Starting VM '" + vm + "'.");
    }
    if (want == "stop") {
        if (!write("stop")) return message(500, "Internal Server Error");
        return message(200, "Forcibly stopping VM '" + vm + "'.");
    }
    if (want == "restart" || want == "shutdown") {
        if (current != "start") return message(400, "ERROR: VM '" + vm + "' is not in 'start' state!");
        if (!write(want)) return message(500, "Internal Server Error");
        bool restart = want == "restart";
        if (!c.flag("wait")) return message(200, restart ? "Restarting VM '" + vm + "'." : "Shutting down VM '" + vm + "'");
        poll_while(want);
        return message(200, restart ? "Restarted VM '" + vm + "'" : "Shut down VM '" + vm + "'");
    }
    // disable
    if (current == "start") {
        if (c.flag("force")) {
            if (!write("stop")) return message(500, "Internal Server Error");
            std::this_thread::sleep_for(500ms);
        } else {
            if (!write("shutdown")) return message(500, "Internal Server Error");
            while (!c.stop.stop_requested() && read_key(key) != "stop") std::this_thread::sleep_for(500ms);
            if (c.stop.stop_requested()) return message(503, "The API is stopping on this node; the VM is shutting down");
        }
    }
    if (!write("disable")) return message(500, "Internal Server Error");
    return message(200, "Disabled VM '" + vm + "'.");
}

HttpResponse Api::vm_node_get(Ctx& c) {
    auto u = find_vm(c, c.args[0]);
    if (!u) return message(404, "VM not found.");
    auto r = reader(c);
    return json_response(200, Json{{"name", c.args[0]},
                                   {"node", r.value(path("domain.node", {*u}))},
                                   {"last_node", r.value(path("domain.last_node", {*u}))}});
}

HttpResponse Api::vm_node_post(Ctx& c) {
    const std::string& vm = c.args[0];
    auto found = find_vm(c, vm);
    if (!found) return message(400, "ERROR: Could not find VM '" + vm + "' in the cluster!");
    const std::string u = *found;
    std::string action = *c.p("action");
    std::string state = read_key(path("domain.state", {u}));
    std::string cur = read_key(path("domain.node", {u}));
    std::string last = read_key(path("domain.last_node", {u}));
    std::string ts = state != "start" ? state : (c.flag("force_live") ? "migrate-live" : "migrate");
    bool force = c.flag("force");
    std::string target, new_last;
    if (action == "unmigrate") {
        if (last.empty()) return message(400, "ERROR: VM '" + vm + "' has not been previously migrated.");
        target = last;
    } else {
        if (action == "migrate" && !last.empty() && !force)
            return message(400, "ERROR: VM '" + vm + "' has been previously migrated.");
        if (auto n = c.p("node"); n && !n->empty()) {
            if (!client::is_safe_name(*n) || !zk_->exists(path("node.name", {*n}))) return message(400, "ERROR: Specified node '" + *n + "' is invalid.");
            std::string limit = read_key(path("domain.meta.node_limit", {u}));
            if (!limit.empty()) {
                bool allowed = false;
                size_t pos = 0;
                while (pos <= limit.size()) {
                    size_t e = limit.find(',', pos);
                    if (e == std::string::npos) e = limit.size();
                    allowed = allowed || limit.substr(pos, e - pos) == *n;
                    pos = e + 1;
                }
                if (!allowed)
                    return message(400, "ERROR: Specified node '" + *n + "' is not in the allowed list of nodes for VM '" + vm + "'.");
            }
            target = *n;
        } else {
            auto t = target::find_target(*zk_, u);
            if (!t) return message(400, "ERROR: Could not find a valid migration target for VM '" + vm + "'.");
            target = *t;
        }
        if (target == cur) {
            if (action == "move" && !last.empty()) {
                if (!zk_->write(path("domain.last_node", {u}), "")) return message(500, "Internal Server Error");
                return message(200, "Making temporary migration permanent for VM '" + vm + "'.");
            }
            return message(400, "ERROR: VM '" + vm + "' is already running on node '" + cur + "'.");
        }
        new_last = action == "migrate" ? ((!last.empty() && force) ? last : cur) : "";
    }
    auto t0 = Clock::now();
    try {
        if (!client::relocate_vm(zk_, u, ts, target, new_last, c.stop)) return message(500, "Internal Server Error");
    } catch (const client::VfInUse& e) {
        return message(400, std::string("ERROR: ") + e.what());
    }
    figures_.vm_action(action, std::chrono::duration<double>(Clock::now() - t0).count());
    bool wait = c.flag("wait");
    if (wait)
        while (!c.stop.stop_requested() && read_key(path("domain.state", {u})) == ts) std::this_thread::sleep_for(500ms);
    if (action == "move")
        return message(200, (wait ? "Permanently migrated VM '" : "Permanently migrating VM '") + vm + "' to node '" + target +
                                (wait ? "'" : "'."));
    if (action == "migrate")
        return message(200, (wait ? "Migrated VM '" : "Migrating VM '") + vm + "' to node '" + target + (wait ? "'" : "'."));
    return message(200, (wait ? "Unmigrated VM '" : "Unmigrating VM '") + vm + "' back to node '" + target + (wait ? "'" : "'."));
}

HttpResponse Api::vm_meta_get(Ctx& c) {
    auto u = find_vm(c, c.args[0]);
    if (!u) return message(404, "VM not found.");
    auto r = reader(c);
    std::string limit = r.value(path("domain.meta.node_limit", {*u}));
    Json nl = nullptr;
    if (!limit.empty()) {
        nl = Json::array();
        size_t pos = 0;
        while (pos <= limit.size()) {
            size_t e = limit.find(',', pos);
            if (e == std::string::npos) e = limit.size();
            nl.push_back(limit.substr(pos, e - pos));
            pos = e + 1;
        }
    }
    std::string autostart = r.value(path("domain.meta.autostart", {*u}));
    return json_response(200, Json{{"name", c.args[0]},
                                   {"node_limit", nl},
                                   {"node_selector", lower(r.value(path("domain.meta.node_selector", {*u})))},
                                   {"node_autostart", autostart.empty() ? Json(nullptr) : Json(autostart)},
                                   {"migration_method", lower(r.value(path("domain.meta.migrate_method", {*u})))}});
}

HttpResponse Api::vm_meta_post(Ctx& c) {
    const std::string& vm = c.args[0];
    // Free text that reaches metric labels and the CLI's tables: no NUL or control characters.
    for (const char* name : {"limit", "profile"})
        if (auto v = c.p(name); v && has_control(*v)) return param_error(name, "Control characters are not allowed");
    auto u = find_vm(c, vm);
    if (!u) return message(404, "VM not found.");
    std::vector<zk::KeyValue> kvs;
    if (auto v = c.p("limit")) kvs.emplace_back(path("domain.meta.node_limit", {*u}), *v);
    if (auto v = c.p("selector")) kvs.emplace_back(path("domain.meta.node_selector", {*u}), lower(*v));
    if (auto v = c.p("autostart")) kvs.emplace_back(path("domain.meta.autostart", {*u}), zk::py_bool(truthy(v)));
    if (auto v = c.p("profile")) kvs.emplace_back(path("domain.profile", {*u}), *v);
    if (auto v = c.p("migration_method")) kvs.emplace_back(path("domain.meta.migrate_method", {*u}), lower(*v));
    if (kvs.empty()) return message(400, "ERROR: No updates to apply.");
    if (auto bad = over_request_limit(kvs)) return *bad;
    if (!zk_->write(kvs)) return message(500, "Internal Server Error");
    settle(kvs);
    return message(200, "Successfully modified PVC metadata of VM '" + vm + "'.");
}

HttpResponse Api::vm_tags_get(Ctx& c) {
    auto u = find_vm(c, c.args[0]);
    if (!u) return message(404, "VM not found.");
    auto r = reader(c);
    Json tags = Json::array();
    for (const auto& t : r.children(path("domain.meta.tags", {*u})))
        tags.push_back({{"name", t},
                        {"type", r.value(path("tag.type", {*u, t}))},
                        {"protected", zk::lenient_bool(r.value(path("tag.protected", {*u, t}))).value_or(false)}});
    return json_response(200, Json{{"name", c.args[0]}, {"tags", tags}});
}

HttpResponse Api::vm_tags_post(Ctx& c) {
    const std::string& vm = c.args[0];
    auto action = c.p("action").value_or("");
    if (action != "add" && action != "remove") return message(400, "Tag action must be one of 'add', 'remove'.");
    auto u = find_vm(c, vm);
    if (!u) return message(404, "VM not found.");
    // A tag is required (the reference stored a tag named None).
    auto tag = c.p("tag");
    if (!tag) return param_error("tag", "A tag must be specified");
    if (!client::is_safe_name(*tag) || tag->size() > 255) return param_error("tag", "Invalid tag name");
    if (action == "add") {
        auto tags = reader(c).children(path("domain.meta.tags", {*u}));
        if (tags.size() >= kMaxTags && std::find(tags.begin(), tags.end(), *tag) == tags.end())
            return message(400, "ERROR: VM '" + vm + "' has " + std::to_string(tags.size()) + " tags, the most a VM may have (" +
                                    std::to_string(kMaxTags) + ").");
        std::string prot = c.p("protected").value_or("False");
        auto kvs = client::vm_tag_keys(*u, *tag, prot);
        if (!zk_->write(kvs)) return message(500, "Internal Server Error");
        settle(kvs);
        return message(200, "Successfully added tag '" + *tag + "' to VM '" + vm + "'.");
    }
    if (!zk_->exists(path("tag.name", {*u, *tag}))) return message(400, "The tag '" + *tag + "' does not exist.");
    if (read_key(path("tag.type", {*u, *tag})) != "user")
        return message(400, "The tag '" + *tag + "' is not a user tag and cannot be removed.");
    if (zk::lenient_bool(read_key(path("tag.protected", {*u, *tag}))).value_or(false))
        return message(400, "The tag '" + *tag + "' is protected and cannot be removed.");
    zk_->remove_recursive(path("tag.name", {*u, *tag}));
    settle(path("tag.name", {*u, *tag}), std::nullopt);
    return message(200, "Successfully removed tag '" + *tag + "' from VM '" + vm + "'.");
}

HttpResponse Api::vm_console(Ctx& c) {
    const std::string& vm = c.args[0];
    long long lines = 10;
    if (auto bad = read_lines(c.p("lines"), lines)) return *bad;
    auto u = find_vm(c, vm);
    if (!u) return message(400, "ERROR: Could not find VM \"" + vm + "\" in the cluster!");
    std::string text = read_key(path("domain.console.log", {*u}));
    return json_response(200, Json{{"name", vm}, {"data", join(last_lines(text, lines), "\n")}});
}

// ---------------------------------------------------------------- networks

namespace {
std::optional<std::string> network_vni(const Reader& r, const std::string& id) {
    if (!id.empty() && std::all_of(id.begin(), id.end(), ::isdigit)) {
        if (r.exists(path("network.vni", {id}))) return id;
        return std::nullopt;
    }
    for (const auto& v : r.children(path("base.network")))
        if (r.value(path("network.vni", {v})) == id) return v;
    return std::nullopt;
}
}  // namespace

HttpResponse Api::network_list(Ctx& c) {
    auto limit = c.p("limit");
    Limit l;
    if (auto bad = read_limit(limit, true, l, c.stop)) return *bad;
    auto r = view_.read();
    Json out = Json::array();
    for (const auto& v : r.children(path("base.network"))) {
        if (!l.re) {
            out.push_back(network_object(r, v));
            continue;
        }
        if (full_match(l, v)) out.push_back(network_object(r, v));
        if (full_match(l, r.value(path("network.vni", {v})))) out.push_back(network_object(r, v));  // twice if both match, as the reference
    }
    if (out.empty()) return message(404, "Network not found.");
    return json_response(200, out);
}

HttpResponse Api::network_get(Ctx& c) {
    Limit l = compile(c.args[0], false, c.stop);
    if (!l.re) return message(400, "Regex Error: " + l.error);
    auto r = reader(c);
    Json out = Json::array();
    for (const auto& v : r.children(path("base.network"))) {
        if (full_match(l, v)) out.push_back(network_object(r, v));
        if (full_match(l, r.value(path("network.vni", {v})))) out.push_back(network_object(r, v));
    }
    if (out.empty()) return message(404, "Network not found.");
    return json_response(200, out);
}

HttpResponse Api::lease_list(Ctx& c) {
    auto r = reader(c);
    auto vni = network_vni(r, c.args[0]);
    if (!vni) return message(400, "ERROR: Could not find network \"" + c.args[0] + "\" in the cluster!");
    Limit l;
    auto limit = c.args.size() > 1 ? std::optional<std::string>(c.args[1]) : c.p("limit");
    if (auto bad = read_limit(limit, true, l, c.stop)) return *bad;
    std::vector<std::string> macs = r.children(path("network.reservation", {*vni}));
    if (c.args.size() > 1 || !c.flag("static"))
        for (const auto& m : r.children(path("network.lease", {*vni}))) macs.push_back(m);
    Json out = Json::array();
    for (const auto& m : macs)
        if (!l.re || full_match(l, m)) out.push_back(lease_object(r, *vni, m));
    if (out.empty()) return message(404, "Lease not found.");
    return json_response(200, out);
}

HttpResponse Api::lease_get(Ctx& c) { return lease_list(c); }

HttpResponse Api::acl_list(Ctx& c) {
    auto r = reader(c);
    auto vni = network_vni(r, c.args[0]);
    if (!vni) return message(400, "ERROR: Could not find network \"" + c.args[0] + "\" in the cluster!");
    Limit l;
    auto limit = c.args.size() > 1 ? std::optional<std::string>(c.args[1]) : c.p("limit");
    if (auto bad = read_limit(limit, true, l, c.stop)) return *bad;
    std::vector<std::string> dirs = {"in", "out"};
    if (auto d = c.p("direction")) dirs = {*d};
    Json out = Json::array();
    for (const auto& d : dirs) {
        // Each ACL its own rule, ordered numerically (the reference showed one rule for all, in text order).
        std::vector<std::pair<long long, std::string>> acls;
        for (const auto& a : r.children(path(d == "in" ? "network.rule.in" : "network.rule.out", {*vni}))) {
            auto order = r.get(path("rule.order", {*vni, d, a}));
            if (!order) continue;
            acls.emplace_back(to_int(*order).value_or(0), a);
        }
        std::stable_sort(acls.begin(), acls.end());
        for (const auto& [o, a] : acls)
            if (!l.re || full_match(l, a)) out.push_back(acl_object(r, *vni, d, a));
    }
    if (out.empty()) return message(404, "ACL not found.");
    return json_response(200, out);
}

HttpResponse Api::acl_get(Ctx& c) { return acl_list(c); }

// Network writes: the client library's (pvc/client_network.hpp, the same
// `pvc network` uses), which checks the input, retries a lost version race
// and gives the reference's messages; 200 done, 400 refused, 500 ZooKeeper
// failed. The answer waits until the view shows what was written.
HttpResponse Api::net_answer(const client::NetResult& r) {
    if (r.ok()) settle(r.written);
    return message(static_cast<unsigned>(r.status), quoted(r.message));
}

namespace {
// Every `name_servers` value (repeated, or one comma-separated value).
std::vector<std::string> name_servers(const Params& p) { return p.all("name_servers"); }
}  // namespace

HttpResponse Api::network_add(Ctx& c) {
    for (const char* name : {"description", "domain", "mtu"})
        if (auto v = c.p(name); v && has_control(*v)) return param_error(name, "Control characters are not allowed");
    client::NetworkSpec s;
    // POST /network/<vni>: the path's VNI (the reference wrote the keys at the ZooKeeper root).
    s.vni = c.args.empty() ? c.p("vni").value_or("") : c.args[0];
    s.description = c.p("description").value_or("");
    s.nettype = c.p("nettype").value_or("");
    s.mtu = c.p("mtu");
    s.domain = c.p("domain");
    s.name_servers = name_servers(c.params);
    s.ip4_network = c.p("ip4_network");
    s.ip4_gateway = c.p("ip4_gateway");
    s.ip6_network = c.p("ip6_network");
    s.ip6_gateway = c.p("ip6_gateway");
    s.dhcp4 = c.flag("dhcp4");
    s.dhcp4_start = c.p("dhcp4_start");
    s.dhcp4_end = c.p("dhcp4_end");
    return net_answer(client::add_network(*zk_, s));
}

HttpResponse Api::network_modify(Ctx& c) {
    for (const char* name : {"description", "domain", "mtu"})
        if (auto v = c.p(name); v && has_control(*v)) return param_error(name, "Control characters are not allowed");
    client::NetworkChange ch;
    ch.description = c.p("description");
    ch.mtu = c.p("mtu");
    ch.domain = c.p("domain");
    // Only when given (the reference cleared them on every modify).
    if (c.params.has("name_servers")) ch.name_servers = name_servers(c.params);
    ch.ip4_network = c.p("ip4_network");
    ch.ip4_gateway = c.p("ip4_gateway");
    ch.ip6_network = c.p("ip6_network");
    ch.ip6_gateway = c.p("ip6_gateway");
    if (c.params.has("dhcp4")) ch.dhcp4 = c.flag("dhcp4");
    ch.dhcp4_start = c.p("dhcp4_start");
    ch.dhcp4_end = c.p("dhcp4_end");
    return net_answer(client::modify_network(*zk_, c.args[0], ch));
}

HttpResponse Api::network_delete(Ctx& c) { return net_answer(client::remove_network(*zk_, c.args[0])); }

HttpResponse Api::lease_add(Ctx& c) {
    if (auto v = c.p("hostname"); v && has_control(*v)) return param_error("hostname", "Control characters are not allowed");
    std::string mac = c.args.size() > 1 ? c.args[1] : c.p("macaddress").value_or("");
    return net_answer(client::add_reservation(*zk_, c.args[0], mac, c.p("ipaddress").value_or(""), c.p("hostname")));
}

HttpResponse Api::lease_delete(Ctx& c) { return net_answer(client::remove_reservation(*zk_, c.args[0], c.args[1])); }

HttpResponse Api::acl_add(Ctx& c) {
    std::string description = c.args.size() > 1 ? c.args[1] : c.p("description").value_or("");
    // The direction as given, default in (the reference stored any given direction as in, none as out).
    return net_answer(client::add_acl(*zk_, c.args[0], description, c.p("rule").value_or(""),
                                      c.p("direction").value_or("in"), c.p("order")));
}

HttpResponse Api::acl_delete(Ctx& c) { return net_answer(client::remove_acl(*zk_, c.args[0], c.args[1])); }

// ---------------------------------------------------------------- SR-IOV

namespace {
Json nullable(const std::string& v) { return v.empty() ? Json(nullptr) : Json(v); }
Json vf_object(const client::SriovVf& v) {
    return Json{{"phy", v.phy},
                {"pf", nullable(v.pf)},
                {"mtu", nullable(v.mtu)},
                {"mac", nullable(v.mac)},
                {"config", {{"vlan_id", nullable(v.vlan_id)}, {"vlan_qos", nullable(v.vlan_qos)},
                            {"tx_rate_min", nullable(v.tx_rate_min)}, {"tx_rate_max", nullable(v.tx_rate_max)},
                            {"link_state", nullable(v.link_state)}, {"spoof_check", nullable(v.spoof_check)},
                            {"trust", nullable(v.trust)}, {"query_rss", nullable(v.query_rss)}}},
                {"pci", {{"domain", nullable(v.pci_domain)}, {"bus", nullable(v.pci_bus)},
                         {"slot", nullable(v.pci_slot)}, {"function", nullable(v.pci_function)}}},
                {"usage", {{"used", nullable(v.used)}, {"domain", v.used_by}}}};
}
HttpResponse invalid_node(const std::string& node) {
    return message(400, "ERROR: Specified node \"" + node + "\" is invalid.");
}
}  // namespace

HttpResponse Api::sriov_pf_list(Ctx& c) {
    std::string node = c.args.empty() ? c.p("node").value_or("") : c.args[0];
    auto pfs = client::read_sriov_pfs(*zk_, node);
    if (!pfs) return invalid_node(node);
    if (pfs->empty()) return message(404, "PF not found.");
    Json out = Json::array();
    for (const auto& p : *pfs) out.push_back(Json{{"phy", p.phy}, {"mtu", nullable(p.mtu)}, {"vfs", p.vfs}});
    return json_response(200, out);
}

HttpResponse Api::sriov_vf_list(Ctx& c) {
    std::string node = c.args.empty() ? c.p("node").value_or("") : c.args[0];
    auto vfs = client::read_sriov_vfs(*zk_, node, c.args.size() > 1 ? std::nullopt : c.p("pf"));
    if (!vfs) return invalid_node(node);
    Json out = Json::array();
    for (const auto& v : *vfs)
        if (c.args.size() < 2 || v.phy == c.args[1]) out.push_back(vf_object(v));
    if (c.args.size() > 1 && out.empty()) return message(404, "No VF '" + c.args[1] + "' found on node '" + node + "'");
    if (out.empty()) return message(404, "VF not found.");
    return json_response(200, out);
}

HttpResponse Api::sriov_vf_set(Ctx& c) {
    client::VfConfig v;
    v.vlan_id = c.p("vlan_id");
    v.vlan_qos = c.p("vlan_qos");
    v.tx_rate_min = c.p("tx_rate_min");
    v.tx_rate_max = c.p("tx_rate_max");
    v.link_state = c.p("link_state");
    v.spoof_check = c.p("spoof_check");
    v.trust = c.p("trust");
    v.query_rss = c.p("query_rss");
    // The SR-IOV routes read ZooKeeper itself (the view does not mirror VF config keys): nothing to wait for.
    auto r = client::set_vf(*zk_, c.args[0], c.args[1], v);
    return message(static_cast<unsigned>(r.status), quoted(r.message));
}

// ---------------------------------------------------------------- storage

HttpResponse Api::ceph_status(Ctx&) {
    auto r = view_.read();
    std::string data = r.value(path("base.storage"));
    while (!data.empty() && std::isspace(static_cast<unsigned char>(data.back()))) data.pop_back();
    return json_response(200, Json{{"type", "status"}, {"primary_node", r.value(path("base.config.primary_node"))}, {"ceph_data", data}});
}

HttpResponse Api::ceph_util(Ctx&) {
    auto r = view_.read();
    std::string data = r.value(path("base.storage.util"));
    while (!data.empty() && std::isspace(static_cast<unsigned char>(data.back()))) data.pop_back();
    return json_response(200, Json{{"type", "utilization"}, {"primary_node", r.value(path("base.config.primary_node"))}, {"ceph_data", data}});
}

HttpResponse Api::osd_list(Ctx& c) {
    auto limit = c.args.empty() ? c.p("limit") : std::optional<std::string>(c.args[0]);
    Limit l;
    if (auto bad = read_limit(limit, c.args.empty(), l, c.stop)) return *bad;
    auto r = reader(c);
    std::vector<std::pair<long long, std::string>> ids;
    for (const auto& id : r.children(path("base.osd")))
        if (!l.re || full_match(l, id)) ids.emplace_back(to_int(id).value_or(0), id);
    std::sort(ids.begin(), ids.end());
    Json out = Json::array();
    for (const auto& [n, id] : ids) out.push_back(osd_object(r, id));
    if (out.empty()) return message(404, "OSD not found.");
    return json_response(200, out);
}

HttpResponse Api::osd_get(Ctx& c) { return osd_list(c); }  // exact (the reference's /osd/1 also gave 10, 11...)

HttpResponse Api::pool_list(Ctx& c) {
    auto limit = c.args.empty() ? c.p("limit") : std::optional<std::string>(c.args[0]);
    Limit l;
    if (auto bad = read_limit(limit, c.args.empty(), l, c.stop)) return *bad;
    auto r = reader(c);
    std::vector<std::pair<long long, Json>> pools;
    for (const auto& p : r.children(path("base.pool"))) {
        if (l.re && !full_match(l, p)) continue;
        Json o = pool_object(r, p);
        long long id = o["stats"].is_object() && o["stats"].contains("id") && o["stats"]["id"].is_number_integer()
                           ? o["stats"]["id"].get<long long>() : 0;
        pools.emplace_back(id, std::move(o));
    }
    std::stable_sort(pools.begin(), pools.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    Json out = Json::array();
    for (auto& [id, o] : pools) out.push_back(std::move(o));
    if (out.empty()) return message(404, "Pool not found.");
    return json_response(200, out);
}

HttpResponse Api::pool_get(Ctx& c) { return pool_list(c); }

HttpResponse Api::volume_list(Ctx& c) {
    bool element = c.args.size() == 2;
    auto limit = element ? std::optional<std::string>(c.args[1]) : c.p("limit");
    auto pool = element ? std::optional<std::string>(c.args[0]) : c.p("pool");
    Limit l;
    if (auto bad = read_limit(limit, !element, l, c.stop)) return *bad;
    auto r = reader(c);
    if (pool && (!client::is_safe_name(*pool) || !r.exists(path("pool.name", {*pool}))))
        return message(element ? 404 : 400, element ? std::string("Volume not found.")
                                                    : "ERROR: No pool with name \"" + *pool + "\" is present in the cluster.");
    std::vector<std::string> pools = pool ? std::vector<std::string>{*pool} : r.children(path("base.pool"));
    std::vector<std::pair<std::string, std::string>> vols;  // (volume, pool)
    for (const auto& p : pools)
        for (const auto& v : r.children(path("base.volume") + "/" + p))
            if (!l.re || full_match(l, v)) vols.emplace_back(v, p);
    std::sort(vols.begin(), vols.end());
    Json out = Json::array();
    for (const auto& [v, p] : vols) out.push_back(volume_object(r, p, v));
    if (out.empty()) return message(404, "Volume not found.");
    return json_response(200, out);
}

HttpResponse Api::volume_get(Ctx& c) { return volume_list(c); }

HttpResponse Api::snapshot_list(Ctx& c) {
    auto limit = c.p("limit"), pool = c.p("pool"), volume = c.p("volume");
    Limit l;
    if (auto bad = read_limit(limit, true, l, c.stop)) return *bad;
    auto r = reader(c);
    std::vector<std::tuple<std::string, std::string, std::string>> snaps;  // (snapshot, pool, volume)
    for (const auto& p : r.children(path("base.snapshot"))) {
        if (pool && *pool != p) continue;
        for (const auto& v : r.children(path("base.snapshot") + "/" + p)) {
            if (volume && *volume != v) continue;  // a volume filter is a volume (the reference checked it as a pool)
            for (const auto& s : r.children(path("base.snapshot") + "/" + p + "/" + v))
                if (!l.re || full_match(l, s)) snaps.emplace_back(s, p, v);
        }
    }
    std::sort(snaps.begin(), snaps.end());
    Json out = Json::array();
    for (const auto& [s, p, v] : snaps) out.push_back({{"pool", p}, {"volume", v}, {"snapshot", s}});
    if (out.empty()) return message(404, "Volume snapshot not found.");
    return json_response(200, out);
}

// ---------------------------------------------------------------- metrics

HttpResponse Api::metrics_health(Ctx&) {
    auto r = view_.read();
    return text_response(200, health_metrics(r, vms_));
}

HttpResponse Api::metrics_resource(Ctx&) {
    auto r = view_.read();
    return text_response(200, resource_metrics(r, vms_));
}

namespace {
constexpr auto relay_deadline = std::chrono::seconds(3);

// The active MGR's host: the second token of the first "mgr:" line of the
// status text, cut at '(' (as the reference finds it).
std::optional<std::string> active_mgr(const std::string& status) {
    size_t pos = 0;
    while (pos < status.size()) {
        size_t end = status.find('\n', pos);
        if (end == std::string::npos) end = status.size();
        std::string line = status.substr(pos, end - pos);
        size_t b = line.find_first_not_of(" \t");
        if (b != std::string::npos && line.compare(b, 4, "mgr:") == 0) {
            std::string rest = line.substr(b + 4);
            size_t t = rest.find_first_not_of(" \t");
            if (t == std::string::npos) return std::nullopt;
            std::string host = rest.substr(t, rest.find_first_of(" \t", t) - t);
            host = host.substr(0, host.find('('));
            if (host.empty()) return std::nullopt;
            return host;
        }
        pos = end + 1;
    }
    return std::nullopt;
}
}  // namespace

std::optional<std::string> Api::ceph_exporter() {
    return ceph_relay_.get([this] { return fetch_ceph_exporter(); });
}

std::optional<std::string> Api::zookeeper_exporter() {
    return zookeeper_relay_.get([this] { return fetch_zookeeper_exporter(); });
}

std::optional<std::string> Api::fetch_ceph_exporter() {
    std::string status;
    {
        auto r = view_.read();
        status = r.value(path("base.storage"));
    }
    auto host = active_mgr(status);
    if (!host) return std::nullopt;
    return http_get(*host, 9283, "/metrics", relay_deadline);
}

std::optional<std::string> Api::fetch_zookeeper_exporter() {
    std::string primary;
    {
        auto r = view_.read();
        primary = r.value(path("base.config.primary_node"));
    }
    if (primary.empty() || primary == "none") return std::nullopt;
    auto body = http_get(primary, 9141, "/metrics", relay_deadline);
    if (!body) return std::nullopt;
    // The reference's rewrite: ":2181" removed, lines sorted.
    std::string text = *body;
    for (size_t p = text.find(":2181"); p != std::string::npos; p = text.find(":2181", p)) text.erase(p, 5);
    std::vector<std::string> lines;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t e = text.find('\n', pos);
        if (e == std::string::npos) e = text.size();
        lines.push_back(text.substr(pos, e - pos));
        pos = e + 1;
    }
    std::sort(lines.begin(), lines.end());
    std::string out;
    for (const auto& l : lines)
        if (!l.empty()) out += l + "\n";
    return out;
}

HttpResponse Api::metrics_ceph(Ctx&) {
    auto body = ceph_exporter();
    if (!body) return text_response(400, "Error: Failed to obtain data");
    return text_response(200, *body);
}

HttpResponse Api::metrics_zookeeper(Ctx&) {
    auto body = zookeeper_exporter();
    if (!body) return text_response(400, "Error: Failed to obtain data");
    return text_response(200, *body);
}

HttpResponse Api::metrics_daemon(Ctx&) {
    size_t size = view_.size();
    auto r = view_.read();
    return text_response(200, daemon_metrics(r, figures_, size));
}

// Health + resource + Ceph + ZooKeeper (+ the daemon's own). Unlike the
// reference, a cluster without a reachable Ceph or ZooKeeper exporter still
// gets its own figures: the missing part is a comment line, so every line
// of the answer stays valid exposition text.
HttpResponse Api::metrics_all(Ctx&) {
    std::string out;
    {
        auto r = view_.read();
        out = health_metrics(r, vms_) + resource_metrics(r, vms_);
    }
    auto ceph = ceph_exporter();
    out += ceph ? *ceph : "# Error: Failed to obtain metric data from the active Ceph MGR\n";
    if (!out.empty() && out.back() != '\n') out += '\n';
    auto zk = zookeeper_exporter();
    out += zk ? *zk : "# Error: Failed to obtain metric data from the primary node's ZooKeeper exporter\n";
    size_t size = view_.size();
    auto r = view_.read();
    out += daemon_metrics(r, figures_, size);
    return text_response(200, out);
}

}  // namespace pvc::api
