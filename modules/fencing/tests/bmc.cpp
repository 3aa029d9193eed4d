#include "bmc.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "pvc/command.hpp"

namespace pvc::fencing::test {

Bmc::Bmc(std::filesystem::path dir, std::string address, int port, std::string password)
    : dir_(std::move(dir)), address_(std::move(address)), port_(port) {
    std::filesystem::create_directories(dir_ / "state");
    std::ofstream(dir_ / "power") << "1\n";
    auto chassis = dir_ / "chassis.sh";
    // ipmi_sim's chassis_control program: `get power` prints power:<0|1>,
    // `set power 0|1` records it; off kills the node process.
    std::ofstream(chassis) << "#!/bin/bash\nD=" << dir_.string() << R"SH(
op=$1; shift
case $op in
get) for p in "$@"; do case $p in
       power) echo "power:$(cat $D/power)" ;;
       boot) echo "boot:default" ;;
       *) echo "Invalid parameter: $p"; exit 1 ;;
     esac; done ;;
set) while [ $# -gt 0 ]; do p=$1; v=$2; shift 2; case $p in
       power) echo "set power $v" >> $D/chassis.log; echo $v > $D/power
              if [ "$v" = 0 ] && [ -s $D/node.pid ]; then kill -9 $(cat $D/node.pid) 2>/dev/null; fi ;;
       reset) echo "set reset $v" >> $D/chassis.log ;;
       boot|identify) ;;
       *) echo "Invalid parameter: $p"; exit 1 ;;
     esac; done ;;
*) exit 1 ;;
esac
)SH";
    std::filesystem::permissions(chassis, std::filesystem::perms::owner_all);
    // RMCP+ (lanplus) needs a GUID; one per address.
    char guid[33];
    std::snprintf(guid, sizeof guid, "%032zx", std::hash<std::string>{}(address_));
    std::ofstream(dir_ / "lan.conf") << "name \"bmc\"\nset_working_mc 0x20\n  startlan 1\n    addr " << address_ << " "
                                     << port_ << R"(
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid )" << guid << R"(
  endlan
  chassis_control ")" << chassis.string() << R"("
  user 2 true "admin" ")" << password << R"(" admin 10 none md2 md5 straight
)";
    // mc_setbmc is mandatory; without it ipmi_sim fails or crashes.
    std::ofstream(dir_ / "bmc.emu") << "mc_setbmc 0x20\n"
                                       "mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\n"
                                       "mc_enable 0x20\n";
    pid_ = ::fork();
    if (pid_ == 0) {
        std::string log = (dir_ / "ipmi_sim.log").string();
        FILE* f = std::freopen(log.c_str(), "w", stdout);
        (void)f;
        ::dup2(1, 2);
        // -n: no console (stdin is not a terminal here).
        ::execlp("ipmi_sim", "ipmi_sim", "-n", "-c", (dir_ / "lan.conf").c_str(), "-f", (dir_ / "bmc.emu").c_str(),
                 "-s", (dir_ / "state").c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    std::vector<std::string> argv{"ipmitool", "-I", "lanplus"};
    for (auto& a : ipmitool_args()) argv.push_back(a);
    for (std::string a : {"-H", address_.c_str(), "-U", "admin", "-E", "chassis", "power", "status"}) argv.push_back(a);
    for (int i = 0; i < 100; ++i) {
        if (run_command(argv, {{"IPMI_PASSWORD", password}}, std::chrono::seconds(5)).exit_status == 0) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    throw std::runtime_error("ipmi_sim on " + address_ + " did not answer: " + slurp_log());
}

std::string Bmc::slurp_log() const {
    std::ifstream in(dir_ / "ipmi_sim.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

Bmc::~Bmc() {
    if (pid_ > 0) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
}

bool Bmc::powered_on() const {
    std::ifstream in(dir_ / "power");
    std::string s;
    in >> s;
    return s == "1";
}

std::vector<std::string> Bmc::power_commands() const {
    std::vector<std::string> out;
    std::ifstream in(dir_ / "chassis.log");
    for (std::string line; std::getline(in, line);)
        if (line.rfind("set power", 0) == 0) out.push_back(line);
    return out;
}

void Bmc::set_node_process(pid_t pid) { std::ofstream(dir_ / "node.pid") << pid << "\n"; }

std::vector<std::string> Bmc::ipmitool_args() const { return {"-C", "3", "-p", std::to_string(port_)}; }

}  // namespace pvc::fencing::test
