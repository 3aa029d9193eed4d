// The librados/librbd C API behind RAII handles (statistics and RBD locks).
//
// Every call is bounded twice: the client handle carries
// rados_mon_op_timeout / rados_osd_op_timeout / client_mount_timeout (so
// librados itself gives up), and CephCall (ceph_call.hpp) runs the calls on
// a worker so the caller never waits past its own deadline even when
// librados does not honour them (a connect to an unreachable monitor).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

typedef void* rados_t;
typedef void* rados_ioctx_t;
typedef void* rbd_image_t;

namespace pvc::storage {

// A failed Ceph call: what was called and librados' error text.
class CephError : public std::runtime_error {
public:
    CephError(const std::string& what, int code);
    int code() const { return code_; }  // negative errno (or -ETIMEDOUT for a deadline)

private:
    int code_;
};

struct ClientOptions {
    std::string config_file;                 // ceph_config_file
    std::string keyring;                     // ceph_admin_keyring ("" = the configuration file's)
    std::chrono::seconds op_timeout{3};      // rados_mon_op_timeout, rados_osd_op_timeout
    std::chrono::seconds mount_timeout{3};   // client_mount_timeout (connect)
};

// A monitor/manager command's reply.
struct CommandReply {
    int rc = 0;
    std::string out;     // output buffer
    std::string status;  // status text (the error message on failure)
};

// Per-pool counters of `rados df` (rados_pool_stat_t).
struct PoolCounters {
    uint64_t num_objects = 0, num_object_clones = 0, num_object_copies = 0, num_objects_missing_on_primary = 0,
             num_objects_unfound = 0, num_objects_degraded = 0, read_ops = 0, read_bytes = 0, write_ops = 0,
             write_bytes = 0;
};

// One lock on an RBD image (rbd_list_lockers).
struct RbdLocker {
    std::string client;   // "client.4123"
    std::string cookie;   // "auto 140234567890"
    std::string address;  // "<ip>:<port>/<nonce>"
};

class IoCtx;

// A connected client (rados_t), shut down by the destructor.
class RadosClient {
public:
    // Creates, configures and connects; throws CephError.
    explicit RadosClient(const ClientOptions& options);
    ~RadosClient();
    RadosClient(const RadosClient&) = delete;
    RadosClient& operator=(const RadosClient&) = delete;

    // rados_mon_command with a JSON command (the monitor forwards the
    // manager's commands such as `df`, `osd df`, `osd status`).
    CommandReply mon_command(const std::string& json);
    // rados_mgr_command: straight to the active manager.
    CommandReply mgr_command(const std::string& json);
    std::string fsid();
    IoCtx open_pool(const std::string& pool);
    rados_t handle() const { return cluster_; }

private:
    rados_t cluster_ = nullptr;
};

// An I/O context on one pool (rados_ioctx_t).
class IoCtx {
public:
    IoCtx(rados_ioctx_t io, std::string pool) : io_(io), pool_(std::move(pool)) {}
    ~IoCtx();
    IoCtx(IoCtx&& o) noexcept : io_(o.io_), pool_(std::move(o.pool_)) { o.io_ = nullptr; }
    IoCtx(const IoCtx&) = delete;
    IoCtx& operator=(const IoCtx&) = delete;
    IoCtx& operator=(IoCtx&&) = delete;
    rados_ioctx_t handle() const { return io_; }
    const std::string& pool() const { return pool_; }
    PoolCounters counters();

private:
    rados_ioctx_t io_;
    std::string pool_;
};

// An open RBD image (rbd_image_t), closed by the destructor.
class RbdImage {
public:
    RbdImage(IoCtx& io, const std::string& name);
    ~RbdImage();
    RbdImage(const RbdImage&) = delete;
    RbdImage& operator=(const RbdImage&) = delete;
    std::vector<RbdLocker> lockers();
    // rbd_break_lock; false when the lock no longer exists (ENOENT: counts as freed).
    bool break_lock(const RbdLocker& lock);

private:
    rbd_image_t image_ = nullptr;
    std::string name_;
};

// Removes every snapshot of image `name` (rbd_snap_list, rbd_snap_remove),
// then the image (rbd_remove); returns the snapshots removed. Throws
// CephError: -ENOENT when the image is not there; a protected snapshot is
// not unprotected (its removal fails with -EBUSY).
std::vector<std::string> remove_image_with_snapshots(IoCtx& io, const std::string& name);

}  // namespace pvc::storage
