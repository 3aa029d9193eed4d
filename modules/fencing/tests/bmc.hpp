// A simulated BMC for tests: OpenIPMI's ipmi_sim on a loopback address, login
// admin/<password>, whose chassis power is a file. Power off kills the
// "node" (a process the test names), like a power loss.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>
#include <vector>

// A BMC port: pvc::test::reserve_port() (one per test fixture; each BMC has its own address).
#include "pvc/test/ports.hpp"

namespace pvc::fencing::test {

class Bmc {
public:
    Bmc(std::filesystem::path dir, std::string address, int port, std::string password = "pass");
    ~Bmc();
    Bmc(const Bmc&) = delete;
    Bmc& operator=(const Bmc&) = delete;

    const std::string& address() const { return address_; }
    bool powered_on() const;
    // Lines "set power 0" / "set power 1" in order.
    std::vector<std::string> power_commands() const;
    // Power off kills `pid` (SIGKILL).
    void set_node_process(pid_t pid);
    // ipmitool arguments a fencer needs for this BMC (the port, -C 3).
    std::vector<std::string> ipmitool_args() const;

private:
    std::string slurp_log() const;
    std::filesystem::path dir_;
    std::string address_;
    int port_;
    pid_t pid_ = -1;
};

}  // namespace pvc::fencing::test
