#include "daemon/sd_notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

namespace pvc::sd {

namespace {

// A decimal number that fills the whole string, else false.
bool parse_u64(const char* s, uint64_t& out) {
    if (!s || !*s) return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || s[0] == '-') return false;
    out = v;
    return true;
}

// The socket and address, set up at the first call and kept: the keepalive
// sends a WATCHDOG datagram every tick (one sendto, not socket+sendto+close).
struct Target {
    int fd = -1;
    sockaddr_un addr{};
    socklen_t len = 0;
};

const Target& target() {
    static const Target t = [] {
        Target t;
        const char* path = std::getenv("NOTIFY_SOCKET");
        if (!path || !*path) return t;
        size_t len = std::strlen(path);
        // Only unix sockets: a path or an abstract name ('@'); systemd's vsock
        // form is for a service manager outside a VM, not ours.
        if ((path[0] != '/' && path[0] != '@') || len >= sizeof t.addr.sun_path) return t;
        t.addr.sun_family = AF_UNIX;
        std::memcpy(t.addr.sun_path, path, len);
        if (t.addr.sun_path[0] == '@') t.addr.sun_path[0] = '\0';
        t.len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len + (path[0] == '/' ? 1 : 0));
        t.fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        return t;
    }();
    return t;
}

}  // namespace

void notify(const char* state) {
    const Target& t = target();
    if (t.fd < 0 || !state) return;
    // One datagram per call: sendto on a datagram socket is atomic, so
    // threads need no lock.
    [[maybe_unused]] auto n = ::sendto(t.fd, state, std::strlen(state), MSG_NOSIGNAL,
                                       reinterpret_cast<const sockaddr*>(&t.addr), t.len);
}

bool watchdog_enabled(uint64_t& usec) {
    uint64_t v = 0;
    if (!parse_u64(std::getenv("WATCHDOG_USEC"), v) || v == 0) return false;
    if (const char* pid = std::getenv("WATCHDOG_PID")) {
        uint64_t p = 0;
        if (!parse_u64(pid, p) || p != static_cast<uint64_t>(::getpid())) return false;
    }
    usec = v;
    return true;
}

}  // namespace pvc::sd
