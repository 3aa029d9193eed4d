// pvc.api in pvcnoded.yaml (settings.hpp): defaults, the reference's shape,
// every problem with its YAML path.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "config_reader.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "settings.hpp"

using namespace pvc;
using namespace pvc::api;

namespace {
struct Read {
    ApiSettings settings;
    ConfigProblems problems;
};
Read read(const std::string& api_block) {
    pvc::test::TempDir dir("pvc-api-settings");
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.base_dir = dir.path();
    std::string yaml = pvc::test::node_config_yaml(o);
    auto at = yaml.find("  cluster:\n");
    yaml.insert(at, api_block);
    Read r;
    ConfigNode doc = parse_config_tree(yaml, "test.yaml");
    Config c = read_config(doc, r.problems, host_identity("hv1"));
    r.settings = read_api_settings(c, r.problems);
    return r;
}
bool has_problem(const Read& r, const std::string& path) {
    for (const auto& p : r.problems.list())
        if (p.path == path) return true;
    return false;
}
}  // namespace

TEST(ApiSettings, WithoutABlockTheDefaultsHold) {
    auto r = read("");
    EXPECT_TRUE(r.problems.empty());
    EXPECT_EQ(r.settings.server.address, "127.0.0.1");
    EXPECT_EQ(r.settings.server.port, 7370);
    EXPECT_TRUE(r.settings.auth_enabled);
    EXPECT_FALSE(r.settings.server.tls);
}

TEST(ApiSettings, TheReferencesShapeIsRead) {
    auto r = read("  api:\n    listen_address: 0.0.0.0\n    listen_port: 7371\n    authentication:\n      enabled: true\n"
                  "      secret_key: abc\n      tokens:\n        - description: ops\n          token: t0k\n"
                  "    ssl:\n      enabled: true\n      cert_file: /c.pem\n      key_file: /k.pem\n"
                  "    limits:\n      max_connections: 10\n      request_timeout: 5\n");
    EXPECT_TRUE(r.problems.empty()) << r.problems.list()[0].message;
    EXPECT_EQ(r.settings.server.address, "0.0.0.0");
    EXPECT_EQ(r.settings.server.port, 7371);
    ASSERT_EQ(r.settings.tokens.size(), 1u);
    EXPECT_EQ(r.settings.tokens[0].token, "t0k");
    EXPECT_TRUE(r.settings.server.tls);
    EXPECT_EQ(r.settings.server.limits.connections, 10u);
    EXPECT_EQ(r.settings.server.limits.request_timeout, std::chrono::seconds(5));
}

TEST(ApiSettings, EveryProblemNamesItsKey) {
    auto r = read("  api:\n    listen_address: not-an-ip\n    listen_port: 70000\n    colour: red\n"
                  "    authentication:\n      tokens:\n        - description: empty\n          token: \"\"\n"
                  "    ssl:\n      enabled: true\n");
    EXPECT_TRUE(has_problem(r, "pvc.api.listen_address"));
    EXPECT_TRUE(has_problem(r, "pvc.api.listen_port"));
    EXPECT_TRUE(has_problem(r, "pvc.api.colour"));
    EXPECT_TRUE(has_problem(r, "pvc.api.authentication.tokens[0].token"));
    EXPECT_TRUE(has_problem(r, "pvc.api.ssl"));
    EXPECT_TRUE(r.settings.tokens.empty());
}

TEST(ApiSettings, TheSampleConfigurationsBlockIsValid) {
    std::ifstream in(std::string(PVC_TEST_SOURCE_DIR) + "/etc/pvcnoded.sample.yaml");
    std::stringstream text;
    text << in.rdbuf();
    ConfigProblems problems;
    ConfigNode doc = parse_config_tree(text.str(), "pvcnoded.sample.yaml");
    Config c = read_config(doc, problems, host_identity("pvchv1"));
    auto s = read_api_settings(c, problems);
    for (const auto& p : problems.list()) EXPECT_NE(p.path.rfind("pvc.api", 0), 0u) << p.path << ": " << p.message;
    EXPECT_EQ(s.server.address, "192.0.2.10");
    EXPECT_EQ(s.server.port, 7370);
    ASSERT_EQ(s.tokens.size(), 1u);
    EXPECT_EQ(s.server.limits.connections, 64u);
}

TEST(ApiSettings, TheLimitsPerClientAndTheBudgetsAreRead) {
    auto r = read("  api:\n    limits:\n      max_connections: 32\n      max_connections_per_client: 4\n"
                  "      max_requests_per_client: 2\n      header_timeout: 3\n      cpu_budget: 2\n      time_budget: 60\n");
    EXPECT_TRUE(r.problems.empty()) << r.problems.list()[0].message;
    const auto& l = r.settings.server.limits;
    EXPECT_EQ(l.connections_per_client, 4u);
    EXPECT_EQ(l.reserved_connections, 8u) << "a quarter of max_connections by default";
    EXPECT_EQ(l.workers_per_client, 2u);
    EXPECT_EQ(l.header_timeout, std::chrono::seconds(3));
    EXPECT_EQ(l.cpu_budget, std::chrono::seconds(2));
    EXPECT_EQ(l.time_budget, std::chrono::seconds(60));
    auto d = read("");
    EXPECT_EQ(d.settings.server.limits.connections_per_client, 16u);
    EXPECT_EQ(d.settings.server.limits.reserved_connections, 16u);
    EXPECT_EQ(d.settings.server.limits.cpu_budget, std::chrono::seconds(5));
    auto bad = read("  api:\n    limits:\n      max_connections: 8\n      reserved_connections: 8\n"
                    "      max_requests_per_client: 9\n");
    EXPECT_TRUE(has_problem(bad, "pvc.api.limits.reserved_connections"));
    EXPECT_TRUE(has_problem(bad, "pvc.api.limits.max_requests_per_client"));
}
