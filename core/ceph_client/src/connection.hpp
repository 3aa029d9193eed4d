// One librados connection shared by a Client's calls, with the bounds that
// make an unreachable or slow Ceph an error instead of a hang.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include "pvc/ceph_client.hpp"

namespace pvc::ceph {

// A failed Ceph call: `code` is the negative errno, `text` what a person
// reads (in the form the `ceph`/`rbd` commands print: "Error EINVAL: ...",
// "rbd: create error: (17) File exists").
class CephFailure : public std::runtime_error {
public:
    CephFailure(int code, const std::string& text) : std::runtime_error(text), code(code) {}
    int code;
    // Ceph did not answer in time or the connection is gone: 503, reconnect.
    bool unreachable() const;
};

// "(17) File exists"
std::string errno_text(int code);
// "EEXIST" (or the number)
std::string errno_name(int code);

struct Connection : std::enable_shared_from_this<Connection> {
    rados_t cluster = nullptr;
    ~Connection() {
        if (cluster) rados_shutdown(cluster);
    }
};

// Opens the connection lazily, reuses it, drops it after a failure that
// says it is unusable. connect() is bounded twice: client_mount_timeout in
// librados, and a deadline of its own (the connect runs on a thread that is
// abandoned past it and cleans up after itself).
class Connector {
public:
    explicit Connector(Settings s) : settings_(std::move(s)) {}
    std::shared_ptr<Connection> get();
    void drop(const std::shared_ptr<Connection>& c);
    void drop_all();
    const Settings& settings() const { return settings_; }

private:
    Settings settings_;
    std::mutex m_;
    std::shared_ptr<Connection> conn_;
};

// An I/O context on one pool; throws CephFailure (ENOENT: no such pool).
class Io {
public:
    Io(Connection& c, const std::string& pool);
    ~Io() {
        if (io_) rados_ioctx_destroy(io_);
    }
    Io(const Io&) = delete;
    Io& operator=(const Io&) = delete;
    rados_ioctx_t get() const { return io_; }

private:
    rados_ioctx_t io_ = nullptr;
};

// An open image; read_only never takes the exclusive lock.
class Image {
public:
    Image(Io& io, const std::string& name, bool read_only);
    ~Image() {
        if (image_) rbd_close(image_);
    }
    Image(const Image&) = delete;
    Image& operator=(const Image&) = delete;
    rbd_image_t get() const { return image_; }

private:
    rbd_image_t image_ = nullptr;
};

struct MonReply {
    int rc = 0;
    std::string out, status;
};
MonReply mon_command(Connection& c, const std::string& json);

}  // namespace pvc::ceph
