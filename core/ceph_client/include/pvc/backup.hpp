// Backups of a PVC cluster, as the reference 0.9.82 makes them, shared by
// the API module (POST/DELETE /vm/<vm>/backup, POST /vm/<vm>/restore,
// GET /backup, POST /restore) and `pvc` (vm backup, vm autobackup,
// cluster backup|restore): core/ceph_client/README.md, "VM backups".
//
// A VM backup is a directory on the machine that makes it:
//   <path>/<vm>/<datestring>/pvcbackup.json
//   <path>/<vm>/<datestring>/pvcdisks/<pool>.<volume>.rbdimg   (full: rbd export --export-format 2)
//   <path>/<vm>/<datestring>/pvcdisks/<pool>.<volume>.rbddiff  (incremental: rbd export-diff)
// with the RBD snapshots `backup_<datestring>` (kept for a later incremental
// when asked). The images are read and written through librbd in the `rbd`
// command's formats (no `rbd` process). A backup is written into a hidden
// directory beside its final name and renamed when complete, so a failed
// backup leaves no directory and no snapshot behind.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/ceph_client.hpp"
#include "pvc/zk.hpp"

namespace pvc::backup {

using Json = nlohmann::ordered_json;

// The reference's answer: 200 done (warnings as first lines), 400 refused
// or failed (nothing left half-done), 503 Ceph did not answer.
struct Answer {
    int status = 200;
    std::string message;
    bool ok() const { return status == 200; }
};

struct Context {
    std::shared_ptr<zk::Session> zk;
    ceph::Client* ceph = nullptr;  // snapshots and volumes, with their /ceph keys
    ceph::Settings settings;       // the connection the image streams use
    std::string host;              // the host named in messages; "" = this host's short name
    // The VM object stored as `vm_detail` (the API's GET /vm/<vm> object), by UUID.
    std::function<std::optional<Json>(const std::string& uuid)> vm_detail;
    // Restore: the define's refusal on `node` (memory, vCPUs), or nullopt.
    std::function<std::optional<std::string>(const std::string& xml, const std::string& node)> admit;
};

// `vm`: the VM's name or UUID, as given (the directory is named so).
Answer create(const Context& c, const std::string& vm, const std::string& path,
              const std::optional<std::string>& incremental_parent, bool retain_snapshot);
Answer remove(const Context& c, const std::string& vm, const std::string& path, const std::string& datestring);
Answer restore(const Context& c, const std::string& vm, const std::string& path, const std::string& datestring,
               bool retain_snapshot);

// `pvc vm autobackup`: the reference's configuration file (YAML, key
// `autobackup`: backup_root_path, backup_root_suffix, backup_tags,
// backup_schedule.full_interval / full_retention, auto_mount.enabled /
// mount_cmds / unmount_cmds).
struct AutobackupConfig {
    std::string root_path, root_suffix;
    std::vector<std::string> tags;
    long full_interval = 7, full_retention = 2;
    bool auto_mount = false;
    std::vector<std::string> mount_cmds, unmount_cmds;  // {backup_root_path} replaced
};
// Throws std::runtime_error with the reference's messages ("ERROR: Specified
// backup configuration does not exist!", "ERROR: Backup configuration is
// invalid: 'full_retention'").
AutobackupConfig read_autobackup_config(const std::string& file);
// Backs up every VM carrying one of the tags (full, or incremental from the
// newest full, by the schedule), removes full backups past the retention
// with their incrementals, and keeps the state in <root><suffix>/<vm>/.autobackup.json.
// Lines go to `out` (the VM list to `err`). The exit status (0, or 1 when
// a mount command failed).
int autobackup(const Context& c, const AutobackupConfig& cfg, bool force_full, std::ostream& out, std::ostream& err);

// POST /initialize: the schema-10 base keys of an empty cluster; with
// `overwrite`, the cluster's base trees (/schema /config /logs /nodes
// /domains /networks /ceph) deleted first. The reference's messages.
Answer cluster_initialize(zk::Session& zk, bool overwrite);

// The whole cluster's keys (GET /backup's inner object): "/" first, then
// depth-first in ZooKeeper's order, /zookeeper and /patroni left out.
Json cluster_backup(zk::Session& zk);
// Writes a cluster backup's keys (POST /restore): the schema version must
// be this cluster's; lock contenders and node task keys are skipped; the
// keys go in transactions under ZooKeeper's request limit, parents first.
// Answers the reference's messages ("Restore completed successfully.").
Answer cluster_restore(zk::Session& zk, const Json& data);

// The local time as YYYYMMDDHHMMSS; a Python float rounded to 2 digits as
// Python prints it (12.0, 0.35).
std::string datestring_now();
std::string seconds_text(double s);

}  // namespace pvc::backup
