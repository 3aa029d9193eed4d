// RBD image streams through librbd, in the `rbd` command's file formats, so
// a VM backup is written and read without an `rbd` process and its files
// stay interchangeable with the command's:
//
// - export_image:  `rbd export --export-format 2 <pool>/<image>@<snap> FILE`
//   ("rbd image v2" header: order, features, stripe unit and count, image
//   metadata; then one diff per snapshot, each "rbd diff v2" with its
//   records' lengths, and a last diff from the newest snapshot to the head);
// - export_diff:   `rbd export-diff --from-snap <from> <pool>/<image>@<snap> FILE`
//   ("rbd diff v1": from/to snapshot, size, write and zero records);
// - import_image:  `rbd import --export-format 2 FILE <pool>/<image>` (the
//   image created with the file's order, features and striping, each diff
//   applied and its end snapshot created, protected when it was);
// - import_diff:   `rbd import-diff FILE <pool>/<image>` (the start snapshot
//   must exist, the end snapshot must not; the end snapshot is created).
//
// One deliberate difference: `rbd export` of a snapshot writes the image's
// head as the last diff (data written after the snapshot included, later
// snapshots too); export_image writes the snapshots up to the one named and
// a last diff that leaves the head at that snapshot, so the file holds the
// snapshot's data. While nothing is written after the snapshot the two
// files are the same bytes (the backup test compares them).
//
// Reads and writes go through librbd's asynchronous calls, up to
// `kStreamOps` at once (the command's rbd_concurrent_management_ops), each
// bounded by the connection's OSD op timeout. Failures throw CephFailure
// with the text the command prints ("rbd: export error: (2) No such file or
// directory"); a file that is not in the format names what is wrong.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "connection.hpp"

namespace pvc::ceph {

inline constexpr unsigned kStreamOps = 10;

struct StreamStats {
    std::uint64_t data_bytes = 0;  // image bytes read or written (not zeros)
    std::uint64_t file_bytes = 0;  // bytes of the stream
};

// `fd`: an open file; written from its current position.
StreamStats export_image(Io& io, const std::string& image, const std::string& snap, int fd);
StreamStats export_diff(Io& io, const std::string& image, const std::string& from_snap, const std::string& snap, int fd);
// Creates `image` (EEXIST when it exists); removed again when the import fails.
StreamStats import_image(Io& io, const std::string& image, int fd);
StreamStats import_diff(Io& io, const std::string& image, int fd);

}  // namespace pvc::ceph
