#include "pvc/test/ports.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>

namespace pvc::test {

namespace {

bool bindable(int type, int port) {
    int fd = ::socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

// The first port of the kernel's ephemeral range (32768 if unreadable).
int ephemeral_low() {
    std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    if (f >> low && low > 2048) return low;
    return 32768;
}

}  // namespace

bool claim_port(int port) {
    static std::mutex m;
    std::lock_guard l(m);
    const std::string dir = "/tmp/pvc-test-ports";
    ::mkdir(dir.c_str(), 01777);
    std::string lock = dir + "/" + std::to_string(port);
    int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return false;
    // Held until this process exits (the descriptor is never closed); a
    // second claim in this process fails too (a new open file description).
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        return false;
    }
    if (bindable(SOCK_STREAM, port) && bindable(SOCK_DGRAM, port)) return true;
    ::close(fd);
    return false;
}

int reserve_port() {
    const int high = ephemeral_low() - 1;
    const int low = std::max(1024, high - 12000);
    const int span = high - low + 1;
    std::mt19937 rng(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
    const int start = static_cast<int>(rng() % static_cast<unsigned>(span));
    for (int i = 0; i < span; ++i) {
        int port = low + (start + i) % span;
        if (claim_port(port)) return port;
    }
    throw std::runtime_error("no free loopback port below the ephemeral range");
}

}  // namespace pvc::test
