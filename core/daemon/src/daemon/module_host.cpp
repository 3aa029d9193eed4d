#include "daemon/module_host.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include <boost/dll/import.hpp>
#include <fmt/format.h>

namespace pvc {

namespace {

constexpr std::string_view file_prefix = "libpvc-module-";
constexpr std::string_view file_suffix = ".so";

bool is_module_file(const std::filesystem::path& p) {
    std::string name = p.filename().string();
    return name.size() > file_prefix.size() + file_suffix.size() && name.starts_with(file_prefix) &&
           name.ends_with(file_suffix);
}

}  // namespace

std::filesystem::path module_directory(const Config& cfg) {
    if (!cfg.module_directory.empty()) return cfg.module_directory;
    return PVC_DEFAULT_MODULE_DIR;
}

ModuleHost::~ModuleHost() { stop_all(); }

ModuleInventory ModuleHost::discover() const {
    ModuleInventory out;
    std::error_code ec;
    std::vector<std::filesystem::path> files;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
        if (is_module_file(it->path())) files.push_back(it->path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
        try {
            out.modules.push_back(read_module_info(f));
        } catch (const ModuleLoadError& e) {
            out.unreadable.push_back(e.what());
        }
    }
    std::stable_sort(out.modules.begin(), out.modules.end(),
                     [](const ModuleInfo& a, const ModuleInfo& b) { return a.start_order < b.start_order; });
    return out;
}

Module& ModuleHost::load_module(const ModuleInfo& info) {
    const std::string file = info.file.string();
    // Checked before the library is opened: a module built against other
    // headers never runs its static initialisers in this process.
    if (info.abi != abi_fingerprint())
        throw ModuleLoadError("module '" + info.name + "' (" + file + ") has ABI fingerprint '" + info.abi +
                              "', this daemon requires '" + abi_fingerprint() +
                              "' (rebuild the module against this pvc SDK)");
    Loaded l;
    l.info = info;
    try {
        // RTLD_NODELETE: a module's code and static data stay mapped until the
        // process ends. Objects a module handed out (callbacks, shared
        // pointers held by the core or libraries) may be released during the
        // process's own teardown, after the module host is gone; unmapping the
        // library first turned those releases into crashes at exit.
        l.library.load(info.file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local |
                                      static_cast<boost::dll::load_mode::type>(RTLD_NODELETE));
    } catch (const std::exception& e) {
        throw ModuleLoadError("cannot open module '" + info.name + "' (" + file + "): " + e.what());
    }
    if (!l.library.has("pvc_module_create"))
        throw ModuleLoadError("module '" + info.name + "' (" + file + ") does not export pvc_module_create");
    auto& factory = l.library.get_alias<ModuleFactory>("pvc_module_create");
    try {
        l.module = factory();
    } catch (const std::exception& e) {
        throw ModuleLoadError("module '" + info.name + "' (" + file + ") failed to construct: " + e.what());
    }
    if (!l.module) throw ModuleLoadError("module '" + info.name + "' (" + file + ") returned no module object");
    loaded_.push_back(std::move(l));
    return *loaded_.back().module;
}

Module& ModuleHost::load_file(const std::filesystem::path& file) { return load_module(read_module_info(file)); }

void ModuleHost::load(const Config& cfg) {
    ModuleInventory found = discover();
    for (const auto& bad : found.unreadable) log_.error("Ignoring {}", bad);

    // Every check that can refuse the start comes before any module is opened.
    std::map<std::string, const ModuleInfo*> by_flag, by_name;
    for (const auto& m : found.modules) {
        if (auto [it, fresh] = by_name.emplace(m.name, &m); !fresh)
            throw ModuleLoadError("two modules are named '" + m.name + "': " + it->second->file.string() + " and " +
                                  m.file.string());
        if (m.always()) continue;
        if (auto [it, fresh] = by_flag.emplace(m.serves, &m); !fresh)
            throw ModuleLoadError("pvc.functions." + m.serves + " is served by two modules: " +
                                  it->second->file.string() + " and " + m.file.string());
    }
    for (const auto& [flag, on] : cfg.functions) {
        if (!on || by_flag.count(flag)) continue;
        std::string msg = "pvc.functions." + flag + " is on, but no module in " + dir_.string() + " serves " + flag +
                          " (install the module providing it, or turn the flag off)";
        for (const auto& bad : found.unreadable) msg += "; unreadable: " + bad;
        throw ModuleLoadError(msg);
    }

    for (const auto& m : found.modules) {
        if (!m.always() && !cfg.function_enabled(m.serves)) {
            log_.debug("Module {} not loaded: {} is off", m.name, m.serves);
            continue;
        }
        try {
            Module& loaded = load_module(m);
            log_.info("Loaded module {} {} ({}) from {}", loaded.name(), m.version, m.serves, m.file.string());
        } catch (const ModuleLoadError& e) {
            if (m.required) throw;
            log_.warn("OPTIONAL MODULE {} NOT LOADED, THIS NODE RUNS WITHOUT IT{}: {}", m.name, if_absent(m.name),
                      e.what());
        }
    }
    for (const auto& b : bundled_)
        if (!by_name.count(b.name))
            log_.warn("Module {} is not installed in {}: {}", b.name, dir_.string(), b.if_absent);
    std::string list;
    for (const auto& l : loaded_) list += (list.empty() ? "" : ", ") + l.info.name + " (" + l.info.serves + ")";
    log_.info("Modules loaded from {}: {}", dir_.string(), list.empty() ? "none" : list);
}

std::string ModuleHost::if_absent(const std::string& name) const {
    for (const auto& b : bundled_)
        if (b.name == name) return " (" + b.if_absent + ")";
    return "";
}

std::vector<Module*> ModuleHost::modules() const {
    std::vector<Module*> out;
    for (const auto& l : loaded_) out.push_back(l.module.get());
    return out;
}

std::vector<ModuleInfo> ModuleHost::loaded_info() const {
    std::vector<ModuleInfo> out;
    for (const auto& l : loaded_) out.push_back(l.info);
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

std::vector<std::string> ModuleHost::secrets() const {
    std::vector<std::string> out;
    for (const auto& l : loaded_) {
        try {
            l.module->secrets(out);
        } catch (const std::exception& e) {
            log_.error("Module {} failed to name its secrets: {}", l.module->name(), e.what());
        }
    }
    return out;
}

void ModuleHost::drain_all() {
    for (auto& l : loaded_) {
        if (!l.started) continue;
        try {
            l.module->drain_before_shutdown();
        } catch (const std::exception& e) {
            log_.error("Module {} failed to drain before shutdown: {}", l.module->name(), e.what());
        } catch (...) {
            log_.error("Module {} failed to drain before shutdown: unknown exception", l.module->name());
        }
    }
}

void ModuleHost::prepare_host_all(const Config& cfg, const std::shared_ptr<LogSink>& sink) {
    for (auto& l : loaded_) {
        const std::string name(l.module->name());
        try {
            l.module->prepare_host(cfg, Logger(sink, name));
        } catch (const std::exception& e) {
            log_.error("Module {} failed to prepare the host: {}", name, e.what());
        } catch (...) {
            log_.error("Module {} failed to prepare the host: unknown exception", name);
        }
    }
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
