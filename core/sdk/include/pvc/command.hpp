// Running an external command with a deadline (ipmitool, ceph-volume,
// systemctl, reset actions): no shell, output captured, extra environment
// variables (secrets go there, never into argv, which any user can read in
// /proc/<pid>/cmdline).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "pvc/export.hpp"

namespace pvc {

struct PVC_SDK_API CommandResult {
    int exit_status = -1;      // -1: did not run to completion (not started, killed, timed out)
    bool timed_out = false;
    std::string output;        // stdout and stderr, interleaved
};

// Runs argv[0] (searched on PATH) in its own process group; past `timeout`
// the whole group is killed. Never throws for the command's own failures.
PVC_SDK_API CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          std::chrono::milliseconds timeout);

}  // namespace pvc
