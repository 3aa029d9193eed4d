// RBD volume removal (a volume's "remove"): the
// `pvc.rbd_volumes.v1` service this module registers, used by the API
// module's `DELETE /vm/<vm>?delete_disks=true`. Each Ceph call is bounded
// (CephCalls): the connection by the module's deadline, the removal of the
// snapshots and the image (whose time grows with the image's data) by
// `removal_deadline`.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "ceph_call.hpp"
#include "pvc/log.hpp"
#include "pvc/services/rbd_volumes.hpp"
#include "rados.hpp"

namespace pvc::storage {

class RbdVolumeService final : public services::RbdVolumes {
public:
    RbdVolumeService(ClientOptions client, Logger log, std::shared_ptr<CephCalls> calls,
                     std::chrono::milliseconds deadline, std::chrono::milliseconds removal_deadline);

    Removal remove(const std::string& volume) override;

private:
    ClientOptions client_;
    Logger log_;
    std::shared_ptr<CephCalls> calls_;  // shared: a user may still hold the service after our stop()
    std::chrono::milliseconds deadline_, removal_deadline_;
};

}  // namespace pvc::storage
