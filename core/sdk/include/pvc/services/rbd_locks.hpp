// RBD lock handling, provided by the storage module; used by
// the hypervisor before a VM start and by fencing
// before a dead node's VMs start elsewhere. Without a
// provider (storage disabled) users fall back to doing nothing.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc::services {

class PVC_SDK_API RbdLocks {
public:
    static constexpr std::string_view service_name = "pvc.rbd_locks.v1";
    virtual ~RbdLocks() = default;
    // Frees this node's stale locks on `volumes` ("pool/volume") of VM `uuid`
    // before it is created here. Returns the `failedreason` text when a lock
    // cannot be freed safely (the start is then abandoned with state `fail`).
    virtual std::optional<std::string> prepare_start(const std::string& uuid,
                                                     const std::vector<std::string>& volumes) = 0;
    // Frees every lock of `volumes` of VM `uuid`, whoever holds it (a fenced
    // node's). Returns an error text when listing or freeing failed.
    virtual std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) = 0;
};

}  // namespace pvc::services
