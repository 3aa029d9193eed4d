// RBD lock handling: the `pvc.rbd_locks.v1` service this
// module registers, used by the hypervisor before a start and by
// fencing after a fence. Each Ceph call is bounded (CephCalls).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ceph_call.hpp"
#include "pvc/log.hpp"
#include "pvc/services/rbd_locks.hpp"
#include "rados.hpp"

namespace pvc::storage {

// The owner of a lock: its address up to the first ':', after an
// optional messenger prefix ("v1:", "v2:", "any:"); nullopt when the text is
// not `<ip>:<port>/<nonce>`.
std::optional<std::string> lock_owner(const std::string& address);

// "pool/volume" → {pool, volume}; nullopt for anything else.
std::optional<std::pair<std::string, std::string>> split_volume(const std::string& item);

class RbdLockService final : public services::RbdLocks {
public:
    // `own_address`: the address part of storage_dev_ip ("" when unknown:
    // then no lock counts as this node's).
    RbdLockService(ClientOptions client, std::string own_address, Logger log, std::shared_ptr<CephCalls> calls,
                   std::chrono::milliseconds deadline);

    std::optional<std::string> prepare_start(const std::string& uuid, const std::vector<std::string>& volumes) override;
    std::optional<std::string> free_all(const std::string& uuid, const std::vector<std::string>& volumes) override;

private:
    struct VolumeLocks {
        std::string volume;  // "pool/volume"
        std::vector<RbdLocker> locks;
    };
    std::shared_ptr<RadosClient> connect(const std::string& uuid);
    // Locks of one volume; throws CephError.
    std::vector<RbdLocker> list(const std::shared_ptr<RadosClient>& client, const std::string& pool,
                                const std::string& image);
    // Frees one lock; false when it was already gone; throws CephError.
    bool free(const std::shared_ptr<RadosClient>& client, const std::string& volume, const RbdLocker& lock);

    ClientOptions client_;
    std::string own_address_;
    Logger log_;
    std::shared_ptr<CephCalls> calls_;  // shared: a user may still hold the service after our stop()
    std::chrono::milliseconds deadline_;
};

}  // namespace pvc::storage
