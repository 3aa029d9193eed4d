// What a PVC client writes (docs/wire-contract.md §5.10): the keys, values,
// transactions and locks of the reference's client library, shared by the
// `pvc` command line and the API module so both write a cluster the same way.
// Checks of the input and the messages shown to a person are each caller's;
// these functions only write (and, where the reference does, wait).
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "pvc/export.hpp"
#include "pvc/zk.hpp"

namespace pvc::client {

using namespace std::chrono_literals;

// A new random UUID (version 4), canonical lowercase.
PVC_SDK_API std::string new_uuid();

// True for a name that can be one znode (a node, VM, tag name): not empty,
// no '/', not "." or "..", no NUL or control characters.
PVC_SDK_API bool is_safe_name(std::string_view name);

// The reference's change_state and move/migrate write: the kazoo exclusive
// lock on /domains/<uuid>/state, the keys written in one transaction, held
// `hold` (0.5 s) more, released. False when the lock or the write failed, or
// when `stop` was requested while waiting for the lock (a server stopping).
PVC_SDK_API bool write_under_state_lock(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                                        const std::vector<zk::KeyValue>& kvs, std::chrono::milliseconds hold = 500ms,
                                        std::stop_token stop = {});
PVC_SDK_API bool change_vm_state(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                                 const std::string& state, std::stop_token stop = {});

// SR-IOV VF bookkeeping (a VF's used / used_by keys), done by define_vm, write_vm_xml,
// relocate_vm and undefine_vm for the VM's `direct` (macvtap) and `hostdev`
// NICs whose VF is registered on the VM's node (/nodes/<n>/sriov/vf/<vf>):
// a claim sets the VF's `used`=True, `used_by`=the VM's UUID, `mac`=the NIC's
// MAC, in the same transaction as the VM's own keys; a release sets
// `used`=False, `used_by`="", `mac`=`phy_mac` (only a VF this VM holds).
// A VM without such NICs is written exactly as before.
//
// Thrown (before anything is written) when a VF the VM would claim is used
// by another VM; the message names the VF, the node and that VM.
class PVC_SDK_API VfInUse : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A new VM's keys (the API's POST /vm). A VM with a `hostdev` NIC gets
// migrate_method `shutdown` whatever was asked (hostdev VMs cannot live-migrate).
struct VmDefinition {
    std::string uuid, name, xml, node;
    std::string profile = "None";
    std::vector<std::string> rbd_list;
    bool autostart = false;
    std::string migrate_method = "none";
    std::string node_limit;  // comma-joined
    std::string node_selector = "none";
    std::vector<std::pair<std::string, bool>> tags;  // (tag, protected), user tags
};
PVC_SDK_API std::vector<zk::KeyValue> vm_define_keys(const VmDefinition& vm);
// The VM's keys and its VF claims in one transaction, then each tag's. False
// when a write failed; VfInUse when a VF is used by another VM.
PVC_SDK_API bool define_vm(zk::Session& session, const VmDefinition& vm);
// A user tag's keys; `protected_value` is stored as given ("True"/"False").
PVC_SDK_API std::vector<zk::KeyValue> vm_tag_keys(const std::string& uuid, const std::string& tag,
                                                  const std::string& protected_value);
// A modified configuration: `domain` (the name as it was), rbdlist, xml, with
// the VFs of NICs added claimed and those of NICs removed released (compared
// with the stored XML; hostdev added → migrate_method `shutdown`), in one
// transaction. VfInUse as define_vm.
PVC_SDK_API bool write_vm_xml(zk::Session& session, const std::string& uuid, const std::string& name,
                              const std::vector<std::string>& rbd_list, const std::string& xml);
// move/migrate/unmigrate: state, node and last node under the state lock,
// with the VM's VFs claimed on `node` and released on the node it was on, in
// the same transaction. VfInUse when a VF on `node` is used by another VM.
PVC_SDK_API bool relocate_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                             const std::string& target_state, const std::string& node, const std::string& last_node,
                             std::stop_token stop = {});
// Undefine: `stop` unless stopped (then `settle`), `delete`, the VM's VFs
// released, the VM's tree removed. False when a write failed (nothing more is done then).
PVC_SDK_API bool undefine_vm(const std::shared_ptr<zk::Session>& session, const std::string& uuid,
                             std::chrono::milliseconds settle = 0ms, std::stop_token stop = {});

// Node requests: domain state (flush, unflush), the primary coordinator
// (`primary`: the node's name; `secondary`: none), cluster maintenance.
PVC_SDK_API bool set_node_domain_state(zk::Session& session, const std::string& node, const std::string& state);
PVC_SDK_API bool request_router_state(zk::Session& session, const std::string& node, bool primary);
PVC_SDK_API bool set_maintenance(zk::Session& session, bool on);

// The UUID of the VM named exactly `name` (blocking reads of every VM name).
PVC_SDK_API std::optional<std::string> vm_by_name(zk::Session& session, const std::string& name);

}  // namespace pvc::client
