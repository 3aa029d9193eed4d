// Recovery of a fenced node's VMs (modules/fencing/README.md):
// `domainstate` fence-flush → every VM freed of its RBD locks and given a
// target by the core's selector (or stopped with node_autostart) → flushed.
// What the choices need (the nodes' figures, every VM's keys) is read first,
// many keys at once; then the VMs are handled in parallel, at most
// `parallelism` at once, each with one multi-op.
#pragma once

#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/zk.hpp"
#include "pvc/services/rbd_locks.hpp"

namespace pvc::fencing {

struct RecoveryResult {
    int moved = 0;      // state=start on a target
    int stopped = 0;    // no target: state=stop, node_autostart=True
    int failed = 0;     // left alone (lock or ZooKeeper failure)
};

// One key as read_keys read it: `value` nullopt when the key is absent;
// `error` set (value meaningless) when the read failed.
struct KeyRead {
    std::optional<std::string> value;
    std::exception_ptr error;
};

// What a recovery reads before it writes anything: the dead node's VMs, the
// nodes' names and figures, the cluster's selector, each VM's volumes,
// limit, selector, node and XML.
struct RecoveryReads {
    std::chrono::steady_clock::time_point started;
    std::exception_ptr vms_error;  // runningdomains could not be read
    std::vector<std::string> uuids;
    KeyRead node_names;            // joined by spaces
    std::vector<std::string> paths;
    std::vector<KeyRead> values;   // of `paths`
};
RecoveryReads read_for_recovery(zk::Session& zk, const std::string& dead_node, unsigned parallelism);

// `before_writes`, if given, is called once the keys are read and before
// anything is written (the fence job writes `fenced` meanwhile); false ends
// the recovery there, with nothing moved. `reads`: what read_for_recovery
// read a moment before (the fence job reads while the BMC confirms the
// power off); without it the keys are read first.
RecoveryResult recover_node(zk::Session& zk, const std::string& dead_node, services::RbdLocks& locks, const Logger& log,
                            unsigned parallelism, const std::function<bool()>& before_writes = {},
                            std::optional<RecoveryReads> reads = std::nullopt);

// Writes every pair in one multi-op of plain sets (one round trip, for keys
// that exist); if that fails (a key absent, ZooKeeper trouble), the
// reference's write (zk::Session::write), which creates what is absent.
bool set_keys(zk::Session& zk, const std::vector<zk::KeyValue>& kvs);

// The values of `paths`, in order: one zk::Session::get_many (every request
// sent before any answer is awaited: about one round trip for the lot); if
// that fails, each key alone with up to `in_flight` gets outstanding at
// once, so that only the keys that cannot be read carry their error.
std::vector<KeyRead> read_keys(zk::Session& zk, const std::vector<std::string>& paths, unsigned in_flight);

}  // namespace pvc::fencing
