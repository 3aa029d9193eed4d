#include "daemon/host_figures.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace pvc {
namespace {

long kib_field(const std::string& text, const char* name) {
    std::string key = std::string("\n") + name + ":";
    size_t pos = text.rfind(key.c_str() + 1, 0) == 0 ? 0 : text.find(key);
    if (pos == std::string::npos) return 0;
    pos = text.find(':', pos);
    return std::strtol(text.c_str() + pos + 1, nullptr, 10);
}

// One read(2) of a small /proc file (no iostreams on the keepalive path).
std::optional<std::string> slurp(const char* path) {
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

}  // namespace

HostFigures host_figures_from(const std::string& meminfo, const std::string& loadavg) {
    HostFigures f;
    long total = kib_field(meminfo, "MemTotal");
    long free = kib_field(meminfo, "MemFree");
    long buffers = kib_field(meminfo, "Buffers");
    long cached = kib_field(meminfo, "Cached");
    long reclaimable = kib_field(meminfo, "SReclaimable");
    // Byte counts divided by 1024*1024, truncated towards zero.
    f.memtotal_mib = total / 1024;
    f.memfree_mib = free / 1024;
    long used = total - free - buffers - (cached + reclaimable);
    if (used < 0) used = total - free;
    f.memused_mib = used / 1024;
    double load = std::strtod(loadavg.c_str(), nullptr);
    f.cpuload = std::round(load * 100.0) / 100.0;
    return f;
}

std::optional<HostFigures> read_host_figures() {
    auto mem = slurp("/proc/meminfo");
    auto load = slurp("/proc/loadavg");
    if (!mem || !load) return std::nullopt;
    return host_figures_from(*mem, *load);
}

}  // namespace pvc
