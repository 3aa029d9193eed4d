// The node task `vm.flush_locks` (docs/sdk-guide.md §8): frees every RBD
// lock of a stopped, disabled or failed VM's volumes, on the VM's node,
// through the lock service. Queued by `POST /vm/<vm>/locks` and
// `pvc vm flush-locks`.
#pragma once

#include <memory>

#include "pvc/log.hpp"
#include "pvc/services/rbd_locks.hpp"
#include "pvc/services/tasks.hpp"
#include "pvc/zk.hpp"

namespace pvc::storage {

// The handler; `locks` frees the locks (RbdLocks::free_all).
services::TaskHandler flush_locks_task(std::shared_ptr<zk::Session> zk, std::shared_ptr<services::RbdLocks> locks,
                                       Logger log);

}  // namespace pvc::storage
