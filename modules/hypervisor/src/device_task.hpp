// The node tasks `vm.device_attach` and `vm.device_detach` (docs/sdk-guide.md
// §8): hot-plug a libvirt device XML into (out of) a VM running on this
// node, the running domain only (its persistent definition is the VM's XML in
// ZooKeeper, changed separately). Queued by `POST`/`DELETE /vm/<vm>/device`
// on the VM's node.
#pragma once

#include <memory>

#include "libvirt.hpp"
#include "pvc/services/tasks.hpp"
#include "pvc/zk.hpp"

namespace pvc::hv {

// `lv` must outlive the handler's registration.
services::TaskHandler device_task(std::shared_ptr<zk::Session> zk, Connection& lv, bool attach);

}  // namespace pvc::hv
