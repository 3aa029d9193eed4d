// pvcnoded.yaml text for tests: a minimal valid node configuration whose
// knobs tests set, and files the daemon needs (directories, module dir).
#pragma once

#include <filesystem>
#include <string>

namespace pvc::test {

struct NodeConfigOptions {
    std::string node = "hv1";
    std::string coordinators = "[hv1]";   // YAML list text; "host:port" entries allowed
    std::filesystem::path base_dir;       // dynamic/log/plugin dirs are created below it
    std::filesystem::path module_dir;     // "" = leave unset
    std::filesystem::path plugin_dir;     // "" = <base_dir>/plugins (created empty)
    bool enable_hypervisor = false;
    bool enable_storage = false;
    int keepalive_interval = 1;
    bool zookeeper_logging = true;
    bool stdout_logging = true;
    std::string extra_system_yaml;        // appended under pvc.system (indented 4 spaces)
    std::string extra_functions_yaml;     // appended under pvc.functions (indented 4 spaces)
};

std::string node_config_yaml(const NodeConfigOptions& o);
// Writes the YAML to <base_dir>/pvcnoded.yaml and returns its path.
std::filesystem::path write_node_config(const NodeConfigOptions& o);

}  // namespace pvc::test
