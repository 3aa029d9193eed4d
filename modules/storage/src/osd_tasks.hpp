// The OSD node tasks (docs/sdk-guide.md §8), run on the node that holds the
// disk: `osd.add`, `osd.add_db_vg`, `osd.replace`, `osd.refresh`,
// `osd.remove`; and `storage.benchmark` on the primary (benchmark_task.cpp).
// Queued by the API (POST /storage/ceph/osd, /osddb, POST|PUT|DELETE
// /storage/ceph/osd/<id>, POST /storage/ceph/benchmark) and `pvc storage osd
// ...`, `pvc storage benchmark run`.
//
// Every host command is an argv (no shell), bounded, with CEPH_CONF set to
// the module's `ceph_config_file`; `ceph` commands also get the admin
// keyring. Disks are refused before anything is written when they do not
// exist, are not block devices, hold a partition table, or carry any other
// signature (a filesystem, RAID, LVM) that is not the LVM of a Ceph OSD that
// no longer exists (modules/storage/README.md, "OSD tasks").
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/command.hpp"
#include "pvc/log.hpp"
#include "pvc/services/tasks.hpp"
#include "pvc/zk.hpp"

namespace pvc::storage {

struct OsdTaskOptions {
    std::string node;                          // this node
    std::string ceph_config_file;              // CEPH_CONF of every command
    std::string ceph_admin_keyring;            // `ceph --keyring`
    std::chrono::seconds command_timeout{900};  // one ceph-volume / LVM / fio command
    std::chrono::seconds ceph_timeout{60};      // one `ceph` command
    std::chrono::seconds up_timeout{300};       // a new OSD reported up by Ceph
    std::chrono::seconds safe_timeout{60};      // the safe-to-destroy wait (then proceeds, as the reference)
    std::chrono::seconds stats_timeout{120};    // the primary's first statistics of a new OSD (0: not waited for)
    std::chrono::seconds benchmark_runtime{75}; // each fio job (the reference's)
    std::string benchmark_size = "8G";          // the temporary volume (the reference's)
};

// What a handler runs on the host, with the options' environment.
class HostTools {
public:
    HostTools(OsdTaskOptions options, Logger log) : o_(std::move(options)), log_(std::move(log)) {}
    // Any command, bounded by command_timeout (or `timeout`).
    CommandResult run(const std::vector<std::string>& argv,
                      std::optional<std::chrono::seconds> timeout = std::nullopt) const;
    // `ceph --conf <f> --keyring <k> <args...>`, bounded by ceph_timeout.
    CommandResult ceph(const std::vector<std::string>& args) const;
    const OsdTaskOptions& options() const { return o_; }
    const Logger& log() const { return log_; }

private:
    OsdTaskOptions o_;
    Logger log_;
};

// The JSON document in a command's output (stdout and stderr interleaved:
// from the first '{' or '[' to the last matching closer); nullopt when
// there is none or it does not parse.
std::optional<nlohmann::json> json_in_output(const std::string& output);

// The reference's `detect:<name>:<size>:<index>` from `lsscsi -s` output:
// the index-th disk line containing <name> (case-insensitive) whose size
// is within 3 % of <size>; nullopt when none.
std::optional<std::string> detect_device_in(const std::string& lsscsi_output, const std::string& detect);

// "1G", "512M", "1024" (bytes): the reference's units (powers of 1024).
std::optional<unsigned long long> parse_size_bytes(const std::string& s);

// The partition of a whole disk that `osd.add_db_vg` creates: `-part1` for
// /dev/disk/by-* names, `p1` after a name ending in a digit (nvme0n1,
// loop3, mmcblk0), else `1`.
std::string first_partition(const std::string& device);

// The placeholder `stats` of a new OSD, the reference's (weight "|" until the
// primary's first collection).
extern const char* const osd_stats_placeholder;

struct OsdTaskHandles {
    std::vector<std::shared_ptr<void>> handles;
};

// Registers the five OSD handlers and storage.benchmark with `tasks`.
OsdTaskHandles register_osd_tasks(services::TaskHandlers& tasks, std::shared_ptr<zk::Session> zk,
                                  const OsdTaskOptions& options, Logger log);

// The handlers themselves (tests run them through a task runner).
services::TaskHandler osd_add_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);
services::TaskHandler osd_add_db_vg_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);
services::TaskHandler osd_replace_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);
services::TaskHandler osd_refresh_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);
services::TaskHandler osd_remove_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);
services::TaskHandler benchmark_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<const HostTools> tools);

// Where benchmark results live (ours; the reference kept them in
// PostgreSQL): /ceph/benchmarks/<job>, a JSON object {"id", "job",
// "test_format", "benchmark_result"} ("Running" until the run ends).
inline constexpr const char* benchmarks_path = "/ceph/benchmarks";

}  // namespace pvc::storage
