// Failover time of a dead node, broken into phases: detection (last
// keepalive → fence job), saving throws, IPMI (power off → confirmed off by
// polling), recovery (confirmed off → every VM assigned, state=start).
// Real ZooKeeper and an ipmi_sim BMC; nodes and VMs are ZooKeeper keys (the
// VMs' start on their targets is the hypervisor's, measured by its benches).
//   fencing_bench [keepalive_s fence_intervals saving_throws vms]   default 1 3 0 50
#include <atomic>
#include <cstdio>
#include <thread>

#include "bmc.hpp"
#include "fencer.hpp"
#include "pvc/cluster.hpp"
#include "pvc/config.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using namespace pvc::fencing;
using pvc::schema::path;

int main(int argc, char** argv) {
    int interval_s = argc > 1 ? std::atoi(argv[1]) : 1;
    int fence_intervals = argc > 2 ? std::atoi(argv[2]) : 3;
    int throws = argc > 3 ? std::atoi(argv[3]) : 0;
    int vms = argc > 4 ? std::atoi(argv[4]) : 50;
    const auto interval = std::chrono::milliseconds(1000 * interval_s);

    pvc::test::TempDir dir("fencing-bench");
    pvc::test::ZkServer zk;
    auto s = pvc::zk::Session::connect({zk.hosts()});
    pvc::init_cluster(*s);
    s->write(path("base.config.migration_target_selector"), "mem");
    pvc::Config quiet;
    pvc::Logger log(pvc::make_log_sink(&quiet), "fencing");
    int port = pvc::test::reserve_port();
    test::Bmc bmc(dir.path() / "bmc", "127.0.0.13", port);

    for (int i = 1; i <= 3; ++i) {
        std::string n = "hv" + std::to_string(i);
        s->ensure_path(path("node.name", {n}));
    }
    std::string running;
    for (int i = 0; i < vms; ++i) {
        std::string uuid = "vm-" + std::to_string(i);
        s->ensure_path(path("domain.name", {uuid}));
        running += (i ? " " : "") + uuid;
    }
    pvc::validate_and_apply(*s, log);
    for (int i = 1; i <= 3; ++i) {
        std::string n = "hv" + std::to_string(i);
        s->write({{path("node.state.daemon", {n}), "run"}, {path("node.state.domain", {n}), "ready"},
                  {path("node.memory.free", {n}), std::to_string(1000 * i)},
                  {path("node.ipmi.hostname", {n}), "127.0.0.13"}, {path("node.ipmi.username", {n}), "admin"},
                  {path("node.ipmi.password", {n}), "pass"}, {path("node.keepalive", {n}), "0"}});
    }
    for (int i = 0; i < vms; ++i) {
        std::string uuid = "vm-" + std::to_string(i);
        s->write({{path("domain.state", {uuid}), "start"}, {path("domain.node", {uuid}), "hv3"},
                  {path("domain.meta.node_selector", {uuid}), "none"}});
    }
    s->write(path("node.running_domains", {"hv3"}), running);

    std::atomic<bool> hv3_alive{true};
    std::atomic<Clock::time_point::rep> hv3_last{0};
    std::jthread heartbeat([&](std::stop_token st) {
        auto hb = pvc::zk::Session::connect({zk.hosts()});
        while (!st.stop_requested()) {
            for (const char* n : {"hv1", "hv2", "hv3"}) {
                if (std::string(n) == "hv3" && !hv3_alive) continue;
                hb->write(path("node.keepalive", {n}), std::to_string(::time(nullptr)));
                if (std::string(n) == "hv3") hv3_last = Clock::now().time_since_epoch().count();
            }
            std::this_thread::sleep_for(interval);
        }
    });

    Ipmitool ipmi({"-C", "3", "-p", std::to_string(port)}, 5s);
    pvc::services::NoRbdLocks locks(log);
    FenceSettings fs;
    fs.interval = interval;
    fs.saving_throws = throws;
    fs.migrate_on_success = true;
    fs.confirm_window = 10s;
    Fencer fencer(pvc::zk::Session::connect({zk.hosts()}), ipmi, locks, log, fs, fence_intervals);
    std::atomic<bool> done{false};
    FenceTimes times;
    fencer.on_job_done([&](const std::string&, FenceOutcome, const FenceTimes& t) {
        times = t;
        done = true;
    });
    fencer.start();
    std::jthread ticks([&](std::stop_token st) {
        while (!st.stop_requested()) {
            fencer.on_tick();
            std::this_thread::sleep_for(interval);
        }
    });

    std::this_thread::sleep_for(interval * (fence_intervals + 2));  // past the fencer's first trust window
    hv3_alive = false;  // power loss
    while (!done) std::this_thread::sleep_for(10ms);
    // Recovery runs beside the power on; wait for its end.
    while (s->get(path("node.state.domain", {"hv3"})).value_or("") != "flushed") std::this_thread::sleep_for(10ms);
    Clock::time_point last{Clock::duration{hv3_last.load()}};
    auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
    Clock::time_point recovered = times.recovery_done;
    int moved = 0;
    for (int i = 0; i < vms; ++i) {
        std::string uuid = "vm-" + std::to_string(i);
        moved += s->get(path("domain.state", {uuid})).value_or("") == "start" &&
                 s->get(path("domain.node", {uuid})).value_or("") != "hv3";
    }
    std::printf("fencing failover: keepalive %d s x %d, %d saving throws, %d VMs (%d reassigned)\n", interval_s,
                fence_intervals, throws, vms, moved);
    std::printf("  detection      %8.0f ms  (last keepalive -> fence job; deadline %d ms)\n",
                ms(times.started - last), interval_s * fence_intervals * 1000);
    std::printf("  saving throws  %8.0f ms\n", ms(times.throws_done - times.started));
    std::printf("  IPMI           %8.0f ms  (power off -> confirmed off)\n", ms(times.confirmed_off - times.throws_done));
    std::printf("  recovery       %8.0f ms  (confirmed off -> every VM state=start elsewhere)\n",
                ms(recovered - times.confirmed_off));
    std::printf("  total          %8.0f ms  (last keepalive -> every VM assigned)\n", ms(recovered - last));
    return 0;
}
