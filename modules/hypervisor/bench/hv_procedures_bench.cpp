// ZooKeeper reads of the hypervisor's long procedures against a real
// ZooKeeper and libvirt's test driver: (a) 50 VMs shut down at once on one
// node, (b) a flush of 50 VMs from one node to another (migration by
// shutdown). libvirt's test driver powers a guest off the moment it is asked
// to; here each guest powers off `delay` seconds after the ACPI request (the
// domain is destroyed then, through the module's own connection), as a real
// guest does. Counted: the read calls (get, exists, children, watch re-reads)
// of each node's ZooKeeper session, from the moment the clients' writes begin
// until the last VM has settled, and their rate over that time.
//
//   hv_procedures_bench [vms] [delay seconds] [max_parallel_migrations]   default 50 3 4
//
// Figures only; never pass/fail.
#include <cstdio>

#include "../tests/hv_fixture.hpp"

using namespace pvc;
using namespace pvc::hv::test;

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The figures, printed together after the modules' log lines.
std::string report;

template <typename... Args>
void say(const char* fmt, Args... args) {
    char line[256];
    std::snprintf(line, sizeof line, fmt, args...);
    report += line;
}

void print_reads(const char* node, zk::OpCounts before, zk::OpCounts after, double s) {
    auto reads = after.reads - before.reads;
    say("    %s: %6llu ZooKeeper reads (%7.1f reads/s), %6llu requests in all\n", node,
        static_cast<unsigned long long>(reads), s > 0 ? reads / s : 0.0,
        static_cast<unsigned long long>(after.requests - before.requests));
}

// Guests power off well before the shutdown timeout: no VM is destroyed.
int shutdown_timeout(std::chrono::milliseconds delay) {
    return std::max(60, static_cast<int>(4 * std::chrono::duration_cast<std::chrono::seconds>(delay).count()));
}

class Bench : public HvTest {
public:
    void TestBody() override {}

    void shutdown(int vms, std::chrono::milliseconds delay) {
        SetUp();
        register_node("hv1");
        TestNode n1("hv1", server.hosts(), dir.path(), private_uri());
        n1.config.vm_shutdown_timeout = shutdown_timeout(delay);
        n1.start();
        std::vector<std::string> ids;
        for (int i = 0; i < vms; i++) {
            ids.push_back(uuid_n(2000 + i));
            define(ids.back(), "s" + std::to_string(i), "hv1", "start");
        }
        eventually([&] { for (auto& u : ids) if (!n1.hv->libvirt().running(u)) return false; return true; }, 120s);
        // Every dispatch of the start has finished: only the shutdown is counted.
        eventually([&] { for (auto& u : ids) if (!n1.hv->domain(u) || !n1.hv->domain(u)->idle()) return false; return true; }, 60s);
        SlowGuests guests(n1.hv->libvirt(), delay);
        auto before = n1.session->stats();
        auto t0 = Clock::now();
        for (auto& u : ids) set("domain.state", u, "shutdown");
        bool ok = eventually([&] { for (auto& u : ids) if (get("domain.state", u) != "stop") return false; return true; }, 900s);
        auto t1 = Clock::now();
        auto after = n1.session->stats();
        say("  (a) shutdown of %d VMs, one node (vm_shutdown_timeout %d s): %.1f s%s\n", vms,
                    n1.config.vm_shutdown_timeout, seconds(t1 - t0), ok ? "" : " (TIMEOUT)");
        print_reads("hv1", before, after, seconds(t1 - t0));
        n1.stop();
        TearDown();
    }

    void flush(int vms, std::chrono::milliseconds delay, int parallel) {
        SetUp();
        register_node("hv1");
        register_node("hv2");
        TestNode n1("hv1", server.hosts(), dir.path(), private_uri(), parallel);
        TestNode n2("hv2", server.hosts(), dir.path(), private_uri(), parallel);
        n1.config.vm_shutdown_timeout = n2.config.vm_shutdown_timeout = shutdown_timeout(delay);
        n1.start();
        n2.start();
        std::vector<std::string> ids;
        for (int i = 0; i < vms; i++) {
            ids.push_back(uuid_n(3000 + i));
            define(ids.back(), "f" + std::to_string(i), "hv1", "start", "shutdown");
        }
        eventually([&] { for (auto& u : ids) if (!n1.hv->libvirt().running(u)) return false; return true; }, 120s);
        eventually([&] { for (auto& u : ids) if (!n1.hv->domain(u) || !n1.hv->domain(u)->idle()) return false; return true; }, 60s);
        n1.hv->collect();
        SlowGuests guests(n1.hv->libvirt(), delay);
        auto b1 = n1.session->stats(), b2 = n2.session->stats();
        auto t0 = Clock::now();
        set("node.state.domain", "hv1", "flush");
        bool ok = eventually([&] { return get("node.state.domain", "hv1") == "flushed"; }, 1800s);
        auto t1 = Clock::now();
        auto a1 = n1.session->stats(), a2 = n2.session->stats();
        // Flushed once every VM has left `migrate`; the target may still be starting the last ones.
        eventually([&] { for (auto& u : ids) if (!n2.hv->libvirt().running(u)) return false; return true; }, 60s);
        int moved = 0;
        for (auto& u : ids) moved += n2.hv->libvirt().running(u);
        say("  (b) flush of %d VMs hv1 -> hv2 by shutdown, max_parallel_migrations=%d: %.1f s%s, %d running on hv2\n",
                    vms, parallel, seconds(t1 - t0), ok ? "" : " (TIMEOUT)", moved);
        print_reads("hv1", b1, a1, seconds(t1 - t0));
        print_reads("hv2", b2, a2, seconds(t1 - t0));
        zk::OpCounts zero{}, sum{a1.requests - b1.requests + a2.requests - b2.requests, a1.reads - b1.reads + a2.reads - b2.reads};
        print_reads("both", zero, sum, seconds(t1 - t0));
        n1.stop();
        n2.stop();
        TearDown();
    }
};

}  // namespace

int main(int argc, char** argv) {
    int vms = argc > 1 ? std::atoi(argv[1]) : 50;
    double delay_s = argc > 2 ? std::atof(argv[2]) : 3.0;
    int parallel = argc > 3 ? std::atoi(argv[3]) : 4;
    auto delay = std::chrono::milliseconds(static_cast<long>(delay_s * 1000));
    say("hv_procedures_bench: %d VMs, guests power off %.1f s after the ACPI request\n", vms, delay_s);
    {
        Bench b;
        b.shutdown(vms, delay);
    }
    {
        Bench b;
        b.flush(vms, delay, parallel);
    }
    std::fputs(report.c_str(), stdout);
    return 0;
}
