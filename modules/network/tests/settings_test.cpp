// The network module's keys of pvcnoded.yaml (Settings, read by its
// Module::configure): the networks with their address math, the bridge,
// SR-IOV and the coordinators' databases, required and validated only with
// enable_networking; problems with their YAML path and line, into the same
// list as the core's.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include "config_reader.hpp"
#include "network.hpp"
#include "settings.hpp"

namespace {

using pvc::network::Settings;

std::string sample_text() {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

pvc::HostIdentity host(const std::string& fqdn = "pvchv1.example.com") { return pvc::host_identity(fqdn); }

// Replaces exactly one occurrence of `from` (the test fails otherwise).
std::string replace(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << "not in text: " << from;
    if (pos == std::string::npos) return text;
    EXPECT_EQ(text.find(from, pos + 1), std::string::npos) << "ambiguous: " << from;
    return text.replace(pos, from.size(), to);
}

int line_of(const std::string& text, const std::string& needle) {
    auto pos = text.find(needle);
    EXPECT_NE(pos, std::string::npos) << needle;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

// What the daemon does: the core's keys, then the module's, into one list.
struct Read {
    pvc::Config config;
    Settings settings;
    std::vector<pvc::ConfigProblem> problems;
};

Read read(const std::string& text, const pvc::HostIdentity& h = host()) {
    pvc::ConfigProblems problems;
    Read r;
    r.config = pvc::read_config(pvc::parse_config_tree(text, "t"), problems, h);
    r.settings = Settings::read(r.config, problems);
    r.problems = problems.sorted();
    return r;
}

const pvc::ConfigProblem* find_problem(const std::vector<pvc::ConfigProblem>& problems, const std::string& path) {
    for (const auto& p : problems)
        if (p.path == path) return &p;
    return nullptr;
}

std::string dump(const std::vector<pvc::ConfigProblem>& problems) {
    std::string out;
    for (const auto& p : problems) out += p.to_string("t") + "\n";
    return out;
}

void expect_problem(const std::vector<pvc::ConfigProblem>& problems, const std::string& path, int line,
                    const std::string& fragment) {
    const auto* p = find_problem(problems, path);
    ASSERT_NE(p, nullptr) << "no problem for " << path << " in:\n" << dump(problems);
    EXPECT_EQ(p->line, line) << dump(problems);
    EXPECT_NE(p->message.find(fragment), std::string::npos) << p->message;
}

// A small valid configuration with every function off and no network keys.
const std::string minimal = R"(pvc:
  node: pvchv1
  functions:
    enable_hypervisor: false
    enable_networking: false
    enable_storage: false
    enable_api: false
  cluster:
    coordinators: [pvchv1, pvchv2, pvchv3]
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

// The sample with one role set's addresses replaced, for address derivation.
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
    auto r = read(networking_config(network, floating, address), host(fqdn));
    EXPECT_TRUE(r.problems.empty()) << dump(r.problems);
    return r.settings.cluster.dev_ip.value_or("<unset>");
}

std::set<std::string> keys_of(const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
}

}  // namespace

TEST(NetworkSettings, SampleValues) {
    auto r = read(sample_text());
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    const Settings& s = r.settings;
    EXPECT_EQ(s.cluster.dev_ip, "10.255.0.1/24");
    EXPECT_EQ(s.storage.dev_ip, "10.254.0.1/24");
    EXPECT_EQ(s.upstream.dev_ip, "192.0.2.1/24");
    EXPECT_EQ(s.cluster.domain, "pvc.local");
    EXPECT_EQ(s.upstream.gateway, "192.0.2.254");
    EXPECT_EQ(s.dns_database.port, 5432);
    EXPECT_EQ(s.metadata_database.name, "pvcapi");
    EXPECT_EQ(s.bridge_dev, "ens4");
    EXPECT_EQ(s.bridge_mtu, 1500);
    ASSERT_EQ(s.sriov_devices.size(), 1u);
    EXPECT_EQ(s.sriov_devices[0].phy, "ens1f1");
    EXPECT_EQ(s.sriov_devices[0].mtu, 9000);
    EXPECT_EQ(s.sriov_devices[0].vfcount, 8);
    // A hypervisor's address by id.
    EXPECT_EQ(read(sample_text(), host("pvchv4.example.com")).settings.cluster.dev_ip, "10.255.0.4/24");
}

TEST(NetworkSettings, KeysRequiredOnlyWithNetworking) {
    // Minimal has no networks at all and is valid with networking off...
    EXPECT_TRUE(read(minimal).problems.empty()) << dump(read(minimal).problems);
    // ...and is refused with it on, naming each missing section.
    auto problems = read(replace(minimal, "enable_networking: false", "enable_networking: true")).problems;
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.coordinator"), nullptr) << dump(problems);

    std::string sample = replace(sample_text(), "          device: ens4\n          mtu: 1500\n          address: by-id\n"
                                                "        # storage: This node's storage interface",
                                 "          mtu: 1500\n        # storage: This node's storage interface");
    problems = read(sample).problems;
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.device"), nullptr)
        << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

TEST(NetworkSettings, DatabasePortRangeChecked) {
    std::string text = replace(sample_text(), "port: 5432\n        # name: Database name\n        name: pvcdns",
                               "port: 99999\n        # name: Database name\n        name: pvcdns");
    expect_problem(read(text).problems, "pvc.coordinator.dns.database.port", line_of(text, "port: 99999"),
                   "between 1 and 65535");
}

TEST(NetworkSettings, BadCidr) {
    std::string text = replace(sample_text(), "network: \"10.254.0.0/24\"", "network: \"10.254.0.0/33\"");
    text = replace(text, "network: \"192.0.2.0/24\"", "network: \"not-a-network\"");
    auto problems = read(text).problems;
    expect_problem(problems, "pvc.cluster.networks.storage.network", line_of(text, "10.254.0.0/33"), "prefix length");
    expect_problem(problems, "pvc.cluster.networks.upstream.network", line_of(text, "not-a-network"), "CIDR");
}

TEST(NetworkSettings, HostBitsSetIsAnError) {
    std::string text = replace(sample_text(), "network: \"10.255.0.0/24\"", "network: \"10.255.0.1/24\"");
    expect_problem(read(text).problems, "pvc.cluster.networks.cluster.network", line_of(text, "10.255.0.1/24"),
                   "host bits are set");
}

TEST(NetworkSettings, FloatingIpMustBeAUsableHostOfItsNetwork) {
    for (const char* bad : {"10.0.0.5/24", "10.255.0.0/24", "10.255.0.255/24", "bogus/24"}) {
        std::string text = replace(sample_text(), "floating_ip: \"10.255.0.254/24\"",
                                   std::string("floating_ip: \"") + bad + "\"");
        auto problems = read(text).problems;
        expect_problem(problems, "pvc.cluster.networks.cluster.floating_ip",
                       line_of(text, std::string("floating_ip: \"") + bad), "");
        ASSERT_EQ(problems.size(), 1u) << dump(problems);
    }
}

TEST(NetworkSettings, ExplicitAddressMustBeAUsableHostWithPrefix) {
    EXPECT_EQ(cluster_dev_ip("pvchv1", "10.255.0.0/24", "10.255.0.254/24", "10.255.0.50/24"), "10.255.0.50/24");
    for (const char* bad : {"10.254.0.50/24", "10.255.0.50", "10.255.0.255/24"}) {
        auto problems = read(networking_config("10.255.0.0/24", "10.255.0.254/24", bad)).problems;
        ASSERT_EQ(problems.size(), 1u) << bad << "\n" << dump(problems);
        EXPECT_EQ(problems[0].path, "pvc.system.configuration.networking.cluster.address");
    }
}

TEST(NetworkSettings, ByIdDerivation) {
    EXPECT_EQ(cluster_dev_ip("pvchv1.example.com"), "10.255.0.1/24");
    EXPECT_EQ(cluster_dev_ip("hv12"), "10.255.0.12/24");
    EXPECT_EQ(cluster_dev_ip("hv01"), "10.255.0.1/24");
    // No digits: node id 0 gives the last usable address (the reference's quirk).
    EXPECT_EQ(cluster_dev_ip("storagebox"), "10.255.0.254/24");
    EXPECT_EQ(cluster_dev_ip("hv254"), "10.255.0.254/24");
    EXPECT_EQ(cluster_dev_ip("hv6", "10.255.0.0/29", "10.255.0.1/29"), "10.255.0.6/29");
}

TEST(NetworkSettings, ByIdBeyondTheNetworkIsAnError) {
    auto problems = read(networking_config("10.255.0.0/24", "10.255.0.254/24", "by-id"), host("hv255")).problems;
    expect_problem(problems, "pvc.system.configuration.networking.cluster.address",
                   line_of(sample_text(), "        cluster:\n          device: ens4") + 3, "beyond");
    problems = read(networking_config("10.255.0.0/29", "10.255.0.1/29", "by-id"),
                    host("hv99999999999999999999999999999999999999999"))
                   .problems;
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

TEST(NetworkSettings, Ipv6) {
    EXPECT_EQ(cluster_dev_ip("pvchv1", "fd00:10::/64", "fd00:10::fe/64"), "fd00:10::1/64");
    EXPECT_EQ(cluster_dev_ip("pvchv1", "fd00:10::/64", "fd00:10::fe/64", "fd00:10::2a/64"), "fd00:10::2a/64");
    auto problems = read(networking_config("fd00:10::1/64", "fd00:10::fe/64", "by-id")).problems;
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.network"), nullptr) << dump(problems);
    problems = read(networking_config("fd00:10::/64", "fd00:11::fe/64", "fd00:12::1/64")).problems;
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.floating_ip"), nullptr) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.system.configuration.networking.cluster.address"), nullptr)
        << dump(problems);
}

// Every problem at once, the core's and the module's, in line order.
TEST(NetworkSettings, ProblemsJoinTheCoresInLineOrder) {
    std::string text = replace(sample_text(), "keepalive_interval: 5", "keepalive_interval: five");
    text = replace(text, "network: \"10.255.0.0/24\"", "network: \"10.255.0.1/24\"");
    text = replace(text, "  node: pvchv1\n", "  node: [pvchv1]\n");
    auto problems = read(text).problems;
    EXPECT_EQ(problems.size(), 3u) << dump(problems);
    EXPECT_NE(find_problem(problems, "pvc.node"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.system.fencing.intervals.keepalive_interval"), nullptr);
    EXPECT_NE(find_problem(problems, "pvc.cluster.networks.cluster.network"), nullptr);
    for (std::size_t i = 1; i < problems.size(); ++i) EXPECT_LE(problems[i - 1].line, problems[i].line);
}

// The passwords are never echoed in a problem, and the module names them as
// secrets for the log to mask.
TEST(NetworkSettings, DatabasePasswordsAreSecrets) {
    std::string text = replace(sample_text(), "pass: pvcdnsPassw0rd", "pass: {x: pvcdnsPassw0rd}");
    auto problems = read(text).problems;
    ASSERT_NE(find_problem(problems, "pvc.coordinator.dns.database.pass"), nullptr) << dump(problems);
    EXPECT_EQ(dump(problems).find("pvcdnsPassw0rd"), std::string::npos);

    auto r = read(sample_text());
    pvc::network::NetworkModule module;
    pvc::ConfigProblems p;
    module.configure(r.config, p);
    std::vector<std::string> secrets;
    module.secrets(secrets);
    EXPECT_EQ(secrets, (std::vector<std::string>{"pvcdnsPassw0rd", "pvcapiPassw0rd"}));
}

// The reference's networking group of the flat dictionary, names and natural types.
TEST(NetworkSettings, FlatKeysAreTheReferencesNetworkingGroup) {
    auto r = read(sample_text());
    nlohmann::json j = nlohmann::json::object();
    r.settings.flat_keys(j);
    const std::set<std::string> expected = {
        "cluster_domain", "cluster_network", "cluster_floating_ip", "cluster_dev", "cluster_mtu", "cluster_dev_ip",
        "storage_domain", "storage_network", "storage_floating_ip", "storage_dev", "storage_mtu", "storage_dev_ip",
        "upstream_domain", "upstream_network", "upstream_floating_ip", "upstream_gateway", "upstream_dev",
        "upstream_mtu", "upstream_dev_ip", "bridge_dev", "bridge_mtu", "enable_sriov", "sriov_device",
        "pdns_postgresql_host", "pdns_postgresql_port", "pdns_postgresql_dbname", "pdns_postgresql_user",
        "pdns_postgresql_password", "metadata_postgresql_host", "metadata_postgresql_port",
        "metadata_postgresql_dbname", "metadata_postgresql_user", "metadata_postgresql_password"};
    EXPECT_EQ(keys_of(j), expected);
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
    EXPECT_EQ(j["bridge_dev"], "ens4");
    EXPECT_EQ(j["bridge_mtu"], 1500);
    EXPECT_EQ(j["enable_sriov"], false);
    EXPECT_EQ(j["sriov_device"], nlohmann::json::parse(R"([{"phy":"ens1f1","mtu":9000,"vfcount":8}])"));

    // Within the group, an unset value is None.
    auto net = read(replace(sample_text(), "        gateway: \"192.0.2.254\"\n", ""));
    nlohmann::json k = nlohmann::json::object();
    net.settings.flat_keys(k);
    ASSERT_TRUE(k.contains("upstream_gateway"));
    EXPECT_TRUE(k["upstream_gateway"].is_null());
}
