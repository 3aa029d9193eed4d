// The hypervisor's own keys of pvcnoded.yaml: the `pvc.system.hypervisor`
// block (ours), the migration target selector it publishes, and the console
// log keys. Read and validated by the module (Module::configure), every
// problem into the daemon's one list with its YAML path and line; the
// reference's keys among them go into the legacy plugins' flat dictionary.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "pvc/config.hpp"

namespace pvc::hv {

struct Settings {
    std::string libvirt_uri = "qemu:///system";
    std::string migration_uri = "qemu+tcp://{node}.{cluster_domain}/system";
    int max_parallel_migrations = 1;
    // pvc.system.migration.target_selector: published by the primary as
    // /config/migration_target_selector.
    std::string migration_target_selector = "mem";
    // pvc.system.configuration.directories.console_log_directory and
    // .logging.console_log_lines (both required with the hypervisor).
    std::filesystem::path console_log_directory;
    int console_log_lines = 0;
    // pvc.cluster.networks.cluster.domain, for migration_uri's
    // {cluster_domain}: the network module's key, read here as written (the
    // network module validates it when networking is on).
    std::string cluster_domain;

    // Reads and validates; every problem goes to `problems` with its path and line.
    static Settings read(const Config& config, ConfigProblems& problems);
    // The reference's flat dictionary keys these settings give legacy plugins.
    void flat_keys(nlohmann::json& j) const;
};

}  // namespace pvc::hv
