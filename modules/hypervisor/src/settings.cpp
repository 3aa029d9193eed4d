#include "settings.hpp"

#include <fmt/format.h>

#include "pvc/strings.hpp"
#include "pvc/target.hpp"

namespace pvc::hv {

namespace {
constexpr const char* because = " (required when pvc.functions.enable_hypervisor is true)";

// The parent sections are the core's (it reports them missing or not a
// mapping); the module reads its keys in those that are mappings or written empty.
bool usable(const ConfigNode& section) { return section.is_map() || section.is_null(); }

// A key the hypervisor requires in a section the core reads.
ConfigNode required(const ConfigNode& section, std::string_view key, ConfigProblems& problems) {
    ConfigNode at = section.child(key, problems);
    if (!at.has_value()) problems.add(at, std::string("required key is missing") + because);
    return at;
}
}  // namespace

Settings Settings::read(const Config& config, ConfigProblems& problems) {
    Settings s;
    const ConfigNode& doc = config.document;
    ConfigNode system = doc.at("pvc.system");
    if (!usable(system)) return s;
    ConfigNode block = system.child("hypervisor", problems);
    if (block.section(problems)) {
        block.child("libvirt_uri", problems).read(problems, s.libvirt_uri);
        block.child("migration_uri", problems).read(problems, s.migration_uri);
        block.child("max_parallel_migrations", problems).read(problems, s.max_parallel_migrations, 1);
    }

    ConfigNode migration = system.child("migration", problems);
    if (migration.section(problems, "")) {
        ConfigNode sel = migration.child("target_selector", problems);
        if (auto v = sel.string(problems)) {
            std::vector<std::string> names(std::begin(target::selector_names), std::end(target::selector_names));
            if (!target::parse_selector(*v))
                problems.add(sel, fmt::format("unknown migration target selector '{}': expected one of {} (stricter "
                                              "than the reference, which accepts any word)",
                                              *v, join(names, ", ")));
            else
                s.migration_target_selector = *v;
        }
    }

    if (ConfigNode dirs = doc.at("pvc.system.configuration.directories"); usable(dirs)) {
        if (auto v = required(dirs, "console_log_directory", problems).string(problems)) s.console_log_directory = *v;
    }
    if (ConfigNode logging = doc.at("pvc.system.configuration.logging"); usable(logging))
        required(logging, "console_log_lines", problems).read(problems, s.console_log_lines, 0);

    // The network module's key: a problem with it is reported by that module
    // when networking is on, so only then not here.
    ConfigProblems domain_problems;
    if (auto v = doc.at("pvc.cluster.networks.cluster.domain").string(domain_problems)) s.cluster_domain = *v;
    if (!config.enable_networking)
        for (const auto& p : domain_problems.list()) problems.add(p.path, p.line, p.message);
    return s;
}

void Settings::flat_keys(nlohmann::json& j) const {
    j["migration_target_selector"] = migration_target_selector;
    j["console_log_directory"] =
        console_log_directory.empty() ? nlohmann::json(nullptr) : nlohmann::json(console_log_directory.string());
    j["console_log_lines"] = console_log_lines;
}

}  // namespace pvc::hv
