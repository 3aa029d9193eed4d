// pvcnoded as a whole, against a real ZooKeeper: time from start to `run`,
// CPU per keepalive tick, resident memory, time to stop, and ZooKeeper
// write transactions and bytes the daemon sends per tick, for
//   (a) the core only (no plugins, no modules),
//   (b) the core with every shipped health plugin (Python host loaded),
//   (c) the hypervisor module with 50 running VMs (libvirt test driver),
//   (d) the core with every shipped health plugin and the sample's logging
//       (ZooKeeper logging, keepalive and plugin lines, a full 2,000-line
//       ring, keepalive 5 s), one ZooKeeper log write per line
//       (zookeeper_log_interval_ms 0, as PVC 0.9.x),
//   (e) the same with the default batching (one write per 1,000 ms at most).
// Prints figures; never passes or fails on them.
//   daemon_bench [seconds per scenario, default 20] [scenarios, default abcde]
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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

// The ZooKeeper server's last transaction id (`srvr`): every write
// transaction (a multi counts once) and every session open/close adds one.
long long server_zxid(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && send(fd, "srvr", 4, 0) == 4) {
        char buf[4096];
        for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    auto p = out.find("Zxid: ");
    return p == std::string::npos ? -1 : std::stoll(out.substr(p + 6), nullptr, 16);
}

// Bytes `pid` has sent on its TCP connections to `port` (ss's tcp_info).
long long bytes_sent_to(int pid, int port) {
    auto r = pvc::test::run_command({"ss", "-tinpH", fmt::format("( dport = :{} )", port)});
    long long total = 0;
    bool ours = false;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("ESTAB", 0) == 0) {
            ours = line.find(fmt::format("pid={},", pid)) != std::string::npos;
            continue;
        }
        auto p = line.find("bytes_sent:");
        if (ours && p != std::string::npos) total += std::stoll(line.substr(p + 11));
    }
    return total;
}

// A ring as a long-running node leaves it: 2,000 lines of about 100 bytes.
std::string full_ring() {
    std::string v;
    for (int i = 0; i < 2000; ++i)
        v += fmt::format("{}2023/01/01 00:00:00.{:06d} \033[95m>>>\033[0m hv1 keepalive @ 2023-01-01 00:00:00.000000 "
                         "[primary] in 0.01 seconds",
                         i ? "\n" : "", i);
    return v;
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
    double zk_txns_per_tick = 0, zk_kib_per_tick = 0, log_writes_per_tick = 0;
    std::string note;
};

// zk_log_ms: -1 ZooKeeper logging off, else zookeeper_log_interval_ms with
// the sample's logging (2,000-line ring, keepalive every 5 s).
Figures measure(const std::string& label, bool plugins, int vms, int seconds, int zk_log_ms = -1) {
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
    o.keepalive_interval = zk_log_ms >= 0 ? 5 : 1;
    o.stdout_logging = false;
    o.zookeeper_logging = zk_log_ms >= 0;
    if (vms) o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: test:///default\n";
    auto cfg = pvc::test::write_node_config(o);
    if (zk_log_ms >= 0) {
        std::string yaml = pvc::test::slurp(cfg);
        const std::string lines = "node_log_lines: 200\n";
        yaml.replace(yaml.find(lines), lines.size(),
                     fmt::format("node_log_lines: 2000\n        zookeeper_log_interval_ms: {}\n", zk_log_ms));
        std::ofstream(cfg) << yaml;
        zk->ensure_path(pvc::schema::path("logs.node", {"hv1"}));
        zk->write(pvc::schema::path("logs.messages", {"hv1"}), full_ring());
    }

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
    auto log_version = [&] {
        pvc::zk::Stat st;
        zk->get(pvc::schema::path("logs.messages", {"hv1"}), &st);
        return st.version;
    };
    long k0 = ka();
    double c0 = cpu_ns(d.pid());
    long long z0 = server_zxid(server.port()), b0 = bytes_sent_to(d.pid(), server.port());
    int32_t l0 = log_version();
    std::this_thread::sleep_for(std::chrono::seconds(seconds));
    double c1 = cpu_ns(d.pid());
    long long z1 = server_zxid(server.port()), b1 = bytes_sent_to(d.pid(), server.port());
    int32_t l1 = log_version();
    long k1 = ka();
    f.ticks = static_cast<int>((k1 - k0) / o.keepalive_interval);
    f.cpu_per_tick_ms = f.ticks > 0 ? (c1 - c0) / 1e6 / f.ticks : 0;
    if (f.ticks > 0) {
        f.zk_txns_per_tick = static_cast<double>(z1 - z0) / f.ticks;
        f.zk_kib_per_tick = static_cast<double>(b1 - b0) / 1024.0 / f.ticks;
        f.log_writes_per_tick = static_cast<double>(l1 - l0) / f.ticks;
    }
    f.rss_kib = rss_kib(d.pid());
    auto s0 = Clock::now();
    d.signal(SIGTERM);
    d.wait(60s);
    f.stop_ms = std::chrono::duration<double, std::milli>(Clock::now() - s0).count();
    std::cout << fmt::format("{:<44} {:>10.1f} {:>14.3f} {:>10.1f} {:>10.1f} {:>9.2f} {:>10.1f} {:>9.2f}  {}\n", label,
                             f.start_to_run_ms, f.cpu_per_tick_ms, f.rss_kib / 1024.0, f.stop_ms, f.zk_txns_per_tick,
                             f.zk_kib_per_tick, f.log_writes_per_tick, f.note)
              << std::flush;
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    int seconds = argc > 1 ? std::atoi(argv[1]) : 20;
    std::string only = argc > 2 ? argv[2] : "abcde";  // which scenarios
    std::cout << fmt::format("pvcnoded, keepalive_interval 1 s (d, e: 5 s), {} s measured per scenario\n", seconds);
    std::cout << fmt::format("{:<44} {:>10} {:>14} {:>10} {:>10} {:>9} {:>10} {:>9}\n", "scenario", "to run ms",
                             "CPU/tick ms", "RSS MiB", "stop ms", "ZK tx/t", "ZK KiB/t", "log wr/t");
    if (only.find('a') != std::string::npos) measure("(a) core only", false, 0, seconds);
    if (only.find('b') != std::string::npos) measure("(b) core + all shipped plugins (Python host)", true, 0, seconds);
    if (only.find('c') != std::string::npos) {
        if (std::filesystem::exists(pvc::test::build_dir() + "/modules/libpvc-module-hypervisor.so"))
            measure("(c) hypervisor module, 50 VMs (test driver)", false, 50, seconds);
        else
            std::cout << "(c) skipped: hypervisor module not built\n";
    }
    if (only.find('d') != std::string::npos)
        measure("(d) plugins, sample logging, a ZK write per line", true, 0, seconds, 0);
    if (only.find('e') != std::string::npos)
        measure("(e) plugins, sample logging, ZK log batched 1 s", true, 0, seconds, 1000);
    std::cout << "CPU/tick counts every thread of the daemon over the window (ZooKeeper pings included).\n"
                 "ZK tx/t: write transactions the server committed per tick (a multi counts once);\n"
                 "ZK KiB/t: bytes the daemon sent to ZooKeeper per tick; log wr/t: writes of /logs/<node>/messages.\n";
    return 0;
}
