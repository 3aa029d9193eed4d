// VM backups (pvc/backup.hpp): POST /vm/<vm>/backup, DELETE
// /vm/<vm>/backup, POST /vm/<vm>/restore, run inside the request as the
// reference 0.9.82 does (no task), on this node's filesystem (the API runs on
// the primary coordinator) and through this node's Ceph client.
// Differences from the reference: `retain_snapshot` of a restore defaults to
// true when absent (its documented default); a VM without RBD volumes, a
// volume that exists already and missing backup files are refused before
// anything is written; a failed backup leaves no directory and no snapshot,
// a failed restore no VM and no volume.
#include <algorithm>
#include <unistd.h>

#include "objects.hpp"
#include "pvc/backup.hpp"
#include "pvc/schema.hpp"
#include "route_ctx.hpp"
#include "routes.hpp"

namespace pvc::api {

namespace {

HttpResponse backup_message(unsigned status, std::string text) {
    std::replace(text.begin(), text.end(), '"', '\'');
    return {status, "application/json", dump(Json{{"message", text}}) + "\n", {}};
}

const char* const no_ceph_settings =
    "ERROR: This node has no Ceph client settings (pvc.system.configuration.storage.ceph_config_file in "
    "pvcnoded.yaml); VM backups are not possible here.";

}  // namespace

std::optional<backup::Context> Api::backup_context(Ctx& c) {
    ceph::Client* ceph = ceph_client();
    if (!ceph || !settings_.ceph) return std::nullopt;
    backup::Context ctx;
    ctx.zk = zk_;
    ctx.ceph = ceph;
    ctx.settings = *settings_.ceph;
    ctx.vm_detail = [this, &c](const std::string& uuid) -> std::optional<Json> { return vm_object(reader(c), uuid); };
    return ctx;
}

HttpResponse Api::vm_backup_create(Ctx& c) {
    auto ctx = backup_context(c);
    if (!ctx) return backup_message(503, no_ceph_settings);
    auto parent = c.p("incremental_parent");
    if (parent && parent->empty()) parent.reset();
    auto a = backup::create(*ctx, c.args[0], c.p("backup_path").value_or(""), parent, c.flag("retain_snapshot"));
    if (!a.ok()) log_.local().info("API: backup of VM {} refused: {}", c.args[0], a.message);
    return backup_message(static_cast<unsigned>(a.status), a.message);
}

HttpResponse Api::vm_backup_remove(Ctx& c) {
    auto ctx = backup_context(c);
    if (!ctx) return backup_message(503, no_ceph_settings);
    auto a = backup::remove(*ctx, c.args[0], c.p("backup_path").value_or(""), c.p("backup_datestring").value_or(""));
    return backup_message(static_cast<unsigned>(a.status), a.message);
}

HttpResponse Api::vm_restore(Ctx& c) {
    auto ctx = backup_context(c);
    if (!ctx) return backup_message(503, no_ceph_settings);
    // The documented default (true) when absent; the reference read absent as false.
    bool retain = zk::lenient_bool(c.p("retain_snapshot").value_or("true")).value_or(true);
    auto a = backup::restore(*ctx, c.args[0], c.p("backup_path").value_or(""), c.p("backup_datestring").value_or(""),
                             retain);
    return backup_message(static_cast<unsigned>(a.status), a.message);
}

}  // namespace pvc::api
