// Ipmitool: argv without the password; the password through the environment;
// a deadline on every call. Uses a stand-in `ipmitool` script (the real one
// against ipmi_sim is exercised by fencing_test).
#include "pvc/command.hpp"
#include "ipmi.hpp"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using namespace pvc::fencing;
using pvc::run_command;

TEST(Ipmitool, PasswordIsNeverInArgv) {
    Ipmitool ipmi({"-C", "3"}, 5s);
    auto argv = ipmi.argv(BmcAccess{"10.0.0.9", "admin", "s3cr3t"}, "off");
    std::vector<std::string> want{"ipmitool", "-I", "lanplus", "-C", "3", "-H", "10.0.0.9", "-U", "admin", "-E",
                                  "chassis", "power", "off"};
    EXPECT_EQ(argv, want);
}

TEST(Ipmitool, PasswordTravelsInTheEnvironmentAndStatusIsParsed) {
    pvc::test::TempDir dir("ipmi");
    auto tool = dir.path() / "fake-ipmitool";
    std::ofstream(tool) << "#!/bin/sh\n"
                           "echo \"$@\" > " << (dir.path() / "argv").string() << "\n"
                           "echo \"Chassis Power is off ($IPMI_PASSWORD)\"\n";
    std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
    Ipmitool ipmi({}, 5s, tool.string());
    auto r = ipmi.chassis_power(BmcAccess{"bmc", "admin", "s3cr3t"}, "status");
    EXPECT_EQ(r.exit_status, 0);
    EXPECT_EQ(r.state, PowerState::off);
    // The tool saw the password; our copy of its output does not keep it.
    EXPECT_EQ(r.output, "Chassis Power is off (<password>)");
    std::ifstream in(dir.path() / "argv");
    std::string argv((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(argv.find("s3cr3t"), std::string::npos) << argv;
}

TEST(Ipmitool, EveryCallHasADeadline) {
    pvc::test::TempDir dir("ipmi");
    auto tool = dir.path() / "hung-ipmitool";
    std::ofstream(tool) << "#!/bin/sh\nsleep 30 & sleep 30\n";
    std::filesystem::permissions(tool, std::filesystem::perms::owner_all);
    Ipmitool ipmi({}, 300ms, tool.string());
    auto t0 = std::chrono::steady_clock::now();
    auto r = ipmi.chassis_power(BmcAccess{"bmc", "admin", "x"}, "off");
    EXPECT_EQ(r.exit_status, -1);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);  // killed, with its child, not waited for
    EXPECT_NE(r.output.find("no answer within 300 ms"), std::string::npos) << r.output;
}

TEST(Command, ExitStatusAndOutputAndMissingProgram) {
    auto r = run_command({"/bin/sh", "-c", "echo out; echo err >&2; exit 3"}, {}, 5s);
    EXPECT_EQ(r.exit_status, 3);
    EXPECT_EQ(r.output, "out\nerr\n");
    auto missing = run_command({"/nonexistent/tool"}, {}, 5s);
    EXPECT_NE(missing.exit_status, 0);
}

TEST(PowerStatus, ParsesIpmitoolWords) {
    EXPECT_EQ(parse_power_status("Chassis Power is on"), PowerState::on);
    EXPECT_EQ(parse_power_status("Chassis Power is off\n"), PowerState::off);
    EXPECT_EQ(parse_power_status("Error: Unable to establish IPMI v2 / RMCP+ session"), PowerState::unknown);
}
