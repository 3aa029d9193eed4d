// Freeing a dead node's RBD locks before its VMs start elsewhere
// (the RBD lock service). The storage module provides the real one; without it
// fencing says so and moves the VMs anyway (nothing to free without Ceph).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/service_registry.hpp"
#include "pvc/services/rbd_locks.hpp"

namespace pvc::fencing {

class RbdLockBreaker {
public:
    virtual ~RbdLockBreaker() = default;
    // Frees every lock of `volumes` ("pool/volume") of VM `uuid`, whoever holds
    // it. Returns an error text when listing or freeing failed (the VM is then
    // left alone), nullopt when every lock is gone.
    virtual std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) = 0;
};

// Storage module not loaded: a no-op that says so.
class NoRbdLockBreaker final : public RbdLockBreaker {
public:
    explicit NoRbdLockBreaker(Logger log) : log_(std::move(log)) {}
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override {
        if (!volumes.empty())
            log_.info("VM {}: storage module not loaded, RBD locks not freed ({} volume(s))", uuid, volumes.size());
        return std::nullopt;
    }

private:
    Logger log_;
};

// The storage module's RBD lock handling from the service registry, looked up
// at each use, else NoRbdLockBreaker.
class RegistryRbdLockBreaker final : public RbdLockBreaker {
public:
    RegistryRbdLockBreaker(ServiceRegistry& services, Logger log) : services_(services), none_(std::move(log)) {}
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override {
        if (auto provider = services_.get<services::RbdLocks>()) return provider->free_all(uuid, volumes);
        return none_.free_all(uuid, volumes);
    }

private:
    ServiceRegistry& services_;
    NoRbdLockBreaker none_;
};

}  // namespace pvc::fencing
