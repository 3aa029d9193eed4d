#include "ipmi.hpp"

#include "pvc/command.hpp"
#include "pvc/strings.hpp"

namespace pvc::fencing {

PowerState parse_power_status(std::string_view output) {
    if (output.find("Chassis Power is on") != std::string_view::npos) return PowerState::on;
    if (output.find("Chassis Power is off") != std::string_view::npos) return PowerState::off;
    return PowerState::unknown;
}

Ipmitool::Ipmitool(std::vector<std::string> extra_args, std::chrono::milliseconds timeout, std::string program)
    : extra_args_(std::move(extra_args)), timeout_(timeout), program_(std::move(program)) {}

std::vector<std::string> Ipmitool::argv(const BmcAccess& bmc, std::string_view action) const {
    std::vector<std::string> a{program_, "-I", "lanplus"};
    a.insert(a.end(), extra_args_.begin(), extra_args_.end());
    a.insert(a.end(), {"-H", bmc.host, "-U", bmc.user, "-E", "chassis", "power", std::string(action)});
    return a;
}

IpmiResult Ipmitool::chassis_power(const BmcAccess& bmc, std::string_view action) {
    auto r = run_command(argv(bmc, action), {{"IPMI_PASSWORD", bmc.password}}, timeout_);
    IpmiResult out;
    out.exit_status = r.exit_status;
    out.output = trim(r.output);
    // A BMC or tool that echoes what it was given must not leak the secret into our logs.
    if (!bmc.password.empty())
        for (auto p = out.output.find(bmc.password); p != std::string::npos; p = out.output.find(bmc.password, p))
            out.output.replace(p, bmc.password.size(), "<password>");
    if (r.timed_out)
        out.output = "no answer within " + std::to_string(timeout_.count()) + " ms" +
                     (out.output.empty() ? "" : " (" + out.output + ")");
    if (action == "status" && out.exit_status == 0) out.state = parse_power_status(out.output);
    return out;
}

}  // namespace pvc::fencing
