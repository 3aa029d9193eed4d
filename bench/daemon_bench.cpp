// pvcnoded as a whole, against a real ZooKeeper: time from start to `run`,
// CPU per keepalive tick, resident memory, and time to stop, for
//   (a) the core only (no plugins, no modules),
//   (b) the core with every shipped health plugin (Python host loaded),
//   (c) the hypervisor module with 50 running VMs (libvirt test driver).
// Prints figures; never passes or fails on them.
//   daemon_bench [seconds per scenario, default 20] [scenarios, default abc]
#include <dirent.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// CPU time of every thread of `pid`, in nanoseconds (schedstat: ns on CPU).
double cpu_ns(int pid) {
    double total = 0;
    std::string dir = fmt::format("/proc/{}/task", pid);
    DIR* d = opendir(dir.c_str());
    if (!d) return 0;
    while (auto* e = readdir(d)) {
        if (e->d_name[0] == '.') continue;
        std::ifstream in(dir + "/" + e->d_name + "/schedstat");
        double ns = 0;
        if (in >> ns) total += ns;
    }
    closedir(d);
    return total;
}

long rss_kib(int pid) {
    std::ifstream in(fmt::format("/proc/{}/status", pid));
    for (std::string line; std::getline(in, line);)
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

std::string vm_xml(const std::string& name, const std::string& uuid) {
    return fmt::format("<domain type='kvm'><name>{}</name><uuid>{}</uuid><memory unit='MiB'>64</memory>"
                       "<currentMemory unit='MiB'>64</currentMemory><vcpu>1</vcpu>"
                       "<os><type arch='x86_64'>hvm</type></os><devices/></domain>",
                       name, uuid);
}

void define_vms(pvc::zk::Session& zk, const std::string& node, int count) {
    for (int i = 0; i < count; ++i) {
        std::string uuid = fmt::format("00000000-0000-4000-8000-{:012d}", i + 1);
        std::string name = fmt::format("bench{:02d}", i);
        using pvc::schema::path;
        zk.write({{path("domain.name", {uuid}), name},
                  {path("domain.xml", {uuid}), vm_xml(name, uuid)},
                  {path("domain.state", {uuid}), "start"},
                  {path("domain.node", {uuid}), node},
                  {path("domain.last_node", {uuid}), ""},
                  {path("domain.failed_reason", {uuid}), ""},
                  {path("domain.console.log", {uuid}), ""},
                  {path("domain.console.vnc", {uuid}), ""},
                  {path("domain.storage.volumes", {uuid}), ""},
                  {path("domain.profile", {uuid}), "None"},
                  {path("domain.stats", {uuid}), ""},
                  {path("domain.meta.autostart", {uuid}), "False"},
                  {path("domain.meta.migrate_method", {uuid}), "none"},
                  {path("domain.meta.node_selector", {uuid}), "none"},
                  {path("domain.meta.node_limit", {uuid}), ""},
                  {path("domain.meta.tags", {uuid}), ""},
                  {path("domain.migrate.sync_lock", {uuid}), ""}});
    }
}

struct Figures {
    double start_to_run_ms = 0;
    double cpu_per_tick_ms = 0;
    long rss_kib = 0;
    double stop_ms = 0;
    int ticks = 0;
    std::string note;
};

Figures measure(const std::string& label, bool plugins, int vms, int seconds) {
    pvc::test::ZkServer server;
    pvc::test::TempDir dir("bench");
    auto zk = pvc::zk::Session::connect({server.hosts()});
    pvc::init_cluster(*zk);
    if (vms) define_vms(*zk, "hv1", vms);

    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.coordinators = fmt::format("[hv1:{}]", server.port());
    o.base_dir = dir.path();
    o.module_dir = pvc::test::build_dir() + "/modules";
    if (plugins) o.plugin_dir = pvc::test::build_dir() + "/plugins";
    o.enable_hypervisor = vms > 0;
    o.keepalive_interval = 1;
    o.stdout_logging = false;
    o.zookeeper_logging = false;
    if (vms) o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: test:///default\n";
    auto cfg = pvc::test::write_node_config(o);

    Figures f;
    auto state = [&] { return zk->get(pvc::schema::path("node.state.daemon", {"hv1"})).value_or(""); };
    auto t0 = Clock::now();
    pvc::test::DaemonProcess d("hv1", cfg, dir.path() / "out.log");
    while (state() != "run" && Clock::now() - t0 < 30s) std::this_thread::sleep_for(1ms);
    f.start_to_run_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (state() != "run") {
        f.note = "never reached run: " + pvc::test::slurp(dir.path() / "out.log.err");
        return f;
    }
    if (vms) {
        auto running = [&] {
            auto r = zk->get(pvc::schema::path("node.running_domains", {"hv1"})).value_or("");
            return std::count(r.begin(), r.end(), '-') / 4;
        };
        pvc::test::eventually([&] { return running() >= vms; }, 30s);
        f.note = fmt::format("{} VMs running", running());
    }
    std::this_thread::sleep_for(2s);  // settle (first health pass, VM start-up)
    auto ka = [&] { return std::stol(zk->get(pvc::schema::path("node.keepalive", {"hv1"})).value_or("0")); };
    long k0 = ka();
    double c0 = cpu_ns(d.pid());
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    double c1 = cpu_ns(d.pid());
    long k1 = ka();
    f.ticks = static_cast<int>(k1 - k0);
    f.cpu_per_tick_ms = f.ticks > 0 ? (c1 - c0) / 1e6 / f.ticks : 0;
    f.rss_kib = rss_kib(d.pid());
    auto s0 = Clock::now();
    d.signal(SIGTERM);
    d.wait(60s);
    f.stop_ms = std::chrono::duration<double, std::milli>(Clock::now() - s0).count();
    std::cout << fmt::format("{:<44} {:>10.1f} {:>14.3f} {:>10.1f} {:>10.1f}  {}\n", label, f.start_to_run_ms,
                             f.cpu_per_tick_ms, f.rss_kib / 1024.0, f.stop_ms, f.note)
              << std::flush;
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    int seconds = argc > 1 ? std::atoi(argv[1]) : 20;
    std::string only = argc > 2 ? argv[2] : "abc";  // which scenarios
    std::cout << fmt::format("pvcnoded, keepalive_interval 1 s, {} s measured per scenario\n", seconds);
    std::cout << fmt::format("{:<44} {:>10} {:>14} {:>10} {:>10}\n", "scenario", "to run ms", "CPU/tick ms",
                             "RSS MiB", "stop ms");
    if (only.find('a') != std::string::npos) measure("(a) core only", false, 0, seconds);
    if (only.find('b') != std::string::npos) measure("(b) core + all shipped plugins (Python host)", true, 0, seconds);
    if (only.find('c') == std::string::npos) return 0;
    if (std::filesystem::exists(pvc::test::build_dir() + "/modules/libpvc-module-hypervisor.so"))
        measure("(c) hypervisor module, 50 VMs (test driver)", false, 50, seconds);
    else
        std::cout << "(c) skipped: hypervisor module not built\n";
    std::cout << "CPU/tick counts every thread of the daemon over the window (ZooKeeper pings included).\n";
    return 0;
}
