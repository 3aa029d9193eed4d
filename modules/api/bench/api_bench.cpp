// api_bench: the API on a real pvcnoded (a coordinator, primary, API on)
// with 1,000 VMs defined in a private ZooKeeper. Prints requests per second
// and latency percentiles for GET /api/v1/vm (the whole list) and for
// /api/v1/metrics, from one client and from four at once, and the daemon's
// RSS with the API on and, for comparison, off. Figures only: nothing here
// passes or fails on time.
//
//   api_bench [vms=1000] [requests=200]
#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "http_client.hpp"
#include "pvc/client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc;
using namespace pvc::api::test;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

const std::string token = "bench-token";
constexpr uint16_t port = 17371;

long rss_kib(int pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line;
    while (std::getline(in, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

std::filesystem::path config(const std::filesystem::path& dir, int zk_port, bool api) {
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.coordinators = "[hv1:" + std::to_string(zk_port) + "]";
    o.base_dir = dir;
    o.module_dir = pvc::test::build_dir() + "/modules";
    o.stdout_logging = false;
    o.zookeeper_logging = false;
    std::string yaml = pvc::test::node_config_yaml(o);
    if (api) {
        yaml.replace(yaml.find("enable_api: false"), 17, "enable_api: true");
        yaml.insert(yaml.find("  cluster:\n"), "  api:\n    listen_address: 127.0.0.1\n    listen_port: " + std::to_string(port) +
                                                   "\n    authentication:\n      tokens:\n        - description: bench\n"
                                                   "          token: " + token + "\n");
    }
    std::filesystem::create_directories(dir);
    auto file = dir / "pvcnoded.yaml";
    std::ofstream(file) << yaml;
    return file;
}

struct Figures {
    double per_second = 0, p50 = 0, p99 = 0, max = 0;
    size_t bytes = 0;
};

Figures measure(const std::string& target, int requests, int clients) {
    std::vector<std::vector<double>> lat(clients);
    std::vector<size_t> bytes(clients);
    auto t0 = Clock::now();
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
        threads.emplace_back([&, c] {
            Connection conn("127.0.0.1", port);
            Call call;
            call.target = target;
            call.api_key = token;
            for (int i = 0; i < requests / clients; ++i) {
                auto s = Clock::now();
                auto r = conn.send(call);
                lat[c].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
                bytes[c] = r.body.size();
                if (r.status != 200) std::fprintf(stderr, "%s: status %u\n", target.c_str(), r.status);
            }
        });
    for (auto& t : threads) t.join();
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::vector<double> all;
    for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
    std::sort(all.begin(), all.end());
    Figures f;
    f.per_second = all.size() / secs;
    f.p50 = all[all.size() / 2];
    f.p99 = all[std::min(all.size() - 1, all.size() * 99 / 100)];
    f.max = all.back();
    f.bytes = bytes[0];
    return f;
}

}  // namespace

int main(int argc, char** argv) {
    int vms = argc > 1 ? std::atoi(argv[1]) : 1000;
    int requests = argc > 2 ? std::atoi(argv[2]) : 200;
    pvc::test::ZkServer zk;
    pvc::test::TempDir dir("pvc-api-bench");
    auto session = zk::Session::connect({.hosts = zk.hosts()});
    init_cluster(*session);

    std::printf("api_bench: %d VMs, %d requests per figure\n", vms, requests);
    auto t0 = Clock::now();
    for (int i = 0; i < vms; ++i) {
        char uuid[37];
        std::snprintf(uuid, sizeof uuid, "5a0e1d2c-0000-4000-8000-%012d", i);
        std::string name = "vm" + std::to_string(i);
        client::VmDefinition d;
        d.uuid = uuid;
        d.name = name;
        d.node = "hv1";
        d.xml = "<domain type='kvm'><name>" + name + "</name><uuid>" + uuid +
                "</uuid><description>bench</description><memory unit='MiB'>1024</memory><vcpu>2</vcpu>"
                "<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features><devices>"
                "<emulator>/usr/bin/qemu-system-x86_64</emulator><disk type='network' device='disk'>"
                "<source protocol='rbd' name='vms/" + name + "_disk0'/><target dev='sda' bus='scsi'/></disk>"
                "<interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='vmbr100'/>"
                "<model type='virtio'/></interface><console type='pty'/></devices></domain>";
        d.rbd_list = {"vms/" + name + "_disk0"};
        d.tags = {{"bench", false}};
        if (!client::define_vm(*session, d)) {
            std::fprintf(stderr, "define %s failed\n", name.c_str());
            return 1;
        }
    }
    std::printf("defined %d VMs in %.1f s\n", vms, std::chrono::duration<double>(Clock::now() - t0).count());

    for (bool api : {false, true}) {
        auto base = dir.path() / (api ? "on" : "off");
        pvc::test::DaemonProcess d("hv1", config(base, zk.port(), api), base / "out");
        auto started = Clock::now();
        while (session->get(schema::path("node.state.router", {"hv1"})).value_or("") != "primary" &&
               Clock::now() - started < 60s)
            std::this_thread::sleep_for(50ms);
        if (!api) {
            std::this_thread::sleep_for(3s);
            std::printf("daemon RSS, API off: %ld KiB\n", rss_kib(d.pid()));
            d.signal(SIGTERM);
            d.wait(60s);
            continue;
        }
        // While the view loads: does the keepalive keep its interval (1 s)?
        // Its timestamp is watched every 50 ms; the largest gap between changes.
        std::atomic<bool> loaded{false};
        double max_gap = 0;
        std::thread keepalive([&] {
            std::string last;
            auto changed = Clock::now();
            while (!loaded) {
                auto v = session->get(schema::path("node.keepalive", {"hv1"})).value_or("");
                auto now = Clock::now();
                if (v != last) {
                    if (!last.empty()) max_gap = std::max(max_gap, std::chrono::duration<double>(now - changed).count());
                    last = v;
                    changed = now;
                }
                std::this_thread::sleep_for(50ms);
            }
        });
        Connection probe("127.0.0.1", port);
        Call c;
        c.target = "/api/v1/vm";
        c.api_key = token;
        while (Clock::now() - started < 120s) {
            try {
                auto r = probe.send(c);
                if (r.status == 200 && r.json().size() == static_cast<size_t>(vms)) break;
            } catch (...) {
            }
            std::this_thread::sleep_for(100ms);
        }
        std::printf("start to the full VM list served: %.1f s\n", std::chrono::duration<double>(Clock::now() - started).count());
        std::this_thread::sleep_for(3s);
        loaded = true;
        keepalive.join();
        std::printf("keepalive (interval 1 s) while the view loaded: largest gap %.2f s\n", max_gap);
        measure("/api/v1/vm", 5, 1);  // the VM objects built once
        for (int clients : {1, 4}) {
            for (const char* route : {"/api/v1/vm", "/api/v1/metrics"}) {
                Figures f = measure(route, requests, clients);
                std::printf("GET %-16s %d client%s: %7.1f req/s  p50 %6.2f ms  p99 %6.2f ms  max %6.2f ms  (%zu bytes)\n",
                            route, clients, clients > 1 ? "s" : " ", f.per_second, f.p50, f.p99, f.max, f.bytes);
            }
        }
        std::printf("daemon RSS, API on (view of %d VMs, caches warm): %ld KiB\n", vms, rss_kib(d.pid()));
        d.signal(SIGTERM);
        d.wait(60s);
    }
    session->close();
    return 0;
}
