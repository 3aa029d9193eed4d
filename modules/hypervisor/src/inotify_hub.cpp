#include "inotify_hub.hpp"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include <boost/asio/post.hpp>

namespace pvc::hv {

std::shared_ptr<InotifyHub> InotifyHub::create(Strand strand) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return nullptr;
    std::shared_ptr<InotifyHub> hub(new InotifyHub(strand));
    boost::system::error_code ec;
    hub->fd_.assign(fd, ec);
    if (ec) {
        ::close(fd);
        return nullptr;
    }
    hub->raw_fd_ = fd;
    hub->wait();
    return hub;
}

InotifyHub::InotifyHub(Strand strand) : fd_(strand) {}

// The descriptor closes with the hub (no handler holds it any more by then).
InotifyHub::~InotifyHub() = default;

int InotifyHub::add(const std::filesystem::path& path, uint32_t mask, Callback cb) {
    std::lock_guard g(m_);
    if (closed_) {
        errno = EBADF;
        return -1;
    }
    // Every subscriber of one file asks for the same events; a second add of
    // the same inode returns the same descriptor (the mask is replaced, not
    // narrowed, since it is the same).
    int wd = ::inotify_add_watch(raw_fd_, path.c_str(), mask);
    if (wd < 0) return -1;
    int id = next_id_++;
    subs_.emplace(id, Sub{wd, std::make_shared<Callback>(std::move(cb))});
    return id;
}

void InotifyHub::remove(int id) {
    std::lock_guard g(m_);
    auto it = subs_.find(id);
    if (it == subs_.end()) return;
    int wd = it->second.wd;
    subs_.erase(it);
    for (auto& [other, s] : subs_)
        if (s.wd == wd) return;  // still watched for another subscriber
    if (!closed_) ::inotify_rm_watch(raw_fd_, wd);
}

// The descriptor itself is closed on the hub's strand, where its reads run:
// closing it from another thread raced with a read in progress (and a read
// could then have gone to a reused descriptor number). add/remove use it only
// under the mutex while not closed.
void InotifyHub::close() {
    {
        std::lock_guard g(m_);
        if (closed_) return;
        closed_ = true;
        subs_.clear();
    }
    auto self = shared_from_this();
    boost::asio::post(fd_.get_executor(), [self] {
        boost::system::error_code ec;
        self->fd_.close(ec);
    });
}

size_t InotifyHub::subscriptions() const {
    std::lock_guard g(m_);
    return subs_.size();
}

void InotifyHub::wait() {
    auto self = shared_from_this();
    fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read, [self](const boost::system::error_code& ec) {
        if (ec) return;  // closed
        alignas(inotify_event) char buf[8192];
        for (;;) {
            {
                std::lock_guard g(self->m_);
                if (self->closed_) return;
            }
            // On the strand: the descriptor is open (it is closed only here).
            ssize_t n = ::read(self->fd_.native_handle(), buf, sizeof buf);
            if (n <= 0) break;
            for (char* p = buf; p < buf + n;) {
                auto* ev = reinterpret_cast<inotify_event*>(p);
                self->dispatch(ev->wd, ev->mask);
                p += sizeof(inotify_event) + ev->len;
            }
        }
        self->wait();
    });
}

void InotifyHub::dispatch(int wd, uint32_t mask) {
    std::vector<std::shared_ptr<Callback>> targets;
    {
        std::lock_guard g(m_);
        bool overflow = (mask & IN_Q_OVERFLOW) != 0;
        for (auto it = subs_.begin(); it != subs_.end();) {
            if (overflow || it->second.wd == wd) targets.push_back(it->second.cb);
            // The kernel dropped this watch: the subscription ends with it.
            if (!overflow && it->second.wd == wd && (mask & IN_IGNORED))
                it = subs_.erase(it);
            else
                ++it;
        }
    }
    // Outside the lock: a callback may add or remove subscriptions.
    for (auto& cb : targets) {
        try {
            (*cb)(mask);
        } catch (...) {
            // A subscriber's failure never stops the others or the hub.
        }
    }
}

}  // namespace pvc::hv
