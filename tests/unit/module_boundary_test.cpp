// No module includes another module's files (issue 9.4): services between
// modules go through the core's registry and SDK headers only.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

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

}  // namespace
