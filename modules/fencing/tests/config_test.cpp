// The fencing keys of pvcnoded.yaml (modules/fencing/README.md "Configuration").
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "fencing.hpp"
#include "pvc/config.hpp"

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
    return pvc::HostIdentity::from_hostname("pvchv1.example.com");
}

std::vector<pvc::ConfigProblem> problems(const std::string& text) {
    try {
        pvc::parse_config(text, "t", host());
    } catch (const pvc::ConfigError& e) {
        return e.problems;
    }
    return {};
}

}  // namespace

TEST(FencingConfig, DefaultsAreTheReferences) {
    auto c = pvc::parse_config(with(""), "t", host());
    EXPECT_EQ(c.saving_throws, 6);
    EXPECT_TRUE(c.ipmitool_args.empty());
    EXPECT_EQ(c.ipmi_timeout, 15);
    auto s = pvc::fencing::settings_from(c);
    EXPECT_EQ(s.interval, std::chrono::seconds(2));
    EXPECT_TRUE(s.migrate_on_success);
    EXPECT_FALSE(s.migrate_on_failure);
    EXPECT_EQ(s.suicide_intervals, 4);
    EXPECT_EQ(s.coordinators, (std::vector<std::string>{"pvchv1", "pvchv2"}));
}

TEST(FencingConfig, OurKeysAreRead) {
    auto c = pvc::parse_config(with("      saving_throws: 0\n"), "t", host());
    EXPECT_EQ(c.saving_throws, 0);
    std::string text = with("");
    text.replace(text.find("        pass: x\n"), 16,
                 "        pass: x\n        timeout: 3\n        ipmitool_args: [\"-C\", \"3\"]\n");
    c = pvc::parse_config(text, "t", host());
    EXPECT_EQ(c.ipmi_timeout, 3);
    EXPECT_EQ(c.ipmitool_args, (std::vector<std::string>{"-C", "3"}));
}

TEST(FencingConfig, BadValuesAreReportedWithTheirPath) {
    auto p = problems(with("      saving_throws: -1\n"));
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].path, "pvc.system.fencing.saving_throws");
    std::string text = with("");
    text.replace(text.find("        pass: x\n"), 16, "        pass: x\n        timeout: 0\n        ipmitool_args: \"-C 3\"\n");
    p = problems(text);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[0].path, "pvc.system.fencing.ipmi.timeout");
    EXPECT_EQ(p[1].path, "pvc.system.fencing.ipmi.ipmitool_args");
}

TEST(FencingConfig, SampleCarriesTheKeys) {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    std::string sample((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (const char* key : {"saving_throws:", "ipmitool_args:", " timeout:"})
        EXPECT_NE(sample.find(key), std::string::npos) << key;
}
