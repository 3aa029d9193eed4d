// pvcnoded.yaml loading and validation (docs/operations.md).
#include "pvc/config.hpp"

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
    return pvc::HostIdentity::from_hostname(fqdn);
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

// A networking configuration for one role set, used for address derivation.
std::string networking_config(const std::string& cluster_network, const std::string& cluster_floating,
                              const std::string& cluster_address) {
    std::string text = sample_text();
    text = replace(text, "network: \"10.255.0.0/24\"", "network: \"" + cluster_network + "\"");
    text = replace(text, "floating_ip: \"10.255.0.254/24\"", "floating_ip: \"" + cluster_floating + "\"");
    text = replace(text, "        cluster:\n          device: ens4\n          mtu: 1500\n          address: by-id",
                   "        cluster:\n          device: ens4\n          mtu: 1500\n          address: " +
                       cluster_address);
    return text;
}

std::string cluster_dev_ip(const std::string& fqdn, const std::string& network = "10.255.0.0/24",
                           const std::string& floating = "10.255.0.254/24", const std::string& address = "by-id") {
    auto c = pvc::parse_config(networking_config(network, floating, address), "test.yaml", host(fqdn));
    return c.cluster.dev_ip.value_or("<unset>");
}

// ---------------------------------------------------------------------------

TEST(HostIdentity, SplitsTheFqdnAndTakesTheLastRunOfDigits) {
    auto h = pvc::HostIdentity::from_hostname("pvchv3.cluster.example.com");
    EXPECT_EQ(h.fqdn, "pvchv3.cluster.example.com");
    EXPECT_EQ(h.hostname, "pvchv3");
    EXPECT_EQ(h.domain, "cluster.example.com");
    EXPECT_EQ(h.node_id, "3");
    EXPECT_EQ(pvc::HostIdentity::from_hostname("hv01").node_id, "01");
    EXPECT_EQ(pvc::HostIdentity::from_hostname("hv01").domain, "");
    EXPECT_EQ(pvc::HostIdentity::from_hostname("a2b7.x").node_id, "7");
    EXPECT_EQ(pvc::HostIdentity::from_hostname("node12").node_id, "12");
    EXPECT_EQ(pvc::HostIdentity::from_hostname("storage").node_id, "0");
    ASSERT_EQ(h.static_data.size(), 4u);
    EXPECT_GE(std::stoi(h.static_data[0]), 1);
    EXPECT_FALSE(h.static_data[1].empty());
}

TEST(HostIdentity, OfThisHostMatchesGethostname) {
    auto h = pvc::HostIdentity::of_this_host();
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
    EXPECT_EQ(c.cluster.dev_ip, "10.255.0.1/24");
    EXPECT_EQ(c.storage.dev_ip, "10.254.0.1/24");
    EXPECT_EQ(c.upstream.dev_ip, "192.0.2.1/24");
    EXPECT_EQ(c.cluster.domain, "pvc.local");
    EXPECT_EQ(c.upstream.gateway, "192.0.2.254");
    EXPECT_EQ(c.vm_shutdown_timeout, 180);
    EXPECT_EQ(c.keepalive_interval, 5);
    EXPECT_EQ(c.monitoring_interval, 60);
    EXPECT_EQ(c.plugin_timeout, 30);
    // The fence actions and intervals are the fencing module's
    // (modules/fencing/tests/config_test.cpp); this node's BMC is the core's.
    EXPECT_EQ(c.ipmi_hostname, "pvchv1-lom.example.com");
    EXPECT_EQ(c.ipmi_username, "admin");
    EXPECT_EQ(c.dns_database.port, 5432);
    EXPECT_EQ(c.metadata_database.name, "pvcapi");
    EXPECT_EQ(c.bridge_dev, "ens4");
    EXPECT_EQ(c.bridge_mtu, 1500);
    ASSERT_EQ(c.sriov_devices.size(), 1u);
    EXPECT_EQ(c.sriov_devices[0].phy, "ens1f1");
    EXPECT_EQ(c.sriov_devices[0].mtu, 9000);
    EXPECT_EQ(c.sriov_devices[0].vfcount, 8);
    EXPECT_EQ(c.ceph_config_file, "/etc/ceph/ceph.conf");
    EXPECT_EQ(c.console_log_lines, 1000);
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
    EXPECT_EQ(c.cluster.dev_ip, "10.255.0.4/24");
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

TEST(ConfigRequired, MissingFencingSubsectionsAndOthers) {
    std::string text = replace(minimal, "      ipmi: {}\n", "");
    text = replace(text, "    migration: {}\n", "");
    text = replace(text, "      logging: {}\n", "");
    text = replace(text, "  functions:", "  functionsx:");
    auto problems = problems_of(text);
    EXPECT_NE(find_problem(problems, "pvc.system.fencing.ipmi"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.migration"), nullptr) << dump(problems);
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

TEST(ConfigRequired, StorageSectionRequiredWithStorage) {
    std::string text = replace(minimal, "enable_storage: false", "enable_storage: true");
    auto problems = problems_of(text);
    const auto* p = find_problem(problems, "pvc.system.configuration.storage");
    ASSERT_NE(p, nullptr) << dump(problems);
    EXPECT_NE(p->message.find("enable_storage"), std::string::npos);
}

TEST(ConfigRequired, NetworkingKeysRequiredOnlyWithNetworking) {
    // Minimal has no networks at all and loads with networking off...
    EXPECT_NO_THROW(pvc::parse_config(minimal, "t", host()));
    // ...and is refused with it on, naming each missing section.
    std::string text = replace(minimal, "enable_networking: false", "enable_networking: true");
    auto problems = problems_of(text);
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.coordinator"), nullptr) << dump(problems);

    std::string sample = replace(sample_text(), "          device: ens4\n          mtu: 1500\n          address: by-id\n"
                                                "        # storage: This node's storage interface",
                                 "          mtu: 1500\n        # storage: This node's storage interface");
    problems = problems_of(sample);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.device"), nullptr)
        << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

TEST(ConfigTypes, StringWhereIntegerWanted) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: five");
    expect_problem(problems_of(text), "pvc.system.fencing.intervals.keepalive_interval",
                   line_of(text, "keepalive_interval: five"), "expected an integer");
}

TEST(ConfigTypes, BooleanWhereIntegerWanted) {
    std::string text = replace(sample_text(), "console_log_lines: 1000", "console_log_lines: false");
    expect_problem(problems_of(text), "pvc.system.configuration.logging.console_log_lines",
                   line_of(text, "console_log_lines: false"), "expected an integer");
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
    text = replace(text, "port: 5432\n        # name: Database name\n        name: pvcdns",
                   "port: 99999\n        # name: Database name\n        name: pvcdns");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.system.fencing.intervals.keepalive_interval", line_of(text, "keepalive_interval: 0"),
                   "at least 1");
    expect_problem(problems, "pvc.coordinator.dns.database.port", line_of(text, "port: 99999"), "between 1 and 65535");
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

TEST(ConfigNetworks, BadCidr) {
    std::string text = replace(sample_text(), "network: \"10.254.0.0/24\"", "network: \"10.254.0.0/33\"");
    text = replace(text, "network: \"192.0.2.0/24\"", "network: \"not-a-network\"");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.cluster.networks.storage.network", line_of(text, "10.254.0.0/33"), "prefix length");
    expect_problem(problems, "pvc.cluster.networks.upstream.network", line_of(text, "not-a-network"), "CIDR");
}

TEST(ConfigNetworks, HostBitsSetIsAnError) {
    std::string text = replace(sample_text(), "network: \"10.255.0.0/24\"", "network: \"10.255.0.1/24\"");
    expect_problem(problems_of(text), "pvc.cluster.networks.cluster.network", line_of(text, "10.255.0.1/24"),
                   "host bits are set");
}

TEST(ConfigNetworks, FloatingIpMustBeAUsableHostOfItsNetwork) {
    for (const char* bad : {"10.0.0.5/24", "10.255.0.0/24", "10.255.0.255/24", "bogus/24"}) {
        std::string text = replace(sample_text(), "floating_ip: \"10.255.0.254/24\"",
                                   std::string("floating_ip: \"") + bad + "\"");
        auto problems = problems_of(text);
        expect_problem(problems, "pvc.cluster.networks.cluster.floating_ip",
                       line_of(text, std::string("floating_ip: \"") + bad), "");
        ASSERT_EQ(problems.size(), 1u) << dump(problems);
    }
}

TEST(ConfigNetworks, ExplicitAddressMustBeAUsableHostWithPrefix) {
    EXPECT_EQ(cluster_dev_ip("pvchv1", "10.255.0.0/24", "10.255.0.254/24", "10.255.0.50/24"), "10.255.0.50/24");
    for (const char* bad : {"10.254.0.50/24", "10.255.0.50", "10.255.0.255/24"}) {
        auto problems = problems_of(networking_config("10.255.0.0/24", "10.255.0.254/24", bad));
        ASSERT_EQ(problems.size(), 1u) << bad << "\n" << dump(problems);
        EXPECT_EQ(problems[0].path, "pvc.system.configuration.networking.cluster.address");
    }
}

TEST(ConfigNetworks, ByIdDerivation) {
    EXPECT_EQ(cluster_dev_ip("pvchv1.example.com"), "10.255.0.1/24");
    EXPECT_EQ(cluster_dev_ip("hv12"), "10.255.0.12/24");
    EXPECT_EQ(cluster_dev_ip("hv01"), "10.255.0.1/24");
    // No digits: node id 0 gives the last usable address (the reference's quirk).
    EXPECT_EQ(cluster_dev_ip("storagebox"), "10.255.0.254/24");
    EXPECT_EQ(cluster_dev_ip("hv254"), "10.255.0.254/24");
    EXPECT_EQ(cluster_dev_ip("hv6", "10.255.0.0/29", "10.255.0.1/29"), "10.255.0.6/29");
}

TEST(ConfigNetworks, ByIdBeyondTheNetworkIsAnError) {
    auto problems = problems_of(networking_config("10.255.0.0/24", "10.255.0.254/24", "by-id"), host("hv255"));
    expect_problem(problems, "pvc.system.configuration.networking.cluster.address",
                   line_of(sample_text(), "        cluster:\n          device: ens4") + 3, "beyond");
    problems = problems_of(networking_config("10.255.0.0/29", "10.255.0.1/29", "by-id"),
                           host("hv99999999999999999999999999999999999999999"));
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

TEST(ConfigNetworks, Ipv6) {
    EXPECT_EQ(cluster_dev_ip("pvchv1", "fd00:10::/64", "fd00:10::fe/64"), "fd00:10::1/64");
    EXPECT_EQ(cluster_dev_ip("pvchv1", "fd00:10::/64", "fd00:10::fe/64", "fd00:10::2a/64"), "fd00:10::2a/64");
    auto problems = problems_of(networking_config("fd00:10::1/64", "fd00:10::fe/64", "by-id"));
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.network"), nullptr) << dump(problems);
    problems = problems_of(networking_config("fd00:10::/64", "fd00:11::fe/64", "fd00:12::1/64"));
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.floating_ip"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

TEST(ConfigSelector, UnknownSelectorIsAnErrorSayingWeAreStricter) {
    std::string text = replace(sample_text(), "target_selector: mem", "target_selector: fastest");
    auto problems = problems_of(text);
    expect_problem(problems, "pvc.system.migration.target_selector", line_of(text, "fastest"), "fastest");
    EXPECT_NE(problems[0].message.find("stricter"), std::string::npos);
    EXPECT_NE(problems[0].message.find("memprov"), std::string::npos);
}

TEST(ConfigSelector, EveryKnownSelectorAccepted) {
    for (const char* s : {"mem", "memprov", "load", "vcpus", "vms"}) {
        std::string text = replace(minimal, "    migration: {}", std::string("    migration: {target_selector: ") + s + "}");
        EXPECT_EQ(pvc::parse_config(text, "t", host()).migration_target_selector, s);
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
    EXPECT_EQ(c.ipmi_hostname, "pvchv2-lom.example.com");
    EXPECT_EQ(c.ipmi_username, "null");
    EXPECT_EQ(c.ipmi_password, "null");
    EXPECT_TRUE(c.ipmitool_args.empty());
    EXPECT_EQ(c.migration_target_selector, "mem");
    EXPECT_EQ(c.plugin_directory, "/usr/share/pvc/plugins");
    EXPECT_TRUE(c.module_directory.empty());
    EXPECT_FALSE(c.file_logging);
    EXPECT_FALSE(c.enable_sriov);
    EXPECT_FALSE(c.bridge_mtu.has_value());
    EXPECT_FALSE(c.cluster.dev_ip.has_value());
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("pvchv2")).ipmi_hostname, "pvchv2-lom");
}

// The hypervisor block is its module's (hypervisor settings_test).
TEST(ConfigOurs, ModuleDirectory) {
    std::string text = replace(minimal, "        log_directory: /var/log/pvc",
                               "        log_directory: /var/log/pvc\n        module_directory: /opt/mods");
    EXPECT_EQ(pvc::parse_config(text, "t", host()).module_directory, "/opt/mods");
}

// This node's BMC is the core's: it registers it, checks it at start (with
// the extra ipmitool arguments) and gives it to legacy plugins.
TEST(ConfigOurs, IpmitoolArgsAreAListOfStrings) {
    std::string text = replace(minimal, "      ipmi: {}", "      ipmi: {ipmitool_args: [\"-C\", \"3\"]}");
    EXPECT_EQ(pvc::parse_config(text, "t", host()).ipmitool_args, (std::vector<std::string>{"-C", "3"}));
    text = replace(minimal, "      ipmi: {}", "      ipmi: {ipmitool_args: \"-C 3\"}");
    expect_problem(problems_of(text), "pvc.system.fencing.ipmi.ipmitool_args", line_of(text, "ipmitool_args"),
                   "expected a list of ipmitool arguments");
}

// The fencing module's keys are not the core's: a bad value there is its
// module's to report (modules/fencing/tests/config_test.cpp), the core's
// reading accepts the file.
TEST(ConfigOurs, TheFencingModulesKeysAreNotReadByTheCore) {
    std::string text = replace(minimal, "      ipmi: {}",
                               "      ipmi: {timeout: 0}\n      saving_throws: -1\n      suicide_command: [1]");
    text = replace(text, "    intervals: {}", "    intervals: {fence_intervals: 0, suicide_intervals: x}");
    EXPECT_NO_THROW(pvc::parse_config(text, "t", host()));
}

TEST(ConfigProblems, SeveralReportedAtOnceInLineOrder) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: five");
    text = replace(text, "network: \"10.255.0.0/24\"", "network: \"10.255.0.1/24\"");
    text = replace(text, "target_selector: mem", "target_selector: fastest");
    text = replace(text, "  node: pvchv1\n", "  node: [pvchv1]\n");
    auto problems = problems_of(text);
    EXPECT_EQ(problems.size(), 4u) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.node"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.system.fencing.intervals.keepalive_interval"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.network"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.system.migration.target_selector"), nullptr);
    for (std::size_t i = 1; i < problems.size(); ++i) EXPECT_LE(problems[i - 1].line, problems[i].line);
    for (const auto& p : problems) EXPECT_GT(p.line, 0) << p.path;
}

TEST(ConfigProblems, SecretsNeverAppearInMessages) {
    std::string text = replace(sample_text(), "pass: Passw0rd", "pass: [Passw0rd]");
    text = replace(text, "pass: pvcdnsPassw0rd", "pass: {x: pvcdnsPassw0rd}");
    text = replace(text, "keepalive_interval: 5", "keepalive_interval: five");
    try {
        pvc::parse_config(text, "t", host());
        FAIL() << "accepted";
    } catch (const pvc::ConfigError& e) {
        std::string all = e.what();
        EXPECT_NE(find_problem(e.problems, "pvc.system.fencing.ipmi.pass"), nullptr) << all;
        EXPECT_NE(find_problem(e.problems, "pvc.coordinator.dns.database.pass"), nullptr) << all;
        EXPECT_EQ(all.find("Passw0rd"), std::string::npos) << all;
        EXPECT_EQ(all.find("pvcapiPassw0rd"), std::string::npos) << all;
    }
}

TEST(ConfigProblems, DuplicateKeyIsReported) {
    std::string text = replace(minimal, "  node: pvchv1\n", "  node: pvchv1\n  node: pvchv2\n");
    expect_problem(problems_of(text), "pvc.node", 3, "duplicate");
}

TEST(ConfigFlat, ReferenceNamesAndNaturalTypes) {
    auto c = pvc::parse_config(sample_text(), "t", host());
    auto j = c.flat();
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
    EXPECT_EQ(j["cluster_dev_ip"], "10.255.0.1/24");
    EXPECT_EQ(j["cluster_dev"], "ens4");
    EXPECT_EQ(j["cluster_mtu"], 1500);
    EXPECT_EQ(j["cluster_network"], "10.255.0.0/24");
    EXPECT_EQ(j["cluster_floating_ip"], "10.255.0.254/24");
    EXPECT_EQ(j["cluster_domain"], "pvc.local");
    EXPECT_EQ(j["upstream_gateway"], "192.0.2.254");
    EXPECT_EQ(j["storage_dev_ip"], "10.254.0.1/24");
    EXPECT_EQ(j["pdns_postgresql_host"], "localhost");
    EXPECT_EQ(j["pdns_postgresql_port"], 5432);
    EXPECT_EQ(j["pdns_postgresql_dbname"], "pvcdns");
    EXPECT_EQ(j["pdns_postgresql_user"], "pvcdns");
    EXPECT_EQ(j["pdns_postgresql_password"], "pvcdnsPassw0rd");
    EXPECT_EQ(j["metadata_postgresql_dbname"], "pvcapi");
    EXPECT_EQ(j["vm_shutdown_timeout"], 180);
    EXPECT_EQ(j["keepalive_interval"], 5);
    EXPECT_EQ(j["monitoring_interval"], 60);
    EXPECT_EQ(j["ipmi_hostname"], "pvchv1-lom.example.com");
    EXPECT_EQ(j["ipmi_username"], "admin");
    EXPECT_EQ(j["ipmi_password"], "Passw0rd");
    EXPECT_EQ(j["migration_target_selector"], "mem");
    EXPECT_EQ(j["plugin_directory"], "/usr/share/pvc/plugins");
    EXPECT_EQ(j["dynamic_directory"], "/run/pvc");
    EXPECT_EQ(j["log_directory"], "/var/log/pvc");
    EXPECT_EQ(j["console_log_directory"], "/var/log/libvirt");
    EXPECT_EQ(j["dnsmasq_dynamic_directory"], "/run/pvc/dnsmasq");
    EXPECT_EQ(j["pdns_dynamic_directory"], "/run/pvc/pdns");
    EXPECT_EQ(j["nft_dynamic_directory"], "/run/pvc/nft");
    EXPECT_EQ(j["dnsmasq_log_directory"], "/var/log/pvc/dnsmasq");
    EXPECT_EQ(j["pdns_log_directory"], "/var/log/pvc/pdns");
    EXPECT_EQ(j["nft_log_directory"], "/var/log/pvc/nft");
    EXPECT_EQ(j["file_logging"], true);
    EXPECT_EQ(j["log_keepalive_plugin_details"], true);
    EXPECT_EQ(j["console_log_lines"], 1000);
    EXPECT_EQ(j["node_log_lines"], 2000);
    EXPECT_EQ(j["bridge_dev"], "ens4");
    EXPECT_EQ(j["bridge_mtu"], 1500);
    EXPECT_EQ(j["enable_sriov"], false);
    EXPECT_EQ(j["sriov_device"], nlohmann::json::parse(R"([{"phy":"ens1f1","mtu":9000,"vfcount":8}])"));
    EXPECT_EQ(j["ceph_config_file"], "/etc/ceph/ceph.conf");
    EXPECT_EQ(j["ceph_admin_keyring"], "/etc/ceph/ceph.client.admin.keyring");
    ASSERT_TRUE(j["static_data"].is_array());
    EXPECT_EQ(j["static_data"].size(), 4u);
    EXPECT_TRUE(j["pvcnoded_version"].is_string());
    EXPECT_FALSE(j["pvcnoded_version"].get<std::string>().empty());
}

TEST(ConfigFlat, AbsentValuesAreNull) {
    auto c = pvc::parse_config(minimal, "t", host());
    auto j = c.flat();
    EXPECT_TRUE(j["console_log_directory"].is_null());
    EXPECT_EQ(j["monitoring_interval"], 5);  // a pass per keepalive
    EXPECT_EQ(j["ipmi_username"], "null");
    // Within an enabled group, an unset value is None.
    auto net = pvc::parse_config(replace(sample_text(), "        gateway: \"192.0.2.254\"\n", ""), "t", host()).flat();
    ASSERT_TRUE(net.contains("upstream_gateway"));
    EXPECT_TRUE(net["upstream_gateway"].is_null());
}

// The reference's dictionary, group by group (as the reference daemon builds it):
// keys every node has, and the keys enable_networking and enable_storage add.
const std::set<std::string> kGeneralKeys = {
    "node", "node_hostname", "node_fqdn", "node_domain", "node_id", "coordinators", "debug", "daemon_mode",
    "enable_hypervisor", "enable_networking", "enable_storage", "enable_api",
    "plugin_directory", "dynamic_directory", "log_directory", "console_log_directory",
    "dnsmasq_dynamic_directory", "pdns_dynamic_directory", "nft_dynamic_directory",
    "dnsmasq_log_directory", "pdns_log_directory", "nft_log_directory",
    "file_logging", "stdout_logging", "zookeeper_logging", "log_colours", "log_dates", "log_keepalives",
    "log_keepalive_cluster_details", "log_keepalive_plugin_details", "console_log_lines", "node_log_lines",
    "vm_shutdown_timeout", "keepalive_interval", "monitoring_interval", "fence_intervals", "suicide_intervals",
    "successful_fence", "failed_fence", "ipmi_hostname", "ipmi_username", "ipmi_password",
    "migration_target_selector", "static_data", "pvcnoded_version"};
// Of those, the fencing module's (its Module::flat_keys adds them; the whole
// dictionary with the module: modules/fencing/tests/config_test.cpp).
const std::set<std::string> kFencingModuleKeys = {"fence_intervals", "suicide_intervals", "successful_fence",
                                                  "failed_fence"};
// The general keys the core itself gives.
std::set<std::string> core_general_keys() {
    std::set<std::string> out;
    for (const auto& k : kGeneralKeys)
        if (!kFencingModuleKeys.count(k)) out.insert(k);
    return out;
}
const std::set<std::string> kNetworkingKeys = {
    "cluster_domain", "cluster_network", "cluster_floating_ip", "cluster_dev", "cluster_mtu", "cluster_dev_ip",
    "storage_domain", "storage_network", "storage_floating_ip", "storage_dev", "storage_mtu", "storage_dev_ip",
    "upstream_domain", "upstream_network", "upstream_floating_ip", "upstream_gateway", "upstream_dev",
    "upstream_mtu", "upstream_dev_ip", "bridge_dev", "bridge_mtu", "enable_sriov", "sriov_device",
    "pdns_postgresql_host", "pdns_postgresql_port", "pdns_postgresql_dbname", "pdns_postgresql_user",
    "pdns_postgresql_password", "metadata_postgresql_host", "metadata_postgresql_port",
    "metadata_postgresql_dbname", "metadata_postgresql_user", "metadata_postgresql_password"};
const std::set<std::string> kStorageKeys = {"ceph_config_file", "ceph_admin_keyring"};

std::set<std::string> keys_of(const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
}

// A key of a disabled function is absent (a legacy plugin reading it fails
// its run, as on a reference node), never None; and no key of our own. The
// core gives all but the fencing module's keys, which its flat_keys adds.
TEST(ConfigFlat, KeysAreExactlyTheReferencesForTheNodesFunctions) {
    for (bool networking : {false, true}) {
        for (bool storage : {false, true}) {
            for (bool hypervisor : {false, true}) {
                std::string text = sample_text();
                if (!networking) text = replace(text, "enable_networking: True", "enable_networking: False");
                if (!storage) text = replace(text, "enable_storage: True", "enable_storage: False");
                if (!hypervisor) text = replace(text, "enable_hypervisor: True", "enable_hypervisor: False");
                auto j = pvc::parse_config(text, "t", host()).flat();
                std::set<std::string> expected = core_general_keys();
                if (networking) expected.insert(kNetworkingKeys.begin(), kNetworkingKeys.end());
                if (storage) expected.insert(kStorageKeys.begin(), kStorageKeys.end());
                EXPECT_EQ(keys_of(j), expected)
                    << "networking " << networking << ", storage " << storage << ", hypervisor " << hypervisor;
                EXPECT_EQ(j["enable_networking"], networking);
                EXPECT_EQ(j["enable_storage"], storage);
            }
        }
    }
    // The minimal file (every function off): general keys only.
    EXPECT_EQ(keys_of(pvc::parse_config(minimal, "t", host()).flat()), core_general_keys());
}

// The loaded modules' keys (Config::module_keys, from Module::flat_keys) are
// part of the dictionary: with the fencing module's, it is the reference's.
TEST(ConfigFlat, TheModulesKeysAreAdded) {
    auto c = pvc::parse_config(minimal, "t", host());
    for (const auto& k : kFencingModuleKeys) c.module_keys[k] = "from the module";
    auto j = c.flat();
    EXPECT_EQ(keys_of(j), kGeneralKeys);
    EXPECT_EQ(j["successful_fence"], "from the module");
}

TEST(ConfigFlat, NodeIdIsTextOrTheIntegerZero) {
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("hv01.example.com")).flat()["node_id"], "01");
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("pvchv0.example.com")).flat()["node_id"], "0");
    // No digits: the reference's findall(...)[-1] raises and it falls back to 0.
    EXPECT_EQ(pvc::parse_config(minimal, "t", host("storage.example.com")).flat()["node_id"], 0);
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
