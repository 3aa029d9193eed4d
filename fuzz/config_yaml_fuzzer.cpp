// pvcnoded.yaml as an operator writes it (core/daemon/src/config*.cpp): the
// YAML reader, the core's keys with every problem reported (never an
// exception other than ConfigError), the flat dictionary legacy plugins
// see, and a walk over the whole tree as the modules read their keys (every
// node as a string, integer and boolean, which only add problems).
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "config_reader.hpp"
#include "pvc/config_tree.hpp"

namespace {

pvc::HostIdentity host() {
    pvc::HostIdentity h;
    h.fqdn = "hv1.example.com";
    h.hostname = "hv1";
    h.domain = "example.com";
    h.node_id = "1";
    h.static_data = {"4", "6.1.0-13-amd64", "GNU/Linux", "x86_64"};
    return h;
}

void walk(const pvc::ConfigNode& n, pvc::ConfigProblems& problems, int depth) {
    if (depth > 40) return;
    (void)n.path();
    (void)n.string(problems);
    (void)n.integer(problems, LLONG_MIN, LLONG_MAX);
    (void)n.boolean(problems);
    if (n.is_map())
        for (const auto& k : n.keys()) walk(n.child(k, problems), problems, depth + 1);
    if (n.is_sequence())
        for (std::size_t i = 0; i < n.size() && i < 64; ++i) walk(n.item(i), problems, depth + 1);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string text(reinterpret_cast<const char*>(data), size);
    const auto h = host();
    try {
        auto config = pvc::parse_config(text, "fuzz.yaml", h);
        (void)pvc::flat_config(config).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    } catch (const pvc::ConfigError& e) {
        if (e.problems.empty()) __builtin_trap();  // a refusal always says why
        for (const auto& p : e.problems) (void)p.to_string(e.file);
    }
    try {
        auto tree = pvc::parse_config_tree(text, "fuzz.yaml");
        pvc::ConfigProblems problems;
        walk(tree, problems, 0);
        for (const auto& p : problems.sorted()) (void)p.to_string("fuzz.yaml");
        (void)tree.at("pvc.system.configuration.directories.module_directory").exists();
    } catch (const pvc::ConfigError&) {
    }
    return 0;
}
