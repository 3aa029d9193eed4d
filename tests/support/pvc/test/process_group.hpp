// A server a test starts (ZooKeeper's JVM, Ceph's daemons): one child leading
// its own process group, killed with the test process even on a crash
// (PR_SET_PDEATHSIG), stdout and stderr appended to a log file.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace pvc::test {

class ProcessGroup {
public:
    ProcessGroup(std::vector<std::string> argv, std::filesystem::path log);
    ~ProcessGroup();  // SIGKILL to the group
    ProcessGroup(const ProcessGroup&) = delete;
    ProcessGroup& operator=(const ProcessGroup&) = delete;

    void spawn();  // argv[0] searched on PATH; nothing while it runs
    bool alive();
    // `sig` to the group; SIGKILL after `grace`, and to any straggler of the group.
    void stop(int sig, std::chrono::milliseconds grace);
    void kill_now();
    pid_t pid() const { return pid_; }
    const std::filesystem::path& log() const { return log_; }

private:
    std::vector<std::string> argv_;
    std::filesystem::path log_;
    pid_t pid_ = -1;
};

}  // namespace pvc::test
