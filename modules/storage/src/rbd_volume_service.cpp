#include "rbd_volume_service.hpp"

#include <cerrno>

namespace pvc::storage {

RbdVolumeService::RbdVolumeService(ClientOptions client, Logger log, std::shared_ptr<CephCalls> calls,
                                   std::chrono::milliseconds deadline, std::chrono::milliseconds removal_deadline)
    : client_(std::move(client)), log_(std::move(log)), calls_(std::move(calls)), deadline_(deadline),
      removal_deadline_(removal_deadline) {}

services::RbdVolumes::Removal RbdVolumeService::remove(const std::string& volume) {
    using services::RbdVolumes;
    if (!services::valid_rbd_volume_name(volume))
        return {Outcome::error, "volume name '" + volume + "' is not a valid pool/volume name"};
    const auto slash = volume.find('/');
    const std::string pool = volume.substr(0, slash), image = volume.substr(slash + 1);
    try {
        auto options = client_;
        auto client = calls_->run<std::shared_ptr<RadosClient>>("connecting to Ceph", deadline_, [options] {
            return std::make_shared<RadosClient>(options);
        });
        // nullopt: the pool or the image is not there.
        auto removed = calls_->run<std::optional<std::vector<std::string>>>(
            "removing volume " + volume, removal_deadline_,
            [client, pool, image]() -> std::optional<std::vector<std::string>> {
                try {
                    IoCtx io = client->open_pool(pool);
                    return remove_image_with_snapshots(io, image);
                } catch (const CephError& e) {
                    if (e.code() == -ENOENT) return std::nullopt;
                    throw;
                }
            });
        if (!removed) {
            log_.info("RBD volume {} is not there; nothing to remove", volume);
            return {Outcome::absent, ""};
        }
        log_.info("Removed RBD volume {} and its {} snapshot(s)", volume, removed->size());
        return {Outcome::removed, ""};
    } catch (const std::exception& e) {
        log_.error("Could not remove RBD volume {}: {}", volume, e.what());
        return {Outcome::error, e.what()};
    }
}

}  // namespace pvc::storage
