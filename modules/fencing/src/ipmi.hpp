// Power control of a node's BMC (ipmitool -I lanplus ... chassis power).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace pvc::fencing {

// Where and how to reach one BMC (from the dead node's keys in ZooKeeper).
struct BmcAccess {
    std::string host;
    std::string user;
    std::string password;
};

enum class PowerState { on, off, unknown };

struct IpmiResult {
    int exit_status = -1;   // -1: timed out or could not run
    std::string output;     // trimmed; never contains the password
    PowerState state = PowerState::unknown;  // parsed from a `status` answer
};

class Ipmi {
public:
    virtual ~Ipmi() = default;
    // `chassis power <action>` with action one of off, on, status.
    virtual IpmiResult chassis_power(const BmcAccess& bmc, std::string_view action) = 0;
};

// `ipmitool -I lanplus <extra args> -H host -U user -E chassis power <action>`:
// the password goes through the environment (IPMI_PASSWORD), never argv; each
// call is killed after `timeout`.
class Ipmitool final : public Ipmi {
public:
    Ipmitool(std::vector<std::string> extra_args, std::chrono::milliseconds timeout,
             std::string program = "ipmitool");
    IpmiResult chassis_power(const BmcAccess& bmc, std::string_view action) override;
    // The argv of one call (tests check that no password is in it).
    std::vector<std::string> argv(const BmcAccess& bmc, std::string_view action) const;

private:
    std::vector<std::string> extra_args_;
    std::chrono::milliseconds timeout_;
    std::string program_;
};

// "Chassis Power is on" / "Chassis Power is off" (ipmitool's words) → state.
PowerState parse_power_status(std::string_view output);

}  // namespace pvc::fencing
