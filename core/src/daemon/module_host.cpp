#include "daemon/module_host.hpp"

#include <boost/dll/import.hpp>
#include <boost/dll/shared_library.hpp>
#include <fmt/format.h>

namespace pvc {

std::vector<ModuleSpec> module_specs(const Config& cfg) {
    return {
        {"network", "enable_networking", cfg.enable_networking},
        {"storage", "enable_storage", cfg.enable_storage},
        {"hypervisor", "enable_hypervisor", cfg.enable_hypervisor},
        {"fencing", "", true},
        {"api", "enable_api", cfg.enable_api},
    };
}

std::filesystem::path module_directory(const Config& cfg) {
    if (!cfg.module_directory.empty()) return cfg.module_directory;
    return PVC_DEFAULT_MODULE_DIR;
}

std::filesystem::path module_file(const std::filesystem::path& dir, const std::string& name) {
    return dir / ("libpvc-module-" + name + ".so");
}

ModuleHost::~ModuleHost() { stop_all(); }

Module& ModuleHost::load_file(const std::filesystem::path& file) {
    Loaded l;
    try {
        l.library.load(file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    } catch (const std::exception& e) {
        throw ModuleLoadError("cannot open module " + file.string() + ": " + e.what());
    }
    if (!l.library.has("pvc_module_abi") || !l.library.has("pvc_module_create"))
        throw ModuleLoadError("module " + file.string() + " does not export pvc_module_abi and pvc_module_create");
    int abi = l.library.get<const int>("pvc_module_abi");
    if (abi != module_abi)
        throw ModuleLoadError("module " + file.string() + " has ABI " + std::to_string(abi) + ", this daemon needs ABI " +
                              std::to_string(module_abi) + " (rebuild the module against this pvc)");
    auto& factory = l.library.get_alias<ModuleFactory>("pvc_module_create");
    l.module = factory();
    if (!l.module) throw ModuleLoadError("module " + file.string() + " returned no module object");
    loaded_.push_back(std::move(l));
    return *loaded_.back().module;
}

void ModuleHost::load(const Config& cfg) {
    for (const auto& spec : module_specs(cfg)) {
        auto file = module_file(dir_, spec.name);
        if (!spec.enabled) {
            log_.debug("Module {} not loaded: {} is off", spec.name, spec.flag);
            continue;
        }
        if (spec.flag.empty() && !std::filesystem::exists(file)) {
            log_.warn("Fencing module not installed ({}): THIS NODE WILL NOT FENCE DEAD NODES", file.string());
            continue;
        }
        if (!std::filesystem::exists(file))
            throw ModuleLoadError("module '" + spec.name + "' needed by " + spec.flag + " is not installed at " +
                                  file.string());
        Module& m = load_file(file);
        log_.info("Loaded module {} from {}", m.name(), file.string());
    }
}

std::vector<Module*> ModuleHost::modules() const {
    std::vector<Module*> out;
    for (const auto& l : loaded_) out.push_back(l.module.get());
    return out;
}

nlohmann::json ModuleHost::configure_all(const Config& cfg, ConfigProblems& problems) {
    nlohmann::json keys = nlohmann::json::object();
    for (auto& l : loaded_) {
        try {
            l.module->configure(cfg, problems);
            l.module->flat_keys(keys);
        } catch (const std::exception& e) {
            problems.add("", 0, fmt::format("module {} failed to read its configuration: {}", l.module->name(), e.what()));
        }
    }
    return keys;
}

void ModuleHost::start_all(const Config& cfg, const std::shared_ptr<LogSink>& sink, std::shared_ptr<zk::Session> zk,
                           Executor& ex, CoreEvents& events, ServiceRegistry& services) {
    for (auto& l : loaded_) {
        l.context.reset(new NodeContext{cfg, Logger(sink, std::string(l.module->name())), zk, ex, events, services});
        const std::string name(l.module->name());
        log_.system("Starting module {}", name);
        std::string reason;
        try {
            l.module->start(*l.context);
            l.started = true;
            continue;
        } catch (const std::exception& e) {
            reason = e.what();
        } catch (...) {
            reason = "unknown exception";
        }
        log_.error("Module {} failed to start: {}", name, reason);
        throw ModuleStartError("module " + name + " failed to start: " + reason);
    }
}

void ModuleHost::stop_all() {
    for (auto it = loaded_.rbegin(); it != loaded_.rend(); ++it) {
        if (!it->started) continue;
        it->started = false;
        try {
            log_.system("Stopping module {}", it->module->name());
            it->module->stop();
        } catch (const std::exception& e) {
            log_.error("Module {} failed to stop cleanly: {}", it->module->name(), e.what());
        }
    }
}

}  // namespace pvc
