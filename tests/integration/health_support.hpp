// Shared fixture of the health host tests: a real ZooKeeper, a temp plugin
// directory, a Config parsed from YAML with a host identity override, a file
// log sink the tests read back.
#pragma once

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "daemon/module_host.hpp"
#include "health/health_host.hpp"
#include "config_reader.hpp"
#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace pvc::test {

struct HealthOptions {
    std::string node;
    std::string coordinators;        // YAML list text; default: [127.0.0.1:<zk port>]
    int keepalive_interval = 1;
    std::optional<int> monitoring_interval;
    // Deadline of a plugin run: 2 s, scaled on sanitizer builds (timing.hpp)
    // where the plugins themselves run slower; tests of the deadline set it.
    int plugin_timeout = static_cast<int>(std::ceil(2 * time_scale()));
    std::string ipmi_host = "127.0.0.1";
    // enable_networking with these core devices (networking.bridge_device and
    // the upstream/cluster/storage devices); networking off when unset.
    struct Devices {
        std::string bridge, upstream, cluster, storage;
    };
    std::optional<Devices> networking;

    HealthOptions& with_node(std::string v) { node = std::move(v); return *this; }
    HealthOptions& with_coordinators(std::string v) { coordinators = std::move(v); return *this; }
    HealthOptions& with_keepalive_interval(int v) { keepalive_interval = v; return *this; }
    HealthOptions& with_monitoring_interval(int v) { monitoring_interval = v; return *this; }
    HealthOptions& with_plugin_timeout(int v) { plugin_timeout = v; return *this; }
    HealthOptions& with_ipmi_host(std::string v) { ipmi_host = std::move(v); return *this; }
    HealthOptions& with_networking(Devices v) { networking = std::move(v); return *this; }
};

class HealthTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }

    void SetUp() override {
        node_ = unique_name("hh");
        plugins_ = dir_.path() / "plugins";
        std::filesystem::create_directories(plugins_);
        std::filesystem::create_directories(dir_.path() / "log");
        zk::SessionOptions o;
        o.hosts = server_->hosts();
        zk_ = zk::Session::connect(o);
    }
    void TearDown() override {
        if (zk_) zk_->close();
    }

    Config config(HealthOptions opt = {}) {
        if (opt.node.empty()) opt.node = node_;
        if (opt.coordinators.empty()) opt.coordinators = fmt::format("[127.0.0.1:{}]", server_->port());
        std::string yaml = fmt::format(R"(---
pvc:
  node: {node}
  debug: false
  functions:
    enable_hypervisor: false
    enable_networking: {net}
    enable_storage: false
    enable_api: false
  cluster:
    coordinators: {coords}
    networks:
{networks}{coordinator}  system:
    intervals:
      vm_shutdown_timeout: 5
      keepalive_interval: {ka}
{mi}      plugin_timeout: {pt}
      fence_intervals: 6
      suicide_intervals: 0
    fencing:
      actions:
        successful_fence: migrate
        failed_fence: None
      ipmi:
        host: "{ipmi}"
        user: admin
        pass: s3cr3tpass
    migration:
      target_selector: mem
    configuration:
      directories:
        plugin_directory: {plugins}
        dynamic_directory: {base}/run
        log_directory: {base}/log
        console_log_directory: {base}/console
      logging:
        file_logging: true
        stdout_logging: false
        zookeeper_logging: false
        log_colours: false
        log_dates: false
        log_keepalives: true
        log_keepalive_cluster_details: true
        log_keepalive_plugin_details: true
        console_log_lines: 100
        node_log_lines: 200
{devices})",
                                       fmt::arg("node", opt.node), fmt::arg("coords", opt.coordinators),
                                       fmt::arg("net", opt.networking ? "true" : "false"),
                                       fmt::arg("networks", opt.networking ? networking_networks : "      cluster:\n        domain: pvc.local\n"),
                                       fmt::arg("coordinator", opt.networking ? networking_coordinator : ""),
                                       fmt::arg("devices", opt.networking ? networking_devices(*opt.networking) : std::string()),
                                       fmt::arg("ka", opt.keepalive_interval),
                                       fmt::arg("mi", opt.monitoring_interval
                                                          ? fmt::format("      monitoring_interval: {}\n",
                                                                        *opt.monitoring_interval)
                                                          : std::string()),
                                       fmt::arg("pt", opt.plugin_timeout), fmt::arg("ipmi", opt.ipmi_host),
                                       fmt::arg("plugins", plugins_.string()),
                                       fmt::arg("base", dir_.path().string()));
        Config c = parse_config(yaml, "health-test.yaml", host_identity(opt.node + ".pvc.local"));
        add_module_keys(c);
        return c;
    }

    // The modules' part of the flat dictionary, as the daemon adds it: every
    // real module this configuration loads reads its own keys (the fencing
    // module this node's BMC, the network module the networking group).
    static void add_module_keys(Config& c) {
        ModuleHost modules(std::filesystem::path(build_dir()) / "modules", Logger(make_log_sink(nullptr), ""));
        modules.load(c);
        ConfigProblems problems;
        c.module_keys = modules.configure_all(c, problems);
        for (const auto& p : problems.list()) ADD_FAILURE() << p.to_string("health-test.yaml");
    }

    // The networking sections of a config with enable_networking (addresses
    // given explicitly: the test node names carry no host number).
    static constexpr const char* networking_networks = R"(      upstream:
        domain: example.com
        network: 192.0.2.0/24
        floating_ip: 192.0.2.10/24
      cluster:
        domain: pvc.local
        network: 10.255.0.0/24
        floating_ip: 10.255.0.254/24
      storage:
        domain: pvc.storage
        network: 10.254.0.0/24
        floating_ip: 10.254.0.254/24
)";
    static constexpr const char* networking_coordinator = R"(  coordinator:
    dns:
      database: {host: localhost, port: 5432, name: pvcdns, user: pvcdns, pass: pvcdnsPassw0rd}
    metadata:
      database: {host: localhost, port: 5432, name: pvcapi, user: pvcapi, pass: pvcapiPassw0rd}
)";
    static std::string networking_devices(const HealthOptions::Devices& d) {
        return fmt::format(R"(      networking:
        bridge_device: {}
        upstream: {{device: {}, mtu: 1500, address: 192.0.2.1/24}}
        cluster: {{device: {}, mtu: 1500, address: 10.255.0.1/24}}
        storage: {{device: {}, mtu: 1500, address: 10.254.0.1/24}}
)",
                           d.bridge, d.upstream, d.cluster, d.storage);
    }

    std::unique_ptr<HealthHost> host(const Config& cfg) {
        sink_ = make_log_sink(&cfg);
        return std::make_unique<HealthHost>(cfg, Logger(sink_, ""), zk_, ex_);
    }

    // A legacy-format plugin file: `run_body` is the body of run() (8 spaces indent).
    void python_plugin(const std::string& file, const std::string& name, const std::string& run_body,
                       const std::string& setup_body = "        pass\n", const std::string& extra = "") {
        std::ofstream(plugins_ / file) << "from pvcnoded.objects.MonitoringInstance import MonitoringPlugin\n"
                                       << "PLUGIN_NAME = \"" << name << "\"\n"
                                       << extra << "\n"
                                       << "class MonitoringPluginScript(MonitoringPlugin):\n"
                                       << "    def setup(self):\n"
                                       << setup_body << "\n"
                                       << "    def run(self, coordinator_state=None):\n"
                                       << run_body << "\n"
                                       << "    def cleanup(self):\n"
                                       << "        pass\n";
    }

    std::string log_text() const {
        std::ifstream f(dir_.path() / "log" / "pvc.log");
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    }
    bool log_has(const std::string& s, std::chrono::milliseconds wait = std::chrono::seconds(5)) const {
        return eventually([&] { return log_text().find(s) != std::string::npos; }, wait);
    }

    std::optional<std::string> key(std::string_view k) { return zk_->get(schema::path(k, {node_})); }
    std::optional<std::string> pkey(std::string_view k, const std::string& plugin) {
        return zk_->get(schema::path(k, {node_, plugin}));
    }

    // One keepalive, then wait for the pass it started to complete.
    void pass(HealthHost& h, const std::string& state = "client",
              std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
        auto before = h.stats().passes;
        h.on_keepalive(state);
        ASSERT_TRUE(eventually([&] { return h.stats().passes > before; }, timeout)) << "pass did not complete";
    }

    static std::filesystem::path build_dir() { return PVC_TEST_BUILD_DIR; }

    static inline ZkServer* server_ = nullptr;
    TempDir dir_{"pvc-health"};
    std::string node_;
    std::filesystem::path plugins_;
    std::shared_ptr<zk::Session> zk_;
    std::shared_ptr<LogSink> sink_;
    Executor ex_{1};
};

}  // namespace pvc::test
