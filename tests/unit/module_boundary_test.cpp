// No module includes another module's files: services between modules go
// through the core's registry and SDK headers only. And the core parses no
// module's configuration key: each module reads its own.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include "config_reader.hpp"

namespace {

namespace fs = std::filesystem;

// "modules/<a>/<file>:<line>: includes <what> of module <b>" for every
// #include in modules/<a>/ that names a file of another module: a path
// through modules/<b>/ or ../<b>/, or a quoted header found only in <b>.
std::vector<std::string> violations(const fs::path& modules_dir) {
    std::map<std::string, std::set<std::string>> headers;  // module -> its header file names
    std::vector<std::string> modules;
    for (const auto& m : fs::directory_iterator(modules_dir)) {
        if (!m.is_directory()) continue;
        modules.push_back(m.path().filename().string());
        for (const auto& f : fs::recursive_directory_iterator(m.path()))
            if (f.is_regular_file()) headers[modules.back()].insert(f.path().filename().string());
    }
    static const std::regex include(R"(^\s*#\s*include\s*[<"]([^">]+)[">])");
    std::vector<std::string> out;
    for (const auto& a : modules) {
        for (const auto& f : fs::recursive_directory_iterator(modules_dir / a)) {
            auto ext = f.path().extension().string();
            if (!f.is_regular_file() || (ext != ".cpp" && ext != ".hpp" && ext != ".h")) continue;
            std::ifstream in(f.path());
            std::string line;
            for (int n = 1; std::getline(in, line); ++n) {
                std::smatch m;
                if (!std::regex_search(line, m, include)) continue;
                const std::string what = m[1];
                const std::string name = fs::path(what).filename().string();
                for (const auto& b : modules) {
                    if (b == a) continue;
                    bool by_path = what.find("modules/" + b + "/") != std::string::npos ||
                                   what.find("../" + b + "/") != std::string::npos;
                    bool by_name = headers[b].count(name) && !headers[a].count(name) &&
                                   what.rfind("pvc/", 0) != 0;
                    if (by_path || by_name)
                        out.push_back(fs::relative(f.path(), modules_dir.parent_path()).string() + ":" +
                                      std::to_string(n) + ": includes " + what + " of module " + b);
                }
            }
        }
    }
    return out;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += x + "\n";
    return s;
}

TEST(ModuleBoundary, NoModuleIncludesAnotherModulesFiles) {
    auto v = violations(fs::path(PVC_TEST_SOURCE_DIR) / "modules");
    EXPECT_TRUE(v.empty()) << join(v);
}

// The check itself finds both kinds of crossing.
TEST(ModuleBoundary, CheckFindsCrossIncludes) {
    auto root = fs::temp_directory_path() / ("pvc-boundary-" + std::to_string(::getpid()));
    fs::create_directories(root / "modules/alpha/src");
    fs::create_directories(root / "modules/beta/src");
    std::ofstream(root / "modules/beta/src/beta_only.hpp") << "#pragma once\n";
    std::ofstream(root / "modules/alpha/src/own.hpp") << "#pragma once\n";
    std::ofstream(root / "modules/alpha/src/a.cpp") << "#include \"own.hpp\"\n#include \"pvc/module.hpp\"\n"
                                                       "#include \"beta_only.hpp\"\n"
                                                       "#include \"../../beta/src/other.hpp\"\n";
    auto v = violations(root / "modules");
    fs::remove_all(root);
    ASSERT_EQ(v.size(), 2u) << join(v);
    EXPECT_NE(v[0].find("a.cpp:3: includes beta_only.hpp of module beta"), std::string::npos) << v[0];
    EXPECT_NE(v[1].find("a.cpp:4: includes ../../beta/src/other.hpp of module beta"), std::string::npos) << v[1];
}

// The core parses no module's key: given the sample configuration, which
// writes every key of every module (and the intervals in both places), the
// core's reader looks up none of the modules' keys, and only keys of its own
// (the list below: a key added to the core must be added here, a module's key
// never). Each module reads and validates its own (Module::configure).
const std::vector<std::string> kModuleKeys = {
    // network: the networks, this node's interfaces, bridge, SR-IOV, the databases
    "pvc.cluster.networks", "pvc.system.configuration.networking", "pvc.coordinator",
    // storage: the Ceph client files and ours
    "pvc.system.configuration.storage",
    // fencing: actions, this node's BMC, our keys, its two intervals in both places
    "pvc.system.fencing.actions", "pvc.system.fencing.ipmi", "pvc.system.fencing.saving_throws",
    "pvc.system.fencing.suicide_command", "pvc.system.intervals.fence_intervals",
    "pvc.system.intervals.suicide_intervals", "pvc.system.fencing.intervals.fence_intervals",
    "pvc.system.fencing.intervals.suicide_intervals",
    // hypervisor: the migration selector, its block, the console log
    "pvc.system.migration", "pvc.system.hypervisor", "pvc.system.configuration.directories.console_log_directory",
    "pvc.system.configuration.logging.console_log_lines",
    // api
    "pvc.api"};
const std::set<std::string> kCoreKeys = {
    "pvc", "pvc.node", "pvc.debug", "pvc.functions", "pvc.functions.enable_hypervisor",
    "pvc.functions.enable_networking", "pvc.functions.enable_storage", "pvc.functions.enable_api", "pvc.cluster",
    "pvc.cluster.coordinators", "pvc.system", "pvc.system.fencing", "pvc.system.intervals",
    "pvc.system.fencing.intervals", "pvc.system.configuration", "pvc.system.configuration.directories",
    "pvc.system.configuration.logging"};
const std::vector<std::string> kCoreLeaves = {
    "pvc.system.intervals.vm_shutdown_timeout", "pvc.system.intervals.keepalive_interval",
    "pvc.system.intervals.monitoring_interval", "pvc.system.intervals.plugin_timeout",
    "pvc.system.fencing.intervals.vm_shutdown_timeout", "pvc.system.fencing.intervals.keepalive_interval",
    "pvc.system.fencing.intervals.monitoring_interval", "pvc.system.fencing.intervals.plugin_timeout",
    "pvc.system.configuration.directories.plugin_directory", "pvc.system.configuration.directories.module_directory",
    "pvc.system.configuration.directories.dynamic_directory", "pvc.system.configuration.directories.log_directory",
    "pvc.system.configuration.logging.file_logging", "pvc.system.configuration.logging.stdout_logging",
    "pvc.system.configuration.logging.zookeeper_logging", "pvc.system.configuration.logging.log_colours",
    "pvc.system.configuration.logging.log_dates", "pvc.system.configuration.logging.log_keepalives",
    "pvc.system.configuration.logging.log_keepalive_cluster_details",
    "pvc.system.configuration.logging.log_keepalive_plugin_details",
    "pvc.system.configuration.logging.node_log_lines",
    "pvc.system.configuration.logging.zookeeper_log_interval_ms",
    "pvc.system.configuration.logging.zookeeper_log_batch_ms"};

bool under(const std::string& path, const std::string& key) {
    return path == key || path.rfind(key + ".", 0) == 0 || path.rfind(key + "[", 0) == 0;
}

// The keys the core's reader looks up in `text`, and those of them that are a module's.
std::set<std::string> core_reads(const std::string& text, std::vector<std::string>& module_keys_read) {
    std::set<std::string> read;
    pvc::ConfigProblems problems;
    pvc::read_config(pvc::parse_config_tree(text, "t"), problems, pvc::host_identity("pvchv1.example.com"), &read);
    for (const auto& path : read)
        for (const auto& key : kModuleKeys)
            if (under(path, key)) module_keys_read.push_back(path + " (" + key + ")");
    return read;
}

std::string sample_with_every_key() {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    // The intervals in both places (the sample has them under fencing only).
    auto at = text.find("\n  system:\n");
    EXPECT_NE(at, std::string::npos);
    text.insert(at + std::string("\n  system:\n").size(),
                "    intervals:\n      keepalive_interval: 5\n      fence_intervals: 6\n      suicide_intervals: 0\n");
    return text;
}

TEST(ModuleBoundary, TheCoreReadsNoModulesKey) {
    std::string text = sample_with_every_key();
    for (const auto& key : kModuleKeys) {
        // Every module key (or section) is written in the document the core reads.
        std::string leaf = key.substr(key.rfind('.') + 1) + ":";
        EXPECT_NE(text.find(leaf), std::string::npos) << key << " is not in the sample";
    }
    std::vector<std::string> module_keys_read;
    auto read = core_reads(text, module_keys_read);
    EXPECT_TRUE(module_keys_read.empty()) << "the core reads keys of a module:\n" << join(module_keys_read);
    std::set<std::string> allowed = kCoreKeys;
    allowed.insert(kCoreLeaves.begin(), kCoreLeaves.end());
    std::vector<std::string> unknown;
    for (const auto& path : read)
        if (!allowed.count(path)) unknown.push_back(path);
    EXPECT_TRUE(unknown.empty()) << "the core reads keys that are not the core's:\n" << join(unknown);
    // It does read its own: the check sees the reads.
    EXPECT_TRUE(read.count("pvc.system.configuration.logging.node_log_lines"));
    EXPECT_TRUE(read.count("pvc.system.intervals.keepalive_interval"));
}

// The check itself: a reader of a module's key is caught.
TEST(ModuleBoundary, TheCheckCatchesAModuleKeyRead) {
    std::vector<std::string> found;
    for (const std::string path : {"pvc.cluster.networks.cluster.domain", "pvc.system.fencing.ipmi",
                                   "pvc.system.configuration.logging.console_log_lines", "pvc.api.listen_port"}) {
        for (const auto& key : kModuleKeys)
            if (under(path, key)) found.push_back(path);
    }
    EXPECT_EQ(found.size(), 4u) << join(found);
    EXPECT_FALSE(under("pvc.system.configuration.logging.node_log_lines", "pvc.system.configuration.logging.console_log_lines"));
}

}  // namespace
