#include "connection.hpp"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <thread>

namespace pvc::ceph {

bool CephFailure::unreachable() const {
    switch (-code) {
    case ETIMEDOUT:
    case ENOTCONN:
    case ESHUTDOWN:
    case ECONNREFUSED:
    case ECONNRESET:
    case EHOSTUNREACH:
    case ENETUNREACH:
    case EINTR:
        return true;
    default:
        return false;
    }
}

std::string errno_text(int code) {
    int e = code < 0 ? -code : code;
    return "(" + std::to_string(e) + ") " + std::strerror(e);
}

std::string errno_name(int code) {
    int e = code < 0 ? -code : code;
    const char* n = strerrorname_np(e);
    return n ? n : std::to_string(e);
}

namespace {

// The connect's state, shared with its thread (which may outlive the caller).
struct Pending {
    std::mutex m;
    std::condition_variable cv;
    bool done = false, abandoned = false;
    int rc = 0;
    std::string what;
    std::shared_ptr<Connection> conn;
};

void connect_on(const Settings& s, const std::shared_ptr<Pending>& p) {
    auto conn = std::make_shared<Connection>();
    int rc = rados_create(&conn->cluster, nullptr);
    std::string what = "creating the Ceph client";
    if (rc < 0) conn->cluster = nullptr;
    auto set = [&](const char* key, const std::string& value) {
        if (rc < 0) return;
        rc = rados_conf_set(conn->cluster, key, value.c_str());
        if (rc < 0) what = std::string("setting ") + key;
    };
    if (rc >= 0) {
        rc = rados_conf_read_file(conn->cluster, s.config_file.c_str());
        if (rc < 0) what = "reading the Ceph configuration file '" + s.config_file + "'";
    }
    if (!s.keyring.empty()) set("keyring", s.keyring);
    const std::string t = std::to_string(s.timeout.count());
    set("rados_mon_op_timeout", t);
    set("rados_osd_op_timeout", t);
    set("client_mount_timeout", t);
    // Our output stays ours: no librados log file or stderr.
    set("log_to_stderr", "false");
    set("err_to_stderr", "false");
    set("log_file", "");
    if (rc >= 0) {
        rc = rados_connect(conn->cluster);
        if (rc < 0) what = "connecting to the Ceph cluster";
    }
    std::lock_guard g(p->m);
    p->rc = rc;
    p->what = what;
    if (rc >= 0 && !p->abandoned) p->conn = std::move(conn);
    p->done = true;
    p->cv.notify_all();
    // abandoned or failed: `conn` shuts down here, on this thread
}

}  // namespace

std::shared_ptr<Connection> Connector::get() {
    std::lock_guard g(m_);
    if (conn_) return conn_;
    auto p = std::make_shared<Pending>();
    std::thread([s = settings_, p] { connect_on(s, p); }).detach();
    std::unique_lock l(p->m);
    // librados gives up after client_mount_timeout; a margin for its answer.
    auto deadline = std::chrono::seconds(settings_.timeout) + std::chrono::seconds(2);
    if (!p->cv.wait_for(l, deadline, [&] { return p->done; })) {
        p->abandoned = true;
        throw CephFailure(-ETIMEDOUT, "connecting to the Ceph cluster: no answer within " +
                                          std::to_string(deadline.count()) + " s");
    }
    if (p->rc < 0) {
        int rc = p->rc;
        // A connect that failed by itself (no monitor answered) is a cluster
        // not reachable; a bad file or keyring is not.
        if (rc == -ETIMEDOUT || rc == -ENOTCONN || rc == -EINTR) rc = -ETIMEDOUT;
        throw CephFailure(rc, p->what + ": " + errno_text(rc));
    }
    conn_ = std::move(p->conn);
    return conn_;
}

void Connector::drop(const std::shared_ptr<Connection>& c) {
    std::lock_guard g(m_);
    if (conn_ == c) conn_.reset();
}

void Connector::drop_all() {
    std::lock_guard g(m_);
    conn_.reset();
}

Io::Io(Connection& c, const std::string& pool) {
    int rc = rados_ioctx_create(c.cluster, pool.c_str(), &io_);
    if (rc < 0) {
        io_ = nullptr;
        throw CephFailure(rc, "rbd: error opening pool '" + pool + "': " + errno_text(rc));
    }
}

Image::Image(Io& io, const std::string& name, bool read_only) {
    int rc = read_only ? rbd_open_read_only(io.get(), name.c_str(), &image_, nullptr)
                       : rbd_open(io.get(), name.c_str(), &image_, nullptr);
    if (rc < 0) {
        image_ = nullptr;
        throw CephFailure(rc, "rbd: error opening image " + name + ": " + errno_text(rc));
    }
}

MonReply mon_command(Connection& c, const std::string& json) {
    const char* cmd[] = {json.c_str()};
    char *out = nullptr, *status = nullptr;
    size_t out_len = 0, status_len = 0;
    MonReply r;
    r.rc = rados_mon_command(c.cluster, cmd, 1, "", 0, &out, &out_len, &status, &status_len);
    if (out) {
        r.out.assign(out, out_len);
        rados_buffer_free(out);
    }
    if (status) {
        r.status.assign(status, status_len);
        rados_buffer_free(status);
    }
    return r;
}

}  // namespace pvc::ceph
