// (The fencing module has the same runner; each module keeps its own: modules never link each other.)
// Running an external command with a deadline: no shell, output captured,
// extra environment variables (secrets go there, never into argv, which any
// user can read in /proc/<pid>/cmdline).
#pragma once

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace pvc::storage {

struct CommandResult {
    int exit_status = -1;      // -1: did not run to completion (not started, killed, timed out)
    bool timed_out = false;
    std::string output;        // stdout and stderr, interleaved
};

// Runs argv[0] (searched on PATH) in its own process group; past `timeout`
// the whole group is killed. Never throws for the command's own failures.
CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          std::chrono::milliseconds timeout);

}  // namespace pvc::storage
