// pvcnoded's reading of pvcnoded.yaml: the YAML reader (config_yaml.cpp), the
// core's keys (config.cpp), the host identity (config_host.cpp) and the flat
// dictionary of legacy plugins (config_flat.cpp). The daemon's own, not the
// SDK's: libpvc-sdk has the types (pvc/config.hpp, pvc/config_tree.hpp),
// modules read their keys from the tree the daemon gives them.
#pragma once

#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/config.hpp"

namespace pvc {

// Exit status for a configuration error (EX_CONFIG).
inline constexpr int exit_config_error = 78;

// The identity of the host named `fqdn`; static_data is always this machine's.
HostIdentity host_identity(const std::string& fqdn);
// This host's identity, from gethostname().
HostIdentity this_host_identity();

class ConfigError : public std::runtime_error {
public:
    ConfigError(std::string file, std::vector<ConfigProblem> problems);
    const std::string file;
    const std::vector<ConfigProblem> problems;
};

// The document as a tree; throws ConfigError on a YAML syntax error only.
ConfigNode parse_config_tree(const std::string& yaml_text, const std::string& name_for_errors);
// The file's text; throws ConfigError if it cannot be read.
std::string read_config_file(const std::filesystem::path& file);
// Reads the core's keys from the tree; every problem goes to `problems`,
// nothing is thrown. With `keys_read`, the path of every key the core looked
// up is added to it (the module-boundary test: the core reads no module's key).
Config read_config(const ConfigNode& document, ConfigProblems& problems,
                   const std::optional<HostIdentity>& host = std::nullopt,
                   std::set<std::string>* keys_read = nullptr);

// Loads and validates the core's keys; throws ConfigError with every problem
// found. The modules' keys are checked by the modules (ModuleHost::configure_all).
// `host` overrides the host identity (tests).
Config load_config(const std::filesystem::path& file, const std::optional<HostIdentity>& host = std::nullopt);
Config parse_config(const std::string& yaml_text, const std::string& name_for_errors,
                    const std::optional<HostIdentity>& host = std::nullopt);

// Where the config path comes from: --config, else PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml.
std::filesystem::path config_path(const std::optional<std::string>& cli_value);

// The flat configuration dictionary legacy Python plugins see, with the
// reference's key names: the core's keys and the loaded modules'
// (Config::module_keys).
nlohmann::json flat_config(const Config& config);

}  // namespace pvc
