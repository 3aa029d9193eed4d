// ModuleHost: discovers the modules in module_directory from their own
// metadata, loads those whose function is on through Boost.DLL, and checks
// their ABI fingerprint (docs/sdk-guide.md §3). It names no module.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/shared_library.hpp>

#include "daemon/module_info.hpp"
#include "pvc/module.hpp"

namespace pvc {

// A module's start() threw; names the module and its reason.
class ModuleStartError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The module directory: the config's module_directory, else the installed default.
std::filesystem::path module_directory(const Config& cfg);

// What discover() found: every libpvc-module-*.so in the directory, readable
// ones in start order (then by name), and the files it could not read.
struct ModuleInventory {
    std::vector<ModuleInfo> modules;
    std::vector<std::string> unreadable;  // "file: reason"
};

// An "always" module this build of pvc ships, and what the node cannot do
// without it. The list is generated at build time from the modules' CMake
// declarations (pvc_add_module ... IF_ABSENT), so the core names none of them.
struct BundledModule {
    std::string name;
    std::string if_absent;  // "THIS NODE WILL NOT FENCE DEAD NODES"
};
const std::vector<BundledModule>& bundled_always_modules();

class ModuleHost {
public:
    ModuleHost(std::filesystem::path dir, Logger log, std::vector<BundledModule> bundled = bundled_always_modules())
        : dir_(std::move(dir)), log_(std::move(log)), bundled_(std::move(bundled)) {}
    ~ModuleHost();

    ModuleInventory discover() const;

    // Loads every module whose pvc.functions flag is on, and every "always"
    // one. Throws ModuleLoadError before any module runs when an enabled flag
    // has no module in the directory (naming the flag and the directory),
    // when two modules serve one flag, or when a required module cannot be
    // loaded (another ABI fingerprint: both named). An optional module that
    // cannot be loaded is a loud warning. Modules whose flag is off are never
    // opened. A bundled "always" module that is not installed, or cannot be
    // loaded, is a loud warning with what the node cannot do without it.
    void load(const Config& cfg);
    // Loads one module file after the same checks (tests); throws ModuleLoadError.
    Module& load_file(const std::filesystem::path& file);

    std::vector<Module*> modules() const;
    // Each loaded module reads its keys (Module::configure) into `problems`;
    // returns the keys they add to the flat dictionary.
    nlohmann::json configure_all(const Config& cfg, ConfigProblems& problems);
    // The loaded modules' secrets (Module::secrets), for the log to mask.
    std::vector<std::string> secrets() const;
    std::vector<ModuleInfo> loaded_info() const;
    // Each loaded module's host set-up before ZooKeeper (Module::prepare_host),
    // in start order; an exception is logged by module name and the next runs.
    void prepare_host_all(const Config& cfg, const std::shared_ptr<LogSink>& sink);
    // Starts the loaded modules in order. A module whose start() throws is
    // logged by name and ModuleStartError is thrown; modules started before
    // it stay started (stop_all() stops them), it is never stop()ped.
    void start_all(const Config& cfg, const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> zk,
                   Executor& ex, CoreEvents& events, ServiceRegistry& services);
    // Each started module's work to finish before the node lets go
    // (Module::drain_before_shutdown), in start order; an exception is logged
    // by module name and the next drains.
    void drain_all();
    void stop_all();  // reverse order, each exception logged

private:
    Module& load_module(const ModuleInfo& info);
    std::string if_absent(const std::string& name) const;  // " (<warning>)" for a bundled module, else ""

    struct Loaded {
        ModuleInfo info;
        boost::dll::shared_library library;  // declared before the module: destroyed after it
        std::unique_ptr<Module> module;
        std::unique_ptr<NodeContext> context;
        bool started = false;
    };
    std::filesystem::path dir_;
    Logger log_;
    std::vector<BundledModule> bundled_;
    std::vector<Loaded> loaded_;
};

}  // namespace pvc
