// One inotify instance for all of the module's console logs. The kernel
// allows a user only `fs.inotify.max_user_instances` instances (128 by
// default, shared with libvirtd, systemd and every other daemon of that
// user), but hundreds of thousands of watches: an instance per VM ran out
// past ~128 running VMs and the rest fell back to polling their files twice
// a second (measured: 400 stat calls per second on a node with 100 VMs).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

#include <boost/asio/posix/stream_descriptor.hpp>

#include "pvc/events.hpp"

namespace pvc::hv {

class InotifyHub : public std::enable_shared_from_this<InotifyHub> {
public:
    // Called on the hub's strand with the event's mask: IN_IGNORED when the
    // watch is gone (file deleted or moved away; the subscription is then
    // over), IN_Q_OVERFLOW when events were lost (anything may have changed).
    using Callback = std::function<void(uint32_t mask)>;

    // nullptr when the instance cannot be created (the callers poll instead).
    static std::shared_ptr<InotifyHub> create(Strand strand);
    ~InotifyHub();

    // Watches `path` for `mask`; a subscription id > 0, or -1 (errno set by
    // inotify_add_watch: ENOENT, ENOSPC, ...) or when closed.
    int add(const std::filesystem::path& path, uint32_t mask, Callback cb);
    // Ends a subscription (nothing is delivered to it afterwards, except a
    // delivery already in progress). Unknown ids are ignored.
    void remove(int id);
    // Ends every subscription and closes the instance (on the hub's strand).
    // Idempotent. The hub must be owned by a shared_ptr (create() does).
    void close();

    size_t subscriptions() const;

private:
    explicit InotifyHub(Strand strand);
    void wait();
    void dispatch(int wd, uint32_t mask);

    struct Sub {
        int wd;
        std::shared_ptr<Callback> cb;
    };
    boost::asio::posix::stream_descriptor fd_;  // async_wait, read, close: on the strand only
    mutable std::mutex m_;
    bool closed_ = false;
    int raw_fd_ = -1;  // for inotify_add_watch/rm_watch, under m_ while !closed_
    int next_id_ = 1;
    std::map<int, Sub> subs_;  // by subscription id
};

}  // namespace pvc::hv
