// The fencing keys of pvcnoded.yaml (modules/fencing/README.md "Configuration"):
// read and validated by the module's configure, into the core's problem list.
#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

#include <gtest/gtest.h>

#include "fencing.hpp"
#include "config_reader.hpp"
#include "settings.hpp"

namespace {

const std::string base = R"(pvc:
  node: pvchv1
  functions:
    enable_hypervisor: false
    enable_networking: false
    enable_storage: false
    enable_api: false
  cluster:
    coordinators: [pvchv1, "pvchv2:2181"]
  system:
    intervals:
      keepalive_interval: 2
      fence_intervals: 3
      suicide_intervals: 4
    fencing:
      actions:
        successful_fence: migrate
        failed_fence: None
      ipmi:
        host: bmc1
        user: admin
        pass: x
FENCING_EXTRA    migration: {}
    configuration:
      directories:
        dynamic_directory: /run/pvc
        log_directory: /var/log/pvc
      logging: {}
)";

std::string with(const std::string& extra) {
    std::string s = base;
    s.replace(s.find("FENCING_EXTRA"), 13, extra);
    return s;
}

pvc::HostIdentity host() {
    return pvc::host_identity("pvchv1.example.com");
}

// What the daemon does: the core's keys, then the module's, into one list.
struct Read {
    pvc::Config config;
    pvc::fencing::Settings settings;
    std::vector<pvc::ConfigProblem> problems;
};

Read read(const std::string& text) {
    pvc::ConfigProblems problems;
    Read r;
    r.config = pvc::read_config(pvc::parse_config_tree(text, "t"), problems, host());
    r.settings = pvc::fencing::Settings::read(r.config, problems);
    r.problems = problems.sorted();
    return r;
}

int line_of(const std::string& text, const std::string& needle) {
    auto pos = text.find(needle);
    EXPECT_NE(pos, std::string::npos) << needle;
    return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<long>(pos), '\n'));
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
    auto pos = text.find(from);
    EXPECT_NE(pos, std::string::npos) << from;
    if (pos != std::string::npos) text.replace(pos, from.size(), to);
    return text;
}

std::string dump(const std::vector<pvc::ConfigProblem>& problems) {
    std::string out;
    for (const auto& p : problems) out += p.to_string("t") + "\n";
    return out;
}

std::set<std::string> keys_of(const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& [k, v] : j.items()) out.insert(k);
    return out;
}

std::string sample_text() {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST(FencingConfig, DefaultsAreTheReferences) {
    auto r = read(with(""));
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.saving_throws, 6);
    EXPECT_EQ(r.settings.ipmi_timeout, 15);
    EXPECT_EQ(r.settings.suicide_command, "systemctl reboot --force --force");
    EXPECT_EQ(r.settings.fence_intervals, 3);
    EXPECT_EQ(r.settings.suicide_intervals, 4);
    EXPECT_EQ(r.settings.successful_fence, "migrate");
    EXPECT_EQ(r.settings.failed_fence, "None");  // a string, as PyYAML reads it: no action
    EXPECT_TRUE(r.settings.ipmitool_args.empty());
    auto s = pvc::fencing::settings_from(r.config, r.settings);
    EXPECT_EQ(s.interval, std::chrono::seconds(2));
    EXPECT_EQ(s.saving_throws, 6);
    EXPECT_TRUE(s.migrate_on_success);
    EXPECT_FALSE(s.migrate_on_failure);
    EXPECT_EQ(s.suicide_intervals, 4);
    EXPECT_EQ(s.coordinators, (std::vector<std::string>{"pvchv1", "pvchv2"}));

    // Nothing written: the reference's defaults.
    std::string bare = replace(with(""), "      fence_intervals: 3\n      suicide_intervals: 4\n", "");
    bare = replace(bare, "        successful_fence: migrate\n        failed_fence: None\n", "");
    r = read(bare);
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.fence_intervals, 6);
    EXPECT_EQ(r.settings.suicide_intervals, 0);
    EXPECT_EQ(r.settings.successful_fence, "");
    EXPECT_EQ(r.settings.failed_fence, "");
}

TEST(FencingConfig, OurKeysAreRead) {
    auto r = read(with("      saving_throws: 0\n      suicide_command: \"/bin/true\"\n"));
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.saving_throws, 0);
    EXPECT_EQ(r.settings.suicide_command, "/bin/true");
    std::string text = replace(with(""), "        pass: x\n",
                               "        pass: x\n        timeout: 3\n        ipmitool_args: [\"-C\", \"3\"]\n");
    r = read(text);
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.ipmi_timeout, 3);
    // The extra arguments are the core's (its own IPMI check uses them too).
    EXPECT_EQ(r.settings.ipmitool_args, (std::vector<std::string>{"-C", "3"}));
}

// Every problem at once, the module's with the core's, each with its path and line.
TEST(FencingConfig, BadValuesAreReportedWithTheirPathAndLine) {
    std::string text = with("      saving_throws: -1\n      suicide_command: [reboot]\n");
    text = replace(text, "        pass: x\n", "        pass: x\n        timeout: 0\n        ipmitool_args: \"-C 3\"\n");
    text = replace(text, "      fence_intervals: 3\n      suicide_intervals: 4\n",
                   "      fence_intervals: 0\n      suicide_intervals: often\n");
    auto r = read(text);
    ASSERT_EQ(r.problems.size(), 6u) << dump(r.problems);
    auto expect = [&](std::size_t i, const char* path, const std::string& line_text, const char* message) {
        EXPECT_EQ(r.problems[i].path, path) << dump(r.problems);
        EXPECT_EQ(r.problems[i].line, line_of(text, line_text)) << path;
        EXPECT_NE(r.problems[i].message.find(message), std::string::npos) << r.problems[i].message;
    };
    expect(0, "pvc.system.intervals.fence_intervals", "fence_intervals: 0", "at least 1");
    expect(1, "pvc.system.intervals.suicide_intervals", "suicide_intervals: often", "integer");
    expect(2, "pvc.system.fencing.ipmi.timeout", "timeout: 0", "between 1 and 600");
    expect(3, "pvc.system.fencing.ipmi.ipmitool_args", "ipmitool_args", "list of ipmitool arguments");
    expect(4, "pvc.system.fencing.saving_throws", "saving_throws: -1", "between 0 and 1000");
    expect(5, "pvc.system.fencing.suicide_command", "suicide_command", "expected a string");
}

TEST(FencingConfig, IntervalsInBothPlacesMustAgree) {
    std::string agree = with("      intervals:\n        fence_intervals: 3\n");
    auto r = read(agree);
    EXPECT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.fence_intervals, 3);

    // Only under pvc.system.fencing (the seed's sample): taken from there.
    std::string only = replace(with("      intervals:\n        suicide_intervals: 2\n"), "      suicide_intervals: 4\n", "");
    r = read(only);
    EXPECT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.suicide_intervals, 2);

    std::string differ = with("      intervals:\n        fence_intervals: 5\n");
    r = read(differ);
    ASSERT_EQ(r.problems.size(), 1u) << dump(r.problems);
    EXPECT_EQ(r.problems[0].path, "pvc.system.fencing.intervals.fence_intervals");
    EXPECT_EQ(r.problems[0].line, line_of(differ, "fence_intervals: 5"));
    EXPECT_NE(r.problems[0].message.find("pvc.system.intervals.fence_intervals = 3 (line " +
                                         std::to_string(line_of(differ, "fence_intervals: 3")) + ")"),
              std::string::npos)
        << r.problems[0].message;
}

TEST(FencingConfig, TheActionsSectionIsRequired) {
    std::string text = replace(with(""), "      actions:\n        successful_fence: migrate\n        failed_fence: None\n", "");
    auto r = read(text);
    ASSERT_EQ(r.problems.size(), 1u) << dump(r.problems);
    EXPECT_EQ(r.problems[0].path, "pvc.system.fencing.actions");
    EXPECT_NE(r.problems[0].message.find("required section is missing"), std::string::npos);
}

// The reference's flat dictionary has fence_intervals, suicide_intervals,
// successful_fence, failed_fence and this node's BMC on every node: the
// module gives them (the core its own keys: tests/unit/config_test.cpp).
TEST(FencingConfig, TheModuleCompletesTheFlatDictionary) {
    auto sample = read(sample_text());
    ASSERT_TRUE(sample.problems.empty()) << dump(sample.problems);
    pvc::fencing::FencingModule module;
    pvc::ConfigProblems problems;
    module.configure(sample.config, problems);
    nlohmann::json keys = nlohmann::json::object();
    module.flat_keys(keys);
    const std::set<std::string> fencing_keys = {"fence_intervals", "suicide_intervals", "successful_fence",
                                                "failed_fence", "ipmi_hostname", "ipmi_username", "ipmi_password",
                                                "ipmitool_args"};
    EXPECT_EQ(keys_of(keys), fencing_keys);
    auto core_only = keys_of(pvc::flat_config(sample.config));
    for (const auto& k : fencing_keys) EXPECT_FALSE(core_only.count(k)) << k << " is the module's";
    sample.config.module_keys = keys;
    auto j = pvc::flat_config(sample.config);
    auto expected = core_only;
    expected.insert(fencing_keys.begin(), fencing_keys.end());
    EXPECT_EQ(keys_of(j), expected);
    // The reference's values and types.
    EXPECT_EQ(j["fence_intervals"], 6);
    EXPECT_EQ(j["suicide_intervals"], 0);
    EXPECT_EQ(j["successful_fence"], "migrate");
    EXPECT_EQ(j["failed_fence"], "None");
    EXPECT_EQ(j["ipmi_hostname"], "pvchv1-lom.example.com");
    EXPECT_EQ(j["ipmi_username"], "admin");
    EXPECT_EQ(j["ipmi_password"], "Passw0rd");
    EXPECT_EQ(j["ipmitool_args"], nlohmann::json::array());
    // The password is a secret the log masks.
    std::vector<std::string> secrets;
    module.secrets(secrets);
    EXPECT_EQ(secrets, std::vector<std::string>{"Passw0rd"});

    // Not written: None, and the reference's BMC defaults.
    nlohmann::json unset = nlohmann::json::object();
    pvc::fencing::Settings{}.flat_keys(unset);
    EXPECT_TRUE(unset["successful_fence"].is_null());
    EXPECT_TRUE(unset["failed_fence"].is_null());
    EXPECT_EQ(unset["fence_intervals"], 6);
    EXPECT_EQ(unset["suicide_intervals"], 0);
    EXPECT_EQ(unset["ipmi_username"], "null");
    EXPECT_EQ(unset["ipmi_password"], "null");
    EXPECT_EQ(unset["ipmitool_args"], nlohmann::json::array());
}

// This node's BMC (moved here from the core): the host defaults to
// <hostname>-lom[.<domain>] when not written or written empty; the ipmi
// section is required; a new node is registered with the three.
TEST(FencingConfig, OwnBmcKeys) {
    auto r = read(with(""));
    ASSERT_TRUE(r.problems.empty()) << dump(r.problems);
    EXPECT_EQ(r.settings.ipmi_hostname, "bmc1");
    EXPECT_EQ(r.settings.ipmi_username, "admin");
    EXPECT_EQ(r.settings.ipmi_password, "x");
    r = read(replace(with(""), "        host: bmc1\n", "        host: \"\"\n"));
    EXPECT_EQ(r.settings.ipmi_hostname, "pvchv1-lom.example.com");
    r = read(replace(with(""), "        host: bmc1\n        user: admin\n        pass: x\n", ""));
    EXPECT_EQ(r.settings.ipmi_username, "null");
    EXPECT_EQ(r.settings.ipmi_password, "null");
    EXPECT_EQ(r.settings.ipmi_hostname, "pvchv1-lom.example.com");

    std::string missing = replace(with(""), "      ipmi:\n        host: bmc1\n        user: admin\n        pass: x\n", "");
    r = read(missing);
    ASSERT_EQ(r.problems.size(), 1u) << dump(r.problems);
    EXPECT_EQ(r.problems[0].path, "pvc.system.fencing.ipmi");
    EXPECT_NE(r.problems[0].message.find("required section is missing"), std::string::npos);

    r = read(replace(with(""), "        user: admin\n", "        user: [admin]\n"));
    ASSERT_EQ(r.problems.size(), 1u) << dump(r.problems);
    EXPECT_EQ(r.problems[0].path, "pvc.system.fencing.ipmi.user");

    pvc::fencing::FencingModule module;
    pvc::ConfigProblems problems;
    module.configure(read(with("")).config, problems);
    std::vector<pvc::zk::KeyValue> values;
    module.registration(values);
    EXPECT_EQ(values, (std::vector<pvc::zk::KeyValue>{{"/nodes/pvchv1/ipmihostname", "bmc1"},
                                                      {"/nodes/pvchv1/ipmiusername", "admin"},
                                                      {"/nodes/pvchv1/ipmipassword", "x"}}));
}

TEST(FencingConfig, SampleCarriesTheKeys) {
    std::string sample = sample_text();
    for (const char* key : {"saving_throws:", "ipmitool_args:", " timeout:"})
        EXPECT_NE(sample.find(key), std::string::npos) << key;
}
