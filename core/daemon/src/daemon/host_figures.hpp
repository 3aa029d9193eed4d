// The node's own figures for the keepalive (CPU, memory and load keys).
#pragma once

#include <optional>
#include <string>

namespace pvc {

struct HostFigures {
    long memtotal_mib = 0;
    long memused_mib = 0;
    long memfree_mib = 0;
    double cpuload = 0.0;  // 1-minute load average, rounded to 2 decimals
};

// Parses /proc/meminfo and /proc/loadavg text (tests pass their own).
HostFigures host_figures_from(const std::string& meminfo, const std::string& loadavg);
// Reads the running system's figures; nullopt if /proc cannot be read.
std::optional<HostFigures> read_host_figures();

}  // namespace pvc
