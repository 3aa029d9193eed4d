// RBD lock handling before a VM start (hypervisor.md §13.1, storage.md §8),
// behind an interface: the storage module provides the real implementation.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"

namespace pvc::hv {

class RbdLocks {
public:
    virtual ~RbdLocks() = default;
    // Frees this node's stale locks on `volumes` ("pool/volume") of VM `uuid`
    // before it is created here. Returns the `failedreason` text when a lock
    // cannot be freed safely (the start is then abandoned with state `fail`).
    virtual std::optional<std::string> prepare_start(const std::string& uuid,
                                                     const std::vector<std::string>& volumes) = 0;
};

// Storage disabled: nothing to check.
class NoRbdLocks final : public RbdLocks {
public:
    explicit NoRbdLocks(Logger log) : log_(std::move(log)) {}
    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>&) override {
        log_.debug("VM {}: storage disabled, not checking RBD locks", uuid);
        return std::nullopt;
    }

private:
    Logger log_;
};

}  // namespace pvc::hv
