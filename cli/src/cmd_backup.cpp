// pvc vm backup create|restore|remove, pvc vm autobackup, pvc cluster
// backup|restore: the reference client's commands, done here through
// pvc/backup.hpp (the library the API's routes use) with this node's Ceph
// settings, on this machine's filesystem (the reference's API wrote on the
// primary coordinator's: run these there, or on any node that mounts the
// backup path).
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <unistd.h>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/backup.hpp"
#include "pvc/schema.hpp"

namespace pvc::cli {

ceph::Client& storage_ceph_client();
ceph::Settings storage_ceph_settings();

namespace {

using schema::path;

std::string short_hostname() {
    char buf[256] = {};
    gethostname(buf, sizeof(buf) - 1);
    std::string h = buf;
    return h.substr(0, h.find('.'));
}

backup::Context context() {
    backup::Context c;
    c.settings = storage_ceph_settings();  // a missing setting is named before anything connects
    c.ceph = &storage_ceph_client();
    c.zk = session();
    c.vm_detail = [](const std::string& uuid) -> std::optional<backup::Json> {
        VmView v = read_vm(uuid);
        backup::Json j = backup::Json::parse(v.to_json(true).dump());
        // As the API's object: the XML with its double quotes as single ones.
        std::string xml = v.xml;
        std::replace(xml.begin(), xml.end(), '"', '\'');
        j["xml"] = xml;
        return j;
    };
    return c;
}

// "Backing up VM 'x'... done." then the answer; a refusal exits 1.
void run(const std::string& doing, const std::function<backup::Answer()>& fn) {
    std::cout << doing << "... " << std::flush;
    auto a = fn();
    std::cout << (a.ok() ? "done." : "failed.") << std::endl;
    if (!a.ok()) throw Failure(a.message);
    std::cout << a.message << std::endl;
}

}  // namespace

void add_backup_commands(CLI::App& app) {
    auto* vm = app.get_subcommand("vm");
    auto* backup = vm->add_subcommand("backup", "Create, restore or remove backups of a VM");
    backup->require_subcommand(1);
    backup->footer("A backup is BACKUP_PATH/<vm>/<datestring>/ on this machine: pvcbackup.json and the VM's RBD\n"
                   "volumes (full: rbd export format 2; incremental: rbd export-diff from a retained snapshot).\n\n"
                   "Examples:\n  pvc vm backup create web1 /srv/backups --retain-snapshot\n"
                   "  pvc vm backup create web1 /srv/backups --incremental 20261127093000\n"
                   "  pvc vm backup restore web1 20261127093000 /srv/backups\n"
                   "  pvc vm backup remove web1 20261127093000 /srv/backups");

    struct CreateArgs {
        std::string vm, path, parent;
        bool retain = false;
    };
    auto ca = std::make_shared<CreateArgs>();
    auto* create = backup->add_subcommand("create", "Create a backup of a VM");
    create->add_option("domain", ca->vm, "VM name or UUID")->required();
    create->add_option("backup_path", ca->path, "An absolute directory path on this machine")->required();
    create->add_option("-i,--incremental", ca->parent, "Perform an incremental volume backup from this parent backup datestring");
    create->add_flag("-r,--retain-snapshot", ca->retain, "Retain volume snapshot for future incremental use (full only)");
    create->footer("The VM may be running (its volumes' snapshots are crash-consistent).\n\n"
                   "Examples:\n  pvc vm backup create web1 /srv/backups -r");
    create->callback([ca] {
        auto c = context();
        std::optional<std::string> parent;
        if (!ca->parent.empty()) parent = ca->parent;
        run("Backing up VM '" + ca->vm + "'", [&] { return backup::create(c, ca->vm, ca->path, parent, ca->retain); });
    });

    struct RestoreArgs {
        std::string vm, ds, path;
        bool retain = true;
    };
    auto ra = std::make_shared<RestoreArgs>();
    auto* restore = backup->add_subcommand("restore", "Restore a backup of a VM");
    restore->add_option("domain", ra->vm, "VM name or UUID (as backed up)")->required();
    restore->add_option("backup_datestring", ra->ds, "The backup's datestring")->required();
    restore->add_option("backup_path", ra->path, "An absolute directory path on this machine")->required();
    restore->add_flag("-r,--retain-snapshot,!-R,!--remove-snapshot", ra->retain,
                      "Retain (default) or remove the restored (parent, if incremental) snapshot");
    restore->footer("The VM must not exist; it is defined again, its volumes created and imported, and started.\n\n"
                    "Examples:\n  pvc vm backup restore web1 20261127093000 /srv/backups");
    restore->callback([ra] {
        auto c = context();
        run("Restoring backup " + ra->ds + " of VM '" + ra->vm + "'",
            [&] { return backup::restore(c, ra->vm, ra->path, ra->ds, ra->retain); });
    });

    struct RemoveArgs {
        std::string vm, ds, path;
    };
    auto xa = std::make_shared<RemoveArgs>();
    auto* remove = backup->add_subcommand("remove", "Remove a backup of a VM, with its retained snapshots");
    remove->add_option("domain", xa->vm, "VM name or UUID")->required();
    remove->add_option("backup_datestring", xa->ds, "The backup's datestring")->required();
    remove->add_option("backup_path", xa->path, "An absolute directory path on this machine")->required();
    remove->footer("Removing an incremental parent invalidates the incremental backups made from it.\n\n"
                   "Examples:\n  pvc vm backup remove web1 20261127093000 /srv/backups");
    remove->callback([xa] {
        auto c = context();
        run("Removing backup " + xa->ds + " of VM '" + xa->vm + "'",
            [&] { return backup::remove(c, xa->vm, xa->path, xa->ds); });
    });

    struct AutoArgs {
        std::string file;
        bool force_full = false, cron = false;
    };
    auto aa = std::make_shared<AutoArgs>();
    const char* env = std::getenv("PVC_AUTOBACKUP_CFGFILE");
    aa->file = env && *env ? env : "/etc/pvc/autobackup.yaml";
    auto* autob = vm->add_subcommand("autobackup", "Perform automatic VM backups (run on the primary coordinator)");
    autob->add_option("-f,--configuration", aa->file, "The configuration file (default $PVC_AUTOBACKUP_CFGFILE, else /etc/pvc/autobackup.yaml)");
    autob->add_flag("--force-full", aa->force_full, "Force all backups to be full backups this run");
    autob->add_flag("--cron", aa->cron, "Cron mode; don't error exit if this isn't the primary coordinator");
    autob->footer("Backs up every VM with one of the configured tags: full every full_interval backups, else\n"
                  "incremental from the newest full; keeps full_retention full backups (and their\n"
                  "incrementals). The configuration (YAML, the reference's):\n"
                  "  autobackup:\n    backup_root_path: /srv/backups\n    backup_root_suffix: /mycluster\n"
                  "    backup_tags: [backup]\n    backup_schedule: {full_interval: 7, full_retention: 2}\n"
                  "    auto_mount: {enabled: no, mount_cmds: [], unmount_cmds: []}\n\n"
                  "Examples:\n  pvc vm autobackup\n  pvc vm autobackup --cron -f /etc/pvc/autobackup.yaml");
    autob->callback([aa] {
        std::string me = short_hostname();
        std::string primary = read(path("base.config.primary_node"));
        if (primary != me) {
            if (aa->cron) {
                std::cout << "Current host is not the primary coordinator of the local cluster and running in cron "
                             "mode. Exiting cleanly."
                          << std::endl;
                return;
            }
            throw Failure("Current host '" + me + "' is not the primary coordinator of the cluster ('" + primary +
                          "'). Autobackup MUST be run from the cluster's primary coordinator.");
        }
        backup::AutobackupConfig cfg;
        try {
            cfg = backup::read_autobackup_config(aa->file);
        } catch (const std::exception& e) {
            throw Failure(e.what());
        }
        if (geteuid() != 0)
            std::cerr << "WARNING: not running as 'root': the backup files may not be readable by the API daemon."
                      << std::endl;
        auto c = context();
        int status = backup::autobackup(c, cfg, aa->force_full, std::cout, std::cerr);
        if (status != 0) throw Failure("autobackup stopped (see above)", status);
    });

    // ---- cluster backup | restore
    auto* cluster = app.get_subcommand("cluster");
    struct ClusterBackupArgs {
        std::string file;
    };
    auto cb = std::make_shared<ClusterBackupArgs>();
    auto* cbackup = cluster->add_subcommand("backup", "Back up every key of the cluster (JSON)");
    cbackup->add_option("-f,--file", cb->file, "Write the backup to this file (default: standard output)");
    cbackup->footer("The keys and values of the whole ZooKeeper tree but /zookeeper and /patroni, as GET\n"
                    "/api/v1/backup gives them.\n\nExamples:\n  pvc cluster backup -f cluster.json");
    cbackup->callback([cb] {
        auto data = backup::cluster_backup(*session());
        std::string text = data.dump();
        if (cb->file.empty()) {
            std::cout << text << std::endl;
            return;
        }
        std::ofstream out(cb->file, std::ios::trunc);
        out << text;
        out.close();
        if (!out) throw Failure("could not write " + cb->file);
        std::cout << "Wrote " << data.size() << " keys (" << text.size() << " bytes) to " << cb->file << "." << std::endl;
    });

    struct ClusterRestoreArgs {
        std::string file;
        bool yes = false;
    };
    auto cr = std::make_shared<ClusterRestoreArgs>();
    auto* crestore = cluster->add_subcommand("restore", "Restore the keys of a cluster backup (destructive)");
    crestore->add_option("-f,--filename", cr->file, "The backup file (from pvc cluster backup)")->required();
    crestore->add_flag("-y,--yes", cr->yes, "Do not ask for confirmation");
    crestore->footer("Writes every key of the backup (existing keys are overwritten, others stay); the backup's\n"
                     "schema version must be this cluster's. Lock and node task keys are skipped.\n\n"
                     "Examples:\n  pvc cluster restore -f cluster.json --yes");
    crestore->callback([cr] {
        std::ifstream in(cr->file);
        if (!in) throw Failure("cannot read " + cr->file);
        std::stringstream ss;
        ss << in.rdbuf();
        backup::Json data = backup::Json::parse(ss.str(), nullptr, false);
        // A file saved from the API holds the JSON text as a JSON string.
        if (data.is_string()) data = backup::Json::parse(data.get<std::string>(), nullptr, false);
        if (data.is_discarded() || !data.is_object()) throw Failure("ERROR: Failed to parse JSON data: " + cr->file + " is not a cluster backup");
        confirm(cr->yes, "restore",
                "Replace the cluster's keys with the backup's (" + std::to_string(data.size()) + " keys)?", "Aborted.");
        auto a = backup::cluster_restore(*session(), data);
        if (!a.ok()) throw Failure(a.message);
        std::cout << a.message << std::endl;
    });
}

}  // namespace pvc::cli
