#include "settings.hpp"

namespace pvc::hv {

namespace {
constexpr const char* because = " (required when pvc.functions.enable_hypervisor is true)";

// A key the core reads (and type-checks) but the hypervisor requires.
void require(const ConfigNode& section, const ConfigNode& key, ConfigProblems& problems) {
    bool section_ok = section.exists() && (section.is_map() || section.is_null());
    if (section_ok && !key.has_value()) problems.add(key, std::string("required key is missing") + because);
}
}  // namespace

Settings Settings::read(const Config& config, ConfigProblems& problems) {
    Settings s;
    const ConfigNode& doc = config.document;
    ConfigNode block = doc.at("pvc.system").child("hypervisor", problems);
    if (block.section(problems)) {
        block.child("libvirt_uri", problems).read(problems, s.libvirt_uri);
        block.child("migration_uri", problems).read(problems, s.migration_uri);
        block.child("max_parallel_migrations", problems).read(problems, s.max_parallel_migrations, 1);
    }
    // Their values are the core's (the flat dictionary has them).
    require(doc.at("pvc.system.configuration.directories"),
            doc.at("pvc.system.configuration.directories.console_log_directory"), problems);
    require(doc.at("pvc.system.configuration.logging"), doc.at("pvc.system.configuration.logging.console_log_lines"),
            problems);
    return s;
}

}  // namespace pvc::hv
