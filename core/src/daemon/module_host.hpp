// ModuleHost: loads one .so per enabled function through Boost.DLL and checks
// its ABI (DESIGN.md, "Module ABI").
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "pvc/module.hpp"

namespace pvc {

class ModuleLoadError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A module's start() threw; names the module and its reason.
class ModuleStartError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// Which module serves which function, in start order.
struct ModuleSpec {
    std::string name;     // "hypervisor" -> libpvc-module-hypervisor.so
    std::string flag;     // "enable_hypervisor", or "" for fencing (loaded when installed)
    bool enabled;
};
std::vector<ModuleSpec> module_specs(const Config& cfg);

// The module directory: the config's module_directory, else the installed default.
std::filesystem::path module_directory(const Config& cfg);
std::filesystem::path module_file(const std::filesystem::path& dir, const std::string& name);

class ModuleHost {
public:
    ModuleHost(std::filesystem::path dir, Logger log) : dir_(std::move(dir)), log_(std::move(log)) {}
    ~ModuleHost();

    // Loads every enabled module (and fencing if installed). Throws
    // ModuleLoadError naming the module, the flag and the file if an enabled
    // module is missing, cannot be opened or has another ABI. Disabled
    // modules are never opened.
    void load(const Config& cfg);
    // Loads one module file (tests); throws ModuleLoadError.
    Module& load_file(const std::filesystem::path& file);

    std::vector<Module*> modules() const;
    // Each loaded module reads its keys (Module::configure) into `problems`;
    // returns the keys they add to the flat dictionary.
    nlohmann::json configure_all(const Config& cfg, ConfigProblems& problems);
    // Starts the loaded modules in order. A module whose start() throws is
    // logged by name and ModuleStartError is thrown; modules started before
    // it stay started (stop_all() stops them), it is never stop()ped.
    void start_all(const Config& cfg, const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> zk,
                   Executor& ex, CoreEvents& events, ServiceRegistry& services);
    void stop_all();  // reverse order, each exception logged

private:
    struct Loaded {
        boost::dll::shared_library library;  // declared first: destroyed after the module
        std::unique_ptr<Module> module;
        std::unique_ptr<NodeContext> context;
        bool started = false;
    };
    std::filesystem::path dir_;
    Logger log_;
    std::vector<Loaded> loaded_;
};

}  // namespace pvc
