#include "settings.hpp"

#include <climits>
#include <optional>
#include <utility>

#include <fmt/format.h>

namespace pvc::fencing {

namespace {

// The sections are the core's (it reports one missing or not a mapping); the
// module reads its keys in those that are mappings or written empty.
bool usable(const ConfigNode& section) { return section.is_map() || section.is_null(); }

// One interval of ours, under pvc.system.intervals and/or
// pvc.system.fencing.intervals; written in both places it must agree.
void read_interval(const ConfigNode& in_system, const ConfigNode& in_fencing, const char* key, long long min,
                   ConfigProblems& problems, int& out) {
    std::optional<long long> sys, fen;
    ConfigNode sys_at, fen_at;
    if (usable(in_system)) {
        sys_at = in_system.child(key, problems);
        sys = sys_at.integer(problems, min, INT_MAX);
    }
    if (usable(in_fencing)) {
        fen_at = in_fencing.child(key, problems);
        fen = fen_at.integer(problems, min, INT_MAX);
    }
    if (sys && fen && *sys != *fen)
        problems.add(fen_at, fmt::format("{} here conflicts with {} = {} (line {}); set it in one place", *fen,
                                         sys_at.path(), *sys, sys_at.line()));
    if (fen)
        out = static_cast<int>(*fen);
    else if (sys)
        out = static_cast<int>(*sys);
}

// pvc.system.fencing.ipmi: this node's BMC, the ipmitool deadline and arguments.
void read_ipmi(const ConfigNode& ipmi, ConfigProblems& problems, Settings& s) {
    if (ipmi.section(problems, "")) {
        ipmi.child("host", problems).read(problems, s.ipmi_hostname);
        ipmi.child("user", problems).read(problems, s.ipmi_username);
        ipmi.child("pass", problems).read(problems, s.ipmi_password);
        ipmi.child("timeout", problems).read(problems, s.ipmi_timeout, 1, 600);
        ConfigNode args = ipmi.child("ipmitool_args", problems);
        if (args.has_value() && !args.is_sequence()) {
            problems.add(args, "expected a list of ipmitool arguments, e.g. [\"-C\", \"3\"]");
        } else if (args.has_value()) {
            for (std::size_t i = 0; i < args.size(); ++i) {
                ConfigNode item = args.item(i);
                if (!item.is_scalar() || item.scalar().empty())
                    problems.add(item, "expected a non-empty string");
                else
                    s.ipmitool_args.push_back(item.scalar());
            }
        }
    }
}

}  // namespace

Settings Settings::read(const Config& config, ConfigProblems& problems) {
    Settings s = read_keys(config, problems);
    // Not written (or written empty): <hostname>-lom[.<domain>], as the reference.
    if (s.ipmi_hostname.empty()) {
        const HostIdentity& host = config.host;
        s.ipmi_hostname = host.domain.empty() ? host.hostname + "-lom" : host.hostname + "-lom." + host.domain;
    }
    return s;
}

Settings Settings::read_keys(const Config& config, ConfigProblems& problems) {
    Settings s;
    const ConfigNode& doc = config.document;
    ConfigNode system = doc.at("pvc.system");
    if (!usable(system)) return s;
    ConfigNode fencing = system.at("fencing");
    bool have_fencing = usable(fencing);

    ConfigNode in_system = system.at("intervals");
    ConfigNode in_fencing = have_fencing ? fencing.at("intervals") : ConfigNode();
    read_interval(in_system, in_fencing, "fence_intervals", 1, problems, s.fence_intervals);
    read_interval(in_system, in_fencing, "suicide_intervals", 0, problems, s.suicide_intervals);

    if (!have_fencing) return s;
    ConfigNode actions = fencing.child("actions", problems);
    if (actions.section(problems, "")) {
        actions.child("successful_fence", problems).read(problems, s.successful_fence);
        actions.child("failed_fence", problems).read(problems, s.failed_fence);
    }
    read_ipmi(fencing.child("ipmi", problems), problems, s);
    fencing.child("saving_throws", problems).read(problems, s.saving_throws, 0, 1000);
    fencing.child("suicide_command", problems).read(problems, s.suicide_command);
    return s;
}

void Settings::flat_keys(nlohmann::json& j) const {
    auto or_null = [](const std::string& v) { return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v); };
    j["fence_intervals"] = fence_intervals;
    j["suicide_intervals"] = suicide_intervals;
    j["successful_fence"] = or_null(successful_fence);
    j["failed_fence"] = or_null(failed_fence);
    j["ipmi_hostname"] = ipmi_hostname;
    j["ipmi_username"] = ipmi_username;
    j["ipmi_password"] = ipmi_password;
    // Ours: the extra ipmitool arguments, for the bundled ipmi plugin (a
    // reference plugin ignores the key).
    j["ipmitool_args"] = ipmitool_args;
}

}  // namespace pvc::fencing
