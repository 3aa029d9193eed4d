// Recovery of a fenced node's VMs (node-lifecycle.md §10.5, storage.md §8.3):
// `domainstate` fence-flush → every VM freed of its RBD locks and given a
// target by the core's selector (or stopped with node_autostart) → flushed.
// VMs are handled in parallel, at most `parallelism` at once.
#pragma once

#include <memory>
#include <string>

#include "pvc/log.hpp"
#include "pvc/zk.hpp"
#include "rbd_lock_breaker.hpp"

namespace pvc::fencing {

struct RecoveryResult {
    int moved = 0;      // state=start on a target
    int stopped = 0;    // no target: state=stop, node_autostart=True
    int failed = 0;     // left alone (lock or ZooKeeper failure)
};

RecoveryResult recover_node(zk::Session& zk, const std::string& dead_node, RbdLockBreaker& locks, const Logger& log,
                            unsigned parallelism);

}  // namespace pvc::fencing
