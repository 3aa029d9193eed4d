// OSD lifecycle and the storage benchmark as node tasks (pvc/tasks.hpp):
// pvc storage osd create-db-vg|add|replace|refresh|remove and pvc storage
// benchmark run|info|list, with the reference client's arguments and
// options. Each task runs in the storage module of the node that holds the
// disk (the benchmark: the primary); with --wait (the default) the command
// follows it as `pvc cluster task` does and exits 1 when it fails.
// Benchmark results are read from /ceph/benchmarks (modules/storage/README.md).
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "commands.hpp"
#include "common.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using schema::path;
using namespace std::chrono_literals;

constexpr const char* benchmarks = "/ceph/benchmarks";

// Queues `name` on `node`, then follows it (the reference client's waiter:
// each new stage printed, then "<state>: <status>") or prints its id.
void task(const std::string& name, const std::string& node, const nlohmann::json& kwargs, bool wait) {
    tasks::Queued q;
    try {
        q = tasks::submit(*session(), name, node, kwargs);
    } catch (const tasks::SubmitError& e) {
        throw Failure(e.what());
    }
    if (!wait) {
        std::cout << "Task ID: " << q.id << " assigned to node " << q.run_on << std::endl;
        return;
    }
    std::cout << "Task ID: " << q.id << " (" << q.name << ") assigned to node " << q.run_on << std::endl;
    tasks::Progress p;
    std::string shown;
    wait_for("task " + q.id, [&] {
        p = tasks::progress(*session(), q.id);
        return p.state == tasks::success || p.state == tasks::failure;
    }, 500ms, [&] {
        if (p.state != tasks::running) return;
        std::string line = "  " + std::to_string(p.current) + "/" + std::to_string(p.total) + " " + p.status;
        if (line != shown) std::cout << (shown = line) << std::endl;
    });
    std::cout << p.state << ": " << p.status << std::endl;
    if (p.state == tasks::failure) throw Failure("task " + q.id + " failed", exit_failed);
}

std::string osd_node(const std::string& id) {
    if (id.empty() || id.find('/') != std::string::npos || !session()->exists(path("osd.id", {id})))
        throw Failure("No OSD with ID " + id + " is present in the cluster.");
    return read(path("osd.node", {id}));
}

nlohmann::json opt(const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); }

// ---- benchmark results ----

std::vector<nlohmann::json> benchmark_rows(const std::string& job) {
    std::vector<nlohmann::json> rows;
    for (const auto& name : children(benchmarks)) {
        if (!job.empty() && name != job) continue;
        nlohmann::json rec;
        try {
            rec = nlohmann::json::parse(read(std::string(benchmarks) + "/" + name));
        } catch (const std::exception&) {
            rec = nlohmann::json::object();
        }
        nlohmann::json row = nlohmann::json::object();
        row["id"] = rec.is_object() ? rec.value("id", 0L) : 0L;
        row["job"] = name;
        row["test_format"] = rec.is_object() ? rec.value("test_format", 1L) : 1L;
        row["benchmark_result"] = rec.is_object() && rec.contains("benchmark_result") ? rec["benchmark_result"] : nlohmann::json::object();
        rows.push_back(std::move(row));
    }
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a["id"].template get<long>() > b["id"].template get<long>(); });
    if (rows.empty()) throw Failure(job.empty() ? "No benchmark found." : "No benchmark named " + job + " found.");
    return rows;
}

// 1234567 -> "1206 MiB/s"-like figures, as the reference's summaries.
std::string human_bytes(double b) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        ++u;
    }
    std::ostringstream o;
    o << std::fixed << std::setprecision(b < 10 && u > 0 ? 1 : 0) << b << " " << units[u];
    return o.str();
}

const char* const tests[] = {"seq_read",      "seq_write",     "rand_read_4M",          "rand_write_4M",
                             "rand_read_4K",  "rand_write_4K", "rand_read_4K_lowdepth", "rand_write_4K_lowdepth"};

// One test's headline figures: the read or write side of fio's first job.
struct Figures {
    std::string bandwidth, iops, latency;
};
Figures figures(const nlohmann::json& result, const char* test) {
    Figures f{"-", "-", "-"};
    if (!result.is_object() || !result.contains(test)) return f;
    const auto& jobs = result[test].value("jobs", nlohmann::json::array());
    if (jobs.empty()) return f;
    const auto& side = jobs[0][std::string(test).find("read") != std::string::npos ? "read" : "write"];
    if (!side.is_object()) return f;
    f.bandwidth = human_bytes(side.value("bw_bytes", 0.0)) + "/s";
    f.iops = std::to_string(static_cast<long>(std::llround(side.value("iops", 0.0))));
    if (side.contains("clat_ns") && side["clat_ns"].is_object())
        f.latency = std::to_string(static_cast<long>(std::llround(side["clat_ns"].value("mean", 0.0) / 1000))) + " us";
    return f;
}

void benchmark_list(const std::string& job, const std::string& format) {
    auto rows = benchmark_rows(job);
    if (format == "json") return print_json(rows);
    Table t({"JOB", "FORMAT", "SEQ READ", "SEQ WRITE", "4K RAND READ IOPS", "4K RAND WRITE IOPS"});
    for (const auto& r : rows) {
        const auto& res = r["benchmark_result"];
        if (res.is_string()) {
            t.add({r["job"], std::to_string(r["test_format"].get<long>()), res.get<std::string>(), "", "", ""});
            continue;
        }
        t.add({r["job"], std::to_string(r["test_format"].get<long>()), figures(res, "seq_read").bandwidth,
               figures(res, "seq_write").bandwidth, figures(res, "rand_read_4K").iops, figures(res, "rand_write_4K").iops});
    }
    t.print(std::cout);
}

void benchmark_info(const std::string& job, const std::string& format) {
    auto rows = benchmark_rows(job);
    if (format == "json") return print_json(rows);
    const auto& r = rows[0];
    std::cout << "Storage benchmark job: " << r["job"].get<std::string>() << "\nTest format: " << r["test_format"].get<long>() << "\n";
    if (r["benchmark_result"].is_string()) {
        std::cout << "Result: " << r["benchmark_result"].get<std::string>() << std::endl;
        return;
    }
    Table t({"TEST", "BANDWIDTH", "IOPS", "MEAN LATENCY"});
    for (const char* test : tests) {
        auto f = figures(r["benchmark_result"], test);
        t.add({test, f.bandwidth, f.iops, f.latency});
    }
    t.print(std::cout);
}

}  // namespace

void add_osd_commands(CLI::App& app) {
    auto* storage = app.get_subcommand("storage");
    auto* osd = storage->get_subcommand("osd");
    const std::string runs = "Runs as a task on the OSD's node (pvc cluster task shows it); with --wait (default) "
                             "each stage is shown and the command exits 1 when the task fails.";

    struct Args {
        std::string node, device, weight = "1.0", ratio, size, count, osd, old_device, job, format = "table";
        bool force = false, yes = false, wait = true;
    };

    auto* vg = osd->add_subcommand("create-db-vg", "Create the OSD database volume group (osd-db) on a node's disk");
    auto vga = std::make_shared<Args>();
    vg->add_option("node", vga->node, "The node holding the disk")->required();
    vg->add_option("device", vga->device, "Block device path or detect string (detect:<NAME>:<SIZE>:<INDEX>)")->required();
    vg->add_flag("--wait,!--no-wait", vga->wait, "Wait for the task and show its progress (default)");
    vg->add_flag("-y,--yes", vga->yes, "Do not ask for confirmation");
    vg->footer("One volume group per node, on a fast disk; OSDs added with --ext-db-ratio/--ext-db-size put their\n"
               "database there. A disk holding a partition table, a filesystem or LVM is refused untouched.\n\n" + runs +
               "\n\nExamples:\n  pvc storage osd create-db-vg hv1 /dev/nvme0n1 --yes");
    vg->callback([vga] {
        confirm(vga->yes, "Destroy all data on and create a new OSD database volume group on node " + vga->node + " device " +
                          vga->device);
        task("osd.add_db_vg", vga->node, {{"device", vga->device}}, vga->wait);
    });

    auto* add = osd->add_subcommand("add", "Add new OSD(s) on a node's disk");
    auto aa = std::make_shared<Args>();
    add->add_option("node", aa->node, "The node holding the disk")->required();
    add->add_option("device", aa->device, "Block device path or detect string (detect:<NAME>:<SIZE>:<INDEX>)")->required();
    add->add_option("-w,--weight", aa->weight, "Weight of the OSD(s) within the CRUSH map (default 1.0)");
    add->add_option("-r,--ext-db-ratio", aa->ratio, "An external DB LV of this ratio of the OSD's size (e.g. 0.05)");
    add->add_option("-s,--ext-db-size", aa->size, "An external DB LV of this size (e.g. 20G)");
    add->add_option("-c,--osd-count", aa->count, "Split the disk into this many OSDs");
    add->add_flag("--wait,!--no-wait", aa->wait, "Wait for the task and show its progress (default)");
    add->add_flag("-y,--yes", aa->yes, "Do not ask for confirmation");
    add->footer("The disk is zapped and prepared with ceph-volume (lvm batch), each OSD added to the CRUSH map under\n"
                "host=<node>, activated and recorded under /ceph/osds. A disk holding a partition table, a filesystem,\n"
                "RAID or LVM that is not a removed OSD's is refused and left untouched.\n\n" + runs +
                "\n\nExamples:\n  pvc storage osd add hv1 /dev/sdb --weight 1.0 --yes\n"
                "  pvc storage osd add hv1 detect:INTEL:480GB:0 --ext-db-ratio 0.05 --yes");
    add->callback([aa] {
        confirm(aa->yes, "Destroy all data on and create new OSD(s) on node " + aa->node + " device " + aa->device);
        task("osd.add", aa->node,
             {{"device", aa->device}, {"weight", aa->weight}, {"ext_db_ratio", opt(aa->ratio)},
              {"ext_db_size", opt(aa->size)}, {"split_count", opt(aa->count)}},
             aa->wait);
    });

    auto* rep = osd->add_subcommand("replace", "Replace the disk of an OSD (and its split peers) with a new one");
    auto ra = std::make_shared<Args>();
    ra->weight.clear();
    rep->add_option("osdid", ra->osd, "OSD ID")->required();
    rep->add_option("new_device", ra->device, "Block device path or detect string")->required();
    rep->add_option("-o,--old-device", ra->old_device, "The old OSD block device, if known and valid");
    rep->add_option("-w,--weight", ra->weight, "New CRUSH weight; the old one if unset");
    rep->add_option("-r,--ext-db-ratio", ra->ratio, "A new external DB LV of this ratio of the OSD's size");
    rep->add_option("-s,--ext-db-size", ra->size, "A new external DB LV of this size");
    rep->add_flag("--wait,!--no-wait", ra->wait, "Wait for the task and show its progress (default)");
    rep->add_flag("-y,--yes", ra->yes, "Do not ask for confirmation");
    rep->footer("The OSD keeps its ID and FSID: it is set down and out, destroyed, re-created on the new disk and\n"
                "activated; the old disk is zapped when it can be identified.\n\n" + runs +
                "\n\nExamples:\n  pvc storage osd replace 3 /dev/sdc --yes");
    rep->callback([ra] {
        std::string node = osd_node(ra->osd);
        confirm(ra->yes, "Destroy all data on and replace OSD " + ra->osd + " (and peer split OSDs) with new device " + ra->device);
        task("osd.replace", node,
             {{"osd_id", ra->osd}, {"new_device", ra->device}, {"old_device", opt(ra->old_device)},
              {"weight", opt(ra->weight)}, {"ext_db_ratio", opt(ra->ratio)}, {"ext_db_size", opt(ra->size)}},
             ra->wait);
    });

    auto* ref = osd->add_subcommand("refresh", "Refresh (reimport) the disk of an OSD, e.g. into a rebuilt node");
    auto fa = std::make_shared<Args>();
    ref->add_option("osdid", fa->osd, "OSD ID")->required();
    ref->add_option("device", fa->device, "Block device path or detect string")->required();
    ref->add_flag("--wait,!--no-wait", fa->wait, "Wait for the task and show its progress (default)");
    ref->add_flag("-y,--yes", fa->yes, "Do not ask for confirmation");
    ref->footer("Each OSD found on the disk is checked against its recorded FSID, activated and its keys rewritten.\n\n" +
                runs + "\n\nExamples:\n  pvc storage osd refresh 3 /dev/sdb --yes");
    ref->callback([fa] {
        std::string node = osd_node(fa->osd);
        confirm(fa->yes, "Refresh OSD " + fa->osd + " (and peer split OSDs) on device " + fa->device);
        task("osd.refresh", node, {{"osd_id", fa->osd}, {"device", fa->device}, {"ext_db_flag", false}}, fa->wait);
    });

    auto* rem = osd->add_subcommand("remove", "Remove an OSD from the cluster and zap its disk");
    auto da = std::make_shared<Args>();
    rem->add_option("osdid", da->osd, "OSD ID")->required();
    rem->add_flag("-f,--force", da->force, "Go on when a step fails (after a node rebuild)");
    rem->add_flag("--wait,!--no-wait", da->wait, "Wait for the task and show its progress (default)");
    rem->add_flag("-y,--yes", da->yes, "Do not ask for confirmation");
    rem->footer("Down, out, waits (at most 60 s) until safe to destroy unless --force, stops, removes it from PVC,\n"
                "destroys, removes from CRUSH, purges, removes its DB LV and zaps the disk when no other OSD and\n"
                "no other logical volume is on it.\n\n" + runs + "\n\nExamples:\n  pvc storage osd remove 3 --yes");
    rem->callback([da] {
        std::string node = osd_node(da->osd);
        confirm(da->yes, "Remove and destroy data on OSD " + da->osd);
        task("osd.remove", node, {{"osd_id", da->osd}, {"force_flag", da->force}, {"skip_zap_flag", false}}, da->wait);
    });

    auto* bench = storage->add_subcommand("benchmark", "Run or view cluster storage benchmarks");
    bench->require_subcommand(1);
    auto* brun = bench->add_subcommand("run", "Run a storage benchmark on POOL (on the primary)");
    auto ba = std::make_shared<Args>();
    std::string* pool = &ba->node;
    brun->add_option("pool", *pool, "The pool")->required();
    brun->add_flag("--wait,!--no-wait", ba->wait, "Wait for the task and show its progress (default)");
    brun->add_flag("-y,--yes", ba->yes, "Do not ask for confirmation");
    brun->footer("Eight fio jobs (rbd engine) of 75 s each against a temporary volume pvcbenchmark in POOL: about\n"
                 "10 minutes of significant load. The results are kept (pvc storage benchmark list|info).\n\n"
                 "Examples:\n  pvc storage benchmark run vms --yes");
    brun->callback([ba] {
        if (ba->node.empty() || ba->node.find('/') != std::string::npos || !session()->exists(path("pool.name", {ba->node})))
            throw Failure("Pool \"" + ba->node + "\" is not valid.");
        confirm(ba->yes, "Storage benchmarks take approximately 10 minutes to run and generate significant load on the "
                     "cluster; they should be run sparingly. Continue");
        task("storage.benchmark", "primary", {{"pool", ba->node}}, ba->wait);
    });
    auto* binfo = bench->add_subcommand("info", "Show the results of storage benchmark JOB");
    auto ia = std::make_shared<Args>();
    binfo->add_option("job", ia->job, "The job name (pvc storage benchmark list)")->required();
    add_format_option(binfo, ia->format);
    binfo->callback([ia] { benchmark_info(ia->job, ia->format); });
    auto* blist = bench->add_subcommand("list", "List storage benchmark results, newest first");
    auto la = std::make_shared<Args>();
    blist->add_option("job", la->job, "Only this job");
    add_format_option(blist, la->format);
    blist->callback([la] { benchmark_list(la->job, la->format); });
}

}  // namespace pvc::cli
