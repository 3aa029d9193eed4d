// The Ceph side of a PVC client (docs/wire-contract.md §5.10): RBD pools,
// volumes and snapshots, OSD in/out and cluster flags, done in Ceph through
// librados/librbd (monitor commands as JSON; no `ceph` or `rbd` process)
// with the `/ceph` mirrors in ZooKeeper written in the same call, as the
// reference's client library does. Shared by the `pvc` command line and the
// API module; a static library of its own (pvc-ceph-client), so the SDK
// that every daemon loads never links librados, librbd or libvirt.
//
// Every operation returns the reference's message and an HTTP-style status:
// 200 done, 400 refused (bad input, missing object, Ceph refused: nothing
// changed), 500 Ceph did its part and ZooKeeper did not (the message says
// which part is done and what the next request does about it), 503 Ceph did
// not answer within its bounds (librados' mon/osd op and mount timeouts;
// nothing was recorded in ZooKeeper).
//
// Invariant: no ZooKeeper entry without its Ceph object, no new Ceph object
// without its entry. A creation whose ZooKeeper write fails is undone in
// Ceph; a removal that Ceph finds already done (ENOENT) removes the entry,
// so the next request reconciles a removal that ZooKeeper missed.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pvc/zk.hpp"

namespace pvc::ceph {

// Where Ceph is and how long a call may take; from pvcnoded.yaml's
// pvc.system.configuration.storage (ceph_config_file, ceph_admin_keyring,
// ceph_timeout) and, for a live resize, pvc.system.hypervisor.migration_uri
// with pvc.cluster.networks.cluster.domain.
struct Settings {
    std::string config_file;  // ceph.conf
    std::string keyring;      // "" = the configuration file's
    std::chrono::seconds timeout{3};  // rados_mon_op_timeout, rados_osd_op_timeout, client_mount_timeout
    // libvirt on a VM's node ({node}, {cluster_domain} replaced), for a live resize.
    std::string vm_uri = "qemu+tcp://{node}.{cluster_domain}/system";
    std::string cluster_domain;
    std::string qemu_img = "qemu-img";  // converts uploads of other formats than raw
    // Called before each ZooKeeper record of a write that Ceph has done
    // (tests stop ZooKeeper there); unset in production.
    std::function<void()> before_record;
};

// Keys written (nullopt: removed).
using Written = std::vector<std::pair<std::string, std::optional<std::string>>>;

struct Result {
    int status = 200;
    std::string message;
    // On success, each key written, for a caller that waits until a watched
    // view shows them.
    Written written = {};
    bool ok() const { return status == 200; }
};

// Sizes (the reference's): digits alone are bytes; else digits then one
// upper-case unit letter of B K M G T P E Z Y R Q (powers of 1024), anything
// after the letter ignored ("10G", "10GB", "10GiB"). nullopt when invalid;
// `unit_error` set when only the unit letter is unknown.
std::optional<std::uint64_t> parse_size(const std::string& text, bool* unit_error = nullptr);
// The smallest unit whose rounded-up value is at most 9999: "10G", "1536M", "0B".
std::string human_size(std::uint64_t bytes);

// `rbd info --format json` of an image, as that command prints it (key
// order, compact, trailing newline): what /ceph/volumes/<p>/<v>/stats holds.
// Built from librbd by the library; exposed for tests.

class Client {
public:
    // `zk` stays the caller's; nothing is connected before the first call.
    Client(std::shared_ptr<zk::Session> zk, Settings settings);
    ~Client();
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;

    // --- pools ---
    // `replcfg`: copies=<n>,mincopies=<m>; `tier`: hdd | ssd | nvme | default (absent: default).
    Result add_pool(const std::string& pool, const std::string& pgs, const std::string& replcfg,
                    const std::optional<std::string>& tier);
    Result remove_pool(const std::string& pool);
    Result set_pool_pgs(const std::string& pool, const std::string& pgs);

    // --- volumes ---
    Result add_volume(const std::string& pool, const std::string& volume, const std::string& size);
    Result resize_volume(const std::string& pool, const std::string& volume, const std::string& size);
    Result rename_volume(const std::string& pool, const std::string& volume, const std::string& new_name);
    Result clone_volume(const std::string& pool, const std::string& volume, const std::string& new_name);
    Result remove_volume(const std::string& pool, const std::string& volume);
    // Writes an image into an existing volume. `read` fills its buffer and
    // returns the bytes read (0 at the end, negative on a read error).
    // raw: written as is (`file_size`, when given, must be the volume's
    // size in bytes or its human size); vmdk qcow2 qed vdi vpc: written to
    // a temporary volume <volume>_tmp of `file_size` bytes, then converted
    // by qemu-img straight from and to RBD, the temporary volume removed.
    using Reader = std::function<std::int64_t(char* buffer, std::size_t size)>;
    Result upload_volume(const std::string& pool, const std::string& volume, const std::string& format,
                         const std::optional<std::string>& file_size, const Reader& read);
    // The same, with what the caller knows of the image: its length when
    // known in advance (asked once, after the format and the volume were
    // checked and before the first read; an image longer than the volume,
    // or than `file_size` for a converted format, is refused before anything
    // is written), and why a read failed (named in the answer, with how much
    // was written and what that leaves in the volume).
    struct Upload {
        Reader read;
        std::function<std::optional<std::uint64_t>()> length;
        std::function<std::string()> error;
    };
    Result upload_volume(const std::string& pool, const std::string& volume, const std::string& format,
                         const std::optional<std::string>& file_size, const Upload& upload);

    // --- snapshots ---
    Result add_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot);
    Result rename_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot,
                           const std::string& new_name);
    Result remove_snapshot(const std::string& pool, const std::string& volume, const std::string& snapshot);

    // --- OSDs and flags ---
    Result set_osd_state(const std::string& osd, bool in);              // ceph osd in|out
    Result set_osd_option(const std::string& option, bool set);         // ceph osd set|unset

    // The image's `rbd info --format json` text (tests compare it with the command's).
    std::optional<std::string> volume_info(const std::string& pool, const std::string& volume);

    // Brings ZooKeeper in line with Ceph for every object a write left
    // half-done (Ceph did its part and ZooKeeper did not, or the reverse):
    // those this client remembers and those in the pools' journals (other
    // processes' leftovers). Ceph is the truth: an object Ceph has is
    // recorded, the keys of one it lacks removed. Every write runs it first
    // while something is pending; the primary's API module runs it at each
    // keepalive. Returns how many are left (ZooKeeper or Ceph unreachable).
    std::size_t reconcile();

    // Drops the connection (the next call connects again).
    void disconnect();

    struct Impl;

private:
    std::unique_ptr<Impl> impl_;
};

}  // namespace pvc::ceph
