#include "rbd_lock_service.hpp"

#include "stats.hpp"

namespace pvc::storage {

std::optional<std::string> lock_owner(const std::string& address) {
    std::string a = address;
    for (const char* prefix : {"v1:", "v2:", "any:"})
        if (a.rfind(prefix, 0) == 0) a = a.substr(std::string(prefix).size());
    auto colon = a.find(':');
    auto slash = a.find('/', colon == std::string::npos ? 0 : colon);
    if (colon == std::string::npos || colon == 0 || slash == std::string::npos) return std::nullopt;
    for (char c : a.substr(0, colon))
        if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.')) return std::nullopt;
    return a.substr(0, colon);
}

std::optional<std::pair<std::string, std::string>> split_volume(const std::string& item) {
    auto slash = item.find('/');
    if (slash == std::string::npos) return std::nullopt;
    std::string pool = item.substr(0, slash), image = item.substr(slash + 1);
    if (!valid_pool_name(pool) || image.empty() || image.find('/') != std::string::npos) return std::nullopt;
    return std::make_pair(pool, image);
}

RbdLockService::RbdLockService(ClientOptions client, std::string own_address, Logger log, std::shared_ptr<CephCalls> calls,
                               std::chrono::milliseconds deadline)
    : client_(std::move(client)), own_address_(std::move(own_address)), log_(std::move(log)), calls_(std::move(calls)),
      deadline_(deadline) {}

std::shared_ptr<RadosClient> RbdLockService::connect(const std::string&) {
    auto options = client_;
    return calls_->run<std::shared_ptr<RadosClient>>("connecting to Ceph", deadline_, [options] {
        return std::make_shared<RadosClient>(options);
    });
}

std::vector<RbdLocker> RbdLockService::list(const std::shared_ptr<RadosClient>& client, const std::string& pool,
                                            const std::string& image) {
    return calls_->run<std::vector<RbdLocker>>("listing the locks of " + pool + "/" + image, deadline_,
                                              [client, pool, image] {
                                                  IoCtx io = client->open_pool(pool);
                                                  RbdImage img(io, image);
                                                  return img.lockers();
                                              });
}

bool RbdLockService::free(const std::shared_ptr<RadosClient>& client, const std::string& volume,
                          const RbdLocker& lock) {
    auto [pool, image] = *split_volume(volume);
    return calls_->run<bool>("freeing lock " + lock.cookie + " on " + volume, deadline_, [client, pool, image, lock] {
        IoCtx io = client->open_pool(pool);
        RbdImage img(io, image);
        return img.break_lock(lock);
    });
}

std::optional<std::string> RbdLockService::prepare_start(const std::string& uuid,
                                                         const std::vector<std::string>& volumes) {
    log_.info("Domain {}: Flushing RBD locks", uuid);
    std::vector<std::pair<std::string, std::pair<std::string, std::string>>> wanted;
    for (const auto& v : volumes) {
        if (v.empty()) continue;  // "" is an empty rbdlist, not a volume
        auto parts = split_volume(v);
        if (!parts) {
            log_.error("Domain {}: volume name '{}' is not pool/volume; its locks are not checked", uuid, v);
            continue;
        }
        wanted.emplace_back(v, *parts);
    }
    if (wanted.empty()) return std::nullopt;

    std::shared_ptr<RadosClient> client;
    try {
        client = connect(uuid);
    } catch (const std::exception& e) {
        // As a failed listing of every volume (such a volume is skipped): nothing known to free.
        log_.error("Domain {}: cannot list RBD locks: {}", uuid, e.what());
        return std::nullopt;
    }
    // Every volume's locks are collected before any is handled, as the reference does.
    std::vector<VolumeLocks> found;
    for (const auto& [name, parts] : wanted) {
        try {
            found.push_back({name, list(client, parts.first, parts.second)});
        } catch (const std::exception& e) {
            log_.error("Domain {}: cannot list the RBD locks of {}, skipping it: {}", uuid, name, e.what());
        }
    }
    for (const auto& vol : found) {
        for (const auto& lock : vol.locks) {
            auto owner = lock_owner(lock.address);
            if (!owner) {
                // Cannot tell whose it is: freeing it could corrupt a live guest's disk.
                log_.error("Domain {}: RBD lock {} on volume {} has an address in an unexpected format ('{}'); not freeing it",
                           uuid, lock.cookie, vol.volume, lock.address);
            }
            if (owner && !own_address_.empty() && *owner == own_address_) {
                try {
                    free(client, vol.volume, lock);
                } catch (const std::exception& e) {
                    return "Could not free RBD lock " + lock.cookie + " (" + lock.address + ") on volume " +
                           vol.volume + ": " + e.what();
                }
                continue;
            }
            std::string shown = owner ? *owner : lock.address;
            log_.error("Domain {}: RBD lock {} on volume {} belongs to another host ({}); freeing it is unsafe", uuid,
                       lock.cookie, vol.volume, shown);
            return "Could not safely free RBD lock " + lock.cookie + " (" + shown + ") on volume " + vol.volume +
                   "; stop VM and flush locks manually";
        }
    }
    return std::nullopt;
}

std::optional<std::string> RbdLockService::free_all(const std::string& uuid, const std::vector<std::string>& volumes) {
    std::vector<std::string> wanted;
    for (const auto& v : volumes) {
        if (v.empty()) continue;
        if (!split_volume(v)) return "volume name '" + v + "' is not pool/volume";
        wanted.push_back(v);
    }
    if (wanted.empty()) return std::nullopt;
    try {
        auto client = connect(uuid);
        std::vector<VolumeLocks> found;
        for (const auto& v : wanted) {
            auto [pool, image] = *split_volume(v);
            found.push_back({v, list(client, pool, image)});
        }
        for (const auto& vol : found)
            for (const auto& lock : vol.locks) {
                log_.info("Domain {}: freeing RBD lock {} ({}) on volume {}", uuid, lock.cookie, lock.address, vol.volume);
                free(client, vol.volume, lock);
            }
    } catch (const std::exception& e) {
        return e.what();
    }
    return std::nullopt;
}

}  // namespace pvc::storage
