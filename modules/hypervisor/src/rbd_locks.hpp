// RBD lock handling before a VM start:
// the SDK interface pvc::services::RbdLocks, provided by the storage module
// through the service registry; without a provider, nothing to check.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/service_registry.hpp"
#include "pvc/services/rbd_locks.hpp"

namespace pvc::hv {

using RbdLocks = services::RbdLocks;

// Storage disabled: nothing to check.
class NoRbdLocks final : public RbdLocks {
public:
    explicit NoRbdLocks(Logger log) : log_(std::move(log)) {}
    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>&) override {
        log_.debug("VM {}: storage disabled, not checking RBD locks", uuid);
        return std::nullopt;
    }
    std::optional<std::string> free_all(const std::string&, const std::vector<std::string>&) override {
        return std::nullopt;
    }

private:
    Logger log_;
};

// The registry's provider, looked up at each use (storage may start after
// us), else NoRbdLocks.
class RegistryRbdLocks final : public RbdLocks {
public:
    RegistryRbdLocks(ServiceRegistry& services, Logger log) : services_(services), none_(std::move(log)) {}
    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>& volumes) override {
        if (auto provider = services_.get<RbdLocks>()) return provider->prepare_start(uuid, volumes);
        return none_.prepare_start(uuid, volumes);
    }
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override {
        if (auto provider = services_.get<RbdLocks>()) return provider->free_all(uuid, volumes);
        return none_.free_all(uuid, volumes);
    }

private:
    ServiceRegistry& services_;
    NoRbdLocks none_;
};

}  // namespace pvc::hv
