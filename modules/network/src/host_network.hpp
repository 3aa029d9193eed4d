// Host (core) networking: one bridge per distinct device of
// the cluster, storage and upstream roles (named after the highest-precedence
// role using it: brcluster > brstorage > brupstream), the node's addresses on
// them, the default route and the sysctls. Reconciled, so a restart over a
// configured host changes (and flaps) nothing.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pvc/config.hpp"
#include "settings.hpp"
#include "pvc/log.hpp"

#include "netlink.hpp"

namespace pvc::network {

struct CoreBridge {
    std::string name;                    // brcluster | brstorage | brupstream
    std::string device;                  // its one port, the role's raw device
    std::optional<unsigned> mtu;         // the naming role's MTU (bridge); device: the largest of its roles
    std::optional<unsigned> device_mtu;
    std::vector<std::string> addresses;  // node addresses "addr/prefix", in role order, no duplicates
};

struct HostPlan {
    std::vector<CoreBridge> bridges;
    std::map<std::string, std::string> role_bridge;  // role -> bridge (also for floating IPs later)
    std::optional<std::string> gateway;              // upstream gateway
    std::vector<std::pair<std::string, std::string>> sysctls;  // key under /proc/sys, value
};

// The plan from the module's networking keys; problems (a device name that
// cannot be a Linux interface name) go to `problems` with their YAML path.
HostPlan plan_host(const Config& cfg, const Settings& net, ConfigProblems& problems);

// Makes the kernel match the plan; each failure is logged and the next step
// runs. Returns the changes made (empty on a host already configured).
std::vector<std::string> apply_host(Netlink& nl, const HostPlan& plan, const Logger& log);

// A valid Linux interface name (1-15 bytes, no '/', ':' or whitespace, not "." or "..").
bool valid_ifname(const std::string& name);

}  // namespace pvc::network
