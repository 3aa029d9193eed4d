// storage_bench: what the storage module costs the keepalive.
//
// A private mini Ceph (3 memstore OSDs, 10 pools) and ZooKeeper on loopback;
// the module started with a NodeContext as pvcnoded starts it. A loop plays
// the keepalive at 1 s: each iteration emits the keepalive tick and takes the
// module's contribution, as the core does. Printed, for a non-primary and a
// primary node: the keepalive path's wall time per tick, the process CPU per
// tick (the collections on the module's worker included), and one
// collection's wall time; then, with the monitor stopped for 15 s, the
// longest gap between two keepalive iterations and the longest keepalive path.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "pvc/cluster.hpp"
#include "config_reader.hpp"
#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/zk_server.hpp"
#include "storage.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using pvc::schema::path;

namespace {

double cpu_seconds() {
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Phase {
    double path_avg_ms = 0, path_max_ms = 0, cpu_per_tick_ms = 0, max_gap_ms = 0;
};

// `ticks` keepalive iterations at `interval`.
Phase keepalives(pvc::CoreEvents& events, pvc::storage::StorageModule& m, int ticks, std::chrono::milliseconds interval) {
    Phase p;
    double cpu0 = cpu_seconds();
    Clock::time_point last{};
    double total = 0;
    for (int i = 0; i < ticks; ++i) {
        auto t0 = Clock::now();
        if (last != Clock::time_point{}) p.max_gap_ms = std::max(p.max_gap_ms, ms(t0 - last));
        last = t0;
        events.keepalive_tick.emit();
        pvc::KeepaliveReport r;
        m.contribute(r);
        double d = ms(Clock::now() - t0);
        total += d;
        p.path_max_ms = std::max(p.path_max_ms, d);
        std::this_thread::sleep_until(t0 + interval);
    }
    p.path_avg_ms = total / ticks;
    p.cpu_per_tick_ms = (cpu_seconds() - cpu0) * 1000 / ticks;
    return p;
}

}  // namespace

int main() {
    auto t0 = Clock::now();
    pvc::test::CephCluster ceph(3);
    for (int i = 1; i < 10; ++i) ceph.create_pool("pool" + std::to_string(i), 8);
    std::printf("mini Ceph: 3 OSDs, 10 pools, HEALTH_OK after %.1f s\n", ms(Clock::now() - t0) / 1000);

    pvc::test::ZkServer zk;
    auto session = pvc::zk::Session::connect({zk.hosts()});
    pvc::init_cluster(*session);
    const std::string node = "hv1";
    session->ensure_path(path("node.name", {node}));
    for (int i = 0; i < 10; ++i) {
        std::string pool = i == 0 ? "rbd" : "pool" + std::to_string(i);
        session->write({{path("pool.name", {pool}), ""}, {path("pool.stats", {pool}), "{}"}});
    }
    for (int i = 0; i < 3; ++i)
        session->write({{path("osd.id", {std::to_string(i)}), ""}, {path("osd.node", {std::to_string(i)}), node}});

    pvc::Config cfg;
    cfg.node = node;
    cfg.daemon_mode = "hypervisor";  // no systemctl for ceph-mon@/ceph-mgr@; primary comes from routerstate
    cfg.enable_storage = true;
    // The module's keys, as it reads them from the document.
    cfg.document = pvc::parse_config_tree("pvc:\n  system:\n    configuration:\n      storage:\n"
                                          "        ceph_config_file: " + ceph.conf().string() + "\n"
                                          "        ceph_admin_keyring: " + ceph.keyring().string() + "\n"
                                          "      networking:\n        storage:\n          address: 127.0.0.1/8\n",
                                          "bench");
    pvc::Executor ex(4);
    auto guard = boost::asio::make_work_guard(ex.io());
    std::thread io([&] { ex.run_io(); });
    pvc::CoreEvents events;
    auto core = ex.make_strand();
    pvc::deliver_core_events(events, ex, core);
    pvc::ServiceRegistry services;
    pvc::storage::StorageModule m;
    pvc::ConfigProblems problems;
    m.configure(cfg, problems);
    pvc::NodeContext ctx{cfg, pvc::Logger(pvc::make_log_sink(nullptr), "storage"), session, ex, events, services};
    m.start(ctx);
    std::this_thread::sleep_for(1s);  // mirrors filled

    for (const char* role : {"secondary", "primary"}) {
        session->write(path("node.state.router", {node}), role);
        keepalives(events, m, 3, 1000ms);  // warm-up
        auto p = keepalives(events, m, 20, 1000ms);
        auto c0 = Clock::now();
        m.collector()->collect();
        std::printf("%-9s keepalive path %.3f ms avg, %.3f ms max; process CPU %.2f ms per keepalive; "
                    "one collection %.1f ms wall\n",
                    role, p.path_avg_ms, p.path_max_ms, p.cpu_per_tick_ms, ms(Clock::now() - c0));
    }

    // Monitor outage (ceph_timeout 3 s): the keepalive loop keeps its 1 s.
    ceph.stop_mon();
    auto p = keepalives(events, m, 15, 1000ms);
    std::printf("monitor outage 15 s: max keepalive gap %.1f ms (interval 1000 ms), keepalive path max %.3f ms, "
                "collections meanwhile %llu\n",
                p.max_gap_ms, p.path_max_ms, static_cast<unsigned long long>(m.collector()->collections()));
    ceph.start_mon();
    auto before = m.collector()->published();
    auto r0 = Clock::now();
    while (m.collector()->published() == before && Clock::now() - r0 < 60s) keepalives(events, m, 1, 1000ms);
    std::printf("monitor back: figures published again after %.1f s\n", ms(Clock::now() - r0) / 1000);

    m.stop();
    guard.reset();
    ex.io().stop();
    io.join();
    ex.stop_pool();
    return 0;
}
