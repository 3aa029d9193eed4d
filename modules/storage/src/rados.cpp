#include "rados.hpp"

#include <rados/librados.h>
#include <rbd/librbd.h>

#include <cerrno>
#include <cstring>

namespace pvc::storage {

CephError::CephError(const std::string& what, int code)
    : std::runtime_error(what + ": " + std::strerror(code < 0 ? -code : code)), code_(code) {}

namespace {

void check(int rc, const std::string& what) {
    if (rc < 0) throw CephError(what, rc);
}

// Frees a librados output buffer.
struct RadosBuffer {
    char* p = nullptr;
    size_t len = 0;
    ~RadosBuffer() {
        if (p) rados_buffer_free(p);
    }
    std::string str() const { return p ? std::string(p, len) : std::string(); }
};

// "a\0b\0" → {"a", "b"}
std::vector<std::string> split_nul(const std::vector<char>& buf, size_t len) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < len) {
        size_t n = strnlen(buf.data() + i, len - i);
        out.emplace_back(buf.data() + i, n);
        i += n + 1;
    }
    return out;
}

}  // namespace

RadosClient::RadosClient(const ClientOptions& o) {
    check(rados_create(&cluster_, nullptr), "rados_create");
    try {
        check(rados_conf_read_file(cluster_, o.config_file.c_str()), "reading " + o.config_file);
        if (!o.keyring.empty()) check(rados_conf_set(cluster_, "keyring", o.keyring.c_str()), "setting keyring");
        const std::string op = std::to_string(o.op_timeout.count());
        const std::string mount = std::to_string(o.mount_timeout.count());
        check(rados_conf_set(cluster_, "rados_mon_op_timeout", op.c_str()), "setting rados_mon_op_timeout");
        check(rados_conf_set(cluster_, "rados_osd_op_timeout", op.c_str()), "setting rados_osd_op_timeout");
        check(rados_conf_set(cluster_, "client_mount_timeout", mount.c_str()), "setting client_mount_timeout");
        // The daemon's own log stays ours: no librados log file or stderr.
        rados_conf_set(cluster_, "log_to_stderr", "false");
        rados_conf_set(cluster_, "err_to_stderr", "false");
        rados_conf_set(cluster_, "log_file", "");
        check(rados_connect(cluster_), "connecting to the Ceph cluster");
    } catch (...) {
        rados_shutdown(cluster_);
        throw;
    }
}

RadosClient::~RadosClient() {
    if (cluster_) rados_shutdown(cluster_);
}

namespace {
template <class Fn>
CommandReply command(Fn fn) {
    RadosBuffer out, status;
    CommandReply r;
    r.rc = fn(&out.p, &out.len, &status.p, &status.len);
    r.out = out.str();
    r.status = status.str();
    return r;
}
}  // namespace

CommandReply RadosClient::mon_command(const std::string& json) {
    const char* cmd[] = {json.c_str()};
    return command([&](char** o, size_t* ol, char** s, size_t* sl) {
        return rados_mon_command(cluster_, cmd, 1, "", 0, o, ol, s, sl);
    });
}

CommandReply RadosClient::mgr_command(const std::string& json) {
    const char* cmd[] = {json.c_str()};
    return command([&](char** o, size_t* ol, char** s, size_t* sl) {
        return rados_mgr_command(cluster_, cmd, 1, "", 0, o, ol, s, sl);
    });
}

std::string RadosClient::fsid() {
    char buf[64] = {};
    check(rados_cluster_fsid(cluster_, buf, sizeof buf), "rados_cluster_fsid");
    return buf;
}

IoCtx RadosClient::open_pool(const std::string& pool) {
    rados_ioctx_t io = nullptr;
    check(rados_ioctx_create(cluster_, pool.c_str(), &io), "opening pool " + pool);
    return IoCtx(io, pool);
}

IoCtx::~IoCtx() {
    if (io_) rados_ioctx_destroy(io_);
}

PoolCounters IoCtx::counters() {
    rados_pool_stat_t s{};
    check(rados_ioctx_pool_stat(io_, &s), "statistics of pool " + pool_);
    PoolCounters c;
    c.num_objects = s.num_objects;
    c.num_object_clones = s.num_object_clones;
    c.num_object_copies = s.num_object_copies;
    c.num_objects_missing_on_primary = s.num_objects_missing_on_primary;
    c.num_objects_unfound = s.num_objects_unfound;
    c.num_objects_degraded = s.num_objects_degraded;
    c.read_ops = s.num_rd;
    // `rados df` prints the KiB counters times 1024.
    c.read_bytes = s.num_rd_kb * 1024;
    c.write_ops = s.num_wr;
    c.write_bytes = s.num_wr_kb * 1024;
    return c;
}

RbdImage::RbdImage(IoCtx& io, const std::string& name) : name_(io.pool() + "/" + name) {
    // Read-only: opening never takes the image's exclusive lock.
    check(rbd_open_read_only(io.handle(), name.c_str(), &image_, nullptr), "opening volume " + name_);
}

RbdImage::~RbdImage() {
    if (image_) rbd_close(image_);
}

std::vector<RbdLocker> RbdImage::lockers() {
    int exclusive = 0;
    size_t tag_len = 64, clients_len = 256, cookies_len = 256, addrs_len = 256;
    for (int attempt = 0; attempt < 3; ++attempt) {
        std::vector<char> tag(tag_len), clients(clients_len), cookies(cookies_len), addrs(addrs_len);
        ssize_t n = rbd_list_lockers(image_, &exclusive, tag.data(), &tag_len, clients.data(), &clients_len,
                                     cookies.data(), &cookies_len, addrs.data(), &addrs_len);
        if (n == -ERANGE) continue;  // the lengths now say what is needed
        if (n < 0) check(static_cast<int>(n), "listing the locks of " + name_);
        auto c = split_nul(clients, clients_len), k = split_nul(cookies, cookies_len), a = split_nul(addrs, addrs_len);
        std::vector<RbdLocker> out;
        for (size_t i = 0; i < static_cast<size_t>(n) && i < c.size() && i < k.size() && i < a.size(); ++i)
            out.push_back({c[i], k[i], a[i]});
        return out;
    }
    throw CephError("listing the locks of " + name_ + " (lock list keeps growing)", -ERANGE);
}

bool RbdImage::break_lock(const RbdLocker& lock) {
    int rc = rbd_break_lock(image_, lock.client.c_str(), lock.cookie.c_str());
    if (rc == -ENOENT) return false;
    check(rc, "freeing lock " + lock.cookie + " (" + lock.address + ") on volume " + name_);
    return true;
}

std::vector<std::string> remove_image_with_snapshots(IoCtx& io, const std::string& name) {
    const std::string full = io.pool() + "/" + name;
    std::vector<std::string> removed;
    {
        rbd_image_t image = nullptr;
        check(rbd_open(io.handle(), name.c_str(), &image, nullptr), "opening volume " + full);
        struct Close {
            rbd_image_t i;
            ~Close() { rbd_close(i); }
        } close{image};
        std::vector<rbd_snap_info_t> snaps(16);
        int max = static_cast<int>(snaps.size());
        int n = 0;
        for (int attempt = 0; attempt < 4; ++attempt) {
            n = rbd_snap_list(image, snaps.data(), &max);
            if (n != -ERANGE) break;
            snaps.resize(static_cast<size_t>(max) + 1);  // `max` now says what is needed
            max = static_cast<int>(snaps.size());
        }
        check(n, "listing the snapshots of " + full);
        std::vector<std::string> names;
        for (int i = 0; i < n; ++i) names.emplace_back(snaps[static_cast<size_t>(i)].name);
        rbd_snap_list_end(snaps.data());
        for (const auto& snap : names) {
            int rc = rbd_snap_remove(image, snap.c_str());
            if (rc == -ENOENT) continue;  // gone meanwhile
            check(rc, "removing snapshot " + full + "@" + snap);
            removed.push_back(snap);
        }
    }
    check(rbd_remove(io.handle(), name.c_str()), "removing volume " + full);
    return removed;
}

}  // namespace pvc::storage
