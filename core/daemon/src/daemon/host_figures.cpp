#include "daemon/host_figures.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <mutex>

namespace pvc {
namespace {

long kib_field(const std::string& text, const char* name) {
    std::string key = std::string("\n") + name + ":";
    size_t pos = text.rfind(key.c_str() + 1, 0) == 0 ? 0 : text.find(key);
    if (pos == std::string::npos) return 0;
    pos = text.find(':', pos);
    return std::strtol(text.c_str() + pos + 1, nullptr, 10);
}

// A /proc file kept open: each tick is one pread(2) from offset 0 (the
// kernel regenerates the text), not an open/read/read/close with a path walk.
class ProcFile {
public:
    explicit ProcFile(const char* path) : path_(path) {}
    ~ProcFile() {
        if (fd_ >= 0) ::close(fd_);
    }
    ProcFile(const ProcFile&) = delete;
    ProcFile& operator=(const ProcFile&) = delete;

    // The whole text into `out` (its capacity reused); false if unreadable.
    bool read(std::string& out) {
        if (fd_ < 0) fd_ = ::open(path_, O_RDONLY | O_CLOEXEC);
        if (fd_ < 0) return false;
        if (out.size() < 4096) out.resize(4096);
        size_t len = 0;
        for (;;) {
            ssize_t n = ::pread(fd_, out.data() + len, out.size() - len, static_cast<off_t>(len));
            if (n < 0) {
                ::close(fd_);
                fd_ = -1;
                return false;
            }
            len += static_cast<size_t>(n);
            if (n == 0 || len < out.size()) break;
            out.resize(out.size() * 2);  // a larger file than ever before: read on
        }
        out.resize(len);
        return true;
    }

private:
    const char* path_;
    int fd_ = -1;
};

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
    // The keepalive's thread is the only caller; the lock only keeps another
    // (a test) from sharing the buffers meanwhile.
    static std::mutex m;
    static ProcFile meminfo("/proc/meminfo"), loadavg("/proc/loadavg");
    static std::string mem, load;
    std::lock_guard g(m);
    if (!meminfo.read(mem) || !loadavg.read(load)) return std::nullopt;
    return host_figures_from(mem, load);
}

}  // namespace pvc
