// The OSD node tasks (osd_tasks.hpp; modules/storage/README.md, "OSD tasks").
#include "osd_tasks.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::storage {

using schema::path;
using services::TaskFailure;
using services::TaskRun;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const char* const osd_stats_placeholder =
    "{\"uuid\": \"|\", \"up\": 0, \"in\": 0, \"primary_affinity\": \"|\", \"utilization\": \"|\", \"var\": \"|\", "
    "\"pgs\": \"|\", \"kb\": \"|\", \"weight\": \"|\", \"reweight\": \"|\", \"node\": \"|\", \"used\": \"|\", "
    "\"avail\": \"|\", \"wr_ops\": \"|\", \"wr_data\": \"|\", \"rd_ops\": \"|\", \"rd_data\": \"|\", \"state\": \"|\"}";

CommandResult HostTools::run(const std::vector<std::string>& argv, std::optional<std::chrono::seconds> timeout) const {
    std::vector<std::pair<std::string, std::string>> env;
    if (!o_.ceph_config_file.empty()) env.emplace_back("CEPH_CONF", o_.ceph_config_file);
    // LVM's tools otherwise complain on stderr of every descriptor the daemon holds.
    env.emplace_back("LVM_SUPPRESS_FD_WARNINGS", "1");
    auto r = run_command(argv, env, timeout.value_or(o_.command_timeout));
    log_.debug("OSD task: `{}` exited {}", join(argv, " "), r.exit_status);
    return r;
}

CommandResult HostTools::ceph(const std::vector<std::string>& args) const {
    std::vector<std::string> argv{"ceph"};
    if (!o_.ceph_config_file.empty()) argv.insert(argv.end(), {"--conf", o_.ceph_config_file});
    if (!o_.ceph_admin_keyring.empty()) argv.insert(argv.end(), {"--keyring", o_.ceph_admin_keyring});
    argv.insert(argv.end(), {"--connect-timeout", std::to_string(o_.ceph_timeout.count())});
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv, o_.ceph_timeout + 5s);
}

std::optional<Json> json_in_output(const std::string& output) {
    auto first = output.find_first_of("{[");
    if (first == std::string::npos) return std::nullopt;
    char closer = output[first] == '{' ? '}' : ']';
    auto last = output.rfind(closer);
    if (last == std::string::npos || last < first) return std::nullopt;
    try {
        return Json::parse(output.substr(first, last - first + 1));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

namespace {

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The leading decimal number of `s` ("480GB" -> 480, "1.92TB" -> 1.92).
std::optional<double> leading_number(const std::string& s) {
    size_t i = 0;
    while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    try {
        return std::stod(s.substr(0, i));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::string> detect_device_in(const std::string& lsscsi_output, const std::string& detect) {
    auto parts = split_all(detect, ':');
    if (parts.size() != 4 || parts[0] != "detect") return std::nullopt;
    auto want = leading_number(parts[2]);
    long index = -1;
    try {
        index = std::stol(parts[3]);
    } catch (const std::exception&) {
        return std::nullopt;
    }
    if (!want || index < 0) return std::nullopt;
    long seen = 0;
    for (const auto& line : split(lsscsi_output, '\n')) {
        auto w = words(line);
        if (w.size() < 4 || w[1] != "disk") continue;
        if (lower(line).find(lower(parts[1])) == std::string::npos) continue;
        auto size = leading_number(w.back());
        if (!size || *want <= *size * 0.97 || *want >= *size * 1.03) continue;
        if (seen++ == index) return w[w.size() - 2];
    }
    return std::nullopt;
}

std::optional<unsigned long long> parse_size_bytes(const std::string& s) {
    static const std::string units = "BKMGTPEZYRQ";
    size_t i = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    if (i == 0 || i > 18) return std::nullopt;
    unsigned long long n = std::stoull(s.substr(0, i));
    if (i == s.size()) return n;
    auto u = units.find(s[i]);
    if (u == std::string::npos || u > 6) return std::nullopt;
    for (size_t k = 0; k < u; ++k) {
        if (n > (~0ULL) / 1024) return std::nullopt;
        n *= 1024;
    }
    return n;
}

std::string first_partition(const std::string& device) {
    if (device.find("by-path") != std::string::npos || device.find("by-id") != std::string::npos)
        return device + "-part1";
    if (!device.empty() && std::isdigit(static_cast<unsigned char>(device.back()))) return device + "p1";
    return device + "1";
}

namespace {

// ---- kwargs (the API and `pvc` send strings; JSON null = absent) ----

std::optional<std::string> kw_string(const Json& kw, const char* key) {
    auto it = kw.find(key);
    if (it == kw.end() || it->is_null()) return std::nullopt;
    if (it->is_string()) {
        std::string v = it->get<std::string>();
        if (v.empty() || v == "None") return std::nullopt;
        return v;
    }
    if (it->is_boolean()) return it->get<bool>() ? "True" : "False";
    return it->dump();
}

bool kw_bool(const Json& kw, const char* key) {
    auto it = kw.find(key);
    if (it == kw.end() || it->is_null()) return false;
    if (it->is_boolean()) return it->get<bool>();
    if (it->is_number()) return it->get<double>() != 0;
    std::string v = it->is_string() ? lower(it->get<std::string>()) : "";
    return v == "true" || v == "yes" || v == "y" || v == "t" || v == "on" || v == "1";
}

std::string osd_id_arg(const Json& kw) {
    auto id = kw_string(kw, "osd_id").value_or("");
    if (id.empty() || id.size() > 9 || !std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        throw TaskFailure("Invalid OSD ID '" + id + "'");
    return id;
}

// A decimal number: digits with at most one '.', nothing else.
std::optional<double> parse_decimal(const std::string& s) {
    if (s.empty() || s.size() > 32) return std::nullopt;
    int dots = 0;
    for (char c : s) {
        if (c == '.') ++dots;
        else if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    }
    if (dots > 1 || s == ".") return std::nullopt;
    return std::stod(s);
}

std::string output_tail(const std::string& out, size_t max = 600) {
    std::string t = trim(out);
    if (t.size() > max) t = "..." + t.substr(t.size() - max);
    return t;
}

// ---- stages ----

struct Stages {
    TaskRun& run;
    long total;
    long current = 0;
    void start(const std::string& status) { run.progress(0, total, status); }
    void step(const std::string& status) {
        if (run.stop_token().stop_requested())
            throw TaskFailure("Stopped before '" + status + "': the node's daemon is stopping or lost the task");
        run.progress(++current, total, status);
    }
};

// ---- devices ----

bool valid_device_path(const std::string& d) {
    if (d.rfind("/dev/", 0) != 0 || d.size() > 1024 || d.find("..") != std::string::npos) return false;
    return std::none_of(d.begin(), d.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)) || std::iscntrl(static_cast<unsigned char>(c)); });
}

// A `detect:` string resolved (lsscsi), then the path checked: a block device of this node.
std::string resolve_device(const HostTools& t, const std::string& device) {
    const std::string& node = t.options().node;
    std::string dev = device;
    if (dev.rfind("detect:", 0) == 0) {
        auto r = t.run({"lsscsi", "-s"}, 60s);
        std::optional<std::string> found;
        if (r.exit_status == 0) found = detect_device_in(r.output, dev);
        if (!found || found->rfind("/dev/", 0) != 0)
            throw TaskFailure("Failed to determine block device from detect string " + device + " on node " + node);
        t.log().info("Determined block device {} from detect string {}", *found, device);
        dev = *found;
    }
    if (!valid_device_path(dev)) throw TaskFailure("Invalid device path '" + dev + "' (a /dev/ path is needed)");
    struct stat st {};
    if (::stat(dev.c_str(), &st) != 0) throw TaskFailure("Device " + dev + " not found on node " + node);
    if (!S_ISBLK(st.st_mode)) throw TaskFailure("Device " + dev + " on node " + node + " is not a block device");
    return dev;
}

// `ceph osd ls`: the OSD ids Ceph knows.
std::set<std::string> ceph_osd_ids(const HostTools& t) {
    auto r = t.ceph({"osd", "ls", "--format", "json"});
    auto j = r.exit_status == 0 ? json_in_output(r.output) : std::nullopt;
    if (!j || !j->is_array()) throw TaskFailure("Failed to list the OSDs in Ceph: " + output_tail(r.output));
    std::set<std::string> ids;
    for (const auto& v : *j) ids.insert(v.is_number() ? std::to_string(v.get<long>()) : v.dump());
    return ids;
}

// `ceph-volume lvm list --format json <device>`: OSD id -> entries ({} on failure, as the reference).
Json lvm_list(const HostTools& t, const std::string& device) {
    auto r = t.run({"ceph-volume", "lvm", "list", "--format", "json", device});
    auto j = r.exit_status == 0 ? json_in_output(r.output) : std::nullopt;
    return j && j->is_object() ? *j : Json::object();
}

// The `block` entry of an OSD in an lvm list (the reference took the first).
const Json* block_entry(const Json& list, const std::string& id) {
    auto it = list.find(id);
    if (it == list.end() || !it->is_array() || it->empty()) return nullptr;
    for (const auto& e : *it)
        if (e.value("type", "") == "block") return &e;
    return &(*it)[0];
}

std::string tag(const Json& entry, const char* name) {
    auto tags = entry.find("tags");
    if (tags == entry.end() || !tags->is_object()) return "";
    auto v = tags->find(name);
    return v != tags->end() && v->is_string() ? v->get<std::string>() : "";
}

std::vector<std::string> sorted_ids(const Json& list) {
    std::vector<std::string> ids;
    for (const auto& [id, _] : list.items()) ids.push_back(id);
    std::sort(ids.begin(), ids.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
    });
    return ids;
}

// OSDs of this cluster (ZooKeeper) on `node` whose device is `device`.
std::vector<std::string> pvc_osds_on(zk::Session& zk, const std::string& node, const std::string& device) {
    std::vector<std::string> out;
    for (const auto& id : zk.children(path("base.osd")).value_or(std::vector<std::string>{})) {
        auto v = zk.get_many({path("osd.node", {id}), path("osd.device", {id})});
        if (v[0].value_or("") == node && v[1].value_or("") == device) out.push_back(id);
    }
    return out;
}

// An LVM report (`pvs`/`vgs`/`lvs --reportformat json`): the rows of its first report.
std::vector<Json> lvm_report(const HostTools& t, std::vector<std::string> argv, const char* kind) {
    argv.insert(argv.begin() + 1, {"--reportformat", "json"});
    auto r = t.run(argv, 60s);
    std::vector<Json> rows;
    auto j = r.exit_status == 0 ? json_in_output(r.output) : std::nullopt;
    if (!j || !j->contains("report") || !(*j)["report"].is_array() || (*j)["report"].empty()) return rows;
    for (const auto& row : (*j)["report"][0].value(kind, Json::array()))
        if (row.is_object()) rows.push_back(row);
    return rows;
}

// The LVs on `device` that ceph-volume did not make (no ceph.osd_id tag).
std::vector<std::string> non_ceph_lvs(const HostTools& t, const std::string& device) {
    std::vector<std::string> out;
    for (const auto& row : lvm_report(t, {"pvs", "-o", "lv_name,lv_tags", device}, "pv")) {
        std::string name = row.value("lv_name", "");
        if (!name.empty() && row.value("lv_tags", "").find("ceph.osd_id=") == std::string::npos) out.push_back(name);
    }
    return out;
}

// The disk must hold nothing that is not ours: no partition table (the
// reference's check), and no other signature (filesystem, RAID, LVM, ...)
// unless it is the LVM of Ceph OSDs that Ceph no longer has (a disk of a
// removed OSD whose zap was skipped). Nothing is written before this passes.
void refuse_foreign_data(const HostTools& t, const std::string& device) {
    const std::string& node = t.options().node;
    if (t.run({"sfdisk", "--dump", device}, 60s).exit_status == 0)
        throw TaskFailure("Device " + device + " on node " + node + " has a partition table and is unsuitable for an OSD");
    auto r = t.run({"wipefs", "--no-act", "--json", device}, 60s);
    if (r.exit_status != 0) throw TaskFailure("Failed to read the signatures of device " + device + " on node " + node + ": " + output_tail(r.output));
    auto j = json_in_output(r.output);
    std::set<std::string> types;
    if (j && j->contains("signatures"))
        for (const auto& s : (*j)["signatures"]) types.insert(s.value("type", "unknown"));
    if (types.empty()) return;
    if (types == std::set<std::string>{"LVM2_member"}) {
        Json list = lvm_list(t, device);
        auto known = ceph_osd_ids(t);
        bool stale_ceph = !list.empty();
        for (const auto& id : sorted_ids(list))
            if (known.count(id)) stale_ceph = false;
        // Every LV on the disk must be a Ceph OSD's.
        if (!non_ceph_lvs(t, device).empty()) stale_ceph = false;
        if (stale_ceph) {
            t.log().info("Device {} holds the LVM of removed OSD(s) {}; it will be zapped", device, join(sorted_ids(list), ","));
            return;
        }
    }
    std::vector<std::string> v(types.begin(), types.end());
    throw TaskFailure("Device " + device + " on node " + node + " holds data (" + join(v, ", ") +
                      ") and is unsuitable for an OSD; it was left untouched (wipe it first if the data is not needed)");
}

void must(const HostTools& t, const std::vector<std::string>& argv, const std::string& failure) {
    auto r = t.run(argv);
    if (r.exit_status != 0)
        throw TaskFailure(failure + (r.timed_out ? " (timed out)" : "") + ": " + output_tail(r.output));
}

void must_ceph(const HostTools& t, const std::vector<std::string>& args, const std::string& failure) {
    auto r = t.ceph(args);
    if (r.exit_status != 0) throw TaskFailure(failure + ": " + output_tail(r.output));
}

// `systemctl status ceph-osd@<id>` exits 0 once the unit runs (the
// reference waited 1 s then asked once; we ask for up to 10 s).
bool osd_service_running(const HostTools& t, const std::string& id, std::stop_token stop) {
    auto end = std::chrono::steady_clock::now() + 10s;
    while (true) {
        if (t.run({"systemctl", "status", "ceph-osd@" + id}, 30s).exit_status == 0) return true;
        if (stop.stop_requested() || std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(500ms);
    }
}

// Waits until Ceph reports every OSD of `ids` up and in.
void wait_up(const HostTools& t, const std::vector<std::string>& ids, std::stop_token stop) {
    auto end = std::chrono::steady_clock::now() + t.options().up_timeout;
    std::string last;
    while (true) {
        auto r = t.ceph({"osd", "dump", "--format", "json"});
        auto j = r.exit_status == 0 ? json_in_output(r.output) : std::nullopt;
        size_t ready = 0;
        if (j && j->contains("osds"))
            for (const auto& o : (*j)["osds"])
                if (std::find(ids.begin(), ids.end(), std::to_string(o.value("osd", -1))) != ids.end() &&
                    o.value("up", 0) == 1 && o.value("in", 0) == 1)
                    ++ready;
        if (ready == ids.size()) return;
        if (stop.stop_requested()) throw TaskFailure("Stopped while waiting for OSD(s) " + join(ids, ",") + " to come up");
        if (std::chrono::steady_clock::now() > end)
            throw TaskFailure("OSD(s) " + join(ids, ",") + " on node " + t.options().node + " did not come up and in within " +
                              std::to_string(t.options().up_timeout.count()) + " s");
        std::this_thread::sleep_for(1s);
    }
}

// The primary's statistics of `id` (stats.weight no longer "|"), at most stats_timeout.
void wait_stats(zk::Session& zk, const HostTools& t, const std::string& id, std::stop_token stop) {
    if (t.options().stats_timeout.count() <= 0) return;
    auto end = std::chrono::steady_clock::now() + t.options().stats_timeout;
    while (!stop.stop_requested() && std::chrono::steady_clock::now() < end) {
        try {
            auto j = Json::parse(zk.get(path("osd.stats", {id})).value_or("{}"));
            if (j.contains("weight") && j["weight"] != "|") return;
        } catch (const std::exception&) {
        }
        std::this_thread::sleep_for(1s);
    }
    t.log().warn("OSD {}: no statistics from the primary within {} s (it is up; they follow)", id,
                 t.options().stats_timeout.count());
}

std::string mib(unsigned long long bytes) { return std::to_string(bytes / 1024 / 1024) + "M"; }

unsigned long long device_bytes(const HostTools& t, const std::string& dev) {
    auto r = t.run({"blockdev", "--getsize64", dev}, 60s);
    try {
        if (r.exit_status == 0) return std::stoull(trim(r.output));
    } catch (const std::exception&) {
    }
    throw TaskFailure("Failed to read the size of " + dev + ": " + output_tail(r.output));
}

bool vg_exists(const HostTools& t, const std::string& vg) {
    return t.run({"vgs", "--noheadings", "-o", "vg_name", vg}, 60s).exit_status == 0;
}

// ---------------------------------------------------------------- osd.add

std::string osd_add(zk::Session& zk, const HostTools& t, TaskRun& run) {
    const Json& kw = run.kwargs();
    const std::string& node = t.options().node;
    std::string device = kw_string(kw, "device").value_or("");
    std::string weight = kw_string(kw, "weight").value_or("1.0");
    auto ratio_s = kw_string(kw, "ext_db_ratio");
    auto size_s = kw_string(kw, "ext_db_size");
    long split_count = 1;
    if (auto s = kw_string(kw, "split_count")) {
        auto n = parse_decimal(*s);
        if (!n || *n < 1 || *n > 32 || std::floor(*n) != *n) throw TaskFailure("Invalid OSD count '" + *s + "' (1 to 32)");
        split_count = static_cast<long>(*n);
    }
    const bool ext_db = ratio_s || size_s;
    Stages st{run, 5 + 3 * split_count + (ext_db ? 3 * split_count + 1 : 0)};
    st.start("Adding " + std::to_string(split_count) + " new OSD(s) on device " + device + " with weight " + weight);

    if (ratio_s && size_s) throw TaskFailure("Invalid configuration: both an ext_db_size and ext_db_ratio were specified");
    if (!parse_decimal(weight)) throw TaskFailure("Invalid weight '" + weight + "' (a decimal number)");
    std::optional<double> ratio;
    std::optional<unsigned long long> db_bytes;
    if (ratio_s) {
        ratio = parse_decimal(*ratio_s);
        if (!ratio || *ratio <= 0 || *ratio >= 1) throw TaskFailure("Invalid ext_db_ratio '" + *ratio_s + "' (above 0, below 1)");
    }
    if (size_s) {
        db_bytes = parse_size_bytes(*size_s);
        if (!db_bytes || *db_bytes < 1024 * 1024) throw TaskFailure("Invalid ext_db_size '" + *size_s + "'");
    }
    if (ext_db && !vg_exists(t, "osd-db"))
        throw TaskFailure("No OSD database volume group (osd-db) on node " + node + "; create it first (pvc storage osd create-db-vg)");
    device = resolve_device(t, device);
    if (auto used = pvc_osds_on(zk, node, device); !used.empty())
        throw TaskFailure("Device " + device + " on node " + node + " is used by OSD(s) " + join(used, ","));
    refuse_foreign_data(t, device);

    std::vector<std::string> batch{"ceph-volume", "lvm", "batch", "--yes", "--prepare", "--bluestore"};
    if (split_count > 1) batch.insert(batch.end(), {"--osds-per-device", std::to_string(split_count)});
    batch.insert(batch.end(), {"--crush-device-class", device.find("nvme") != std::string::npos ? "nvme" : "ssd", device});

    st.step("Zapping block device " + device);
    must(t, {"ceph-volume", "lvm", "zap", "--destroy", device}, "Failed to perform ceph-volume lvm zap on " + device + " on node " + node);
    st.step("Preparing OSD(s) on device " + device);
    must(t, batch, "Failed to perform ceph-volume lvm batch on " + device + " on node " + node);
    st.step("Querying OSD(s) on device " + device);
    Json created = lvm_list(t, device);
    if (created.empty()) throw TaskFailure("Failed to perform ceph-volume lvm list on " + device + " on node " + node);
    auto ids = sorted_ids(created);

    if (ext_db) {
        for (const auto& id : ids) {
            const Json* e = block_entry(created, id);
            st.step("Preparing DB LV for OSD " + id);
            unsigned long long bytes = db_bytes ? *db_bytes
                                                : static_cast<unsigned long long>(device_bytes(t, e->value("lv_path", "")) * *ratio);
            std::string db = "osd-db/osd-" + id;
            st.step("Preparing Bluestore DB volume for OSD " + id + " on " + db);
            must(t, {"lvcreate", "-L", mib(bytes), "-n", "osd-" + id, "--yes", "osd-db"}, "Failed to run lvcreate on " + db);
            st.step("Attaching Bluestore DB volume to OSD " + id);
            must(t, {"ceph-volume", "lvm", "new-db", "--osd-id", id, "--osd-fsid", tag(*e, "ceph.osd_fsid"), "--target", db},
                 "Failed to perform ceph-volume lvm new-db on OSD " + id);
        }
        st.step("Requerying OSD(s) on device " + device);
        created = lvm_list(t, device);
        if (created.empty()) throw TaskFailure("Failed to perform ceph-volume lvm list on " + device + " on node " + node);
    }

    for (const auto& id : ids) {
        const Json* e = block_entry(created, id);
        if (!e) throw TaskFailure("OSD " + id + " vanished from device " + device + " on node " + node);
        std::string fsid = tag(*e, "ceph.osd_fsid");
        st.step("Adding OSD " + id + " to CRUSH map");
        must_ceph(t, {"osd", "crush", "add", "osd." + id, weight, "root=default", "host=" + node},
                  "Failed to perform ceph osd crush add for OSD " + id);
        st.step("Activating OSD " + id);
        must(t, {"ceph-volume", "lvm", "activate", "--bluestore", id, fsid}, "Failed to perform ceph-volume lvm activate for OSD " + id);
        if (!osd_service_running(t, id, run.stop_token())) throw TaskFailure("Failed to start OSD " + id + " process on node " + node);
        st.step("Adding OSD " + id + " to PVC");
        bool ok = zk.write({{path("osd.id", {id}), ""},
                            {path("osd.node", {id}), node},
                            {path("osd.device", {id}), device},
                            {path("osd.db_device", {id}), tag(*e, "ceph.db_device")},
                            {path("osd.fsid", {id}), ""},
                            {path("osd.ofsid", {id}), fsid},
                            {path("osd.cfsid", {id}), tag(*e, "ceph.cluster_fsid")},
                            {path("osd.lvm", {id}), ""},
                            {path("osd.vg", {id}), e->value("vg_name", "")},
                            {path("osd.lv", {id}), e->value("lv_name", "")},
                            {path("osd.is_split", {id}), split_count > 1 ? "True" : "False"},
                            {path("osd.stats", {id}), osd_stats_placeholder}});
        if (!ok) throw TaskFailure("OSD " + id + " runs on node " + node + " but could not be recorded in ZooKeeper");
        t.log().info("Added OSD {} on device {}", id, device);
    }

    st.step("Waiting for new OSD(s) to report stats");
    wait_up(t, ids, run.stop_token());
    wait_stats(zk, t, ids.back(), run.stop_token());
    st.current = st.total;
    run.progress(st.total, st.total, "Finishing up");
    return "Successfully created " + std::to_string(ids.size()) + " new OSD(s) " + join(ids, ",") + " on device " + device;
}

// ---------------------------------------------------------------- osd.add_db_vg

std::string osd_add_db_vg(const HostTools& t, TaskRun& run) {
    const std::string& node = t.options().node;
    std::string device = kw_string(run.kwargs(), "device").value_or("");
    Stages st{run, 4};
    st.start("Creating new OSD database volume group on device " + device);
    auto vg = t.run({"vgdisplay", "osd-db"}, 60s);
    if (vg.exit_status != 5) throw TaskFailure("Ceph OSD database VG already exists on node " + node);
    device = resolve_device(t, device);
    refuse_foreign_data(t, device);

    st.step("Creating partitions on device " + device);
    must(t, {"sgdisk", "--clear", device}, "Failed to create partition table on device " + device);
    must(t, {"sgdisk", "--new", "1::", "--typecode", "1:8e00", device}, "Failed to set partition type to LVM PV on device " + device);
    std::string partition = first_partition(device);
    // The kernel re-reads the table on sgdisk's request; the node follows.
    auto end = std::chrono::steady_clock::now() + 10s;
    struct stat s {};
    while (::stat(partition.c_str(), &s) != 0 && std::chrono::steady_clock::now() < end) {
        t.run({"partx", "-u", device}, 30s);
        std::this_thread::sleep_for(200ms);
    }
    if (::stat(partition.c_str(), &s) != 0)
        throw TaskFailure("Partition " + partition + " of device " + device + " did not appear on node " + node);

    st.step("Creating LVM PV on device " + device);
    must(t, {"pvcreate", "--force", partition}, "Failed to create LVM PV on device " + device);
    st.step("Creating LVM VG \"osd-db\" on device " + device);
    must(t, {"vgcreate", "--force", "osd-db", partition}, "Failed to create LVM VG on device " + device);
    run.progress(4, 4, "Finishing up");
    return "Successfully created new OSD DB volume group on device " + device;
}

// ---------------------------------------------------------------- shared by remove/replace

struct PvcOsd {
    std::string id, node, device, db_device, fsid, weight;
};

PvcOsd read_osd(zk::Session& zk, const std::string& id) {
    auto v = zk.get_many({path("osd.id", {id}), path("osd.node", {id}), path("osd.device", {id}),
                          path("osd.db_device", {id}), path("osd.ofsid", {id}), path("osd.stats", {id})});
    if (!v[0]) throw TaskFailure("No OSD " + id + " in the cluster");
    PvcOsd o{id, v[1].value_or(""), v[2].value_or(""), v[3].value_or(""), v[4].value_or(""), ""};
    try {
        auto s = Json::parse(v[5].value_or("{}"));
        if (s.contains("weight") && s["weight"] != "|") o.weight = s["weight"].is_string() ? s["weight"].get<std::string>() : s["weight"].dump();
    } catch (const std::exception&) {
    }
    return o;
}

void require_here(const HostTools& t, const PvcOsd& o) {
    if (o.node != t.options().node)
        throw TaskFailure("OSD " + o.id + " is on node " + o.node + ", not on node " + t.options().node);
}

// Down, out, safe-to-destroy (bounded, then on anyway, as the reference), stop.
void take_down(const HostTools& t, Stages& st, const std::string& id, bool force, bool wait_safe,
               const std::function<void(const std::string&)>& soft) {
    auto step_or_warn = [&](const std::vector<std::string>& args, const std::string& failure) {
        auto r = t.ceph(args);
        if (r.exit_status == 0) return;
        if (!force) throw TaskFailure(failure + ": " + output_tail(r.output));
        soft(failure + "; ignoring error due to force flag");
    };
    st.step("Setting OSD " + id + " down");
    step_or_warn({"osd", "down", id}, "Failed to set OSD " + id + " down");
    st.step("Setting OSD " + id + " out");
    step_or_warn({"osd", "out", id}, "Failed to set OSD " + id + " out");
    if (wait_safe) {
        st.step("Waiting for OSD " + id + " to be safe to remove");
        auto end = std::chrono::steady_clock::now() + t.options().safe_timeout;
        while (true) {
            auto r = t.ceph({"osd", "safe-to-destroy", "osd." + id});
            if (r.exit_status == 0 || r.exit_status == 11) break;
            if (st.run.stop_token().stop_requested()) throw TaskFailure("Stopped while waiting for OSD " + id + " to be safe to remove");
            if (std::chrono::steady_clock::now() > end) {
                soft("Timed out (" + std::to_string(t.options().safe_timeout.count()) + "s) waiting for OSD " + id +
                     " to be safe to remove; proceeding anyways");
                break;
            }
            t.ceph({"osd", "down", id});
            t.ceph({"osd", "out", id});
            std::this_thread::sleep_for(1s);
        }
    }
    st.step("Stopping OSD " + id);
    auto r = t.run({"systemctl", "stop", "ceph-osd@" + id}, 120s);
    if (r.exit_status != 0) {
        if (!force) throw TaskFailure("Failed to stop OSD " + id + " process: " + output_tail(r.output));
        soft("Failed to stop OSD " + id + " process; ignoring error due to force flag");
    }
    t.ceph({"osd", "down", id});  // the monitor may not have noticed yet
}

// `ceph osd destroy` refuses an OSD the monitor still has up: asked again for a while.
CommandResult destroy(const HostTools& t, const std::string& id, std::stop_token stop) {
    auto end = std::chrono::steady_clock::now() + 30s;
    while (true) {
        auto r = t.ceph({"osd", "destroy", id, "--yes-i-really-mean-it"});
        if (r.exit_status == 0 || stop.stop_requested() || std::chrono::steady_clock::now() > end) return r;
        t.ceph({"osd", "down", id});
        std::this_thread::sleep_for(1s);
    }
}

// Only LVs that ceph-volume made on the disk: anything else keeps it from a zap.
std::optional<std::string> foreign_lvs(const HostTools& t, const std::string& device) {
    auto v = non_ceph_lvs(t, device);
    if (v.empty()) return std::nullopt;
    return join(v, ", ");
}

// ---------------------------------------------------------------- osd.remove

std::string osd_remove(zk::Session& zk, const HostTools& t, TaskRun& run) {
    const Json& kw = run.kwargs();
    const std::string& node = t.options().node;
    std::string id = osd_id_arg(kw);
    bool force = kw_bool(kw, "force_flag"), skip_zap = kw_bool(kw, "skip_zap_flag");
    PvcOsd o;
    try {
        o = read_osd(zk, id);
    } catch (const TaskFailure&) {
        if (!force) throw;
        o = PvcOsd{id, node, "", "", "", ""};
    }
    Stages st{run, 7 + (force ? 0 : 1) + (skip_zap ? 0 : 2) + (o.db_device.empty() ? 0 : 1)};
    st.start("Removing OSD " + id);
    require_here(t, o);
    std::vector<std::string> warnings;
    auto soft = [&](const std::string& w) {
        t.log().warn("{}", w);
        warnings.push_back(w);
    };
    if (!ceph_osd_ids(t).count(id)) {
        if (!force) throw TaskFailure("OSD " + id + " not found in Ceph");
        soft("OSD " + id + " not found in Ceph; ignoring error due to force flag");
    }
    take_down(t, st, id, force, !force, soft);

    st.step("Deleting OSD " + id + " from PVC");
    zk.remove_recursive(path("osd.id", {id}));
    auto soft_or_fail = [&](const CommandResult& r, const std::string& failure) {
        if (r.exit_status == 0) return;
        if (!force) throw TaskFailure(failure + ": " + output_tail(r.output));
        soft(failure + "; ignoring error due to force flag");
    };
    st.step("Destroying OSD " + id);
    soft_or_fail(destroy(t, id, run.stop_token()), "Failed to destroy OSD " + id);
    st.step("Removing OSD " + id + " from CRUSH map");
    soft_or_fail(t.ceph({"osd", "crush", "rm", "osd." + id}), "Failed to remove OSD " + id + " from CRUSH map");
    st.step("Purging OSD " + id);
    std::vector<std::string> purge{"osd", "purge", id};
    if (force) purge.push_back("--force");
    purge.push_back("--yes-i-really-mean-it");
    soft_or_fail(t.ceph(purge), "Failed to purge OSD " + id);
    if (!o.db_device.empty()) {
        st.step("Removing OSD DB logical volume " + o.db_device);
        soft_or_fail(t.run({"lvremove", "--yes", "--force", o.db_device}), "Failed to remove OSD DB logical volume " + o.db_device);
    }
    if (!skip_zap) {
        st.step("Zapping old disk " + o.device + " if possible");
        Json found = o.device.empty() ? Json::object() : lvm_list(t, o.device);
        if (!found.contains(id)) {
            soft("Could not find OSD " + id + " on device " + o.device + "; skipping zap");
        } else if (auto peers = pvc_osds_on(zk, node, o.device); !peers.empty()) {
            soft("Found " + std::to_string(peers.size()) + " OSD(s) still remaining on " + o.device + "; skipping zap");
        } else if (auto foreign = foreign_lvs(t, o.device)) {
            soft("Device " + o.device + " holds logical volumes that are not Ceph's (" + *foreign + "); skipping zap");
        } else {
            soft_or_fail(t.run({"ceph-volume", "lvm", "zap", "--destroy", o.device}),
                         "Failed to run ceph-volume lvm zap on device " + o.device);
        }
    }
    run.progress(st.total, st.total, "Finishing up");
    t.log().info("Removed OSD {}", id);
    return "Successfully removed OSD " + id;
}

// ---------------------------------------------------------------- osd.refresh

std::string osd_refresh(zk::Session& zk, const HostTools& t, TaskRun& run) {
    const Json& kw = run.kwargs();
    const std::string& node = t.options().node;
    std::string id = osd_id_arg(kw);
    std::string device = kw_string(kw, "device").value_or("");
    bool ext_db = kw_bool(kw, "ext_db_flag");
    PvcOsd o = read_osd(zk, id);
    auto on_block = pvc_osds_on(zk, node, o.device);
    if (on_block.empty()) on_block.push_back(id);
    Stages st{run, 1 + 3 * static_cast<long>(on_block.size())};
    st.start("Refreshing/reimporting OSD(s) " + join(on_block, ",") + " on device " + device);
    require_here(t, o);
    device = resolve_device(t, device);
    if (!ceph_osd_ids(t).count(id)) throw TaskFailure("Could not find OSD " + id + " in the cluster");
    Json found = lvm_list(t, device);
    if (!found.contains(id)) throw TaskFailure("Could not find OSD " + id + " on device " + device + " on node " + node);

    std::vector<std::string> done;
    for (const auto& osd : sorted_ids(found)) {
        const Json* e = block_entry(found, osd);
        if (!e) continue;
        st.step("Querying for OSD on device");
        std::string fsid = tag(*e, "ceph.osd_fsid");
        std::string stored;
        try {
            stored = read_osd(zk, osd).fsid;
        } catch (const TaskFailure&) {
            throw TaskFailure("OSD " + osd + " on device " + device + " is not in PVC; OSD cannot be imported");
        }
        if (fsid != stored)
            throw TaskFailure("OSD " + osd + " FSID " + stored + " does not match volume FSID " + fsid + "; OSD cannot be imported");
        if (ext_db) {
            struct stat s {};
            std::string db = "/dev/osd-db/osd-" + osd;
            if (::stat(db.c_str(), &s) != 0)
                throw TaskFailure("OSD Bluestore DB volume osd-db/osd-" + osd + " does not exist; OSD cannot be imported");
        }
        st.step("Activating OSD " + osd);
        must(t, {"ceph-volume", "lvm", "activate", "--bluestore", osd, fsid}, "Failed to run ceph-volume lvm activate for OSD " + osd);
        if (!osd_service_running(t, osd, run.stop_token())) throw TaskFailure("Failed to start OSD " + osd + " process on node " + node);
        st.step("Updating OSD " + osd + " in PVC");
        if (!zk.write({{path("osd.device", {osd}), device}, {path("osd.vg", {osd}), e->value("vg_name", "")},
                       {path("osd.lv", {osd}), e->value("lv_name", "")}}))
            throw TaskFailure("OSD " + osd + " runs but could not be updated in ZooKeeper");
        done.push_back(osd);
    }
    run.progress(st.total, st.total, "Finishing up");
    return "Successfully reimported OSD(s) " + join(done, ",") + " on device " + device;
}

// ---------------------------------------------------------------- osd.replace

std::string osd_replace(zk::Session& zk, const HostTools& t, TaskRun& run) {
    const Json& kw = run.kwargs();
    const std::string& node = t.options().node;
    std::string id = osd_id_arg(kw);
    std::string new_device = kw_string(kw, "new_device").value_or("");
    auto old_device = kw_string(kw, "old_device");
    auto weight = kw_string(kw, "weight");
    auto ratio_s = kw_string(kw, "ext_db_ratio");
    auto size_s = kw_string(kw, "ext_db_size");
    PvcOsd first = read_osd(zk, id);
    std::vector<PvcOsd> osds;
    for (const auto& oid : pvc_osds_on(zk, node, first.device)) osds.push_back(read_osd(zk, oid));
    if (osds.empty()) osds.push_back(first);
    std::vector<std::string> ids;
    bool any_db = ratio_s || size_s;
    for (const auto& o : osds) {
        ids.push_back(o.id);
        if (!o.db_device.empty()) any_db = true;
    }
    const long n = static_cast<long>(osds.size());
    Stages st{run, 3 + 10 * n + (any_db ? 2 * n : 0)};
    st.start("Replacing OSD(s) " + join(ids, ",") + " with device " + new_device);
    require_here(t, first);
    if (ratio_s && size_s) throw TaskFailure("Invalid configuration: both an ext_db_size and ext_db_ratio were specified");
    if (weight && !parse_decimal(*weight)) throw TaskFailure("Invalid weight '" + *weight + "' (a decimal number)");
    new_device = resolve_device(t, new_device);
    if (auto used = pvc_osds_on(zk, node, new_device); !used.empty())
        throw TaskFailure("Device " + new_device + " on node " + node + " is used by OSD(s) " + join(used, ","));
    refuse_foreign_data(t, new_device);

    // Which old disk to zap: the given one if it holds this OSD, else the stored one.
    std::optional<std::string> real_old;
    if (old_device && valid_device_path(*old_device) && lvm_list(t, *old_device).contains(id)) real_old = *old_device;
    if (!real_old && !first.device.empty() && lvm_list(t, first.device).contains(id)) real_old = first.device;
    if (!real_old) t.log().warn("No valid old block device found for OSD(s) {}; skipping zap", join(ids, ","));
    std::string w = weight.value_or(first.weight.empty() ? "1.0" : first.weight);

    auto soft = [&](const std::string& m) { t.log().warn("{}", m); };
    for (const auto& o : osds) {
        take_down(t, st, o.id, false, true, soft);
        st.step("Destroying OSD " + o.id);
        auto r = destroy(t, o.id, run.stop_token());
        if (r.exit_status != 0) throw TaskFailure("Failed to destroy OSD " + o.id + ": " + output_tail(r.output));
    }
    st.step("Zapping old disk " + real_old.value_or("") + " if possible");
    if (real_old) {
        if (auto foreign = foreign_lvs(t, *real_old))
            soft("Device " + *real_old + " holds logical volumes that are not Ceph's (" + *foreign + "); not zapped");
        else if (t.run({"ceph-volume", "lvm", "zap", "--destroy", *real_old}).exit_status != 0)
            soft("Failed to zap old disk " + *real_old + "; proceeding anyways");
    }
    st.step("Preparing LVM volume group on new disk " + new_device);
    must(t, {"ceph-volume", "lvm", "zap", "--destroy", new_device}, "Failed to run ceph-volume lvm zap on new disk " + new_device);
    must(t, {"pvcreate", new_device}, "Failed to run pvcreate on new disk " + new_device);
    std::string vg_uuid = trim(t.run({"cat", "/proc/sys/kernel/random/uuid"}, 10s).output);
    std::string vg = "ceph-" + vg_uuid;
    must(t, {"vgcreate", vg, new_device}, "Failed to run vgcreate on new disk " + new_device);
    unsigned long long osd_mb = device_bytes(t, new_device) / static_cast<unsigned long long>(n) / 1024 / 1024 / 4 * 4;
    // LVM's metadata takes the first extent: the last OSD gets what is left.
    auto free_mb = [&] {
        auto rows = lvm_report(t, {"vgs", "--units", "m", "--nosuffix", "-o", "vg_free", vg}, "vg");
        try {
            if (!rows.empty()) return static_cast<unsigned long long>(std::stod(rows[0].value("vg_free", "0"))) / 4 * 4;
        } catch (const std::exception&) {
        }
        return 0ULL;
    };
    std::optional<unsigned long long> db_mb;
    if (ratio_s) {
        auto r = parse_decimal(*ratio_s);
        if (!r || *r <= 0 || *r >= 1) throw TaskFailure("Invalid ext_db_ratio '" + *ratio_s + "' (above 0, below 1)");
        db_mb = static_cast<unsigned long long>(osd_mb * *r) / 4 * 4;
    } else if (size_s) {
        auto b = parse_size_bytes(*size_s);
        if (!b) throw TaskFailure("Invalid ext_db_size '" + *size_s + "'");
        db_mb = *b / 1024 / 1024 / 4 * 4;
    } else if (!osds.front().db_device.empty()) {
        db_mb = device_bytes(t, osds.front().db_device) / 1024 / 1024 / 4 * 4;
    }
    for (const auto& o : osds) {
        st.step("Preparing LVM logical volume for OSD " + o.id + " on new disk " + new_device);
        std::string lv = "osd-block-" + o.fsid;
        must(t, {"lvcreate", "--yes", "-L", std::to_string(std::min(osd_mb, free_mb())) + "M", "-n", lv, vg},
             "Failed to run lvcreate for OSD " + o.id);
        st.step("Preparing OSD " + o.id + " on new disk " + new_device);
        must(t, {"ceph-volume", "lvm", "prepare", "--bluestore", "--osd-id", o.id, "--osd-fsid", o.fsid, "--data", "/dev/" + vg + "/" + lv},
             "Failed to run ceph-volume lvm prepare for OSD " + o.id);
    }
    for (const auto& o : osds) {
        if (!o.db_device.empty() || (db_mb && (ratio_s || size_s))) {
            std::string db = "osd-db/osd-" + o.id;
            st.step("Preparing Bluestore DB volume for OSD " + o.id + " on " + db);
            if (!o.db_device.empty()) must(t, {"lvremove", "--yes", "--force", db}, "Failed to run lvremove on " + db);
            must(t, {"lvcreate", "-L", std::to_string(db_mb.value_or(1024)) + "M", "-n", "osd-" + o.id, "--yes", "osd-db"},
                 "Failed to run lvcreate on " + db);
            st.step("Attaching Bluestore DB volume to OSD " + o.id);
            must(t, {"ceph-volume", "lvm", "new-db", "--osd-id", o.id, "--osd-fsid", o.fsid, "--target", db},
                 "Failed to run ceph-volume lvm new-db for OSD " + o.id);
        }
        st.step("Updating OSD " + o.id + " in CRUSH map");
        must_ceph(t, {"osd", "crush", "add", "osd." + o.id, w, "root=default", "host=" + node},
                  "Failed to run ceph osd crush add for OSD " + o.id);
        st.step("Activating OSD " + o.id);
        must(t, {"ceph-volume", "lvm", "activate", "--bluestore", o.id, o.fsid}, "Failed to run ceph-volume lvm activate for OSD " + o.id);
        if (!osd_service_running(t, o.id, run.stop_token())) throw TaskFailure("Failed to start OSD " + o.id + " process on node " + node);
        st.step("Updating OSD " + o.id + " in PVC");
        Json found = lvm_list(t, new_device);
        const Json* e = block_entry(found, o.id);
        std::vector<zk::KeyValue> kvs{{path("osd.device", {o.id}), new_device},
                                      {path("osd.vg", {o.id}), vg},
                                      {path("osd.lv", {o.id}), "osd-block-" + o.fsid}};
        if (e) kvs.push_back({path("osd.db_device", {o.id}), tag(*e, "ceph.db_device")});
        if (!zk.write(kvs)) throw TaskFailure("OSD " + o.id + " runs but could not be updated in ZooKeeper");
    }
    wait_up(t, ids, run.stop_token());
    run.progress(st.total, st.total, "Finishing up");
    return "Successfully replaced OSD(s) " + join(ids, ",") + " on new disk " + new_device;
}

template <class F>
services::TaskHandler bind_zk(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools, F f) {
    return [zk = std::move(zk), tools = std::move(tools), f](TaskRun& run) { return f(*zk, *tools, run); };
}

}  // namespace

services::TaskHandler osd_add_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return bind_zk(std::move(zk), std::move(tools), osd_add);
}
services::TaskHandler osd_add_db_vg_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return bind_zk(std::move(zk), std::move(tools), [](zk::Session&, const HostTools& t, TaskRun& run) { return osd_add_db_vg(t, run); });
}
services::TaskHandler osd_replace_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return bind_zk(std::move(zk), std::move(tools), osd_replace);
}
services::TaskHandler osd_refresh_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return bind_zk(std::move(zk), std::move(tools), osd_refresh);
}
services::TaskHandler osd_remove_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return bind_zk(std::move(zk), std::move(tools), osd_remove);
}

OsdTaskHandles register_osd_tasks(services::TaskHandlers& tasks, std::shared_ptr<zk::Session> zk,
                                  const OsdTaskOptions& options, Logger log) {
    auto tools = std::make_shared<const HostTools>(options, std::move(log));
    OsdTaskHandles h;
    h.handles.push_back(tasks.handle("osd.add", osd_add_task(zk, tools)));
    h.handles.push_back(tasks.handle("osd.add_db_vg", osd_add_db_vg_task(zk, tools)));
    h.handles.push_back(tasks.handle("osd.replace", osd_replace_task(zk, tools)));
    h.handles.push_back(tasks.handle("osd.refresh", osd_refresh_task(zk, tools)));
    h.handles.push_back(tasks.handle("osd.remove", osd_remove_task(zk, tools)));
    h.handles.push_back(tasks.handle("storage.benchmark", benchmark_task(zk, tools)));
    return h;
}

}  // namespace pvc::storage
