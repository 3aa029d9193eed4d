// Health pass cost: CPU time (daemon + the commands plugins run) and wall time
// of a pass with every shipped plugin, per-plugin runtimes, and process RSS
// with only native plugins loaded vs with the embedded Python host.
// Prints figures; never fails on time.
//
//   health_bench [passes=5] [plugin directory, default: the build's plugins]
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "health/health_host.hpp"
#include "config_reader.hpp"
#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return -1;
}

double cpu_seconds(int who) {
    rusage u{};
    getrusage(who, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

pvc::Config make_config(const std::string& node, const pvc::test::ZkServer& zk, const fs::path& base,
                        const fs::path& plugins) {
    fs::create_directories(base / "log");
    auto yaml = fmt::format(R"(---
pvc:
  node: {node}
  functions: {{enable_hypervisor: false, enable_networking: false, enable_storage: false, enable_api: false}}
  cluster:
    coordinators: [127.0.0.1:{port}]
    networks: {{cluster: {{domain: pvc.local}}}}
  system:
    intervals: {{keepalive_interval: 5, plugin_timeout: 30}}
    migration: {{target_selector: mem}}
    fencing:
      actions: {{successful_fence: migrate, failed_fence: None}}
      ipmi: {{host: 127.0.0.1, user: admin, pass: pass}}
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
        log_keepalives: false
)",
                            fmt::arg("node", node), fmt::arg("port", zk.port()), fmt::arg("plugins", plugins.string()),
                            fmt::arg("base", base.string()));
    return pvc::parse_config(yaml, "health-bench.yaml", pvc::host_identity(node + ".pvc.local"));
}

}  // namespace

int main(int argc, char** argv) {
    int passes = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
    fs::path built = argc > 2 ? fs::path(argv[2]) : fs::path(PVC_BENCH_BUILD_DIR) / "plugins";
    if (!fs::exists(built)) {
        std::cerr << "no plugins in " << built << ": build target pvc-health-plugins\n";
        return 1;
    }
    pvc::test::ZkServer server;
    pvc::test::TempDir dir("pvc-health-bench");
    auto session = pvc::zk::Session::connect({.hosts = server.hosts()});
    pvc::Executor ex(1);

    fs::path native_dir = dir.path() / "native", all_dir = dir.path() / "all";
    fs::create_directories(native_dir);
    fs::create_directories(all_dir);
    std::vector<std::string> files;
    for (auto& e : fs::directory_iterator(built)) {
        fs::create_symlink(e.path(), all_dir / e.path().filename());
        if (e.path().extension() == ".so") fs::create_symlink(e.path(), native_dir / e.path().filename());
    }

    long rss_start = rss_kib();

    // 1. Native plugins only: the Python interpreter is never started.
    auto cfg_native = make_config(pvc::test::unique_name("bn"), server, dir.path() / "n", native_dir);
    auto sink_native = pvc::make_log_sink(&cfg_native);
    pvc::HealthHost native(cfg_native, pvc::Logger(sink_native, ""), session, ex);
    native.load();
    native.on_keepalive("client");
    while (!native.plugin_names().empty() && native.stats().passes < 1) std::this_thread::sleep_for(10ms);
    long rss_native = rss_kib();
    auto native_stats = native.stats();
    native.shutdown(5s);

    // 2. Every shipped plugin, Python ones through the embedded interpreter.
    auto node = pvc::test::unique_name("ba");
    auto cfg_all = make_config(node, server, dir.path() / "a", all_dir);
    auto sink_all = pvc::make_log_sink(&cfg_all);
    pvc::HealthHost all(cfg_all, pvc::Logger(sink_all, ""), session, ex);
    auto l0 = std::chrono::steady_clock::now();
    all.load();
    auto load_wall = std::chrono::steady_clock::now() - l0;
    long rss_loaded = rss_kib();
    if (all.plugin_names().empty()) {
        std::cerr << "no plugin loaded from " << built << "\n";
        return 1;
    }

    std::vector<double> wall, cpu_self, cpu_children;
    for (int i = 0; i < passes; ++i) {
        auto before = all.stats().passes;
        double s0 = cpu_seconds(RUSAGE_SELF), c0 = cpu_seconds(RUSAGE_CHILDREN);
        auto t0 = std::chrono::steady_clock::now();
        all.on_keepalive("client");
        while (all.stats().passes <= before) std::this_thread::sleep_for(5ms);
        wall.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        cpu_self.push_back(cpu_seconds(RUSAGE_SELF) - s0);
        cpu_children.push_back(cpu_seconds(RUSAGE_CHILDREN) - c0);
    }
    long rss_after = rss_kib();

    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    std::string names;
    for (auto& n : all.plugin_names()) names += n + " ";
    fmt::print("health_bench: {} passes, plugins loaded: {}\n", passes, names);
    fmt::print("  load() of all plugins:           {:.3f} s wall\n", std::chrono::duration<double>(load_wall).count());
    fmt::print("  pass wall time   median {:.3f} s  min {:.3f} s  max {:.3f} s\n", median(wall),
               *std::min_element(wall.begin(), wall.end()), *std::max_element(wall.begin(), wall.end()));
    fmt::print("  pass CPU (daemon process)  median {:.3f} s\n", median(cpu_self));
    fmt::print("  pass CPU (commands run)    median {:.3f} s\n", median(cpu_children));
    fmt::print("  per-plugin runtime of the last pass (s):\n");
    for (auto& n : all.plugin_names()) {
        auto rt = session->get(pvc::schema::path("monitoring_plugin.runtime", {node, n})).value_or("?");
        auto delta = session->get(pvc::schema::path("monitoring_plugin.health_delta", {node, n})).value_or("?");
        fmt::print("    {:5} {:>6}  (delta {})\n", n, rt, delta);
    }
    fmt::print("  node health: {}\n", all.health() ? std::to_string(*all.health()) : "N/A");
    fmt::print("  native-only pass: wall {:.3f} s, CPU {:.3f} s\n", native_stats.last_wall.count() / 1e6,
               native_stats.last_cpu.count() / 1e6);
    fmt::print("  RSS at start:                          {:>7} KiB\n", rss_start);
    fmt::print("  RSS, native plugins only (no Python):  {:>7} KiB  (+{} KiB)\n", rss_native, rss_native - rss_start);
    fmt::print("  RSS, Python host + all plugins loaded: {:>7} KiB  (+{} KiB over native only)\n", rss_loaded,
               rss_loaded - rss_native);
    fmt::print("  RSS after {} passes:                    {:>7} KiB\n", passes, rss_after);
    all.shutdown(10s);
    session->close();
    return 0;
}
