// The fencing module's own keys of pvcnoded.yaml (README "Configuration"):
// read and validated by the module (Module::configure), every problem into
// the daemon's one list with its YAML path and line. They include this
// node's own BMC (ipmi.host/user/pass, ipmitool_args): the module registers
// it in ZooKeeper at every start, checks it, and gives it to legacy plugins.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/config.hpp"

namespace pvc::fencing {

struct Settings {
    // pvc.system.fencing.actions: "migrate" recovers the VMs; anything else
    // (the sample's "None" included) does nothing. "" when not written.
    std::string successful_fence;
    std::string failed_fence;
    // pvc.system.intervals (or pvc.system.fencing.intervals: both places are
    // read and must agree, as for the core's intervals).
    int fence_intervals = 6;    // dead after keepalive_interval × this
    int suicide_intervals = 0;  // self-fence after this many intervals (0: off)
    // Ours: saving throws before a fence (the reference's fixed 6), seconds per
    // ipmitool call, the self-fence reset action (tests replace it).
    int saving_throws = 6;
    int ipmi_timeout = 15;
    std::string suicide_command = "systemctl reboot --force --force";
    // pvc.system.fencing.ipmi: this node's own BMC, registered as
    // /nodes/<node>/ipmi{hostname,username,password} (the peers fence this
    // node with them). The host defaults to <hostname>-lom[.<domain>], user
    // and password to the reference's "null".
    std::string ipmi_hostname;
    std::string ipmi_username = "null";
    std::string ipmi_password = "null";
    // Ours: extra arguments of every ipmitool call this node makes (its own
    // check and its fences), e.g. ["-C", "3"].
    std::vector<std::string> ipmitool_args;

    // Reads and validates; every problem goes to `problems`, nothing is thrown.
    static Settings read(const Config& config, ConfigProblems& problems);
    // The reference's flat dictionary keys these settings give legacy plugins.
    void flat_keys(nlohmann::json& j) const;

private:
    static Settings read_keys(const Config& config, ConfigProblems& problems);
};

}  // namespace pvc::fencing
