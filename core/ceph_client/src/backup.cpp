// VM backups, autobackup and cluster backups (pvc/backup.hpp).
#include "pvc/backup.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include "connection.hpp"
#include "pvc/client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/command.hpp"
#include "pvc/domain_xml.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "rbd_info.hpp"
#include "rbd_stream.hpp"

namespace pvc::backup {

namespace fs = std::filesystem;
using schema::path;
using Clock = std::chrono::steady_clock;

std::string datestring_now() {
    std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof(buf), "%Y%m%d%H%M%S", &tm);
    return buf;
}

std::string seconds_text(double s) {
    long long centi = static_cast<long long>(s * 100 + 0.5);
    std::string out = std::to_string(centi / 100) + "." + std::to_string((centi % 100) / 10);
    if (centi % 10) out += std::to_string(centi % 10);
    return out;
}

namespace {

Answer ok(std::string m) { return {200, std::move(m)}; }
Answer bad(std::string m) { return {400, std::move(m)}; }

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::string host_of(const Context& c) {
    if (!c.host.empty()) return c.host;
    char buf[256] = {};
    gethostname(buf, sizeof(buf) - 1);
    std::string h = buf;
    return h.substr(0, h.find('.'));
}

std::optional<std::string> find_uuid(zk::Session& zk, const std::string& id) {
    if (is_uuid(id)) {
        std::string lower = id;
        std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
        if (zk.exists(path("domain.name", {lower}))) return lower;
    }
    if (!client::is_safe_name(id) || id.size() > 255) return std::nullopt;
    return client::vm_by_name(zk, id);
}

// A name that is one path component (a VM as given, a datestring).
bool component(const std::string& s) { return client::is_safe_name(s) && s.size() <= 255; }

bool datestring_ok(const std::string& s) {
    return s.size() == 14 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

std::string join_list(const std::vector<std::string>& v) { return join(v, ", "); }

struct Volume {
    std::string pool, name, size;  // size: the human size ("10G")
    std::string spec() const { return pool + "/" + name; }
};

// `fn` for every volume at once, each on a thread of its own; the results in order.
std::vector<ceph::Result> each_volume(const std::vector<Volume>& volumes,
                                      const std::function<ceph::Result(const Volume&)>& fn) {
    std::vector<std::future<ceph::Result>> running;
    for (const auto& v : volumes)
        running.push_back(std::async(std::launch::async, [&fn, v] {
            try {
                return fn(v);
            } catch (const std::exception& e) {
                return ceph::Result{500, e.what()};
            }
        }));
    std::vector<ceph::Result> out;
    for (auto& f : running) out.push_back(f.get());
    return out;
}

// "pvcdisks/<pool>.<volume>.<ext>": the pool up to the first dot, the
// extension after the last (a volume name may hold dots).
bool parse_file(const std::string& rel, std::string& pool, std::string& volume, std::string& ext) {
    std::string base = rel.substr(rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/') + 1);
    size_t first = base.find('.'), last = base.rfind('.');
    if (first == std::string::npos || last == first) return false;
    pool = base.substr(0, first);
    volume = base.substr(first + 1, last - first - 1);
    ext = base.substr(last + 1);
    return component(pool) && component(volume) && pool.find('@') == std::string::npos &&
           volume.find('@') == std::string::npos;
}

// Reads and checks a pvcbackup.json; the problem as text.
std::optional<Json> read_details(const fs::path& file, std::string& problem) {
    std::ifstream in(file);
    if (!in) {
        problem = std::string("[Errno ") + std::to_string(errno) + "] " + std::strerror(errno) + ": '" + file.string() + "'";
        return std::nullopt;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    Json j = Json::parse(ss.str(), nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
        problem = "not a JSON object: " + file.string();
        return std::nullopt;
    }
    auto str_or_null = [&](const char* k) { return j.contains(k) && (j[k].is_string() || j[k].is_null()); };
    if (!j.contains("type") || !j["type"].is_string()) problem = "'type' missing or not a string";
    else if (!j.contains("datestring") || !j["datestring"].is_string()) problem = "'datestring' missing or not a string";
    else if (!str_or_null("incremental_parent")) problem = "'incremental_parent' missing";
    else if (!j.contains("retained_snapshot") || !j["retained_snapshot"].is_boolean())
        problem = "'retained_snapshot' missing or not a boolean";
    else if (!j.contains("vm_detail") || !j["vm_detail"].is_object()) problem = "'vm_detail' missing or not an object";
    else if (!j.contains("backup_files") || !j["backup_files"].is_array()) problem = "'backup_files' missing or not a list";
    if (!problem.empty()) return std::nullopt;
    for (const auto& f : j["backup_files"]) {
        std::string p, v, e;
        if (!f.is_array() || f.size() != 2 || !f[0].is_string() || !f[1].is_string() ||
            !parse_file(f[0].get<std::string>(), p, v, e)) {
            problem = "'backup_files' holds an entry that is not [\"pvcdisks/<pool>.<volume>.<ext>\", \"<size>\"]";
            return std::nullopt;
        }
    }
    return j;
}

// An open file closed on scope exit.
struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

std::string ceph_text(const std::exception& e) { return e.what(); }

// Writes `text` to `file` and syncs it.
void write_file(const fs::path& file, const std::string& text) {
    Fd f{::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
    if (f.fd < 0) throw std::runtime_error(std::string(std::strerror(errno)) + ": " + file.string());
    size_t done = 0;
    while (done < text.size()) {
        ssize_t w = ::write(f.fd, text.data() + done, text.size() - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            throw std::runtime_error(std::string(std::strerror(errno)) + ": " + file.string());
        }
        done += static_cast<size_t>(w);
    }
    if (::fsync(f.fd) < 0) throw std::runtime_error(std::string(std::strerror(errno)) + ": " + file.string());
}

void sync_dir(const fs::path& dir) {
    Fd d{::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
    if (d.fd >= 0) ::fsync(d.fd);
}

}  // namespace

// ---------------------------------------------------------------- create

Answer create(const Context& c, const std::string& vm, const std::string& backup_path,
              const std::optional<std::string>& incremental_parent, bool retain_snapshot) {
    const auto t0 = Clock::now();
    const std::string ds = datestring_now();
    const std::string snap = "backup_" + ds;
    zk::Session& zk = *c.zk;
    if (incremental_parent && retain_snapshot)
        return bad("ERROR: Retaining snapshots of incremental backups is not supported!");
    auto uuid = find_uuid(zk, vm);
    if (!uuid) return bad("ERROR: Could not find VM '" + vm + "' in the cluster!");
    if (backup_path.empty() || backup_path[0] != '/')
        return bad("ERROR: Target path " + backup_path + " is not a valid absolute path on the primary coordinator!");
    std::error_code ec;
    if (!fs::is_directory(backup_path, ec)) return bad("ERROR: Target path " + backup_path + " does not exist!");
    if (incremental_parent && !datestring_ok(*incremental_parent))
        return bad("ERROR: Incremental parent " + *incremental_parent +
                   " given, but no snapshots were found; cannot export an incremental backup.");
    std::optional<Json> detail = c.vm_detail ? c.vm_detail(*uuid) : std::nullopt;
    if (!detail) return bad("ERROR: VM listing returned invalid data for VM '" + vm + "'");
    auto xml = zk.get(path("domain.xml", {*uuid}));
    auto parsed = xml ? try_parse_domain_xml(*xml) : std::nullopt;
    if (!parsed) return bad("ERROR: VM '" + vm + "' has no readable XML configuration");
    std::vector<Volume> volumes;
    for (const auto& spec : parsed->rbd_list()) {
        size_t slash = spec.find('/');
        Volume v{spec.substr(0, slash), slash == std::string::npos ? "" : spec.substr(slash + 1), ""};
        if (!component(v.pool) || !component(v.name) || v.name.find('/') != std::string::npos)
            return bad("ERROR: Failed to get volume details for " + spec + ": No volumes returned.");
        auto stats = zk.get(path("volume.stats", {v.pool, v.name}));
        if (!zk.exists(path("volume.name", {v.pool, v.name})) || !stats)
            return bad("ERROR: Failed to get volume details for " + spec + ": No volumes returned.");
        auto j = Json::parse(*stats, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("size") || !j["size"].is_number_unsigned())
            return bad("ERROR: Failed to get volume size for " + spec + ": its stats hold no size");
        v.size = ceph::human_size(j["size"].get<std::uint64_t>());
        volumes.push_back(v);
    }
    if (volumes.empty()) return bad("ERROR: VM '" + vm + "' has no RBD volumes to back up.");
    if (incremental_parent)
        for (const auto& v : volumes)
            if (!zk.exists(path("snapshot.name", {v.pool, v.name, "backup_" + *incremental_parent})))
                return bad("ERROR: Incremental parent " + *incremental_parent +
                           " given, but no snapshots were found; cannot export an incremental backup.");
    const std::string ext = incremental_parent ? "rbddiff" : "rbdimg";

    // The backup is written into a hidden directory and renamed when complete.
    const fs::path vm_dir = fs::path(backup_path) / vm, final_dir = vm_dir / ds,
                   tmp_dir = vm_dir / ("." + ds + ".partial");
    bool made_vm_dir = !fs::exists(vm_dir, ec);
    if (fs::exists(final_dir, ec))
        return bad("ERROR: Failed to create backup directory: " + final_dir.string() + " exists already");
    fs::create_directories(tmp_dir / "pvcdisks", ec);
    if (ec) return bad("ERROR: Failed to create backup directory: " + ec.message() + ": '" + tmp_dir.string() + "'");
    auto discard = [&] {
        std::error_code e2;
        fs::remove_all(tmp_dir, e2);
        if (made_vm_dir) fs::remove(vm_dir, e2);  // only when empty
    };

    std::vector<std::string> created, failed, messages;
    auto remove_created = [&] {
        std::vector<Volume> made;
        for (const auto& spec : created) {
            size_t slash = spec.find('/');
            made.push_back({spec.substr(0, slash), spec.substr(slash + 1), ""});
        }
        each_volume(made, [&](const Volume& v) { return c.ceph->remove_snapshot(v.pool, v.name, snap); });
    };
    // Every volume's snapshot at once: closer together in time (each waits
    // about a second for the monitor), and a VM's disks are more consistent.
    auto results = each_volume(volumes, [&](const Volume& v) { return c.ceph->add_snapshot(v.pool, v.name, snap); });
    for (size_t i = 0; i < volumes.size(); ++i) {
        if (results[i].ok()) created.push_back(volumes[i].spec());
        else {
            failed.push_back(volumes[i].spec());
            messages.push_back(results[i].message);
        }
    }
    if (!failed.empty()) {
        remove_created();
        discard();
        return bad("ERROR: Failed to create snapshot for volume(s) " + join_list(failed) + ": " + join_list(messages));
    }

    Json files = Json::array();
    try {
        ceph::Connector connector(c.settings);
        auto conn = connector.get();
        for (const auto& v : volumes) {
            std::string rel = "pvcdisks/" + v.pool + "." + v.name + "." + ext;
            try {
                ceph::Io io(*conn, v.pool);
                fs::path file = tmp_dir / rel;
                Fd f{::open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)};
                if (f.fd < 0) throw std::runtime_error(std::string("rbd: error opening ") + file.string() + ": " + std::strerror(errno));
                if (incremental_parent) ceph::export_diff(io, v.name, "backup_" + *incremental_parent, snap, f.fd);
                else ceph::export_image(io, v.name, snap, f.fd);
                if (::fsync(f.fd) < 0) throw std::runtime_error(std::string("rbd: error writing ") + file.string() + ": " + std::strerror(errno));
                files.push_back(Json::array({rel, v.size}));
            } catch (const std::exception& e) {
                failed.push_back(v.spec());
                messages.push_back(ceph_text(e));
            }
        }
    } catch (const std::exception& e) {  // no connection
        failed.push_back(volumes.front().spec());
        messages.push_back(ceph_text(e));
    }
    if (!failed.empty()) {
        remove_created();
        discard();
        return bad("ERROR: Failed to export snapshot for volume(s) " + join_list(failed) + ": " + join_list(messages));
    }

    Json details;
    details["type"] = incremental_parent ? "incremental" : "full";
    details["datestring"] = ds;
    details["incremental_parent"] = incremental_parent ? Json(*incremental_parent) : Json(nullptr);
    details["retained_snapshot"] = retain_snapshot;
    details["vm_detail"] = *detail;
    details["backup_files"] = files;
    try {
        write_file(tmp_dir / "pvcbackup.json", ceph::py_dumps(details));
        sync_dir(tmp_dir);
        fs::rename(tmp_dir, final_dir);
        sync_dir(vm_dir);
    } catch (const std::exception& e) {
        remove_created();
        discard();
        return bad(std::string("ERROR: Failed to write backup details: ") + e.what());
    }

    std::vector<std::string> lines, not_removed;
    if (!retain_snapshot) {
        auto removed = each_volume(volumes, [&](const Volume& v) { return c.ceph->remove_snapshot(v.pool, v.name, snap); });
        for (size_t i = 0; i < volumes.size(); ++i)
            if (!removed[i].ok()) not_removed.push_back(volumes[i].spec());
        if (!not_removed.empty())
            lines.push_back("WARNING: Failed to remove snapshot(s) as requested for volume(s) " + join_list(not_removed));
    }
    lines.push_back("Successfully backed up VM '" + vm + "' (" + details["type"].get<std::string>() + "@" + ds +
                    (retain_snapshot ? ", snapshots retained" : "") + ") to '" + host_of(c) + ":" + backup_path +
                    "' in " + seconds_text(since(t0)) + "s.");
    return ok(join(lines, "\n"));
}

// ---------------------------------------------------------------- remove

namespace {
// The checks remove and restore share; nullopt when they pass.
std::optional<Answer> source_checks(const std::string& vm, const std::string& backup_path, const std::string& ds) {
    std::error_code ec;
    if (backup_path.empty() || backup_path[0] != '/')
        return bad("ERROR: Source path " + backup_path + " is not a valid absolute path on the primary coordinator!");
    if (!fs::is_directory(backup_path, ec)) return bad("ERROR: Source path " + backup_path + " does not exist!");
    if (!component(vm) || !fs::is_directory(fs::path(backup_path) / vm, ec))
        return bad("ERROR: Source VM path " + backup_path + "/" + vm + " does not exist!");
    if (!component(ds) || !fs::is_regular_file(fs::path(backup_path) / vm / ds / "pvcbackup.json", ec))
        return bad("ERROR: The specified source backup files do not exist!");
    return std::nullopt;
}
}  // namespace

Answer remove(const Context& c, const std::string& vm, const std::string& backup_path, const std::string& ds) {
    const auto t0 = Clock::now();
    if (!find_uuid(*c.zk, vm)) return bad("ERROR: Could not find VM '" + vm + "' in the cluster!");
    if (auto refused = source_checks(vm, backup_path, ds)) return *refused;
    const fs::path dir = fs::path(backup_path) / vm / ds;
    std::error_code ec;
    if (!fs::is_directory(dir / "pvcdisks", ec)) return bad("ERROR: The specified source backup files do not exist!");
    std::string problem;
    auto details = read_details(dir / "pvcbackup.json", problem);
    if (!details) return bad("ERROR: Failed to read source backup details: " + problem);
    std::vector<std::string> lines, not_removed;
    if ((*details)["retained_snapshot"].get<bool>()) {
        for (const auto& f : (*details)["backup_files"]) {
            std::string pool, volume, ext;
            parse_file(f[0].get<std::string>(), pool, volume, ext);
            if (!c.ceph->remove_snapshot(pool, volume, "backup_" + ds).ok()) not_removed.push_back(pool + "/" + volume);
        }
    }
    if (!not_removed.empty())
        lines.push_back("WARNING: Failed to remove snapshot(s) as requested for volume(s) " + join_list(not_removed));
    fs::remove_all(dir, ec);
    if (ec) lines.push_back("WARNING: Failed to remove backup file(s) from " + backup_path + ": " + ec.message());
    lines.push_back("Removed VM backup " + ds + " for '" + vm + "' from '" + host_of(c) + ":" + backup_path + "' in " +
                    seconds_text(since(t0)) + "s.");
    return ok(join(lines, "\n"));
}

// ---------------------------------------------------------------- restore

Answer restore(const Context& c, const std::string& vm, const std::string& backup_path, const std::string& ds,
               bool retain_snapshot) {
    const auto t0 = Clock::now();
    zk::Session& zk = *c.zk;
    if (find_uuid(zk, vm))
        return bad("ERROR: VM '" + vm + "' already exists in the cluster! Remove or rename it before restoring a backup.");
    if (auto refused = source_checks(vm, backup_path, ds)) return *refused;
    const fs::path vm_dir = fs::path(backup_path) / vm;
    std::string problem;
    auto details = read_details(vm_dir / ds / "pvcbackup.json", problem);
    if (!details) return bad("ERROR: Failed to read source backup details: " + problem);
    std::optional<std::string> parent;
    if ((*details)["incremental_parent"].is_string()) parent = (*details)["incremental_parent"].get<std::string>();
    std::optional<Json> parent_details;
    std::error_code ec;
    if (parent) {
        if (!component(*parent) || !fs::is_regular_file(vm_dir / *parent / "pvcbackup.json", ec))
            return bad("ERROR: The specified backup is incremental but the required incremental parent source backup "
                       "files do not exist!");
        parent_details = read_details(vm_dir / *parent / "pvcbackup.json", problem);
        if (!parent_details) return bad("ERROR: Failed to read source incremental parent backup details: " + problem);
    }

    // Everything is checked before anything is written.
    struct Item {
        std::string pool, volume, size, file, parent_file;
    };
    std::vector<Item> items;
    for (const auto& f : (*details)["backup_files"]) {
        Item it;
        std::string ext;
        it.file = f[0].get<std::string>();
        it.size = f[1].get<std::string>();
        parse_file(it.file, it.pool, it.volume, ext);
        if (!fs::is_regular_file(vm_dir / ds / it.file, ec))
            return bad("ERROR: Failed to read source backup details: the backup file " + it.file + " is missing");
        if (parent) {
            for (const auto& pf : (*parent_details)["backup_files"]) {
                std::string pp, pv, pe;
                parse_file(pf[0].get<std::string>(), pp, pv, pe);
                if (pp == it.pool && pv == it.volume) it.parent_file = pf[0].get<std::string>();
            }
            if (it.parent_file.empty() || !fs::is_regular_file(vm_dir / *parent / it.parent_file, ec))
                return bad("ERROR: Failed to find parent volume for volume " + it.pool + "/" + it.volume +
                           "; backup may be corrupt or invalid: no such file in backup " + *parent);
        }
        if (zk.exists(path("volume.name", {it.pool, it.volume})))
            return bad("ERROR: Failed to create restored volume: ERROR: Volume '" + it.volume + "' already exists in pool '" +
                       it.pool + "'; remove or rename it before restoring a backup.");
        items.push_back(it);
    }
    const Json& d = (*details)["vm_detail"];
    if (!d.contains("xml") || !d["xml"].is_string() || !d.contains("node") || !d["node"].is_string())
        return bad("ERROR: Failed to parse VM backup details: 'xml' or 'node' missing");
    std::string xml = d["xml"].get<std::string>();
    auto x = try_parse_domain_xml(xml);
    if (!x || !x->uuid || !is_uuid(*x->uuid) || !client::is_safe_name(x->name))
        return bad("ERROR: Failed to define restored VM: ERROR: Failed to parse XML data.");
    client::VmDefinition def;
    def.uuid = *x->uuid;
    std::transform(def.uuid.begin(), def.uuid.end(), def.uuid.begin(), [](unsigned char ch) { return std::tolower(ch); });
    def.name = x->name;
    def.xml = xml;
    def.node = d["node"].get<std::string>();
    def.rbd_list = x->rbd_list();
    auto text = [&](const char* k, const std::string& dflt) {
        return d.contains(k) && d[k].is_string() ? d[k].get<std::string>() : dflt;
    };
    def.profile = text("profile", "None");
    def.autostart = d.contains("node_autostart") && d["node_autostart"].is_boolean() && d["node_autostart"].get<bool>();
    def.migrate_method = text("migration_method", "none");
    def.node_selector = text("node_selector", "none");
    if (d.contains("node_limit") && d["node_limit"].is_array()) {
        std::vector<std::string> limit;
        for (const auto& n : d["node_limit"])
            if (n.is_string()) limit.push_back(n.get<std::string>());
        def.node_limit = join(limit, ",");
    } else def.node_limit = text("node_limit", "");
    if (d.contains("tags") && d["tags"].is_array())
        for (const auto& t : d["tags"])
            if (t.is_object() && t.contains("name") && t["name"].is_string() && client::is_safe_name(t["name"].get<std::string>()) &&
                t.value("type", std::string("user")) == "user")
                def.tags.emplace_back(t["name"].get<std::string>(), t.value("protected", false));
    if (zk.exists(path("domain.name", {def.uuid})) || client::vm_by_name(zk, def.name))
        return bad("ERROR: Failed to define restored VM: ERROR: Specified VM '" + def.name + "' or UUID '" + def.uuid +
                   "' matches an existing VM on the cluster");
    if (!client::is_safe_name(def.node) || !zk.exists(path("node.name", {def.node})))
        return bad("ERROR: Failed to define restored VM: ERROR: Specified node '" + def.node + "' is invalid.");
    if (c.admit)
        if (auto refusal = c.admit(xml, def.node)) return bad("ERROR: Failed to define restored VM: " + *refusal);

    auto kvs = client::vm_define_keys(def);
    for (auto& [p, v] : kvs)
        if (p == path("domain.state", {def.uuid})) v = "restore";
    if (!zk.write(kvs)) return bad("ERROR: Failed to define restored VM: the ZooKeeper write failed");
    for (const auto& [tag, prot] : def.tags) zk.write(client::vm_tag_keys(def.uuid, tag, zk::py_bool(prot)));

    // From here a failure undoes what was done: the volumes, then the VM.
    std::vector<Item> made;
    auto rollback = [&](const std::string& why) {
        try {
            zk.remove_recursive(path("domain.name", {def.uuid}));
        } catch (const std::exception&) {
        }
        for (const auto& it : made) c.ceph->remove_volume(it.pool, it.volume);
        return bad(why);
    };
    std::vector<std::string> not_removed;
    std::shared_ptr<ceph::Connection> conn;
    ceph::Connector connector(c.settings);
    try {
        conn = connector.get();
    } catch (const std::exception& e) {
        return rollback(std::string("ERROR: Failed to create restored volume: ") + e.what());
    }
    for (const auto& it : items) {
        auto r = c.ceph->add_volume(it.pool, it.volume, it.size);
        if (!r.ok()) return rollback("ERROR: Failed to create restored volume: " + r.message);
        made.push_back(it);
        std::vector<zk::KeyValue> snap_keys;
        try {
            ceph::Io io(*conn, it.pool);
            int rc = rbd_remove(io.get(), it.volume.c_str());
            if (rc < 0)
                return rollback("ERROR: Failed to remove temporary RBD volume '" + it.pool + "/" + it.volume +
                                "': rbd: delete error: " + ceph::errno_text(rc));
            auto import_file = [&](const fs::path& file, bool diff, const std::string& name, const std::string& what) {
                Fd f{::open(file.c_str(), O_RDONLY | O_CLOEXEC)};
                try {
                    if (f.fd < 0) throw std::runtime_error(std::string("rbd: error opening ") + file.string());
                    if (diff) ceph::import_diff(io, it.volume, f.fd);
                    else ceph::import_image(io, it.volume, f.fd);
                } catch (const std::exception& e) {
                    throw std::runtime_error(what + name + ": " + e.what());
                }
            };
            const std::string kept = "backup_" + (parent ? *parent : ds);
            if (!parent) {
                import_file(vm_dir / ds / it.file, false, it.file, "ERROR: Failed to import backup image ");
            } else {
                import_file(vm_dir / *parent / it.parent_file, false, it.parent_file,
                            "ERROR: Failed to import parent backup image ");
                import_file(vm_dir / ds / it.file, true, it.file, "ERROR: Failed to import incremental backup image ");
            }
            ceph::Image image(io, it.volume, false);
            if (parent) {
                rc = rbd_snap_remove(image.get(), ("backup_" + ds).c_str());
                if (rc < 0) not_removed.push_back(it.pool + "/" + it.volume);
            }
            if (retain_snapshot) {
                snap_keys = {{path("snapshot.name", {it.pool, it.volume, kept}), ""},
                             {path("snapshot.stats", {it.pool, it.volume, kept}), "{}"}};
            } else {
                rc = rbd_snap_remove(image.get(), kept.c_str());
                if (rc < 0) {
                    if (!parent)
                        return rollback("ERROR: Failed to remove imported image snapshot for " + it.file +
                                        ": rbd: failed to remove snapshot: " + ceph::errno_text(rc));
                    not_removed.push_back(it.pool + "/" + it.volume);
                }
            }
            // The volume's stats as it is now (the reference kept the temporary image's).
            snap_keys.emplace_back(path("volume.stats", {it.pool, it.volume}), ceph::rbd_info_json(*conn, io, it.volume));
        } catch (const std::exception& e) {
            return rollback(e.what());
        }
        if (!zk.write(snap_keys)) return rollback("ERROR: Failed to add imported image snapshot for " + it.file);
    }
    if (!client::change_vm_state(c.zk, def.uuid, "start"))
        return bad("ERROR: Failed to start restored VM " + vm + ": the state write failed (it is defined, state 'restore')");
    std::vector<std::string> lines;
    if (!not_removed.empty())
        lines.push_back("WARNING: Failed to remove hanging snapshot(s) as requested for volume(s) " + join_list(not_removed));
    lines.push_back("Successfully restored VM backup " + ds + " for '" + vm + "' from '" + host_of(c) + ":" + backup_path +
                    "' in " + seconds_text(since(t0)) + "s.");
    return ok(join(lines, "\n"));
}

// ---------------------------------------------------------------- autobackup

AutobackupConfig read_autobackup_config(const std::string& file) {
    std::error_code ec;
    if (!fs::is_regular_file(file, ec)) throw std::runtime_error("ERROR: Specified backup configuration does not exist!");
    YAML::Node root;
    try {
        root = YAML::LoadFile(file);
    } catch (const YAML::Exception& e) {
        throw std::runtime_error(std::string("ERROR: Backup configuration is invalid: ") + e.what());
    }
    auto need = [](const YAML::Node& n, const char* key) {
        if (!n.IsMap() || !n[key]) throw std::runtime_error(std::string("ERROR: Backup configuration is invalid: '") + key + "'");
        return n[key];
    };
    auto scalar = [&](const YAML::Node& n, const char* key) {
        auto v = need(n, key);
        if (!v.IsScalar() && !v.IsNull())
            throw std::runtime_error(std::string("ERROR: Backup configuration is invalid: '") + key + "' is not a value");
        return v.IsNull() ? std::string() : v.as<std::string>();
    };
    auto number = [&](const YAML::Node& n, const char* key) {
        std::string s = scalar(n, key);
        char* end = nullptr;
        long v = std::strtol(s.c_str(), &end, 10);
        if (s.empty() || *end || v < 1)
            throw std::runtime_error(std::string("ERROR: Backup configuration is invalid: '") + key +
                                     "' must be a whole number of at least 1");
        return v;
    };
    auto list = [&](const YAML::Node& n, const char* key) {
        auto v = need(n, key);
        std::vector<std::string> out;
        if (v.IsNull()) return out;
        if (!v.IsSequence())
            throw std::runtime_error(std::string("ERROR: Backup configuration is invalid: '") + key + "' is not a list");
        for (const auto& e : v) out.push_back(e.as<std::string>());
        return out;
    };
    AutobackupConfig cfg;
    auto ab = need(root, "autobackup");
    cfg.root_path = scalar(ab, "backup_root_path");
    cfg.root_suffix = scalar(ab, "backup_root_suffix");
    if (cfg.root_path.empty() || cfg.root_path[0] != '/')
        throw std::runtime_error("ERROR: Backup configuration is invalid: 'backup_root_path' must be an absolute path");
    cfg.tags = list(ab, "backup_tags");
    auto sched = need(ab, "backup_schedule");
    cfg.full_interval = number(sched, "full_interval");
    cfg.full_retention = number(sched, "full_retention");
    auto mount = need(ab, "auto_mount");
    auto enabled = zk::lenient_bool(scalar(mount, "enabled"));
    std::string en = scalar(mount, "enabled");
    cfg.auto_mount = en == "yes" || en == "Yes" || en == "on" || enabled.value_or(false);
    if (cfg.auto_mount) {
        auto subst = [&](std::string cmd) {
            const std::string key = "{backup_root_path}";
            for (size_t p; (p = cmd.find(key)) != std::string::npos;) cmd.replace(p, key.size(), cfg.root_path);
            return cmd;
        };
        for (auto& m : list(mount, "mount_cmds")) cfg.mount_cmds.push_back(subst(m));
        for (auto& m : list(mount, "unmount_cmds")) cfg.unmount_cmds.push_back(subst(m));
    }
    return cfg;
}

namespace {
struct Tracked {
    std::string datestring, type;
    Json parent;  // string or null
    bool retained = false;
};
}  // namespace

int autobackup(const Context& c, const AutobackupConfig& cfg, bool force_full, std::ostream& out, std::ostream& err) {
    zk::Session& zk = *c.zk;
    // The VMs carrying one of the tags, by name.
    std::vector<std::string> vms;
    auto uuids = zk.children(path("base.domain")).value_or(std::vector<std::string>{});
    for (const auto& u : uuids) {
        auto name = zk.get(path("domain.name", {u}));
        auto tags = zk.children(path("domain.meta.tags", {u}));
        if (!name || !tags) continue;
        for (const auto& t : *tags)
            if (std::find(cfg.tags.begin(), cfg.tags.end(), t) != cfg.tags.end()) {
                vms.push_back(*name);
                break;
            }
    }
    std::sort(vms.begin(), vms.end());
    if (vms.empty()) {
        out << "Found no suitable VMs for autobackup." << std::endl;
        return 0;
    }
    out << "Found " << vms.size() << " suitable VM(s) for autobackup." << std::endl;
    err << "Full VM list:\n  " << join(vms, "\n  ") << "\n" << std::endl;

    auto run = [&](const std::string& cmd, const char* kind) {
        auto argv = words(cmd);
        if (argv.empty()) return true;
        out << "Executing " << kind << " command '" << argv[0] << "'... " << std::flush;
        auto t0 = Clock::now();
        auto r = run_command(argv, {}, std::chrono::minutes(10));
        long secs = static_cast<long>(since(t0));
        if (r.exit_status != 0) {
            out << "failed. [" << secs << "s]" << std::endl;
            out << (std::string(kind) == "mount" ? "Exiting" : "Continuing") << "; command reports: " << trim(r.output)
                << std::endl;
            return false;
        }
        out << "done. [" << secs << "s]" << std::endl;
        return true;
    };
    if (cfg.auto_mount)
        for (const auto& m : cfg.mount_cmds)
            if (!run(m, "mount")) return 1;

    const std::string suffixed = cfg.root_path + cfg.root_suffix;
    for (const auto& vm : vms) {
        std::error_code ec;
        fs::create_directories(suffixed, ec);
        const fs::path vm_path = fs::path(suffixed) / vm, state_file = vm_path / ".autobackup.json";
        Json state = Json::object();
        std::vector<Tracked> tracked;
        if (fs::exists(state_file, ec)) {
            std::ifstream in(state_file);
            std::stringstream ss;
            ss << in.rdbuf();
            state = Json::parse(ss.str(), nullptr, false);
            if (state.is_discarded() || !state.is_object()) {
                out << "Skipping VM '" << vm << "': its state file " << state_file.string() << " is not readable JSON."
                    << std::endl;
                continue;
            }
            if (state.contains("tracked_backups") && state["tracked_backups"].is_array())
                for (const auto& b : state["tracked_backups"])
                    if (b.is_object() && b.contains("datestring") && b["datestring"].is_string())
                        tracked.push_back({b["datestring"].get<std::string>(), b.value("type", std::string("full")),
                                           b.contains("parent") ? b["parent"] : Json(nullptr),
                                           b.value("retained_snapshot", false)});
        }
        std::string type = "full";
        std::optional<std::string> parent;
        bool retain = true;
        auto full = std::find_if(tracked.begin(), tracked.end(), [](const Tracked& t) { return t.type == "full"; });
        if (full != tracked.end()) {
            long idx = full - tracked.begin();
            if (force_full) type = "forced-full";
            else if (idx < cfg.full_interval - 1) {
                type = "incremental";
                parent = full->datestring;
                retain = false;
            }
        }
        out << "Backing up VM '" << vm << "' (" << type << ")... " << std::flush;
        auto t0 = Clock::now();
        auto r = create(c, vm, suffixed, parent, retain);
        long secs = static_cast<long>(since(t0));
        if (!r.ok()) {
            out << "failed. [" << secs << "s]" << std::endl;
            out << "Skipping cleanups; command reports: " << r.message << std::endl;
            continue;
        }
        // The datestring: the first 14 digits of the answer.
        std::string ds;
        for (size_t i = 0; i + 14 <= r.message.size() && ds.empty(); ++i)
            if (datestring_ok(r.message.substr(i, 14))) ds = r.message.substr(i, 14);
        out << "done. Backup '" << ds << "' created. [" << secs << "s]" << std::endl;
        std::string problem;
        auto made = read_details(vm_path / ds / "pvcbackup.json", problem);
        if (!made) {
            out << "Skipping cleanups; the new backup's details are not readable: " << problem << std::endl;
            continue;
        }
        tracked.insert(tracked.begin(), Tracked{(*made)["datestring"].get<std::string>(), (*made)["type"].get<std::string>(),
                                                (*made)["incremental_parent"], (*made)["retained_snapshot"].get<bool>()});
        // Full backups past the retention, and the incrementals of those.
        std::vector<Tracked> doomed;
        long fulls = 0;
        for (const auto& b : tracked)
            if (b.type == "full" && ++fulls > cfg.full_retention) doomed.push_back(b);
        for (const auto& b : tracked)
            if (b.type == "incremental" && b.parent.is_string() &&
                std::any_of(doomed.begin(), doomed.end(), [&](const Tracked& x) { return x.datestring == b.parent.get<std::string>(); }))
                doomed.push_back(b);
        for (const auto& b : doomed) {
            out << "Removing old VM '" << vm << "' backup '" << b.datestring << "' (" << b.type << ")... " << std::flush;
            auto t1 = Clock::now();
            auto rr = remove(c, vm, suffixed, b.datestring);
            long s2 = static_cast<long>(since(t1));
            if (!rr.ok()) {
                out << "failed. [" << s2 << "s]" << std::endl;
                out << "Skipping removal from tracked backups; command reports: " << rr.message << std::endl;
                continue;
            }
            tracked.erase(std::remove_if(tracked.begin(), tracked.end(),
                                         [&](const Tracked& x) { return x.datestring == b.datestring; }),
                          tracked.end());
            out << "done. [" << s2 << "s]" << std::endl;
        }
        Json list = Json::array();
        for (const auto& b : tracked)
            list.push_back(Json{{"datestring", b.datestring}, {"type", b.type}, {"parent", b.parent},
                                {"retained_snapshot", b.retained}});
        state["tracked_backups"] = list;
        // Written beside and renamed: a crash leaves the old state, never half a file.
        fs::path tmp = vm_path / ".autobackup.json.tmp";
        fs::remove(tmp, ec);
        try {
            write_file(tmp, ceph::py_dumps(state));
            fs::rename(tmp, state_file);
        } catch (const std::exception& e) {
            out << "ERROR: Failed to write the autobackup state " << state_file.string() << ": " << e.what() << std::endl;
        }
    }
    if (cfg.auto_mount)
        for (const auto& m : cfg.unmount_cmds) run(m, "unmount");
    return 0;
}

// ---------------------------------------------------------------- cluster

namespace {
bool skipped_top(const std::string& p) { return p == "/zookeeper" || p == "/patroni"; }

void walk(zk::Session& zk, const std::string& at, Json& out) {
    auto kids = zk.raw_children(at);
    if (!kids || kids->empty()) return;
    std::vector<std::string> paths;
    for (const auto& k : *kids) {
        std::string p = (at == "/" ? "" : at) + "/" + k;
        if (at == "/" && skipped_top(p)) continue;
        paths.push_back(std::move(p));
    }
    if (paths.empty()) return;
    auto values = zk.get_many(paths);
    for (size_t i = 0; i < paths.size(); ++i) {
        if (!values[i]) continue;  // removed meanwhile
        out[paths[i]] = *values[i];
        walk(zk, paths[i], out);
    }
}

bool lock_or_task_key(const std::string& p) {
    if (p == path("task.root") || p.rfind(path("task.root") + "/", 0) == 0) return true;
    size_t slash = p.rfind('/');
    return schema::is_lock_contender(p.substr(slash == std::string::npos ? 0 : slash + 1));
}
}  // namespace

Answer cluster_initialize(zk::Session& zk, bool overwrite) {
    if (zk.exists(path("base.config.primary_node")) && !overwrite)
        return bad("ERROR: Cluster contains data and overwrite not set.");
    if (overwrite) {
        try {
            for (const char* key : {"base.schema", "base.config", "base.logs", "base.node", "base.domain",
                                    "base.network", "base.storage"})
                zk.remove_recursive(path(key));
        } catch (const std::exception&) {
            return bad("ERROR: Failed to delete data in cluster; running nodes perhaps?");
        }
    }
    try {
        init_cluster(zk);
    } catch (const SchemaError& e) {
        return bad(std::string("ERROR: ") + e.what());
    }
    return ok("Successfully initialized cluster");
}

Json cluster_backup(zk::Session& zk) {
    Json data = Json::object();
    data["/"] = "";
    walk(zk, "/", data);
    return data;
}

Answer cluster_restore(zk::Session& zk, const Json& data) {
    if (!data.is_object()) return bad("ERROR: Failed to parse JSON data: not a JSON object");
    const std::string version_key = path("base.schema.version");
    std::string current = zk.get(version_key).value_or("");
    std::string theirs = data.contains(version_key) && data[version_key].is_string()
                             ? data[version_key].get<std::string>()
                             : std::string("none");
    auto as_int = [](const std::string& s) -> std::optional<long long> {
        if (s.empty() || s.size() > 18 || !std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
            return std::nullopt;
        return std::stoll(s);
    };
    if (!as_int(theirs) || as_int(theirs) != as_int(current))
        return bad("ERROR: Schema version of backup (" + theirs + ") does not match cluster schema version (" + current + ").");
    // Parents come before their children in a backup; each batch is one
    // transaction under ZooKeeper's request limit. A single value over
    // ZooKeeper's limit for one value is refused by the session.
    std::vector<zk::KeyValue> batch;
    size_t written = 0;
    auto flush = [&] {
        if (batch.empty()) return true;
        bool done = zk.write(batch);
        written += done ? batch.size() : 0;
        batch.clear();
        return done;
    };
    for (const auto& [p, v] : data.items()) {
        if (p == "/" || p.empty() || p[0] != '/' || !v.is_string()) continue;
        if (lock_or_task_key(p) || skipped_top(p.substr(0, p.find('/', 1)))) continue;
        if (v.get_ref<const std::string&>().size() > zk::max_value_bytes)
            return bad("Restore failed. The value of " + p + " is over ZooKeeper's limit of " +
                       std::to_string(zk::max_value_bytes) + " bytes for one value; " + std::to_string(written) +
                       " keys were written.");
        batch.emplace_back(p, v.get<std::string>());
        if (zk::write_request_bytes(batch) > zk::max_request_bytes / 2 && !flush())
            return bad("Restore failed.");
    }
    if (!flush()) return bad("Restore failed.");
    return ok("Restore completed successfully.");
}

}  // namespace pvc::backup
