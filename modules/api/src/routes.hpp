// The /api/v1 routes: parameter checks, API-key authentication,
// reads from the cluster view, writes through the SDK's client
// functions (pvc/client.hpp, the same the `pvc` command line uses), and the
// Prometheus routes (metrics.hpp).
#pragma once

#include <memory>
#include <mutex>
#include <stop_token>
#include <string>

#include "cluster_view.hpp"
#include "fetch.hpp"
#include "http_server.hpp"
#include "metrics.hpp"
#include "objects.hpp"
#include "pvc/backup.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/client_network.hpp"
#include "pvc/service_registry.hpp"
#include "settings.hpp"

namespace pvc::api {

class Api {
public:
    // `services`: where `DELETE /vm/<vm>?delete_disks=true` finds the RBD
    // volume removal (pvc.rbd_volumes.v1, the storage module's); null or
    // without a provider, removing a VM with volumes is refused.
    Api(std::shared_ptr<zk::Session> zk, ClusterView& view, ApiSettings settings, Logger log, DaemonFigures& figures,
        ServiceRegistry* services = nullptr);
    HttpResponse handle(const HttpRequest& request, std::stop_token stop);
    // The requests whose body the server streams to the route (a volume
    // upload: no limit) rather than reading it whole (ServerOptions::streamed).
    static std::optional<std::uint64_t> streamed_body(std::string_view method, std::string_view target);
    // Brings ZooKeeper's /ceph mirrors in line with Ceph for what storage
    // writes left half-done (pvc/ceph_client.hpp, Client::reconcile): the
    // primary runs it at each keepalive. Nothing without Ceph settings.
    void reconcile_storage();

    struct Ctx;
    using Fn = HttpResponse (Api::*)(Ctx&);

    // The routes, each called by handle() after its checks (route, key, parameters).
    HttpResponse root(Ctx&);
    HttpResponse status_get(Ctx&);
    HttpResponse status_post(Ctx&);
    HttpResponse primary_node(Ctx&);
    HttpResponse node_list(Ctx&);
    HttpResponse node_get(Ctx&);
    HttpResponse node_state_get(Ctx&);
    HttpResponse node_coordinator_post(Ctx&);
    HttpResponse node_domain_post(Ctx&);
    HttpResponse node_log(Ctx&);
    HttpResponse vm_list(Ctx&);
    HttpResponse vm_get(Ctx&);
    HttpResponse vm_define(Ctx&);
    HttpResponse vm_modify(Ctx&);
    HttpResponse vm_delete(Ctx&);
    HttpResponse vm_state_get(Ctx&);
    HttpResponse vm_state_post(Ctx&);
    HttpResponse vm_node_get(Ctx&);
    HttpResponse vm_node_post(Ctx&);
    HttpResponse vm_meta_get(Ctx&);
    HttpResponse vm_meta_post(Ctx&);
    HttpResponse vm_tags_get(Ctx&);
    HttpResponse vm_tags_post(Ctx&);
    HttpResponse vm_console(Ctx&);
    HttpResponse vm_locks(Ctx&);
    // Node tasks (routes_tasks.cpp, pvc/tasks.hpp): 202 with the task's id.
    HttpResponse vm_device(Ctx&);
    HttpResponse task_list(Ctx&);
    HttpResponse task_get(Ctx&);
    HttpResponse vm_rename(Ctx&);  // routes_vm_rename.cpp
    // VM backups (routes_backup.cpp, pvc/backup.hpp): inside the request, as the reference.
    HttpResponse vm_backup_create(Ctx&);
    HttpResponse vm_backup_remove(Ctx&);
    HttpResponse vm_restore(Ctx&);
    // routes_cluster.cpp
    HttpResponse cluster_initialize(Ctx&);
    HttpResponse cluster_backup(Ctx&);
    HttpResponse cluster_restore(Ctx&);
    HttpResponse network_list(Ctx&);
    HttpResponse network_get(Ctx&);
    HttpResponse lease_list(Ctx&);
    HttpResponse lease_get(Ctx&);
    HttpResponse acl_list(Ctx&);
    HttpResponse acl_get(Ctx&);
    HttpResponse network_add(Ctx&);
    HttpResponse network_modify(Ctx&);
    HttpResponse network_delete(Ctx&);
    HttpResponse lease_add(Ctx&);
    HttpResponse lease_delete(Ctx&);
    HttpResponse acl_add(Ctx&);
    HttpResponse acl_delete(Ctx&);
    HttpResponse sriov_pf_list(Ctx&);
    HttpResponse sriov_vf_list(Ctx&);
    HttpResponse sriov_vf_set(Ctx&);
    HttpResponse ceph_status(Ctx&);
    HttpResponse ceph_util(Ctx&);
    HttpResponse osd_list(Ctx&);
    HttpResponse osd_get(Ctx&);
    HttpResponse pool_list(Ctx&);
    HttpResponse pool_get(Ctx&);
    HttpResponse volume_list(Ctx&);
    HttpResponse volume_get(Ctx&);
    HttpResponse snapshot_list(Ctx&);
    // Storage writes (routes_storage.cpp), through pvc/ceph_client.hpp.
    HttpResponse pool_add(Ctx&);
    HttpResponse pool_set_pgs(Ctx&);
    HttpResponse pool_delete(Ctx&);
    HttpResponse volume_add(Ctx&);
    HttpResponse volume_modify(Ctx&);
    HttpResponse volume_delete(Ctx&);
    HttpResponse volume_clone(Ctx&);
    HttpResponse volume_upload(Ctx&);
    HttpResponse snapshot_add(Ctx&);
    HttpResponse snapshot_get(Ctx&);
    HttpResponse snapshot_modify(Ctx&);
    HttpResponse snapshot_delete(Ctx&);
    HttpResponse osd_state_get(Ctx&);
    HttpResponse osd_state_post(Ctx&);
    HttpResponse osd_option(Ctx&);
    // OSD lifecycle and the storage benchmark (routes_osd.cpp): node tasks, 202 with the task's id.
    HttpResponse osd_db_vg_add(Ctx&);
    HttpResponse osd_add(Ctx&);
    HttpResponse osd_replace(Ctx&);
    HttpResponse osd_refresh(Ctx&);
    HttpResponse osd_remove(Ctx&);
    HttpResponse benchmark_run(Ctx&);
    HttpResponse benchmark_list(Ctx&);
    HttpResponse metrics_all(Ctx&);
    HttpResponse metrics_health(Ctx&);
    HttpResponse metrics_resource(Ctx&);
    HttpResponse metrics_ceph(Ctx&);
    HttpResponse metrics_zookeeper(Ctx&);
    HttpResponse metrics_daemon(Ctx&);

private:
    // What a route reads: the view, or ZooKeeper itself once the request is
    // confirmed (Ctx::through; handle() decides, see there).
    ClusterView::Reader reader(const Ctx& c) const;
    // Syncs the session and switches the request to ZooKeeper reads; the
    // 503 to answer when ZooKeeper cannot be reached.
    std::optional<HttpResponse> confirm(Ctx& c);
    std::optional<std::string> find_vm(Ctx& c, const std::string& id);  // exact UUID or name -> UUID
    HttpResponse lists_vms(Ctx& c, const std::optional<std::string>& limit, bool exact);
    HttpResponse set_vm_state(Ctx& c, const std::string& uuid);
    std::optional<std::string> choose_target(Ctx& c, const std::string& node_limit, const std::string& selector,
                                             const std::string& current);
    // Waits until the view shows `path` = `value` (or absent when nullopt), at most 2 s: read-your-writes.
    void settle(const std::string& path, const std::optional<std::string>& value);
    // The same for every key at once (the view's watches answer in no set order), one 2 s bound.
    void settle(const std::vector<zk::KeyValue>& kvs);
    void settle(const std::vector<std::pair<std::string, std::optional<std::string>>>& want);
    std::string read_key(const std::string& path);  // ZooKeeper itself, "" when absent
    // A network write's answer (pvc/client_network.hpp): its status and
    // message, once the view shows what it wrote.
    HttpResponse net_answer(const client::NetResult& r);
    // Queues task `name` on the node of VM `uuid`: the 202 answer, or 400.
    HttpResponse queue_vm_task(const std::string& name, const std::string& uuid, Json kwargs);
    // Queues `name` on `node` ("primary" allowed): the 202 answer, or 400 (routes_osd.cpp).
    HttpResponse queue_task(const std::string& name, const std::string& node, const nlohmann::json& kwargs);
    std::optional<std::string> osd_node(const std::string& id);  // the node of OSD `id`, nullopt when unknown
    // A storage write's answer: its status and message (`keep_quotes`: pool
    // creation keeps its double quotes), once the view shows what it wrote;
    // 503 naming the missing settings when this node has no Ceph client.
    HttpResponse storage_answer(const ceph::Result& r, bool keep_quotes = false);
    ceph::Client* ceph_client();
    // What the backup library needs (routes_backup.cpp); nullopt without Ceph settings.
    std::optional<backup::Context> backup_context(Ctx& c);
    // The relayed exporters (Ceph MGR, ZooKeeper); nullopt when unreachable.
    // Shared by concurrent scrapes, an answer reused for 5 s (fetch.hpp).
    std::optional<std::string> ceph_exporter();
    std::optional<std::string> zookeeper_exporter();
    std::optional<std::string> fetch_ceph_exporter();
    std::optional<std::string> fetch_zookeeper_exporter();

    std::shared_ptr<zk::Session> zk_;
    ClusterView& view_;
    ApiSettings settings_;
    Logger log_;
    DaemonFigures& figures_;
    ServiceRegistry* services_;
    VmCache vms_;
    SharedFetch ceph_relay_, zookeeper_relay_;
    std::unique_ptr<ceph::Client> ceph_;  // made on first use; null without Ceph settings
    std::once_flag ceph_once_;
};

}  // namespace pvc::api
