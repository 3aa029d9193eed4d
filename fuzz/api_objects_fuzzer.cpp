// ZooKeeper values as the API reads them (modules/api/src/objects.cpp over
// cluster_view.cpp): node static data and figures, health plugin data, VM
// XML, stats and tags, networks, leases, reservations and ACLs, Ceph OSD,
// pool and volume statistics (JSON), the cluster status. The input is a
// cluster tree, one znode per record:
//
//   /nodes/hv1/staticdata
//   4 6.1.0-13-amd64 GNU/Linux x86_64
//   %%
//
// (a path line, then its value up to a line "%%"; parents are created with
// empty values). The view mirrors it from an in-memory session whose
// watches answer at once, then every object the routes build is built and
// serialized. Nothing may crash, leak or hang; every object serializes.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "cluster_view.hpp"
#include "objects.hpp"
#include "tree_session.hpp"

using namespace pvc;
using pvc::api::test::TreeSession;
using pvc::api::test::parse_tree;

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void show(const api::Json& j) { check(!api::dump(j).empty()); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 64 * 1024) return 0;
    auto session = std::make_shared<TreeSession>(parse_tree(std::string(reinterpret_cast<const char*>(data), size)));
    api::ClusterView view(session);
    view.start();
    check(view.wait_ready(std::chrono::seconds(60)));
    {
        auto r = view.read();
        for (const auto& n : r.children("/nodes")) show(api::node_object(r, n));
        api::VmCache vms;
        for (const auto& u : r.children("/domains")) {
            if (auto vm = api::vm_object(r, u)) show(*vm);
            (void)vms.get(r, u);
        }
        show(api::cluster_status(r, vms));
        for (const auto& vni : r.children("/networks")) {
            show(api::network_object(r, vni));
            for (const char* kind : {"dhcp4_leases", "dhcp4_reservations"})
                for (const auto& mac : r.children("/networks/" + vni + "/" + kind)) show(api::lease_object(r, vni, mac));
            for (const auto& dir : r.children("/networks/" + vni + "/firewall_rules"))
                for (const auto& d : r.children("/networks/" + vni + "/firewall_rules/" + dir))
                    show(api::acl_object(r, vni, dir, d));
        }
        for (const auto& id : r.children("/ceph/osds")) show(api::osd_object(r, id));
        for (const auto& p : r.children("/ceph/pools")) show(api::pool_object(r, p));
        for (const auto& p : r.children("/ceph/volumes"))
            for (const auto& v : r.children("/ceph/volumes/" + p)) show(api::volume_object(r, p, v));
    }
    view.stop();
    return 0;
}
