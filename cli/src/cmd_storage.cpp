// pvc storage status | util
// pvc storage pool add | remove | set-pgs | list
// pvc storage volume add | resize | rename | clone | remove | upload | info | list
// pvc storage volume snapshot add | rename | remove | list
// pvc storage osd in | out | set | unset | list
// The writes are the Ceph client library's (pvc/ceph_client.hpp, the same
// the API's storage routes use): Ceph through librados/librbd with this
// node's Ceph settings from pvcnoded.yaml, the /ceph mirrors in ZooKeeper.
// Reads come from the mirrors.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <regex>

#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include "commands.hpp"
#include "common.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/schema.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using schema::path;
using Json = nlohmann::json;

// This node's Ceph settings: pvc.system.configuration.storage of
// pvcnoded.yaml (--config, else /etc/pvc/pvcnoded.yaml). Whatever is
// missing is named.
ceph::Settings ceph_settings() {
    std::string file = globals().config_file.empty() ? "/etc/pvc/pvcnoded.yaml" : globals().config_file;
    const std::string why = "pvc storage writes to Ceph with a node's Ceph settings";
    if (!std::filesystem::exists(file))
        throw Failure(why + ", and there is no " + file +
                          " here: run it on a PVC node, or give --config with that node's pvcnoded.yaml",
                      exit_usage);
    YAML::Node root;
    try {
        root = YAML::LoadFile(file);
    } catch (const YAML::Exception& e) {
        throw Failure("cannot read configuration file '" + file + "': " + e.what(), exit_usage);
    }
    auto scalar = [&](std::initializer_list<const char*> keys) -> std::optional<std::string> {
        YAML::Node n = root;
        for (const char* k : keys) {
            if (!n.IsMap()) return std::nullopt;
            n = n[k];
            if (!n) return std::nullopt;
        }
        if (!n.IsScalar()) return std::nullopt;
        return n.as<std::string>();
    };
    ceph::Settings s;
    auto conf = scalar({"pvc", "system", "configuration", "storage", "ceph_config_file"});
    if (!conf || conf->empty())
        throw Failure(why + ": " + file + " has no pvc.system.configuration.storage.ceph_config_file", exit_usage);
    s.config_file = *conf;
    s.keyring = scalar({"pvc", "system", "configuration", "storage", "ceph_admin_keyring"}).value_or("");
    if (auto t = scalar({"pvc", "system", "configuration", "storage", "ceph_timeout"})) {
        auto v = to_long(*t);
        if (!v || *v < 1 || *v > 60)
            throw Failure(file + ": pvc.system.configuration.storage.ceph_timeout must be 1 to 60 seconds, not '" + *t +
                              "'",
                          exit_usage);
        s.timeout = std::chrono::seconds(*v);
    }
    if (auto u = scalar({"pvc", "system", "hypervisor", "migration_uri"})) s.vm_uri = *u;
    s.cluster_domain = scalar({"pvc", "cluster", "networks", "cluster", "domain"}).value_or("");
    return s;
}

std::unique_ptr<ceph::Client>& client_slot() {
    static std::unique_ptr<ceph::Client> c;
    return c;
}
ceph::Client& ceph_client() {
    auto& c = client_slot();
    if (!c) {
        auto settings = ceph_settings();  // before ZooKeeper: a missing setting is named first
        c = std::make_unique<ceph::Client>(session(), settings);
    }
    return *c;
}

void report(const ceph::Result& r) {
    if (!r.ok()) throw Failure(r.message);
    std::cout << r.message << std::endl;
}

bool matches(const std::string& limit, const std::string& name) {
    if (limit.empty()) return true;
    try {
        return std::regex_search(name, std::regex(limit));
    } catch (const std::regex_error& e) {
        throw Failure("LIMIT '" + limit + "' is not a valid regular expression: " + e.what(), exit_usage);
    }
}

Json parse_or_empty(const std::string& text) {
    auto j = Json::parse(text, nullptr, false);
    return j.is_discarded() ? Json::object() : j;
}

std::string str(const Json& j, const char* key) {
    if (!j.is_object() || !j.contains(key)) return "";
    const auto& v = j[key];
    return v.is_string() ? v.get<std::string>() : v.dump();
}

struct Args {
    std::string pool, volume, snapshot, name, new_name, pgs, size, limit, file, osd, option;
    std::string tier = "default", replcfg = "copies=3,mincopies=2", image_format = "raw", format = "table";
    std::string filter_pool, filter_volume;
    bool yes = false;
    bool json() const { return format == "json"; }
};

template <class Fn>
void bind(CLI::App* cmd, std::shared_ptr<Args> args, Fn fn) {
    cmd->callback([args, fn] { fn(*args); });
}

// ---------------------------------------------------------------- status

void show_text(const std::string& key, const std::string& type, const Args& a) {
    std::string data = read(path(key));
    if (a.json()) {
        print_json({{"type", type}, {"primary_node", read(path("base.config.primary_node"))}, {"ceph_data", data}});
        return;
    }
    if (data.empty()) throw Failure("no Ceph " + type + " recorded yet (the primary coordinator writes it each keepalive)");
    std::cout << data << (data.back() == '\n' ? "" : "\n");
}

// ---------------------------------------------------------------- lists

void pool_list(const Args& a) {
    std::vector<std::pair<long long, Json>> pools;
    for (const auto& p : children(path("base.pool"))) {
        if (!matches(a.limit, p)) continue;
        Json stats = parse_or_empty(read(path("pool.stats", {p})));
        std::string tier = read(path("pool.tier", {p}));
        Json o = {{"name", p},
                  {"volume_count", children(path("base.volume") + "/" + p).size()},
                  {"tier", tier.empty() ? "default" : tier},
                  {"pgs", read(path("pool.pgs", {p}))},
                  {"stats", stats}};
        long long id = stats.is_object() && stats.contains("id") && stats["id"].is_number_integer() ? stats["id"].get<long long>() : 0;
        pools.emplace_back(id, std::move(o));
    }
    std::stable_sort(pools.begin(), pools.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    if (a.json()) {
        Json out = Json::array();
        for (auto& [id, o] : pools) out.push_back(o);
        print_json(out);
        return;
    }
    Table t({"Name", "ID", "Tier", "PGs", "Volumes", "Stored", "Used", "Free", "Used%", "Objects"});
    for (auto& [id, o] : pools) {
        const Json& s = o["stats"];
        auto bytes = [&](const char* k) {
            return s.contains(k) && s[k].is_number_unsigned() ? ceph::human_size(s[k].get<std::uint64_t>()) : str(s, k);
        };
        t.add({o["name"], str(s, "id"), o["tier"], o["pgs"], std::to_string(o["volume_count"].get<size_t>()),
               bytes("stored_bytes"), bytes("used_bytes"), bytes("free_bytes"), str(s, "used_percent"),
               str(s, "num_objects")});
    }
    if (t.empty()) throw Failure("no pools" + (a.limit.empty() ? std::string() : " matching '" + a.limit + "'"));
    t.print(std::cout);
}

Json volume_json(const std::string& pool, const std::string& volume) {
    Json stats = parse_or_empty(read(path("volume.stats", {pool, volume})));
    if (stats.is_object() && stats.contains("size") && stats["size"].is_number_unsigned())
        stats["size"] = ceph::human_size(stats["size"].get<std::uint64_t>());
    return {{"name", volume}, {"pool", pool}, {"stats", stats}};
}

void volume_list(const Args& a) {
    std::vector<std::string> pools = a.filter_pool.empty() ? children(path("base.pool")) : std::vector<std::string>{a.filter_pool};
    if (!a.filter_pool.empty() && !read_opt(path("pool.name", {a.filter_pool})))
        throw Failure("ERROR: No pool with name '" + a.filter_pool + "' is present in the cluster.");
    Json out = Json::array();
    for (const auto& p : pools)
        for (const auto& v : children(path("base.volume") + "/" + p))
            if (matches(a.limit, v)) out.push_back(volume_json(p, v));
    if (a.json()) return print_json(out);
    Table t({"Name", "Pool", "Size", "Objects", "Order", "Format", "Features", "Snapshots"});
    for (const auto& o : out) {
        const Json& s = o["stats"];
        std::string features;
        if (s.contains("features") && s["features"].is_array())
            for (const auto& f : s["features"]) features += (features.empty() ? "" : ",") + (f.is_string() ? f.get<std::string>() : f.dump());
        t.add({o["name"], o["pool"], str(s, "size"), str(s, "objects"), str(s, "order"), str(s, "format"), features,
               str(s, "snapshot_count")});
    }
    if (t.empty()) throw Failure("no volumes" + (a.limit.empty() ? std::string() : " matching '" + a.limit + "'"));
    t.print(std::cout);
}

void volume_info(const Args& a) {
    if (!read_opt(path("volume.name", {a.pool, a.name})))
        throw Failure("ERROR: No volume with name '" + a.name + "' is present in pool '" + a.pool + "'.");
    Json o = volume_json(a.pool, a.name);
    if (a.json()) return print_json(o);
    const Json& s = o["stats"];
    std::vector<std::pair<std::string, std::string>> fields = {{"Name", a.name}, {"Pool", a.pool}};
    for (const auto& [k, v] : s.items()) {
        std::string text;
        if (v.is_string()) text = v.get<std::string>();
        else if (v.is_array()) {
            for (const auto& e : v) text += (text.empty() ? "" : ", ") + (e.is_string() ? e.get<std::string>() : e.dump());
        } else text = v.dump();
        fields.emplace_back(k, text);
    }
    print_fields(std::cout, fields);
}

void snapshot_list(const Args& a) {
    Json out = Json::array();
    for (const auto& p : children(path("base.snapshot"))) {
        if (!a.filter_pool.empty() && p != a.filter_pool) continue;
        for (const auto& v : children(path("base.snapshot") + "/" + p)) {
            if (!a.filter_volume.empty() && v != a.filter_volume) continue;
            for (const auto& s : children(path("base.snapshot") + "/" + p + "/" + v))
                if (matches(a.limit, s)) out.push_back({{"pool", p}, {"volume", v}, {"snapshot", s}});
        }
    }
    if (a.json()) return print_json(out);
    Table t({"Name", "Volume", "Pool"});
    for (const auto& o : out) t.add({o["snapshot"], o["volume"], o["pool"]});
    if (t.empty()) throw Failure("no snapshots" + (a.limit.empty() ? std::string() : " matching '" + a.limit + "'"));
    t.print(std::cout);
}

void osd_list(const Args& a) {
    std::vector<std::pair<long, std::string>> ids;
    for (const auto& id : children(path("base.osd")))
        if (matches(a.limit, id)) ids.emplace_back(to_long(id).value_or(0), id);
    std::sort(ids.begin(), ids.end());
    Json out = Json::array();
    for (const auto& [n, id] : ids)
        out.push_back({{"id", id},
                       {"node", read(path("osd.node", {id}))},
                       {"device", read(path("osd.device", {id}))},
                       {"db_device", read(path("osd.db_device", {id}))},
                       {"stats", parse_or_empty(read(path("osd.stats", {id})))}});
    if (a.json()) return print_json(out);
    Table t({"ID", "Node", "Device", "Up", "In", "Weight", "PGs", "Used", "Free", "Used%"});
    for (const auto& o : out) {
        const Json& s = o["stats"];
        t.add({o["id"], o["node"], o["device"], str(s, "up"), str(s, "in"), str(s, "weight"), str(s, "pgs"),
               str(s, "used"), str(s, "avail"), str(s, "utilization")});
    }
    if (t.empty()) throw Failure("no OSDs" + (a.limit.empty() ? std::string() : " matching '" + a.limit + "'"));
    t.print(std::cout);
}

// ---------------------------------------------------------------- upload

void volume_upload(const Args& a) {
    std::FILE* f = std::fopen(a.file.c_str(), "rb");
    if (!f) throw Failure("ERROR: File '" + a.file + "' does not exist!");
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, std::fclose);
    std::error_code ec;
    auto size = std::filesystem::file_size(a.file, ec);
    std::optional<std::string> file_size;
    if (a.image_format != "raw" && !ec) file_size = std::to_string(size);
    // Read as it is written (4 MiB at a time); a file larger than the volume
    // is refused before anything is written.
    ceph::Client::Upload up;
    up.read = [f](char* buf, std::size_t n) -> std::int64_t {
        std::size_t got = std::fread(buf, 1, n, f);
        if (got == 0 && std::ferror(f)) return -1;
        return static_cast<std::int64_t>(got);
    };
    if (!ec) up.length = [size]() -> std::optional<std::uint64_t> { return size; };
    up.error = [file = a.file] { return "reading " + file + " failed"; };
    report(ceph_client().upload_volume(a.pool, a.name, a.image_format, file_size, up));
}

}  // namespace

// This node's Ceph client and settings, for `pvc vm backup` (cmd_backup.cpp).
ceph::Client& storage_ceph_client() { return ceph_client(); }
ceph::Settings storage_ceph_settings() { return ceph_settings(); }

void add_storage_commands(CLI::App& app) {
    auto* storage = app.add_subcommand("storage", "Manage the cluster's Ceph storage: pools, volumes, snapshots, OSDs");
    storage->require_subcommand(1);
    storage->footer("Writes need this node's Ceph settings (pvcnoded.yaml: pvc.system.configuration.storage);\n"
                    "reads come from ZooKeeper.\n\nExamples:\n  pvc storage status\n"
                    "  pvc storage pool add vms 64 --replcfg copies=3,mincopies=2\n"
                    "  pvc storage volume add vms web1_disk0 20G\n"
                    "  pvc storage volume snapshot add vms web1_disk0 before-upgrade");

    auto* status = storage->add_subcommand("status", "Show the Ceph cluster's status (as the primary last saw it)");
    auto status_args = std::make_shared<Args>();
    add_format_option(status, status_args->format);
    bind(status, status_args, [](const Args& a) { show_text("base.storage", "status", a); });
    auto* util = storage->add_subcommand("util", "Show the Ceph cluster's utilization (as the primary last saw it)");
    auto util_args = std::make_shared<Args>();
    add_format_option(util, util_args->format);
    bind(util, util_args, [](const Args& a) { show_text("base.storage.util", "utilization", a); });

    // ---- pool
    auto* pool = storage->add_subcommand("pool", "Manage RBD pools");
    pool->require_subcommand(1);
    auto* padd = pool->add_subcommand("add", "Add an RBD pool with PGS placement groups");
    auto padd_args = std::make_shared<Args>();
    padd->add_option("name", padd_args->pool, "Pool name")->required();
    padd->add_option("pgs", padd_args->pgs, "Placement group count (a power of 2: 64, 128, 256 ...)")->required();
    padd->add_option("-t,--tier", padd_args->tier, "Device tier of the pool's OSDs (default: all)")
        ->check(CLI::IsMember({"default", "hdd", "ssd", "nvme"}));
    padd->add_option("--replcfg", padd_args->replcfg, "Replication: copies=<n>,mincopies=<m> (default copies=3,mincopies=2)");
    padd->footer("Examples:\n  pvc storage pool add vms 128\n  pvc storage pool add fast 64 --tier nvme");
    bind(padd, padd_args, [](const Args& a) { report(ceph_client().add_pool(a.pool, a.pgs, a.replcfg, a.tier)); });

    auto* premove = pool->add_subcommand("remove", "Remove an RBD pool and every volume in it");
    auto premove_args = std::make_shared<Args>();
    premove->add_option("name", premove_args->pool, "Pool name")->required();
    premove->add_flag("-y,--yes", premove_args->yes, "Do not ask for confirmation");
    premove->footer("Examples:\n  pvc storage pool remove scratch --yes");
    bind(premove, premove_args, [](const Args& a) {
        confirm(a.yes, "Remove and destroy all data in RBD pool " + a.pool);
        report(ceph_client().remove_pool(a.pool));
    });

    auto* ppgs = pool->add_subcommand("set-pgs", "Set the placement group count of an RBD pool");
    auto ppgs_args = std::make_shared<Args>();
    ppgs->add_option("name", ppgs_args->pool, "Pool name")->required();
    ppgs->add_option("pgs", ppgs_args->pgs, "Placement group count (a non-zero power of 2)")->required();
    ppgs->add_flag("-y,--yes", ppgs_args->yes, "Do not ask for confirmation");
    ppgs->footer("Examples:\n  pvc storage pool set-pgs vms 256 --yes");
    bind(ppgs, ppgs_args, [](const Args& a) {
        confirm(a.yes, "Adjust PG count of pool " + a.pool + " to " + a.pgs);
        report(ceph_client().set_pool_pgs(a.pool, a.pgs));
    });

    auto* plist = pool->add_subcommand("list", "List RBD pools");
    auto plist_args = std::make_shared<Args>();
    plist->add_option("limit", plist_args->limit, "Only pools whose name matches this regular expression");
    add_format_option(plist, plist_args->format);
    bind(plist, plist_args, pool_list);

    // ---- volume
    auto* volume = storage->add_subcommand("volume", "Manage RBD volumes");
    volume->require_subcommand(1);
    auto* vadd = volume->add_subcommand("add", "Add an RBD volume of SIZE (bytes, or 1024M, 20G ...)");
    auto vadd_args = std::make_shared<Args>();
    vadd->add_option("pool", vadd_args->pool, "Pool name")->required();
    vadd->add_option("name", vadd_args->name, "Volume name")->required();
    vadd->add_option("size", vadd_args->size, "Size: bytes, or digits and a unit of B K M G T P (20G)")->required();
    vadd->footer("Examples:\n  pvc storage volume add vms web1_disk0 20G");
    bind(vadd, vadd_args, [](const Args& a) { report(ceph_client().add_volume(a.pool, a.name, a.size)); });

    auto* vresize = volume->add_subcommand("resize", "Grow an RBD volume to SIZE (live for a running VM's disk)");
    auto vresize_args = std::make_shared<Args>();
    vresize->add_option("pool", vresize_args->pool, "Pool name")->required();
    vresize->add_option("name", vresize_args->name, "Volume name")->required();
    vresize->add_option("size", vresize_args->size, "New size: bytes, or digits and a unit (40G)")->required();
    vresize->add_flag("-y,--yes", vresize_args->yes, "Do not ask for confirmation");
    vresize->footer("Examples:\n  pvc storage volume resize vms web1_disk0 40G --yes");
    bind(vresize, vresize_args, [](const Args& a) {
        confirm(a.yes, "Resize volume " + a.name + " in pool " + a.pool + " to size " + a.size);
        report(ceph_client().resize_volume(a.pool, a.name, a.size));
    });

    auto* vrename = volume->add_subcommand("rename", "Rename an RBD volume");
    auto vrename_args = std::make_shared<Args>();
    vrename->add_option("pool", vrename_args->pool, "Pool name")->required();
    vrename->add_option("name", vrename_args->name, "Volume name")->required();
    vrename->add_option("new_name", vrename_args->new_name, "New volume name")->required();
    vrename->add_flag("-y,--yes", vrename_args->yes, "Do not ask for confirmation");
    vrename->footer("Examples:\n  pvc storage volume rename vms old_disk0 new_disk0 --yes");
    bind(vrename, vrename_args, [](const Args& a) {
        confirm(a.yes, "Rename volume " + a.name + " in pool " + a.pool + " to " + a.new_name);
        report(ceph_client().rename_volume(a.pool, a.name, a.new_name));
    });

    auto* vclone = volume->add_subcommand("clone", "Copy an RBD volume to a new volume in the same pool");
    auto vclone_args = std::make_shared<Args>();
    vclone->add_option("pool", vclone_args->pool, "Pool name")->required();
    vclone->add_option("name", vclone_args->name, "Volume name")->required();
    vclone->add_option("new_name", vclone_args->new_name, "Name of the copy")->required();
    vclone->footer("Examples:\n  pvc storage volume clone vms template_disk0 web2_disk0");
    bind(vclone, vclone_args, [](const Args& a) { report(ceph_client().clone_volume(a.pool, a.name, a.new_name)); });

    auto* vremove = volume->add_subcommand("remove", "Remove an RBD volume with its snapshots");
    auto vremove_args = std::make_shared<Args>();
    vremove->add_option("pool", vremove_args->pool, "Pool name")->required();
    vremove->add_option("name", vremove_args->name, "Volume name")->required();
    vremove->add_flag("-y,--yes", vremove_args->yes, "Do not ask for confirmation");
    vremove->footer("Examples:\n  pvc storage volume remove vms scratch_disk0 --yes");
    bind(vremove, vremove_args, [](const Args& a) {
        confirm(a.yes, "Remove and delete data of RBD volume " + a.name + " in pool " + a.pool);
        report(ceph_client().remove_volume(a.pool, a.name));
    });

    auto* vupload = volume->add_subcommand("upload", "Write a local disk image into an existing RBD volume");
    auto vupload_args = std::make_shared<Args>();
    vupload->add_option("pool", vupload_args->pool, "Pool name")->required();
    vupload->add_option("name", vupload_args->name, "Volume name (must exist, large enough for the raw image)")->required();
    vupload->add_option("image_file", vupload_args->file, "The image file")->required();
    vupload->add_option("-f,--format", vupload_args->image_format,
                        "Format of the image: raw (default), or vmdk qcow2 qed vdi vpc (converted by qemu-img)");
    vupload->footer("Examples:\n  pvc storage volume upload vms web1_disk0 debian.qcow2 --format qcow2");
    bind(vupload, vupload_args, volume_upload);

    auto* vinfo = volume->add_subcommand("info", "Show an RBD volume");
    auto vinfo_args = std::make_shared<Args>();
    vinfo->add_option("pool", vinfo_args->pool, "Pool name")->required();
    vinfo->add_option("name", vinfo_args->name, "Volume name")->required();
    add_format_option(vinfo, vinfo_args->format);
    bind(vinfo, vinfo_args, volume_info);

    auto* vlist = volume->add_subcommand("list", "List RBD volumes");
    auto vlist_args = std::make_shared<Args>();
    vlist->add_option("limit", vlist_args->limit, "Only volumes whose name matches this regular expression");
    vlist->add_option("-p,--pool", vlist_args->filter_pool, "Only the volumes of this pool");
    add_format_option(vlist, vlist_args->format);
    bind(vlist, vlist_args, volume_list);

    // ---- volume snapshot
    auto* snap = volume->add_subcommand("snapshot", "Manage RBD volume snapshots");
    snap->require_subcommand(1);
    auto* sadd = snap->add_subcommand("add", "Add a snapshot NAME of volume VOLUME in pool POOL");
    auto sadd_args = std::make_shared<Args>();
    sadd->add_option("pool", sadd_args->pool, "Pool name")->required();
    sadd->add_option("volume", sadd_args->volume, "Volume name")->required();
    sadd->add_option("name", sadd_args->snapshot, "Snapshot name")->required();
    sadd->footer("Examples:\n  pvc storage volume snapshot add vms web1_disk0 before-upgrade");
    bind(sadd, sadd_args, [](const Args& a) { report(ceph_client().add_snapshot(a.pool, a.volume, a.snapshot)); });

    auto* srename = snap->add_subcommand("rename", "Rename a snapshot");
    auto srename_args = std::make_shared<Args>();
    srename->add_option("pool", srename_args->pool, "Pool name")->required();
    srename->add_option("volume", srename_args->volume, "Volume name")->required();
    srename->add_option("name", srename_args->snapshot, "Snapshot name")->required();
    srename->add_option("new_name", srename_args->new_name, "New snapshot name")->required();
    bind(srename, srename_args,
         [](const Args& a) { report(ceph_client().rename_snapshot(a.pool, a.volume, a.snapshot, a.new_name)); });

    auto* sremove = snap->add_subcommand("remove", "Remove a snapshot");
    auto sremove_args = std::make_shared<Args>();
    sremove->add_option("pool", sremove_args->pool, "Pool name")->required();
    sremove->add_option("volume", sremove_args->volume, "Volume name")->required();
    sremove->add_option("name", sremove_args->snapshot, "Snapshot name")->required();
    sremove->add_flag("-y,--yes", sremove_args->yes, "Do not ask for confirmation");
    bind(sremove, sremove_args, [](const Args& a) {
        confirm(a.yes, "Remove snapshot " + a.snapshot + " for volume " + a.pool + "/" + a.volume);
        report(ceph_client().remove_snapshot(a.pool, a.volume, a.snapshot));
    });

    auto* slist = snap->add_subcommand("list", "List RBD volume snapshots");
    auto slist_args = std::make_shared<Args>();
    slist->add_option("limit", slist_args->limit, "Only snapshots whose name matches this regular expression");
    slist->add_option("-p,--pool", slist_args->filter_pool, "Only the snapshots of this pool");
    slist->add_option("-o,--volume", slist_args->filter_volume, "Only the snapshots of this volume");
    add_format_option(slist, slist_args->format);
    bind(slist, slist_args, snapshot_list);

    // ---- osd
    auto* osd = storage->add_subcommand("osd", "OSD state and cluster-wide OSD flags");
    osd->require_subcommand(1);
    auto* oin = osd->add_subcommand("in", "Set an OSD in (data is placed on it)");
    auto oin_args = std::make_shared<Args>();
    oin->add_option("osdid", oin_args->osd, "OSD id")->required();
    bind(oin, oin_args, [](const Args& a) { report(ceph_client().set_osd_state(a.osd, true)); });
    auto* oout = osd->add_subcommand("out", "Set an OSD out (its data moves elsewhere)");
    auto oout_args = std::make_shared<Args>();
    oout->add_option("osdid", oout_args->osd, "OSD id")->required();
    bind(oout, oout_args, [](const Args& a) { report(ceph_client().set_osd_state(a.osd, false)); });
    const std::string flags =
        "Flags: full pause noup nodown noout noin nobackfill norebalance norecover noscrub nodeep-scrub notieragent "
        "sortbitwise recovery_deletes require_jewel_osds require_kraken_osds";
    auto* oset = osd->add_subcommand("set", "Set a cluster-wide OSD flag");
    auto oset_args = std::make_shared<Args>();
    oset->add_option("osd_property", oset_args->option, "The flag")->required();
    oset->footer(flags + "\n\nExamples:\n  pvc storage osd set noout");
    bind(oset, oset_args, [](const Args& a) { report(ceph_client().set_osd_option(a.option, true)); });
    auto* ounset = osd->add_subcommand("unset", "Unset a cluster-wide OSD flag");
    auto ounset_args = std::make_shared<Args>();
    ounset->add_option("osd_property", ounset_args->option, "The flag")->required();
    ounset->footer(flags + "\n\nExamples:\n  pvc storage osd unset noout");
    bind(ounset, ounset_args, [](const Args& a) { report(ceph_client().set_osd_option(a.option, false)); });
    auto* olist = osd->add_subcommand("list", "List OSDs");
    auto olist_args = std::make_shared<Args>();
    olist->add_option("limit", olist_args->limit, "Only OSDs whose id matches this regular expression");
    add_format_option(olist, olist_args->format);
    bind(olist, olist_args, osd_list);
}

}  // namespace pvc::cli
