// RBD volume removal (the API's "DELETE /vm/<vm>?delete_disks=true",
// a volume's "remove"), provided by the storage module; used by the API
// module. Without a provider (storage module not loaded) users refuse to
// remove volumes.
#pragma once

#include <string>
#include <string_view>

#include "pvc/export.hpp"

namespace pvc::services {

// A Ceph name we accept as one part of `pool/volume`: not empty, at most 255
// bytes, not "." or "..", no '/', no '@' (the snapshot separator), no
// whitespace or control characters. Anything else is refused before Ceph is
// asked (the names come from a client's domain XML and from ZooKeeper).
inline bool valid_rbd_name_part(std::string_view name) {
    if (name.empty() || name.size() > 255 || name == "." || name == "..") return false;
    for (unsigned char c : name)
        if (c <= ' ' || c == 0x7f || c == '/' || c == '@') return false;
    return true;
}

// `pool/volume` with exactly one '/' and both parts valid.
inline bool valid_rbd_volume_name(std::string_view volume) {
    auto slash = volume.find('/');
    if (slash == std::string_view::npos) return false;
    return valid_rbd_name_part(volume.substr(0, slash)) && valid_rbd_name_part(volume.substr(slash + 1));
}

class PVC_SDK_API RbdVolumes {
public:
    static constexpr std::string_view service_name = "pvc.rbd_volumes.v1";
    virtual ~RbdVolumes() = default;

    enum class Outcome {
        removed,  // the image and its snapshots are gone
        absent,   // no such pool or image (nothing to remove)
        error,    // refused or failed: `error` says why; the image may still exist
    };
    struct Removal {
        Outcome outcome = Outcome::error;
        std::string error;
    };
    // Removes the RBD image `volume` ("pool/volume") after removing each of
    // its snapshots. Every Ceph call is bounded by a deadline (a call past it
    // is an error). A name failing valid_rbd_volume_name is an error and
    // Ceph is not asked. A protected snapshot is not unprotected: its removal
    // fails and so does the volume's.
    virtual Removal remove(const std::string& volume) = 0;
};

}  // namespace pvc::services
