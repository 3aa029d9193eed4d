// A pvcnoded child process for tests and benchmarks, in its own UTS and mount
// namespaces: its hostname (= node name) is `node`, and a private /etc/hosts
// resolves hv1..hv9 and pvchv1..pvchv9 to loopback, where the test's ZooKeeper
// listens (coordinators are written "hvN:port").
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

namespace pvc::test {

std::string build_dir();
std::string pvcnoded_binary();
std::string slurp(const std::filesystem::path& p);

class DaemonProcess {
public:
    // stdout to `log`, stderr to `log`.err
    DaemonProcess(const std::string& node, const std::filesystem::path& config, const std::filesystem::path& log);
    ~DaemonProcess();  // SIGKILL if still running
    void signal(int sig);
    // Exit status, or -1 if still running after `timeout`.
    int wait(std::chrono::milliseconds timeout);
    bool running();
    int pid() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pvc::test
