// RBD lock handling, provided by the storage module; used by
// the hypervisor before a VM start and by fencing
// before a dead node's VMs start elsewhere. Without a
// provider (storage disabled) users fall back to doing nothing: they hold an
// RbdLocksOrNone.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"
#include "pvc/log.hpp"
#include "pvc/service_registry.hpp"

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

// Storage not loaded: nothing to check before a start, nothing to free; said
// in the log.
class NoRbdLocks final : public RbdLocks {
public:
    explicit NoRbdLocks(Logger log) : log_(std::move(log)) {}
    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>&) override {
        log_.debug("VM {}: storage disabled, not checking RBD locks", uuid);
        return std::nullopt;
    }
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override {
        if (!volumes.empty())
            log_.info("VM {}: storage module not loaded, RBD locks not freed ({} volume(s))", uuid, volumes.size());
        return std::nullopt;
    }

private:
    Logger log_;
};

// What a user of RBD locks holds: the registry's provider at each use (the
// storage module may start after its user), else NoRbdLocks.
class RbdLocksOrNone final : public RbdLocks {
public:
    RbdLocksOrNone(const ServiceRegistry& services, Logger log)
        : service_(services, std::make_shared<NoRbdLocks>(std::move(log))) {}
    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>& volumes) override {
        return service_.get()->prepare_start(uuid, volumes);
    }
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override {
        return service_.get()->free_all(uuid, volumes);
    }

private:
    ServiceOr<RbdLocks> service_;
};

}  // namespace pvc::services
