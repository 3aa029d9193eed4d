// pvcnoded as a whole, in the shipped configuration (the sample's logging:
// ZooKeeper log of 2,000 lines, routine lines batched 60 s, keepalive, cluster-detail
// and plugin lines, colours, debug off; keepalive 5 s; a health pass at most
// every 60 s), against a real ZooKeeper. Per scenario, one daemon runs
// `ticks` keepalives at 5 s and the bench prints per tick: CPU (user+system
// of the whole process), ZooKeeper requests and bytes sent, the tick's wall
// time; then RSS, PSS and threads, start->run and stop time. A second daemon
// ticks every 100 ms (PVCNODED_KEEPALIVE_MS) for `fast` ticks: RSS/PSS at its
// start and after them. Scenarios (letters):
//   c  the core only (no plugins, no modules)
//   n  the core only, ZooKeeper logging off (what the ring's write costs)
//   p  the core with the 12 shipped health plugins (Python host)
//   t  the hypervisor module on libvirt's test driver, 0, 10 and 50 VMs
//   i  the measurement: hypervisor (test driver, 0/10/50 VMs) and the
//      native `load` plugin only
//   s  scale: hypervisor (test driver) with 1,000 VMs defined, all owned by
//      another node
//   z  scale, ten daemons (hv1..hv10; hv1-hv3 coordinators) against one
//      ZooKeeper with 1,000 VMs defined: per daemon start->run, RSS and CPU
//      per tick; ZooKeeper's own CPU, watches, znodes, outstanding requests.
//      PVC_BENCH_Z_VMS=spread: 100 VMs per daemon, running on its test driver,
//      instead of all 1,000 owned by a node that is not running (the default);
//      PVC_BENCH_Z_NODES=N (1-10): N daemons instead of ten (spread: 100 VMs each)
//   r  the same as t on a real libvirtd: PVC_BENCH_LIBVIRT_URI=qemu+tcp://...
//   o  the old bench's settings (debug on, a pass per tick, a ZooKeeper write
//      per log line) for comparison
//   l  the log ring's cost: one idle daemon (core only, the sample's logging,
//      the ring full) for PVC_BENCH_MINUTES (default 3) minutes, twice: routine
//      lines batched per second (zookeeper_log_batch_ms 0, as before) and as
//      the sample (60 s); bytes per minute written to /logs/<node>/messages
//      (a data watch: version steps x value size) and sent by the daemon
//   Z  scenario z held for PVC_BENCH_MINUTES (default 5) minutes after its tick
//      window, printing every PVC_BENCH_SAMPLE_S (default 30) seconds
//      ZooKeeper's heap (jstat, from openjdk's JDK: used, and live after a
//      full GC by jcmd), data size, transactions/s and bytes/s received
// PVC_BENCH_ZK_BATCH_MS=<ms>: zookeeper_log_batch_ms of the daemons (default
// the sample's 60000; 0 writes routine lines each second, as before)
// Prints figures; never passes or fails on them.
//   daemon_bench [ticks, default 12] [scenarios, default cpit] [fast, default 1000]
// PVC_BENCH_VMS=<0|10|50> runs only that VM count of t, i and r.
// (z: one run of about 2 minutes with 6 ticks; `daemon_bench 6 z`; an hour of
// it: `PVC_BENCH_MINUTES=60 daemon_bench 6 Z`)
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <ctime>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
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

// A ZooKeeper four-letter word's answer (the test server enables them all).
std::string four_letter(int port, const char* word) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return {};
    timeval tv{2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
        send(fd, word, std::strlen(word), 0) == static_cast<ssize_t>(std::strlen(word))) {
        char buf[4096];
        for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
}

// An `ss -p` line of a connection the daemon opened: the bench's own
// ZooKeeper socket is inherited by the daemon's process too (it is not
// close-on-exec), so a connection the bench also holds is the bench's.
bool is_daemons(const std::string& line, int pid) {
    return line.find(fmt::format("pid={},", pid)) != std::string::npos &&
           line.find(fmt::format("pid={},", getpid())) == std::string::npos;
}

// Bytes `pid` has sent on its TCP connections to `port` (ss's tcp_info).
long long bytes_sent_to(int pid, int port) {
    auto r = pvc::test::run_command({"ss", "-tinpH", fmt::format("( dport = :{} )", port)});
    long long total = 0;
    bool ours = false;
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("ESTAB", 0) == 0) {
            ours = is_daemons(line, pid);
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

void define_vms(pvc::zk::Session& zk, const std::string& node, int count, int first = 0) {
    for (int i = first; i < first + count; ++i) {
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


// What one daemon process costs, read from /proc (the whole process: threads
// that have exited, like a plugin pass's, are counted in utime/stime).
struct ProcSample {
    double cpu_ms = 0;  // user + system
    long rss_kib = 0, pss_kib = 0;
    int threads = 0;
};

ProcSample sample(int pid) {
    ProcSample s;
    // The process's CPU clock: user + system of every thread, exited ones
    // included, in nanoseconds (utime/stime in /proc count 10 ms steps).
    clockid_t clock;
    timespec ts{};
    if (clock_getcpuclockid(pid, &clock) == 0 && clock_gettime(clock, &ts) == 0)
        s.cpu_ms = static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    std::ifstream st(fmt::format("/proc/{}/status", pid));
    for (std::string line; std::getline(st, line);) {
        if (line.rfind("VmRSS:", 0) == 0) s.rss_kib = std::stol(line.substr(6));
        if (line.rfind("Threads:", 0) == 0) s.threads = std::stoi(line.substr(8));
    }
    std::ifstream sm(fmt::format("/proc/{}/smaps_rollup", pid));
    for (std::string line; std::getline(sm, line);)
        if (line.rfind("Pss:", 0) == 0) s.pss_kib = std::stol(line.substr(4));
    return s;
}

// Requests the server received on the daemon's connections (`cons`: one line
// per connection, "/127.0.0.1:<client port>[1](queued=0,recved=N,...").
long long requests_from(int pid, int port) {
    std::vector<std::string> ours;
    auto r = pvc::test::run_command({"ss", "-tnpH", fmt::format("( dport = :{} )", port)});
    std::istringstream in(r.out);
    for (std::string line; std::getline(in, line);) {
        if (!is_daemons(line, pid)) continue;
        std::istringstream f(line);
        std::string state, rq, sq, local;
        f >> state >> rq >> sq >> local;
        ours.push_back(local.substr(local.rfind(':')));  // ":<port>"
    }
    std::string cons = four_letter(port, "cons");
    long long total = 0;
    std::istringstream c(cons);
    for (std::string line; std::getline(c, line);) {
        for (const auto& lp : ours) {
            if (line.find(lp + "[") == std::string::npos) continue;
            auto p = line.find("recved=");
            if (p != std::string::npos) total += std::stoll(line.substr(p + 7));
        }
    }
    return total;
}

// Mean of the "in 0.01 seconds" of the keepalive lines logged since byte `from`
// of the daemon's log (the tick's own wall time; 10 ms resolution).
std::pair<double, int> tick_wall_ms(const std::filesystem::path& log, size_t from) {
    std::string text = pvc::test::slurp(log);
    if (from > text.size()) from = 0;
    double sum = 0;
    int n = 0;
    for (size_t p = text.find(" keepalive @ ", from); p != std::string::npos; p = text.find(" keepalive @ ", p + 1)) {
        auto eol = text.find('\n', p);
        auto in = text.rfind(" in ", eol);
        if (in == std::string::npos || in < p) continue;
        sum += std::strtod(text.c_str() + in + 4, nullptr) * 1000.0;
        ++n;
    }
    return {n ? sum / n : 0.0, n};
}

struct Scenario {
    std::string label;
    bool plugins = false;
    bool load_plugin_only = false;  // the measurement: only the native `load` plugin
    int vms = 0;  // -1: hypervisor on, no VMs
    int foreign_vms = 0;  // defined with state start on another node (hv2)
    std::string libvirt_uri = "test:///default";
    int keepalive_s = 5;          // the sample's
    int fast_keepalive_ms = 0;    // >0: fast-forward ticks (PVCNODED_KEEPALIVE_MS) for the memory run
    int zk_log_ms = 1000;         // -1: ZooKeeper logging off
    int zk_batch_ms = 60000;      // zookeeper_log_batch_ms (the sample's)
    bool shipped_logging = true;  // the sample's logging section, debug off, monitoring_interval 60
};

std::string scenario_yaml(const Scenario& sc, pvc::test::NodeConfigOptions& o, pvc::test::ZkServer& server,
                          const pvc::test::TempDir& dir, const std::string& node = "hv1",
                          const std::string& coordinators = "") {
    o.node = node;
    o.coordinators = coordinators.empty() ? fmt::format("[hv1:{}]", server.port()) : coordinators;
    o.base_dir = dir.path();
    o.module_dir = pvc::test::build_dir() + "/modules";
    if (sc.plugins) o.plugin_dir = pvc::test::build_dir() + "/plugins";
    if (sc.load_plugin_only) {
        o.plugin_dir = dir.path() / "plugins";
        std::filesystem::create_directories(o.plugin_dir);
        std::filesystem::create_symlink(pvc::test::build_dir() + "/plugins/load.so", o.plugin_dir / "load.so");
    }
    o.enable_hypervisor = sc.vms != 0;
    o.keepalive_interval = sc.keepalive_s;
    o.stdout_logging = sc.shipped_logging;
    o.zookeeper_logging = sc.zk_log_ms >= 0;
    if (sc.vms) o.extra_system_yaml = fmt::format("    hypervisor:\n      libvirt_uri: {}\n", sc.libvirt_uri);
    std::string yaml = pvc::test::node_config_yaml(o);
    auto replace = [&](const std::string& from, const std::string& to) {
        auto p = yaml.find(from);
        if (p != std::string::npos) yaml.replace(p, from.size(), to);
    };
    // PVC_BENCH_ZK_BATCH_MS: zookeeper_log_batch_ms for every scenario (0:
    // routine lines written at each interval, as before it existed).
    int batch_ms = sc.zk_batch_ms;
    if (const char* b = std::getenv("PVC_BENCH_ZK_BATCH_MS"); b && sc.label.rfind("routine lines", 0) != 0)
        batch_ms = std::atoi(b);
    if (sc.zk_log_ms >= 0)
        replace("node_log_lines: 200\n",
                fmt::format("node_log_lines: 2000\n        zookeeper_log_interval_ms: {}\n"
                            "        zookeeper_log_batch_ms: {}\n",
                            sc.zk_log_ms, batch_ms));
    if (sc.shipped_logging) {
        // etc/pvcnoded.sample.yaml: debug off, colours on, a health pass at most every 60 s.
        replace("debug: true", "debug: false");
        replace("log_colours: false", "log_colours: true");
        replace("      keepalive_interval:", "      monitoring_interval: 60\n      keepalive_interval:");
    }
    return yaml;
}

struct Run {
    std::unique_ptr<pvc::test::ZkServer> server;
    std::unique_ptr<pvc::test::TempDir> dir;
    std::shared_ptr<pvc::zk::Session> zk;
    std::unique_ptr<pvc::test::DaemonProcess> daemon;
    double start_to_run_ms = 0;
    std::string note;
};

std::string daemon_state(pvc::zk::Session& zk) {
    return zk.get(pvc::schema::path("node.state.daemon", {"hv1"})).value_or("");
}

long keepalive_ts(pvc::zk::Session& zk) {
    return std::stol(zk.get(pvc::schema::path("node.keepalive", {"hv1"})).value_or("0"));
}

// Starts the scenario's daemon and waits for `run` and its VMs.
bool start(Run& r, const Scenario& sc, int fast_keepalive_ms) {
    r.server = std::make_unique<pvc::test::ZkServer>();
    r.dir = std::make_unique<pvc::test::TempDir>("bench");
    r.zk = pvc::zk::Session::connect({r.server->hosts()});
    pvc::init_cluster(*r.zk);
    int vms = std::max(sc.vms, 0);
    if (vms) define_vms(*r.zk, "hv1", vms);
    if (sc.foreign_vms) define_vms(*r.zk, "hv2", sc.foreign_vms, 100000);
    pvc::test::NodeConfigOptions o;
    std::string yaml = scenario_yaml(sc, o, *r.server, *r.dir);
    std::filesystem::create_directories(o.base_dir);
    auto cfg = o.base_dir / "pvcnoded.yaml";
    std::ofstream(cfg) << yaml;
    if (sc.zk_log_ms >= 0) {
        r.zk->ensure_path(pvc::schema::path("logs.node", {"hv1"}));
        r.zk->write(pvc::schema::path("logs.messages", {"hv1"}), full_ring());
    }
    if (fast_keepalive_ms > 0) setenv("PVCNODED_KEEPALIVE_MS", std::to_string(fast_keepalive_ms).c_str(), 1);
    auto t0 = Clock::now();
    r.daemon = std::make_unique<pvc::test::DaemonProcess>("hv1", cfg, r.dir->path() / "out.log");
    unsetenv("PVCNODED_KEEPALIVE_MS");
    while (daemon_state(*r.zk) != "run" && Clock::now() - t0 < 30s) std::this_thread::sleep_for(1ms);
    r.start_to_run_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    if (daemon_state(*r.zk) != "run") {
        r.note = "never reached run: " + pvc::test::slurp(r.dir->path() / "out.log.err");
        return false;
    }
    if (vms) {
        auto running = [&] {
            auto v = r.zk->get(pvc::schema::path("node.running_domains", {"hv1"})).value_or("");
            return std::count(v.begin(), v.end(), '-') / 4;
        };
        pvc::test::eventually([&] { return running() >= vms; }, 60s);
        r.note = fmt::format("{} VMs running", running());
    }
    return true;
}

void stop(Run& r, double* stop_ms = nullptr) {
    auto s0 = Clock::now();
    r.daemon->signal(SIGTERM);
    r.daemon->wait(60s);
    if (stop_ms) *stop_ms = std::chrono::duration<double, std::milli>(Clock::now() - s0).count();
}

// (1) `ticks` keepalives at the scenario's own interval: CPU, requests, bytes,
// wall per tick. (2) If fast_ticks: a second daemon ticking every
// fast_keepalive_ms, RSS/PSS after its first tick and after `fast_ticks` ticks.
void measure(const Scenario& sc, int ticks, int fast_ticks) {
    std::string line = fmt::format("{:<40}", sc.label);
    {
        Run r;
        if (!start(r, sc, 0)) {
            std::cout << line << " " << r.note << "\n" << std::flush;
            return;
        }
        // Settle: VM start-up, the first health pass (it runs with the first ticks).
        std::this_thread::sleep_for(std::chrono::seconds(sc.keepalive_s + 2));
        auto log = r.dir->path() / "log" / "pvc.log";
        size_t log0 = pvc::test::slurp(log).size();
        int pid = r.daemon->pid();
        int port = r.server->port();
        long k0 = keepalive_ts(*r.zk);
        // Start right after a tick, so the window holds `ticks` whole ticks.
        while (keepalive_ts(*r.zk) == k0) std::this_thread::sleep_for(5ms);
        k0 = keepalive_ts(*r.zk);
        auto p0 = sample(pid);
        long long q0 = requests_from(pid, port), b0 = bytes_sent_to(pid, port);
        auto w0 = Clock::now();
        while (keepalive_ts(*r.zk) < k0 + static_cast<long>(ticks) * sc.keepalive_s)
            std::this_thread::sleep_for(20ms);
        auto p1 = sample(pid);
        long long q1 = requests_from(pid, port), b1 = bytes_sent_to(pid, port);
        double window_s = std::chrono::duration<double>(Clock::now() - w0).count();
        auto [wall, n] = tick_wall_ms(log, log0);
        double stop_ms = 0;
        stop(r, &stop_ms);
        line += fmt::format(" {:>8.0f} {:>9.3f} {:>8.1f} {:>8.2f} {:>7.1f} {:>6.1f} {:>6.1f} {:>4} {:>7.0f}", r.start_to_run_ms,
                            (p1.cpu_ms - p0.cpu_ms) / ticks, static_cast<double>(q1 - q0) / ticks,
                            static_cast<double>(b1 - b0) / 1024.0 / ticks, wall, p1.rss_kib / 1024.0,
                            p1.pss_kib / 1024.0, p1.threads, stop_ms);
        line += fmt::format("  [{} ticks in {:.0f} s; {}]", ticks, window_s, r.note);
    }
    std::cout << line << "\n" << std::flush;
    if (fast_ticks <= 0 || sc.fast_keepalive_ms <= 0) return;
    Run r;
    if (!start(r, sc, sc.fast_keepalive_ms)) {
        std::cout << fmt::format("{:<40} fast-forward: {}\n", "", r.note) << std::flush;
        return;
    }
    int pid = r.daemon->pid();
    auto log = r.dir->path() / "log" / "pvc.log";
    std::this_thread::sleep_for(2s);
    auto count_ticks = [&] {
        std::string text = pvc::test::slurp(log);
        int n = 0;
        for (size_t p = text.find(" keepalive @ "); p != std::string::npos; p = text.find(" keepalive @ ", p + 1)) ++n;
        return n;
    };
    int t0 = count_ticks();
    auto s0 = sample(pid);
    auto w0 = Clock::now();
    while (count_ticks() < t0 + fast_ticks && Clock::now() - w0 < 1h) std::this_thread::sleep_for(500ms);
    int done = count_ticks() - t0;
    auto s1 = sample(pid);
    stop(r);
    std::cout << fmt::format("{:<40} after {} ticks every {} ms: RSS {:.1f} -> {:.1f} MiB, PSS {:.1f} -> {:.1f} MiB, "
                             "threads {} -> {}, CPU/tick {:.3f} ms\n",
                             "", done, sc.fast_keepalive_ms, s0.rss_kib / 1024.0, s1.rss_kib / 1024.0,
                             s0.pss_kib / 1024.0, s1.pss_kib / 1024.0, s0.threads, s1.threads,
                             done ? (s1.cpu_ms - s0.cpu_ms) / done : 0.0)
              << std::flush;
}

// ---- scenario l: what the log ring costs ZooKeeper on an idle node

double bench_minutes(double dflt) {
    const char* m = std::getenv("PVC_BENCH_MINUTES");
    double v = m ? std::atof(m) : dflt;
    return v > 0 ? v : dflt;
}

// Every write of `key`, counted from a data watch: each fire adds the version
// steps since the last one times the value's size (writes coalesced into one
// fire have the ring's size, full and steady, too).
struct WriteCounter {
    std::mutex m;
    int32_t version = -1;
    long long writes = 0, bytes = 0;
    std::shared_ptr<pvc::zk::Watch> watch;

    void start(pvc::zk::Session& zk, const std::string& key) {
        watch = zk.watch_data(key, [this](const std::optional<std::string>& v, const pvc::zk::Stat& st) {
            std::lock_guard g(m);
            if (v && version >= 0 && st.version > version) {
                writes += st.version - version;
                bytes += static_cast<long long>(st.version - version) * static_cast<long long>(v->size());
            }
            if (v) version = st.version;
        });
    }
    std::pair<long long, long long> now() {
        std::lock_guard g(m);
        return {writes, bytes};
    }
};

void measure_ring(double minutes) {
    std::cout << fmt::format("log ring: one idle daemon (core only, the sample's logging, 2,000-line ring full), "
                             "{:.1f} min per case after 10 s of settling\n",
                             minutes)
              << std::flush;
    for (int batch : {0, 60000}) {
        Scenario sc{.label = batch ? "routine lines batched 60 s (the sample)" : "routine lines batched 1 s (before)",
                    .zk_batch_ms = batch};
        Run r;
        if (!start(r, sc, 0)) {
            std::cout << sc.label << ": " << r.note << "\n";
            continue;
        }
        std::this_thread::sleep_for(10s);
        const std::string key = pvc::schema::path("logs.messages", {"hv1"});
        WriteCounter wc;
        wc.start(*r.zk, key);
        int pid = r.daemon->pid(), port = r.server->port();
        long long b0 = bytes_sent_to(pid, port);
        auto t0 = Clock::now();
        auto end = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(minutes * 60));
        auto next = t0 + 60s;
        while (Clock::now() < end) {
            std::this_thread::sleep_for(200ms);
            if (Clock::now() >= next && Clock::now() < end) {
                auto [w, b] = wc.now();
                double m = std::chrono::duration<double>(Clock::now() - t0).count() / 60;
                std::cout << fmt::format("  {:>5.1f} min: {} writes of the ring, {:.0f} KB ({:.0f} KB/min)\n", m, w,
                                         static_cast<double>(b) / 1000, static_cast<double>(b) / 1000 / m)
                          << std::flush;
                next += 60s;
            }
        }
        auto [w, b] = wc.now();
        long long b1 = bytes_sent_to(pid, port);
        double m = std::chrono::duration<double>(Clock::now() - t0).count() / 60;
        auto size = r.zk->get(key).value_or("").size();
        stop(r);
        std::cout << fmt::format("{:<42} ring {:.1f} KB; {:.1f} writes/min, {:.0f} KB/min into the ring; the daemon "
                                 "sent {:.0f} KB/min to ZooKeeper in all\n",
                                 sc.label, static_cast<double>(size) / 1000, static_cast<double>(w) / m,
                                 static_cast<double>(b) / 1000 / m, static_cast<double>(b1 - b0) / 1000 / m)
                  << std::flush;
    }
}

// ---- scenario z: ten daemons against one ZooKeeper

// ZooKeeper's JVM: the bench's child process named java (ZkServer runs it directly).
int zookeeper_pid() {
    DIR* d = opendir("/proc");
    if (!d) return -1;
    int found = -1;
    while (dirent* e = readdir(d)) {
        int pid = std::atoi(e->d_name);
        if (pid <= 0) continue;
        std::string stat = pvc::test::slurp(fmt::format("/proc/{}/stat", pid));
        auto open = stat.find('('), close = stat.rfind(')');
        if (open == std::string::npos || close == std::string::npos) continue;
        std::istringstream rest(stat.substr(close + 2));
        char state;
        int ppid = 0;
        rest >> state >> ppid;
        if (ppid == getpid() && stat.substr(open + 1, close - open - 1) == "java") found = pid;
    }
    closedir(d);
    return found;
}

// One figure of `mntr` ("zk_watch_count\t123"); -1 if absent.
long long mntr_value(const std::string& mntr, const std::string& key) {
    std::istringstream in(mntr);
    for (std::string line; std::getline(in, line);)
        if (line.rfind(key + "\t", 0) == 0) return std::stoll(line.substr(key.size() + 1));
    return -1;
}

// ZooKeeper's JVM heap in KiB from `jstat -gc` (openjdk's JDK): {used, old
// generation}; {-1, -1} without jstat.
std::pair<double, double> jvm_heap_kib(int pid) {
    auto r = pvc::test::run_command({"jstat", "-gc", std::to_string(pid)}, std::chrono::seconds(20));
    std::istringstream in(r.out);
    std::string header, values;
    std::getline(in, header);
    std::getline(in, values);
    std::istringstream h(header), v(values);
    std::map<std::string, double> f;
    for (std::string name, value; h >> name && v >> value;) f[name] = std::atof(value.c_str());
    if (!f.count("EU") || !f.count("OU")) return {-1, -1};
    return {f["S0U"] + f["S1U"] + f["EU"] + f["OU"], f["OU"]};
}

// The last transaction id (`srvr` "Zxid: 0x..."): one per write transaction.
long long zxid(int port) {
    std::string srvr = four_letter(port, "srvr");
    auto p = srvr.find("Zxid: ");
    return p == std::string::npos ? -1 : std::stoll(srvr.substr(p + 6), nullptr, 16);
}

void measure_ten(int ticks, double soak_minutes = 0) {
    const char* mode = std::getenv("PVC_BENCH_Z_VMS");
    bool spread = mode && std::string(mode) == "spread";
    const char* count = std::getenv("PVC_BENCH_Z_NODES");
    const int nodes = count ? std::clamp(std::atoi(count), 1, 10) : 10;
    const int vms = spread ? 100 * nodes : 1000;
    Scenario sc{.label = "ten daemons", .vms = -1};
    pvc::test::ZkServer server;
    int zk_pid = zookeeper_pid();
    auto zk = pvc::zk::Session::connect({server.hosts()});
    pvc::init_cluster(*zk);
    auto d0 = Clock::now();
    if (spread)
        for (int n = 1; n <= nodes; ++n) define_vms(*zk, fmt::format("hv{}", n), vms / nodes, (n - 1) * (vms / nodes));
    else
        define_vms(*zk, "hv11", vms, 100000);
    double define_s = std::chrono::duration<double>(Clock::now() - d0).count();
    std::cout << fmt::format("{} daemons (hv1..hv{}, coordinators hv1-hv3, hypervisor on the test driver, the shipped "
                             "logging) against one ZooKeeper;\n{} VMs defined in {:.1f} s, {}\n",
                             nodes, nodes, vms, define_s,
                             spread ? "100 per daemon, running on its test driver"
                                    : "all owned by hv11 (no daemon): every daemon sees 1,000 VMs of another node")
              << std::flush;
    std::string coords = fmt::format("[hv1:{0}, hv2:{0}, hv3:{0}]", server.port());
    struct Node {
        std::string name;
        std::unique_ptr<pvc::test::TempDir> dir;
        std::unique_ptr<pvc::test::DaemonProcess> daemon;
        double to_run_ms = 0;
        size_t log0 = 0;
        ProcSample p0, p1;
    };
    std::vector<Node> ns(nodes);
    // One after the other: each start->run is the daemon's own, with the
    // others already running (the n-th node joining a cluster of n-1).
    for (int i = 0; i < nodes; ++i) {
        auto& n = ns[static_cast<size_t>(i)];
        n.name = fmt::format("hv{}", i + 1);
        n.dir = std::make_unique<pvc::test::TempDir>("bench-" + n.name);
        pvc::test::NodeConfigOptions o;
        std::string yaml = scenario_yaml(sc, o, server, *n.dir, n.name, coords);
        std::filesystem::create_directories(o.base_dir);
        auto cfg = o.base_dir / "pvcnoded.yaml";
        std::ofstream(cfg) << yaml;
        zk->ensure_path(pvc::schema::path("logs.node", {n.name}));
        zk->write(pvc::schema::path("logs.messages", {n.name}), full_ring());
        auto state = [&] { return zk->get(pvc::schema::path("node.state.daemon", {n.name})).value_or(""); };
        auto t0 = Clock::now();
        n.daemon = std::make_unique<pvc::test::DaemonProcess>(n.name, cfg, n.dir->path() / "out.log");
        while (state() != "run" && Clock::now() - t0 < 60s) std::this_thread::sleep_for(1ms);
        n.to_run_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (state() != "run") {
            std::cout << n.name << " never reached run: " << pvc::test::slurp(n.dir->path() / "out.log.err") << "\n";
            return;
        }
    }
    if (spread) {
        for (auto& n : ns) {
            auto running = [&] {
                auto v = zk->get(pvc::schema::path("node.running_domains", {n.name})).value_or("");
                return std::count(v.begin(), v.end(), '-') / 4;
            };
            if (!pvc::test::eventually([&] { return running() >= vms / nodes; }, 120s))
                std::cout << n.name << ": " << running() << " VMs running after 120 s\n";
        }
    }
    // Settle (VM start-up, the first health pass), then a window of `ticks`
    // keepalives of hv1, starting right after one.
    std::this_thread::sleep_for(std::chrono::seconds(sc.keepalive_s + 2));
    auto hv1_ts = [&] { return std::stol(zk->get(pvc::schema::path("node.keepalive", {"hv1"})).value_or("0")); };
    long k0 = hv1_ts();
    while (hv1_ts() == k0) std::this_thread::sleep_for(5ms);
    k0 = hv1_ts();
    for (auto& n : ns) {
        n.log0 = pvc::test::slurp(n.dir->path() / "log" / "pvc.log").size();
        n.p0 = sample(n.daemon->pid());
    }
    auto z0 = sample(zk_pid);
    auto w0 = Clock::now();
    long long max_outstanding = 0;
    auto next = Clock::now();
    while (hv1_ts() < k0 + static_cast<long>(ticks) * sc.keepalive_s) {
        if (Clock::now() >= next) {
            max_outstanding = std::max(max_outstanding,
                                       mntr_value(four_letter(server.port(), "mntr"), "zk_outstanding_requests"));
            next += 1s;
        }
        std::this_thread::sleep_for(20ms);
    }
    auto z1 = sample(zk_pid);
    for (auto& n : ns) n.p1 = sample(n.daemon->pid());
    double window_s = std::chrono::duration<double>(Clock::now() - w0).count();
    std::string mntr = four_letter(server.port(), "mntr");
    std::string wchs = four_letter(server.port(), "wchs");
    std::cout << fmt::format("{:<6} {:>8} {:>9} {:>7} {:>6} {:>6} {:>4} {:>6}\n", "node", "to run", "CPU/tick",
                             "wall/t", "RSS", "PSS", "thr", "ticks");
    std::cout << fmt::format("{:<6} {:>8} {:>9} {:>7} {:>6} {:>6} {:>4} {:>6}\n", "", "ms", "ms", "ms", "MiB", "MiB",
                             "", "");
    double max_run = 0, max_cpu = 0, sum_cpu = 0, max_rss = 0, sum_rss = 0;
    for (auto& n : ns) {
        auto [wall, seen] = tick_wall_ms(n.dir->path() / "log" / "pvc.log", n.log0);
        double cpu = (n.p1.cpu_ms - n.p0.cpu_ms) / ticks;
        double rss = n.p1.rss_kib / 1024.0;
        max_run = std::max(max_run, n.to_run_ms);
        max_cpu = std::max(max_cpu, cpu);
        sum_cpu += cpu;
        max_rss = std::max(max_rss, rss);
        sum_rss += rss;
        std::cout << fmt::format("{:<6} {:>8.0f} {:>9.3f} {:>7.1f} {:>6.1f} {:>6.1f} {:>4} {:>6}\n", n.name,
                                 n.to_run_ms, cpu, wall, rss, n.p1.pss_kib / 1024.0, n.p1.threads, seen);
    }
    std::cout << fmt::format("max start->run {:.0f} ms; CPU/tick mean {:.3f} ms, max {:.3f} ms; RSS max {:.1f} MiB, "
                             "all {:.1f} MiB\n",
                             max_run, sum_cpu / nodes, max_cpu, max_rss, sum_rss);
    double zk_cpu = z1.cpu_ms - z0.cpu_ms;
    std::cout << fmt::format("ZooKeeper (JVM pid {}): CPU {:.0f} ms over {:.1f} s = {:.1f} ms/s ({:.1f}% of a core), "
                             "{:.1f} ms per 5 s tick; RSS {:.1f} MiB\n",
                             zk_pid, zk_cpu, window_s, zk_cpu / window_s, zk_cpu / window_s / 10.0, zk_cpu / ticks,
                             z1.rss_kib / 1024.0);
    auto total_watches = [&] {
        auto p = wchs.find("Total watches:");
        return p == std::string::npos ? -1LL : std::stoll(wchs.substr(p + 14));
    };
    auto first_line = wchs.substr(0, wchs.find('\n'));
    std::cout << fmt::format("ZooKeeper: watches {} (mntr zk_watch_count; wchs: {}, total {}), znodes {}, "
                             "outstanding requests {} at the end (max {} sampled each second), connections {}\n",
                             mntr_value(mntr, "zk_watch_count"), first_line, total_watches(),
                             mntr_value(mntr, "zk_znode_count"), mntr_value(mntr, "zk_outstanding_requests"),
                             max_outstanding, mntr_value(mntr, "zk_num_alive_connections"))
              << std::flush;
    if (soak_minutes > 0) {
        const char* every = std::getenv("PVC_BENCH_SAMPLE_S");
        const auto period = std::chrono::seconds(every && std::atoi(every) > 0 ? std::atoi(every) : 30);
        std::cout << fmt::format("held for {:.0f} min; ZooKeeper every {} s (heap: used now / live after a full GC "
                                 "(jcmd GC.run), MiB; heap max 128 MiB as the tests' server)\n",
                                 soak_minutes, period.count());
        std::cout << fmt::format("{:>7} {:>8} {:>8} {:>9} {:>9} {:>8} {:>9} {:>7}\n", "min", "heap", "live",
                                 "data KiB", "znodes", "txn/s", "KB/s in", "RSS MiB")
                  << std::flush;
        auto s0 = Clock::now();
        auto end = s0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(soak_minutes * 60));
        long long z_prev = zxid(server.port());
        long long in_prev = mntr_value(four_letter(server.port(), "mntr"), "zk_bytes_received_count");
        auto t_prev = Clock::now();
        double live_first = -1, live_last = -1;
        while (Clock::now() < end) {
            std::this_thread::sleep_until(std::min(end, t_prev + period));
            auto now = Clock::now();
            double dt = std::chrono::duration<double>(now - t_prev).count();
            long long z = zxid(server.port());
            std::string m = four_letter(server.port(), "mntr");
            if (m.empty()) {
                std::cout << fmt::format("ZooKeeper no longer answers after {:.1f} min (its JVM out of heap?)\n",
                                         std::chrono::duration<double>(now - s0).count() / 60);
                break;
            }
            long long in = mntr_value(m, "zk_bytes_received_count");
            auto [used, old] = jvm_heap_kib(zk_pid);
            pvc::test::run_command({"jcmd", std::to_string(zk_pid), "GC.run"}, std::chrono::seconds(20));
            auto [live, live_old] = jvm_heap_kib(zk_pid);
            (void)old;
            (void)live_old;
            if (live >= 0) {
                if (live_first < 0) live_first = live;
                live_last = live;
            }
            std::cout << fmt::format("{:>7.1f} {:>8.1f} {:>8.1f} {:>9.0f} {:>9} {:>8.1f} {:>9.1f} {:>7.1f}\n",
                                     std::chrono::duration<double>(now - s0).count() / 60, used / 1024, live / 1024,
                                     static_cast<double>(mntr_value(m, "zk_approximate_data_size")) / 1024,
                                     mntr_value(m, "zk_znode_count"), static_cast<double>(z - z_prev) / dt,
                                     static_cast<double>(in - in_prev) / 1000 / dt, sample(zk_pid).rss_kib / 1024.0)
                      << std::flush;
            z_prev = z;
            in_prev = in;
            t_prev = now;
        }
        if (live_first >= 0)
            std::cout << fmt::format("ZooKeeper's live heap {:.1f} -> {:.1f} MiB over {:.0f} min\n",
                                     live_first / 1024, live_last / 1024, soak_minutes);
        else
            std::cout << "jstat not found (openjdk-17-jdk-headless): heap not shown\n";
        std::cout << std::flush;
    }
    // Stop in reverse order (the coordinators last), one at a time.
    std::string stops;
    for (auto it = ns.rbegin(); it != ns.rend(); ++it) {
        auto s0 = Clock::now();
        it->daemon->signal(SIGTERM);
        int rc = it->daemon->wait(30s);
        stops += fmt::format(" {} {:.0f}{}", it->name, std::chrono::duration<double, std::milli>(Clock::now() - s0).count(),
                             rc < 0 ? " (killed)" : "");
        if (rc < 0) {
            auto log = pvc::test::slurp(it->dir->path() / "log" / "pvc.log");
            std::cout << it->name << " did not stop in 30 s; its log ends:\n"
                      << log.substr(log.size() > 1500 ? log.size() - 1500 : 0) << "\n";
        }
    }
    std::cout << "stop ms:" << stops << "\n" << std::flush;
}
}  // namespace

int main(int argc, char** argv) {
    int ticks = argc > 1 ? std::atoi(argv[1]) : 12;
    std::string only = argc > 2 ? argv[2] : "cpit";
    int fast_ticks = argc > 3 ? std::atoi(argv[3]) : 1000;
    const char* real_uri = std::getenv("PVC_BENCH_LIBVIRT_URI");
    bool have_hv = std::filesystem::exists(pvc::test::build_dir() + "/modules/libpvc-module-hypervisor.so");
    std::cout << fmt::format(
        "pvcnoded in the shipped configuration (etc/pvcnoded.sample.yaml's logging: ZooKeeper log 2,000 lines, "
        "routine lines batched 60 s, warnings 1 s; keepalive and plugin lines, colours; debug off; keepalive 5 s; "
        "monitoring_interval 60 s)\n"
        "{} ticks measured per scenario at 5 s; memory after {} ticks fast-forwarded at 100 ms\n",
        ticks, fast_ticks);
    auto want = [&](char c) { return only.find(c) != std::string::npos; };
    bool single = only.find_first_not_of("zZl") != std::string::npos;  // any one-daemon scenario of the table
    if (single) {
        std::cout << fmt::format("{:<40} {:>8} {:>9} {:>8} {:>8} {:>7} {:>6} {:>6} {:>4} {:>7}\n", "scenario",
                                 "to run", "CPU/tick", "ZK rq/t", "KiB/t", "wall/t", "RSS", "PSS", "thr", "stop ms");
        std::cout << fmt::format("{:<40} {:>8} {:>9} {:>8} {:>8} {:>7} {:>6} {:>6} {:>4} {:>7}\n", "", "ms", "ms", "",
                                 "", "ms", "MiB", "MiB", "", "")
                  << std::flush;
    }
    if (want('c')) measure({.label = "core only", .fast_keepalive_ms = 100}, ticks, fast_ticks);
    if (want('n')) measure({.label = "core only, ZooKeeper logging off", .zk_log_ms = -1}, ticks, 0);
    if (want('p'))
        measure({.label = "core + 12 plugins (Python host)", .plugins = true, .fast_keepalive_ms = 100}, ticks,
                fast_ticks);
    // PVC_BENCH_VMS=50: only that VM count of t/i/r (e.g. to profile one daemon).
    const char* only_vms = std::getenv("PVC_BENCH_VMS");
    auto vm_count_wanted = [&](int vms) { return !only_vms || std::atoi(only_vms) == vms; };
    if (want('t')) {
        if (!have_hv) std::cout << "hypervisor scenarios skipped: module not built\n";
        for (int vms : {0, 10, 50})
            if (have_hv && vm_count_wanted(vms))
                measure({.label = fmt::format("hypervisor, {} VMs (test driver)", vms), .vms = vms ? vms : -1,
                         .fast_keepalive_ms = 100},
                        ticks, fast_ticks);
    }
    if (want('i') && have_hv)
        for (int vms : {0, 10, 50})
            if (vm_count_wanted(vms))
                measure({.label = fmt::format("hypervisor {} VMs + `load` (test drv)", vms), .load_plugin_only = true,
                         .vms = vms ? vms : -1, .fast_keepalive_ms = 100},
                        ticks, fast_ticks);
    if (want('s') && have_hv)
        measure({.label = "hypervisor, 1,000 VMs of another node", .vms = -1, .foreign_vms = 1000,
                 .fast_keepalive_ms = 100},
                ticks, fast_ticks);
    if (want('z') || want('Z')) {
        if (have_hv) measure_ten(ticks, want('Z') ? bench_minutes(5) : 0);
        else std::cout << "scenario z skipped: hypervisor module not built\n";
    }
    if (want('l')) measure_ring(bench_minutes(3));
    if (want('r')) {
        if (!real_uri || !have_hv)
            std::cout << "real libvirtd scenarios skipped: set PVC_BENCH_LIBVIRT_URI (e.g. a lab node's libvirtd)\n";
        else
            for (int vms : {0, 10, 50})
                if (vm_count_wanted(vms))
                    measure({.label = fmt::format("hypervisor, {} VMs ({})", vms, real_uri), .vms = vms ? vms : -1,
                             .libvirt_uri = real_uri, .fast_keepalive_ms = 100},
                            ticks, fast_ticks);
    }
    if (want('o')) {
        // The old bench's settings: debug on, a health pass per keepalive, one ZooKeeper write per line.
        measure({.label = "plugins, debug, pass per tick, ZK/line", .plugins = true, .zk_log_ms = 0,
                 .zk_batch_ms = 0, .shipped_logging = false},
                ticks, 0);
    }
    if (single)
        std::cout << "CPU/tick: user+system of the whole process (exited threads included) over the window / ticks;\n"
                     "ZK rq/t: requests the server received on the daemon's connections per tick (pings included);\n"
                     "KiB/t: bytes the daemon sent to ZooKeeper per tick; wall/t: the keepalive line's own time (10 "
                     "ms steps);\n"
                     "RSS/PSS/threads at the end of the window.\n";
    return 0;
}
