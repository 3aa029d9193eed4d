// The hypervisor's own keys of pvcnoded.yaml (docs/operations.md): the
// `pvc.system.hypervisor` block (ours) and the console log keys it requires.
#pragma once

#include <string>

#include "pvc/config.hpp"

namespace pvc::hv {

struct Settings {
    std::string libvirt_uri = "qemu:///system";
    std::string migration_uri = "qemu+tcp://{node}.{cluster_domain}/system";
    int max_parallel_migrations = 1;

    // Reads and validates; every problem goes to `problems` with its path and line.
    static Settings read(const Config& config, ConfigProblems& problems);
};

}  // namespace pvc::hv
