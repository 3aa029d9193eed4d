#include "axfr.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <random>

#include <fmt/format.h>

namespace pvc::network {

namespace {

using Clock = std::chrono::steady_clock;

struct Fd {
    int fd = -1;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

uint16_t u16(const std::string& m, size_t at) {
    if (at + 2 > m.size()) throw AxfrError("truncated message");
    return static_cast<uint16_t>((static_cast<unsigned char>(m[at]) << 8) | static_cast<unsigned char>(m[at + 1]));
}

uint32_t u32(const std::string& m, size_t at) { return (static_cast<uint32_t>(u16(m, at)) << 16) | u16(m, at + 2); }

// A (possibly compressed) name at `at`; `at` moves past it in the message.
std::string read_name(const std::string& m, size_t& at) {
    std::string out;
    size_t pos = at;
    bool jumped = false;
    for (int hops = 0;; ++hops) {
        if (pos >= m.size() || hops > 128) throw AxfrError("malformed name");
        auto len = static_cast<unsigned char>(m[pos]);
        if (len == 0) {
            if (!jumped) at = pos + 1;
            break;
        }
        if ((len & 0xC0) == 0xC0) {
            size_t target = u16(m, pos) & 0x3FFF;
            if (!jumped) at = pos + 2;
            jumped = true;
            pos = target;
            continue;
        }
        if (len & 0xC0) throw AxfrError("malformed name");
        if (pos + 1 + len > m.size()) throw AxfrError("truncated name");
        if (!out.empty()) out += '.';
        for (size_t i = 0; i < len; ++i)
            out += static_cast<char>(std::tolower(static_cast<unsigned char>(m[pos + 1 + i])));
        pos += 1 + len;
    }
    return out;
}

std::string type_name(uint16_t t) {
    switch (t) {
    case 1: return "A";
    case 2: return "NS";
    case 5: return "CNAME";
    case 6: return "SOA";
    case 12: return "PTR";
    case 28: return "AAAA";
    default: return fmt::format("TYPE{}", t);
    }
}

void send_all(int fd, const std::string& data, Clock::time_point end) {
    size_t sent = 0;
    while (sent < data.size()) {
        ssize_t n = ::send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) throw AxfrError(std::strerror(errno));
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0) throw AxfrError("timed out");
        pollfd p{fd, POLLOUT, 0};
        ::poll(&p, 1, static_cast<int>(left));
    }
}

void recv_exact(int fd, char* buf, size_t len, Clock::time_point end) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = ::recv(fd, buf + got, len - got, 0);
        if (n > 0) {
            got += static_cast<size_t>(n);
            continue;
        }
        if (n == 0) throw AxfrError("connection closed before the transfer ended");
        if (errno != EAGAIN && errno != EINTR) throw AxfrError(std::strerror(errno));
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0) throw AxfrError("timed out");
        pollfd p{fd, POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(left));
    }
}

}  // namespace

int parse_axfr_message(const std::string& m, uint16_t id, std::vector<DnsRecord>& out) {
    if (m.size() < 12) throw AxfrError("truncated message");
    if (u16(m, 0) != id) throw AxfrError("answer to another query");
    uint16_t flags = u16(m, 2);
    if (!(flags & 0x8000)) throw AxfrError("not an answer");
    if (unsigned rcode = flags & 0x0F; rcode != 0)
        throw AxfrError(rcode == 5 ? "refused (rcode 5: this host is not one of its --auth-peer addresses?)"
                                   : fmt::format("rcode {}", rcode));
    uint16_t qd = u16(m, 4), an = u16(m, 6);
    size_t at = 12;
    for (int i = 0; i < qd; ++i) {
        read_name(m, at);
        at += 4;
    }
    int soa = 0;
    for (int i = 0; i < an; ++i) {
        DnsRecord r;
        r.name = read_name(m, at);
        uint16_t type = u16(m, at);
        r.ttl = u32(m, at + 4);
        uint16_t len = u16(m, at + 8);
        at += 10;
        if (at + len > m.size()) throw AxfrError("truncated record");
        r.type = type_name(type);
        char text[INET6_ADDRSTRLEN] = {};
        if (type == 1 && len == 4) {
            inet_ntop(AF_INET, m.data() + at, text, sizeof text);
            r.data = text;
        } else if (type == 28 && len == 16) {
            inet_ntop(AF_INET6, m.data() + at, text, sizeof text);
            r.data = text;
        } else if (type == 2 || type == 5 || type == 12) {
            size_t p = at;
            r.data = read_name(m, p);
        }
        at += len;
        if (type == 6) ++soa;
        out.push_back(std::move(r));
    }
    return soa;
}

std::vector<DnsRecord> axfr(const std::string& server, const std::string& zone, std::chrono::milliseconds deadline,
                            uint16_t port) {
    auto end = Clock::now() + deadline;
    sockaddr_storage ss{};
    socklen_t len = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
    if (inet_pton(AF_INET, server.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        len = sizeof *v4;
    } else if (inet_pton(AF_INET6, server.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        len = sizeof *v6;
    } else {
        throw AxfrError(fmt::format("'{}' is not an IP address", server));
    }
    Fd s;
    s.fd = ::socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s.fd < 0) throw AxfrError(std::strerror(errno));
    if (::connect(s.fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
        if (errno != EINPROGRESS) throw AxfrError(std::strerror(errno));
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        pollfd p{s.fd, POLLOUT, 0};
        if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) throw AxfrError("connect timed out");
        int err = 0;
        socklen_t el = sizeof err;
        ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &el);
        if (err) throw AxfrError(std::strerror(err));
    }
    // The query: header (random id, no flags, one question), QNAME, AXFR, IN.
    static thread_local std::mt19937 rng{std::random_device{}()};
    auto id = static_cast<uint16_t>(rng());
    std::string q;
    q += static_cast<char>(id >> 8);
    q += static_cast<char>(id & 0xFF);
    q += std::string("\0\0\0\x01\0\0\0\0\0\0", 10);
    size_t start = 0;
    while (start < zone.size()) {
        size_t dot = zone.find('.', start);
        if (dot == std::string::npos) dot = zone.size();
        size_t l = dot - start;
        if (l == 0 || l > 63) throw AxfrError(fmt::format("'{}' is not a DNS name", zone));
        q += static_cast<char>(l);
        q += zone.substr(start, l);
        start = dot + 1;
    }
    q += std::string("\0\0\xFC\0\x01", 5);
    std::string framed;
    framed += static_cast<char>(q.size() >> 8);
    framed += static_cast<char>(q.size() & 0xFF);
    framed += q;
    send_all(s.fd, framed, end);
    std::vector<DnsRecord> out;
    int soa = 0;
    while (soa < 2) {
        unsigned char lb[2];
        recv_exact(s.fd, reinterpret_cast<char*>(lb), 2, end);
        std::string msg((lb[0] << 8) | lb[1], '\0');
        recv_exact(s.fd, msg.data(), msg.size(), end);
        size_t before = out.size();
        soa += parse_axfr_message(msg, id, out);
        if (out.size() == before) throw AxfrError("an empty answer");
        if (soa == 0) throw AxfrError("the transfer does not start with the SOA");
    }
    out.pop_back();  // the closing SOA
    return out;
}

}  // namespace pvc::network
