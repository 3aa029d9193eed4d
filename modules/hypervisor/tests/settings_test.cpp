// The hypervisor's own keys (Module::configure): read from the document the
// core built, problems with path and line in the shared list.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "config_reader.hpp"
#include "settings.hpp"

namespace pvc::hv {
namespace {

std::string sample_text() {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    return pos == std::string::npos ? text : text.replace(pos, from.size(), to);
}

int line_of(const std::string& text, const std::string& needle) {
    auto pos = text.find(needle);
    EXPECT_NE(pos, std::string::npos) << needle;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

struct Read {
    Config config;
    ConfigProblems problems;
    Settings settings;
};

Read read(const std::string& text) {
    Read r;
    r.config = read_config(parse_config_tree(text, "t"), r.problems, host_identity("pvchv1"));
    r.settings = Settings::read(r.config, r.problems);
    return r;
}

const ConfigProblem* find(const ConfigProblems& problems, const std::string& path) {
    for (const auto& p : problems.list())
        if (p.path == path) return &p;
    return nullptr;
}

TEST(HypervisorSettings, SampleValues) {
    auto r = read(sample_text());
    EXPECT_TRUE(r.problems.empty());
    EXPECT_EQ(r.settings.libvirt_uri, "qemu:///system");
    EXPECT_EQ(r.settings.max_parallel_migrations, 1);
}

TEST(HypervisorSettings, DefaultsWithoutTheBlock) {
    std::string text = sample_text();
    auto begin = text.find("    # hypervisor: libvirt connection details");
    auto end = text.find("\n    #", text.find("max_parallel_migrations:"));
    ASSERT_NE(begin, std::string::npos);
    ASSERT_NE(end, std::string::npos);
    text.erase(begin, end + 1 - begin);
    auto r = read(text);
    EXPECT_TRUE(r.problems.empty()) << r.problems.list().front().message;
    EXPECT_EQ(r.settings.libvirt_uri, "qemu:///system");
    EXPECT_EQ(r.settings.migration_uri, "qemu+tcp://{node}.{cluster_domain}/system");
    EXPECT_EQ(r.settings.max_parallel_migrations, 1);
}

// Our own keys: no legacy plugin knows them, so they stay out of the flat dictionary.
TEST(HypervisorSettings, ValuesNotInTheFlatDictionary) {
    std::string text = replace(sample_text(), "libvirt_uri: \"qemu:///system\"", "libvirt_uri: \"test:///default\"");
    text = replace(text, "max_parallel_migrations: 1", "max_parallel_migrations: 3");
    auto r = read(text);
    EXPECT_TRUE(r.problems.empty());
    EXPECT_EQ(r.settings.libvirt_uri, "test:///default");
    EXPECT_EQ(r.settings.max_parallel_migrations, 3);
    r.settings.flat_keys(r.config.module_keys);
    auto flat = flat_config(r.config);
    EXPECT_FALSE(flat.contains("libvirt_uri"));
    EXPECT_FALSE(flat.contains("max_parallel_migrations"));
}

// The reference's keys among the module's: the selector and the console log.
TEST(HypervisorSettings, ReferenceKeysInTheFlatDictionary) {
    auto r = read(sample_text());
    ASSERT_TRUE(r.problems.empty());
    nlohmann::json j = nlohmann::json::object();
    r.settings.flat_keys(j);
    EXPECT_EQ(j, nlohmann::json({{"migration_target_selector", "mem"},
                                 {"console_log_directory", "/var/log/libvirt"},
                                 {"console_log_lines", 1000}}));
    EXPECT_FALSE(flat_config(r.config).contains("migration_target_selector")) << "the core reads no module key";
}

TEST(HypervisorSettings, UnknownSelectorIsAnErrorSayingWeAreStricter) {
    std::string text = replace(sample_text(), "target_selector: mem", "target_selector: fastest");
    auto r = read(text);
    auto* p = find(r.problems, "pvc.system.migration.target_selector");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->line, line_of(text, "target_selector: fastest"));
    EXPECT_NE(p->message.find("expected one of mem, memprov, load, vcpus, vms"), std::string::npos) << p->message;
    EXPECT_NE(p->message.find("stricter than the reference"), std::string::npos) << p->message;
}

TEST(HypervisorSettings, EveryKnownSelectorAccepted) {
    for (const char* s : {"mem", "memprov", "load", "vcpus", "vms"}) {
        auto r = read(replace(sample_text(), "target_selector: mem", std::string("target_selector: ") + s));
        EXPECT_TRUE(r.problems.empty()) << s;
        EXPECT_EQ(r.settings.migration_target_selector, s);
    }
}

TEST(HypervisorSettings, MigrationSectionRequired) {
    std::string text = sample_text();
    auto at = text.find("\n    migration:");
    ASSERT_NE(at, std::string::npos);
    text.erase(at, text.find("target_selector: mem", at) + std::string("target_selector: mem").size() - at);
    auto r = read(text);
    auto* p = find(r.problems, "pvc.system.migration");
    ASSERT_NE(p, nullptr);
    EXPECT_NE(p->message.find("required section is missing"), std::string::npos) << p->message;
}

// migration_uri's {cluster_domain}: the network module's key, read as written.
TEST(HypervisorSettings, ClusterDomainForTheMigrationUri) {
    auto r = read(sample_text());
    EXPECT_EQ(r.settings.cluster_domain, "pvc.local");
}

TEST(HypervisorSettings, RangeAndTypeProblemsWithPathAndLine) {
    std::string text = replace(sample_text(), "max_parallel_migrations: 1", "max_parallel_migrations: 0");
    text = replace(text, "libvirt_uri: \"qemu:///system\"", "libvirt_uri: [a, b]");
    auto r = read(text);
    auto* p = find(r.problems, "pvc.system.hypervisor.max_parallel_migrations");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->line, line_of(text, "max_parallel_migrations: 0"));
    EXPECT_NE(p->message.find("at least 1"), std::string::npos) << p->message;
    p = find(r.problems, "pvc.system.hypervisor.libvirt_uri");
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->line, line_of(text, "libvirt_uri: [a, b]"));
    EXPECT_EQ(p->message, "expected a string");
}

TEST(HypervisorSettings, ConsoleKeysRequired) {
    std::string text = replace(sample_text(), "        console_log_lines: 1000\n", "");
    auto dir = text.find("\n        console_log_directory:");
    ASSERT_NE(dir, std::string::npos);
    text.erase(dir, text.find('\n', dir + 1) - dir);
    auto r = read(text);
    auto* p = find(r.problems, "pvc.system.configuration.directories.console_log_directory");
    ASSERT_NE(p, nullptr);
    EXPECT_NE(p->message.find("enable_hypervisor"), std::string::npos) << p->message;
    EXPECT_NE(find(r.problems, "pvc.system.configuration.logging.console_log_lines"), nullptr);
}

TEST(HypervisorSettings, DuplicateKeyInItsBlockReportedOnce) {
    std::string text = replace(sample_text(), "max_parallel_migrations: 1", "max_parallel_migrations: 1\n      max_parallel_migrations: 2");
    auto r = read(text);
    ASSERT_EQ(r.problems.size(), 1u);
    EXPECT_EQ(r.problems.list()[0].message, "duplicate key");
    EXPECT_EQ(r.settings.max_parallel_migrations, 1);
}

}  // namespace
}  // namespace pvc::hv
