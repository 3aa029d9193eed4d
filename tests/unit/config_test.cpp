// pvcnoded.yaml loading and validation (docs/operations.md).
#include "config_reader.hpp"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

namespace {

std::string source_dir() {
#ifdef PVC_TEST_SOURCE_DIR
    return PVC_TEST_SOURCE_DIR;
#else
    const char* env = std::getenv("PVC_SOURCE_DIR");
    return env ? env : ".";
#endif
}

std::string sample_path() { return source_dir() + "/etc/pvcnoded.sample.yaml"; }

std::string sample_text() {
    std::ifstream in(sample_path());
    EXPECT_TRUE(in) << "cannot read " << sample_path();
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

pvc::HostIdentity host(const std::string& fqdn = "pvchv1.example.com") {
    return pvc::host_identity(fqdn);
}

// Replaces exactly one occurrence of `from` (the test fails otherwise).
std::string replace(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << "not in text: " << from;
    if (pos == std::string::npos) return text;
    EXPECT_EQ(text.find(from, pos + 1), std::string::npos) << "ambiguous: " << from;
    return text.replace(pos, from.size(), to);
}

// 1-based line of the first occurrence of `needle`.
int line_of(const std::string& text, const std::string& needle) {
    auto pos = text.find(needle);
    EXPECT_NE(pos, std::string::npos) << needle;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

std::vector<pvc::ConfigProblem> problems_of(const std::string& text, const pvc::HostIdentity& h = host()) {
    try {
        pvc::parse_config(text, "test.yaml", h);
    } catch (const pvc::ConfigError& e) {
        EXPECT_EQ(e.file, "test.yaml");
        return e.problems;
    }
    ADD_FAILURE() << "configuration was accepted";
    return {};
}

const pvc::ConfigProblem* find_problem(const std::vector<pvc::ConfigProblem>& problems, const std::string& path) {
    for (const auto& p : problems)
        if (p.path == path) return &p;
    return nullptr;
}

std::string dump(const std::vector<pvc::ConfigProblem>& problems) {
    std::string out;
    for (const auto& p : problems) out += p.to_string("test.yaml") + "\n";
    return out;
}

// The single problem expected for `path`, at `line`, with `fragment` in its message.
void expect_problem(const std::vector<pvc::ConfigProblem>& problems, const std::string& path, int line,
                    const std::string& fragment) {
    const auto* p = find_problem(problems, path);
    ASSERT_NE(p, nullptr) << "no problem for " << path << " in:\n" << dump(problems);
    EXPECT_EQ(p->line, line) << dump(problems);
    EXPECT_NE(p->message.find(fragment), std::string::npos) << p->message;
}

// A small valid configuration with networking, storage and hypervisor off.
const std::string minimal = R"(pvc:
  node: pvchv1
  functions:
    enable_hypervisor: false
    enable_networking: false
    enable_storage: false
    enable_api: false
  cluster:
    coordinators:
      - pvchv1
      - pvchv2
      - pvchv3
  system:
    intervals: {}
    fencing:
      actions: {}
      ipmi: {}
    migration: {}
    configuration:
      directories:
        dynamic_directory: /run/pvc
        log_directory: /var/log/pvc
      logging: {}
)";

// ---------------------------------------------------------------------------

TEST(HostIdentity, SplitsTheFqdnAndTakesTheLastRunOfDigits) {
    auto h = pvc::host_identity("pvchv3.cluster.example.com");
    EXPECT_EQ(h.fqdn, "pvchv3.cluster.example.com");
    EXPECT_EQ(h.hostname, "pvchv3");
    EXPECT_EQ(h.domain, "cluster.example.com");
    EXPECT_EQ(h.node_id, "3");
    EXPECT_EQ(pvc::host_identity("hv01").node_id, "01");
    EXPECT_EQ(pvc::host_identity("hv01").domain, "");
    EXPECT_EQ(pvc::host_identity("a2b7.x").node_id, "7");
    EXPECT_EQ(pvc::host_identity("node12").node_id, "12");
    EXPECT_EQ(pvc::host_identity("storage").node_id, "0");
    ASSERT_EQ(h.static_data.size(), 4u);
    EXPECT_GE(std::stoi(h.static_data[0]), 1);
    EXPECT_FALSE(h.static_data[1].empty());
}

TEST(HostIdentity, OfThisHostMatchesGethostname) {
    auto h = pvc::this_host_identity();
    EXPECT_FALSE(h.hostname.empty());
    EXPECT_EQ(h.hostname.find('.'), std::string::npos);
    EXPECT_EQ(h.fqdn.rfind(h.hostname, 0), 0u);
}

TEST(ConfigSample, ParsesForPvchv1) {
    auto c = pvc::parse_config(sample_text(), "sample", host());
    EXPECT_EQ(c.node, "pvchv1");
    EXPECT_EQ(c.daemon_mode, "coordinator");
    EXPECT_TRUE(c.enable_hypervisor);
    EXPECT_TRUE(c.enable_networking);
    EXPECT_TRUE(c.enable_storage);
    EXPECT_EQ(c.coordinators, (std::vector<std::string>{"pvchv1", "pvchv2", "pvchv3"}));
    EXPECT_EQ(c.zookeeper_hosts, "pvchv1:2181,pvchv2:2181,pvchv3:2181");
    EXPECT_EQ(c.vm_shutdown_timeout, 180);
    EXPECT_EQ(c.keepalive_interval, 5);
    EXPECT_EQ(c.monitoring_interval, 60);
    EXPECT_EQ(c.plugin_timeout, 30);
    // Every other key is a module's (its tests: modules/*/tests).
    EXPECT_EQ(c.node_log_lines, 2000);
    EXPECT_EQ(c.zookeeper_log_interval_ms, 1000);
    EXPECT_EQ(c.zookeeper_log_batch_ms, 60000);
    EXPECT_EQ(c.dynamic_directory, "/run/pvc");
}

TEST(ConfigSample, LoadsFromFileOnEveryCoordinatorAndAHypervisor) {
    for (const char* fqdn : {"pvchv1.example.com", "pvchv2.example.com", "pvchv3.example.com"}) {
        auto c = pvc::load_config(sample_path(), host(fqdn));
        EXPECT_EQ(c.daemon_mode, "coordinator") << fqdn;
    }
    auto c = pvc::load_config(sample_path(), host("pvchv4.example.com"));
    EXPECT_EQ(c.daemon_mode, "hypervisor");
}

TEST(ConfigLoad, UnreadableFileIsOneProblem) {
    try {
        pvc::load_config("/nonexistent/pvcnoded.yaml", host());
        FAIL() << "accepted a missing file";
    } catch (const pvc::ConfigError& e) {
        ASSERT_EQ(e.problems.size(), 1u);
        EXPECT_NE(e.problems[0].message.find("cannot read"), std::string::npos);
        EXPECT_EQ(e.file, "/nonexistent/pvcnoded.yaml");
    }
}

TEST(ConfigLoad, YamlSyntaxErrorIsOneProblemWithItsLine) {
    std::string text = "pvc:\n  node: pvchv1\n  functions: [unclosed\n  cluster: {}\n";
    auto problems = problems_of(text);
    ASSERT_EQ(problems.size(), 1u) << dump(problems);
    EXPECT_GE(problems[0].line, 3);
    EXPECT_NE(problems[0].message.find("YAML syntax error"), std::string::npos);
}

// Regressions of fuzzer findings (fuzz/corpus/config_yaml/crash_*): an alias
// inside the node it names recursed until the stack overflowed; aliases of
// aliases expanded exponentially. Each is now one problem, at once.
TEST(ConfigLoad, AliasInsideItsOwnAnchorIsOneProblem) {
    std::string text = "base: &base\n  enable_hypervisor: true\n  functions:\n    <<: *base\npvc:\n  node: hv1\n";
    auto problems = problems_of(text);
    ASSERT_EQ(problems.size(), 1u) << dump(problems);
    EXPECT_NE(problems[0].message.find("a YAML alias names a node that contains the alias"), std::string::npos)
        << dump(problems);
    EXPECT_GE(problems[0].line, 1) << dump(problems);  // the anchored node's line (an alias has no line of its own)
    auto list = problems_of("a: &a [1, *a]\n");
    ASSERT_EQ(list.size(), 1u) << dump(list);
    EXPECT_NE(list[0].message.find("contains the alias"), std::string::npos) << dump(list);
}

TEST(ConfigLoad, ExpansionAndDepthAreBounded) {
    // Nine levels of ten aliases each: 10^9 values once expanded.
    std::string text = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
    for (int i = 1; i < 10; ++i) {
        text += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
        for (int j = 0; j < 10; ++j) text += std::string(j ? ", " : "") + "*l" + std::to_string(i - 1);
        text += "]\n";
    }
    auto start = std::chrono::steady_clock::now();
    auto problems = problems_of(text);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    ASSERT_EQ(problems.size(), 1u) << dump(problems);
    EXPECT_NE(problems[0].message.find("more than 100000 values"), std::string::npos) << dump(problems);

    auto deep = problems_of("pvc: " + std::string(100, '[') + std::string(100, ']') + "\n");
    ASSERT_EQ(deep.size(), 1u) << dump(deep);
    EXPECT_NE(deep[0].message.find("nested deeper than 64 levels"), std::string::npos) << dump(deep);
    // 60 levels are read (and then refused only for what the keys say).
    for (const auto& p : problems_of("x: " + std::string(60, '[') + std::string(60, ']') + "\n"))
        EXPECT_EQ(p.message.find("YAML document refused"), std::string::npos) << p.message;
}

TEST(ConfigProblem, ToStringNamesFileLinePathAndMessage) {
    pvc::ConfigProblem p{"pvc.node", 12, "required key is missing"};
    EXPECT_EQ(p.to_string("/etc/pvc/pvcnoded.yaml"), "/etc/pvc/pvcnoded.yaml:12: pvc.node: required key is missing");
    pvc::ConfigProblem q{"", 0, "cannot read"};
    EXPECT_EQ(q.to_string("f"), "f: cannot read");
}

TEST(ConfigDefaults, MissingNodeIsTheShortHostname) {
    // pvc.node only names the log key; a reference configuration may leave it out.
    std::string text = replace(minimal, "  node: pvchv1\n", "");
    EXPECT_EQ(pvc::parse_config(text, "test.yaml", host("pvchv7.example.com")).node, "pvchv7");
    EXPECT_EQ(pvc::parse_config(minimal, "test.yaml", host("pvchv7.example.com")).node, "pvchv1");
}

TEST(ConfigRequired, NodeThatIsNotAStringIsNamed) {
    std::string text = replace(minimal, "  node: pvchv1\n", "  node: [a, b]\n");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.node", line_of(text, "node: [a"), "");
}

TEST(ConfigRequired, MissingPvcSection) {
    auto problems = problems_of("other: 1\n");
    expect_problem(problems, "pvc", 1, "required section");
}

TEST(ConfigRequired, MissingClusterSection) {
    std::string text = replace(minimal, "  cluster:", "  clusterx:");
    expect_problem(problems_of(text), "pvc.cluster", 1, "required section");
}

TEST(ConfigRequired, MissingFencingSection) {
    std::string text = replace(minimal, "    fencing:", "    fencingx:");
    expect_problem(problems_of(text), "pvc.system.fencing", line_of(minimal, "  system:"), "required section");
}

// pvc.system.fencing.ipmi and pvc.system.migration are their modules'
// sections (fencing, hypervisor): their tests require them.
TEST(ConfigRequired, MissingSectionsOfTheCore) {
    std::string text = replace(minimal, "      logging: {}\n", "");
    text = replace(text, "  functions:", "  functionsx:");
    auto problems = problems_of(text);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.logging"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.functions"), nullptr) << dump(problems);
}

TEST(ConfigRequired, IntervalsInNeitherPlace) {
    std::string text = replace(minimal, "    intervals: {}\n", "");
    expect_problem(problems_of(text), "pvc.system.intervals", line_of(minimal, "  system:"),
                   "pvc.system.fencing.intervals is also accepted");
}

TEST(ConfigRequired, CoordinatorsMissingOrEmpty) {
    std::string text = replace(minimal, "    coordinators:\n      - pvchv1\n      - pvchv2\n      - pvchv3\n",
                               "    coordinators: []\n");
    expect_problem(problems_of(text), "pvc.cluster.coordinators", line_of(text, "coordinators"), "at least one");
}

// The console keys the hypervisor requires are its module's check (hypervisor settings_test).
TEST(ConfigRequired, DirectoriesRequired) {
    std::string text = replace(minimal, "        log_directory: /var/log/pvc\n", "");
    text = replace(text, "enable_hypervisor: false", "enable_hypervisor: true");
    auto problems = problems_of(text);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.directories.log_directory"), nullptr)
        << dump(problems);
}

TEST(ConfigTypes, StringWhereIntegerWanted) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: five");
    expect_problem(problems_of(text), "pvc.system.fencing.intervals.keepalive_interval",
                   line_of(text, "keepalive_interval: five"), "expected an integer");
}

TEST(ConfigTypes, BooleanWhereIntegerWanted) {
    std::string text = replace(sample_text(), "node_log_lines: 2000", "node_log_lines: false");
    expect_problem(problems_of(text), "pvc.system.configuration.logging.node_log_lines",
                   line_of(text, "node_log_lines: false"), "expected an integer");
}

TEST(ConfigTypes, NonBooleanFlag) {
    std::string text = replace(sample_text(), "enable_api: True", "enable_api: \"True\"");
    text = replace(text, "log_dates: True", "log_dates: sometimes");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.functions.enable_api", line_of(text, "enable_api: \"True\""), "expected a boolean");
    expect_problem(problems, "pvc.system.configuration.logging.log_dates", line_of(text, "log_dates: sometimes"),
                   "expected a boolean");
}

TEST(ConfigTypes, YamlBooleanSpellingsAccepted) {
    std::string text = replace(minimal, "enable_api: false", "enable_api: yes");
    text = replace(text, "  node: pvchv1\n", "  node: pvchv1\n  debug: on\n");
    auto c = pvc::parse_config(text, "t", host());
    EXPECT_TRUE(c.enable_api);
    EXPECT_TRUE(c.debug);
}

TEST(ConfigTypes, MapWhereStringWanted) {
    std::string text = replace(minimal, "  node: pvchv1", "  node: {name: pvchv1}");
    expect_problem(problems_of(text), "pvc.node", 2, "expected a string");
}

TEST(ConfigTypes, RangeChecks) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: 0");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.system.fencing.intervals.keepalive_interval", line_of(text, "keepalive_interval: 0"),
                   "at least 1");
}

TEST(ConfigOurs, ZookeeperLogIntervalIsOptionalAndRangeChecked) {
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("pvchv2.example.com")).zookeeper_log_interval_ms, 1000);
    std::string zero = replace(sample_text(), "zookeeper_log_interval_ms: 1000", "zookeeper_log_interval_ms: 0");
    EXPECT_EQ(pvc::parse_config(zero, "t", host()).zookeeper_log_interval_ms, 0);
    for (const char* bad : {"-1", "60001", "fast"}) {
        std::string text = replace(sample_text(), "zookeeper_log_interval_ms: 1000",
                                   std::string("zookeeper_log_interval_ms: ") + bad);
        auto problems = problems_of(text);
        auto* p = find_problem(problems, "pvc.system.configuration.logging.zookeeper_log_interval_ms");
        ASSERT_NE(p, nullptr) << bad << "\n" << dump(problems);
        EXPECT_EQ(p->line, line_of(text, std::string("zookeeper_log_interval_ms: ") + bad));
    }
}

TEST(ConfigIntervals, AcceptedUnderSystem) {
    std::string text = replace(minimal, "    intervals: {}", "    intervals:\n      keepalive_interval: 2\n"
                                                            "      suicide_intervals: 4\n      plugin_timeout: 7");
    auto c = pvc::parse_config(text, "t", host());
    EXPECT_EQ(c.keepalive_interval, 2);
    EXPECT_EQ(c.plugin_timeout, 7);
}

TEST(ConfigIntervals, ConflictingValuesInBothPlacesNameBothPaths) {
    std::string text = replace(sample_text(), "  system:\n", "  system:\n    intervals:\n      keepalive_interval: 10\n");
    auto problems = problems_of(text);
    ASSERT_EQ(problems.size(), 1u) << dump(problems);
    EXPECT_EQ(problems[0].path, "pvc.system.fencing.intervals.keepalive_interval");
    EXPECT_EQ(problems[0].line, line_of(text, "keepalive_interval: 5"));
    EXPECT_NE(problems[0].message.find("pvc.system.intervals.keepalive_interval"), std::string::npos);
    EXPECT_NE(problems[0].message.find(std::to_string(line_of(text, "keepalive_interval: 10"))), std::string::npos);
}

TEST(ConfigIntervals, ConsistentValuesInBothPlacesAccepted) {
    std::string text = replace(sample_text(), "  system:\n",
                               "  system:\n    intervals:\n      keepalive_interval: 5\n      fence_intervals: 6\n"
                               "      suicide_intervals: 3\n");
    // suicide_intervals is 0 under fencing: that differs, so make it agree.
    text = replace(text, "suicide_intervals: 0", "suicide_intervals: 3");
    auto c = pvc::parse_config(text, "t", host());
    EXPECT_EQ(c.keepalive_interval, 5);
    EXPECT_EQ(c.vm_shutdown_timeout, 180);  // only under fencing: taken from there
}

TEST(ConfigCoordinators, HostPortEntriesAndConnectString) {
    std::string text = replace(minimal, "      - pvchv1\n      - pvchv2\n      - pvchv3\n",
                               "      - pvchv1:2281\n      - pvchv2\n      - pvchv3:3000\n");
    auto c = pvc::parse_config(text, "t", host("pvchv1.example.com"));
    EXPECT_EQ(c.zookeeper_hosts, "pvchv1:2281,pvchv2:2181,pvchv3:3000");
    EXPECT_EQ(c.coordinators, (std::vector<std::string>{"pvchv1:2281", "pvchv2", "pvchv3:3000"}));
    EXPECT_EQ(c.daemon_mode, "coordinator");
    EXPECT_EQ(pvc::parse_config(text, "t", host("pvchv3")).daemon_mode, "coordinator");
    EXPECT_EQ(pvc::parse_config(text, "t", host("pvchv4.example.com")).daemon_mode, "hypervisor");
    // The comparison is exact on the host part: "pvchv" is not "pvchv1".
    EXPECT_EQ(pvc::parse_config(text, "t", host("pvchv")).daemon_mode, "hypervisor");
}

TEST(ConfigCoordinators, BadPortIsAnError) {
    std::string text = replace(minimal, "      - pvchv2\n", "      - pvchv2:99999\n");
    expect_problem(problems_of(text), "pvc.cluster.coordinators[1]", line_of(text, "pvchv2:99999"), "host:port");
}

TEST(ConfigDefaults, MinimalConfig) {
    auto c = pvc::parse_config(minimal, "t", host("pvchv2.example.com"));
    EXPECT_EQ(c.daemon_mode, "coordinator");
    EXPECT_FALSE(c.debug);
    EXPECT_EQ(c.vm_shutdown_timeout, 60);
    EXPECT_EQ(c.keepalive_interval, 5);
    EXPECT_FALSE(c.monitoring_interval.has_value());
    EXPECT_EQ(c.plugin_timeout, 30);
    EXPECT_EQ(c.plugin_directory, "/usr/share/pvc/plugins");
    EXPECT_TRUE(c.module_directory.empty());
    EXPECT_FALSE(c.file_logging);
}

// The hypervisor block is its module's (hypervisor settings_test).
TEST(ConfigOurs, ZookeeperLogBatchIsOptionalAndRangeChecked) {
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("pvchv2.example.com")).zookeeper_log_batch_ms, 60000);
    std::string zero = replace(sample_text(), "zookeeper_log_batch_ms: 60000", "zookeeper_log_batch_ms: 0");
    EXPECT_EQ(pvc::parse_config(zero, "t", host()).zookeeper_log_batch_ms, 0);
    for (const char* bad : {"-1", "600001", "slow"}) {
        std::string text =
            replace(sample_text(), "zookeeper_log_batch_ms: 60000", std::string("zookeeper_log_batch_ms: ") + bad);
        auto problems = problems_of(text);
        auto* p = find_problem(problems, "pvc.system.configuration.logging.zookeeper_log_batch_ms");
        ASSERT_NE(p, nullptr) << bad << "\n" << dump(problems);
        EXPECT_EQ(p->line, line_of(text, std::string("zookeeper_log_batch_ms: ") + bad));
    }
}

TEST(ConfigOurs, ModuleDirectory) {
    std::string text = replace(minimal, "        log_directory: /var/log/pvc",
                               "        log_directory: /var/log/pvc\n        module_directory: /opt/mods");
    EXPECT_EQ(pvc::parse_config(text, "t", host()).module_directory, "/opt/mods");
}

// The modules' keys are not the core's: a bad value there is its module's to
// report (modules/*/tests), the core's reading accepts the file. The
// module-boundary test proves the core reads none of them.
TEST(ConfigOurs, TheModulesKeysAreNotReadByTheCore) {
    std::string text = replace(minimal, "      ipmi: {}",
                               "      ipmi: {timeout: 0, user: [1], ipmitool_args: \"-C 3\"}\n      saving_throws: -1\n"
                               "      suicide_command: [1]");
    text = replace(text, "    migration: {}", "    migration: {target_selector: fastest}");
    text = replace(text, "enable_networking: false", "enable_networking: true");
    text = replace(text, "enable_storage: false", "enable_storage: true");
    text = replace(text, "    intervals: {}", "    intervals: {fence_intervals: 0, suicide_intervals: x}");
    EXPECT_NO_THROW(pvc::parse_config(text, "t", host()));
}

TEST(ConfigProblems, SeveralReportedAtOnceInLineOrder) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: five");
    text = replace(text, "log_dates: True", "log_dates: sometimes");
    text = replace(text, "  node: pvchv1\n", "  node: [pvchv1]\n");
    auto problems = problems_of(text);
    EXPECT_EQ(problems.size(), 3u) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.node"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.system.fencing.intervals.keepalive_interval"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.logging.log_dates"), nullptr);
    for (std::size_t i = 1; i < problems.size(); ++i) EXPECT_LE(problems[i - 1].line, problems[i].line);
    for (const auto& p : problems) EXPECT_GT(p.line, 0) << p.path;
}

TEST(ConfigProblems, DuplicateKeyIsReported) {
    std::string text = replace(minimal, "  node: pvchv1\n", "  node: pvchv1\n  node: pvchv2\n");
    expect_problem(problems_of(text), "pvc.node", 3, "duplicate");
}

TEST(ConfigFlat, ReferenceNamesAndNaturalTypes) {
    auto c = pvc::parse_config(sample_text(), "t", host());
    auto j = pvc::flat_config(c);
    ASSERT_TRUE(j.is_object());
    EXPECT_EQ(j["node"], "pvchv1");
    EXPECT_EQ(j["node_hostname"], "pvchv1");
    EXPECT_EQ(j["node_fqdn"], "pvchv1.example.com");
    EXPECT_EQ(j["node_domain"], "example.com");
    EXPECT_EQ(j["node_id"], "1");
    EXPECT_EQ(j["debug"], false);
    EXPECT_EQ(j["daemon_mode"], "coordinator");
    EXPECT_EQ(j["enable_hypervisor"], true);
    EXPECT_EQ(j["coordinators"], nlohmann::json({"pvchv1", "pvchv2", "pvchv3"}));
    EXPECT_EQ(j["vm_shutdown_timeout"], 180);
    EXPECT_EQ(j["keepalive_interval"], 5);
    EXPECT_EQ(j["monitoring_interval"], 60);
    EXPECT_EQ(j["plugin_directory"], "/usr/share/pvc/plugins");
    EXPECT_EQ(j["dynamic_directory"], "/run/pvc");
    EXPECT_EQ(j["log_directory"], "/var/log/pvc");
    EXPECT_EQ(j["dnsmasq_dynamic_directory"], "/run/pvc/dnsmasq");
    EXPECT_EQ(j["pdns_dynamic_directory"], "/run/pvc/pdns");
    EXPECT_EQ(j["nft_dynamic_directory"], "/run/pvc/nft");
    EXPECT_EQ(j["dnsmasq_log_directory"], "/var/log/pvc/dnsmasq");
    EXPECT_EQ(j["pdns_log_directory"], "/var/log/pvc/pdns");
    EXPECT_EQ(j["nft_log_directory"], "/var/log/pvc/nft");
    EXPECT_EQ(j["file_logging"], true);
    EXPECT_EQ(j["log_keepalive_plugin_details"], true);
    EXPECT_EQ(j["node_log_lines"], 2000);
    ASSERT_TRUE(j["static_data"].is_array());
    EXPECT_EQ(j["static_data"].size(), 4u);
    EXPECT_TRUE(j["pvcnoded_version"].is_string());
    EXPECT_FALSE(j["pvcnoded_version"].get<std::string>().empty());
}

TEST(ConfigFlat, UnsetValuesAreTheReferencesDefaults) {
    auto j = pvc::flat_config(pvc::parse_config(minimal, "t", host()));
    EXPECT_EQ(j["monitoring_interval"], 5);  // a pass per keepalive
    EXPECT_EQ(j["vm_shutdown_timeout"], 60);
    EXPECT_EQ(j["file_logging"], false);
    EXPECT_EQ(j["node_log_lines"], 0);
}

// The reference's dictionary, group by group (as the reference daemon builds it),
// and who gives each key: the core its own settings, the modules theirs
// (Module::flat_keys; each module's tests check its keys, and
// tests/integration/flat_dictionary_test.cpp the whole with the real modules).
const std::set<std::string> kCoreKeys = {
    "node", "node_hostname", "node_fqdn", "node_domain", "node_id", "coordinators", "debug", "daemon_mode",
    "enable_hypervisor", "enable_networking", "enable_storage", "enable_api",
    "plugin_directory", "dynamic_directory", "log_directory",
    "dnsmasq_dynamic_directory", "pdns_dynamic_directory", "nft_dynamic_directory",
    "dnsmasq_log_directory", "pdns_log_directory", "nft_log_directory",
    "file_logging", "stdout_logging", "zookeeper_logging", "log_colours", "log_dates", "log_keepalives",
    "log_keepalive_cluster_details", "log_keepalive_plugin_details", "node_log_lines",
    "vm_shutdown_timeout", "keepalive_interval", "monitoring_interval", "static_data", "pvcnoded_version"};

std::set<std::string> keys_of(const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
}

// Whatever the functions, the core gives exactly its own keys: no key of a
// module (those come from the loaded modules) and no key of our own.
TEST(ConfigFlat, TheCoreGivesExactlyItsOwnKeys) {
    for (bool networking : {false, true}) {
        for (bool storage : {false, true}) {
            for (bool hypervisor : {false, true}) {
                std::string text = sample_text();
                if (!networking) text = replace(text, "enable_networking: True", "enable_networking: False");
                if (!storage) text = replace(text, "enable_storage: True", "enable_storage: False");
                if (!hypervisor) text = replace(text, "enable_hypervisor: True", "enable_hypervisor: False");
                auto j = pvc::flat_config(pvc::parse_config(text, "t", host()));
                EXPECT_EQ(keys_of(j), kCoreKeys)
                    << "networking " << networking << ", storage " << storage << ", hypervisor " << hypervisor;
                EXPECT_EQ(j["enable_networking"], networking);
                EXPECT_EQ(j["enable_storage"], storage);
            }
        }
    }
    EXPECT_EQ(keys_of(pvc::flat_config(pvc::parse_config(minimal, "t", host()))), kCoreKeys);
}

// The loaded modules' keys (Config::module_keys, from Module::flat_keys) are
// part of the dictionary.
TEST(ConfigFlat, TheModulesKeysAreAdded) {
    auto c = pvc::parse_config(minimal, "t", host());
    c.module_keys["successful_fence"] = "from the module";
    auto j = pvc::flat_config(c);
    auto expected = kCoreKeys;
    expected.insert("successful_fence");
    EXPECT_EQ(keys_of(j), expected);
    EXPECT_EQ(j["successful_fence"], "from the module");
}

TEST(ConfigFlat, NodeIdIsTextOrTheIntegerZero) {
    EXPECT_EQ(pvc::flat_config(pvc::parse_config(minimal, "t", host("hv01.example.com")))["node_id"], "01");
    EXPECT_EQ(pvc::flat_config(pvc::parse_config(minimal, "t", host("pvchv0.example.com")))["node_id"], "0");
    // No digits: the reference's findall(...)[-1] raises and it falls back to 0.
    EXPECT_EQ(pvc::flat_config(pvc::parse_config(minimal, "t", host("storage.example.com")))["node_id"], 0);
}

TEST(ConfigPath, CliThenEnvironmentThenDefault) {
    ::unsetenv("PVCD_CONFIG_FILE");
    EXPECT_EQ(pvc::config_path(std::nullopt), "/etc/pvc/pvcnoded.yaml");
    ::setenv("PVCD_CONFIG_FILE", "/srv/env.yaml", 1);
    EXPECT_EQ(pvc::config_path(std::nullopt), "/srv/env.yaml");
    EXPECT_EQ(pvc::config_path(std::string("/srv/cli.yaml")), "/srv/cli.yaml");
    ::unsetenv("PVCD_CONFIG_FILE");
}

}  // namespace
