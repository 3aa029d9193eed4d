// The node task `storage.benchmark` (osd_tasks.hpp), on the primary: fio's
// rbd engine against a temporary volume `pvcbenchmark` of the pool, the
// reference's eight jobs, the results kept in ZooKeeper under
// /ceph/benchmarks/<job> where GET /storage/ceph/benchmark and `pvc storage
// benchmark info|list` read them (the reference used PostgreSQL and, by a
// defect, deleted each result after its run).
#include <ctime>

#include "osd_tasks.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::storage {

using schema::path;
using services::TaskFailure;
using services::TaskRun;
using Json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

struct Job {
    const char* name;
    const char* bs;
    const char* iodepth;
    const char* rw;
};

// The reference's job list (its test_format 1).
constexpr Job jobs[] = {
    {"seq_read", "4M", "64", "read"},
    {"seq_write", "4M", "64", "write"},
    {"rand_read_4M", "4M", "64", "randread"},
    {"rand_write_4M", "4M", "64", "randwrite"},
    {"rand_read_4K", "4K", "64", "randread"},
    {"rand_write_4K", "4K", "64", "randwrite"},
    {"rand_read_4K_lowdepth", "4K", "1", "randread"},
    {"rand_write_4K_lowdepth", "4K", "1", "randwrite"},
};

constexpr const char* volume = "pvcbenchmark";

std::string tail(const std::string& out, size_t max = 600) {
    std::string t = trim(out);
    return t.size() > max ? "..." + t.substr(t.size() - max) : t;
}

std::vector<std::string> rbd_args(const HostTools& t, std::vector<std::string> args) {
    std::vector<std::string> argv{"rbd"};
    const auto& o = t.options();
    if (!o.ceph_config_file.empty()) argv.insert(argv.end(), {"--conf", o.ceph_config_file});
    if (!o.ceph_admin_keyring.empty()) argv.insert(argv.end(), {"--keyring", o.ceph_admin_keyring});
    argv.insert(argv.end(), args.begin(), args.end());
    return argv;
}

// The job's name: local time to the second and this node, as the reference's.
std::string job_name(const std::string& node) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return std::string(buf) + "_" + node;
}

long next_id(zk::Session& zk) {
    long id = 0;
    for (const auto& job : zk.children(benchmarks_path).value_or(std::vector<std::string>{})) {
        try {
            id = std::max(id, Json::parse(zk.get(std::string(benchmarks_path) + "/" + job).value_or("{}")).value("id", 0L));
        } catch (const std::exception&) {
        }
    }
    return id + 1;
}

void record(zk::Session& zk, const std::string& job, long id, const Json& result) {
    Json r = Json::object();
    r["id"] = id;
    r["job"] = job;
    r["test_format"] = 1;
    r["benchmark_result"] = result;
    if (!zk.write(std::string(benchmarks_path) + "/" + job, r.dump()))
        throw TaskFailure("Failed to store benchmark " + job + " in ZooKeeper");
}

std::string benchmark(zk::Session& zk, const HostTools& t, TaskRun& run) {
    const std::string& node = t.options().node;
    std::string pool = run.kwargs().value("pool", "");
    const long total = 13;
    std::string job = job_name(node);
    run.progress(0, total, "Running storage benchmark '" + job + "' on pool '" + pool + "'");
    if (pool.empty() || pool.find('/') != std::string::npos || !zk.exists(path("pool.name", {pool})))
        throw TaskFailure("Pool \"" + pool + "\" is not valid");
    const std::string record_path = std::string(benchmarks_path) + "/" + job;
    if (zk.exists(record_path)) throw TaskFailure("A benchmark named " + job + " exists already");

    long current = 0;
    auto step = [&](const std::string& status) {
        if (run.stop_token().stop_requested())
            throw TaskFailure("Stopped before '" + status + "': the node's daemon is stopping or lost the task");
        run.progress(++current, total, status);
    };
    bool volume_made = false;
    auto remove_volume = [&] {
        if (!volume_made) return true;
        auto r = t.run(rbd_args(t, {"rm", "--no-progress", pool + "/" + volume}), 600s);
        zk.remove_recursive(path("volume.name", {pool, volume}));
        zk.remove_recursive(path("base.snapshot") + "/" + pool + "/" + volume);
        volume_made = false;
        return r.exit_status == 0;
    };
    try {
        step("Storing running status in database");
        zk.ensure_path(benchmarks_path);
        long id = next_id(zk);
        record(zk, job, id, "Running");

        step("Creating benchmark volume");
        if (zk.exists(path("volume.name", {pool, volume})))
            throw TaskFailure("Failed to create volume \"" + std::string(volume) + "\" on pool \"" + pool + "\": ERROR: Volume \"" +
                              volume + "\" already exists in pool \"" + pool + "\"");
        auto c = t.run(rbd_args(t, {"create", "--size", t.options().benchmark_size, pool + "/" + volume}), 120s);
        if (c.exit_status != 0)
            throw TaskFailure("Failed to create volume \"" + std::string(volume) + "\" on pool \"" + pool + "\": " + tail(c.output));
        volume_made = true;
        auto info = t.run(rbd_args(t, {"info", "--format", "json", pool + "/" + volume}), 120s);
        zk.write({{path("volume.name", {pool, volume}), ""},
                  {path("volume.stats", {pool, volume}), info.exit_status == 0 ? trim(info.output) + "\n" : "{}"},
                  {path("base.snapshot") + "/" + pool + "/" + volume, ""}});

        Json results = Json::object();
        for (const auto& j : jobs) {
            step(std::string("Running benchmark job '") + j.name + "'");
            std::vector<std::string> fio{"fio", std::string("--name=") + j.name, "--ioengine=rbd", "--pool=" + pool,
                                         std::string("--rbdname=") + volume, "--output-format=json", "--direct=1",
                                         "--randrepeat=1", "--numjobs=1", "--time_based",
                                         "--runtime=" + std::to_string(t.options().benchmark_runtime.count()),
                                         "--group_reporting", std::string("--iodepth=") + j.iodepth,
                                         std::string("--bs=") + j.bs, std::string("--readwrite=") + j.rw};
            auto r = t.run(fio, t.options().benchmark_runtime + 300s);
            auto out = r.exit_status == 0 ? json_in_output(r.output) : std::nullopt;
            if (!out) throw TaskFailure(std::string("Failed to run fio test '") + j.name + "': " + tail(r.output));
            results[j.name] = *out;
        }
        step("Cleaning up benchmark volume");
        if (!remove_volume())
            throw TaskFailure("Failed to remove volume \"" + std::string(volume) + "\" from pool \"" + pool + "\"");
        step("Storing results in database");
        record(zk, job, id, results);
    } catch (...) {
        // Nothing half-done left behind: the volume and the "Running" record go.
        remove_volume();
        zk.remove_recursive(record_path);
        throw;
    }
    run.progress(total, total, "Finishing up");
    t.log().info("Storage benchmark {} on pool {} completed", job, pool);
    return "Storage benchmark " + job + " completed successfully";
}

}  // namespace

services::TaskHandler benchmark_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools) {
    return [zk = std::move(zk), tools = std::move(tools)](TaskRun& run) { return benchmark(*zk, *tools, run); };
}

}  // namespace pvc::storage
