// Flush of 50 VMs between two nodes on libvirt's test driver against a real
// ZooKeeper: prints the time from `flush` to `flushed` and back (`unflush` to
// `ready`). Figures only; never pass/fail.
#include <cstdio>

#include "../tests/hv_fixture.hpp"

using namespace pvc;
using namespace pvc::hv::test;

namespace {
class Bench : public HvTest {
public:
    void TestBody() override {}
    void run(int vms, int parallel) {
        SetUp();
        register_node("hv1");
        register_node("hv2");
        TestNode n1("hv1", server.hosts(), dir.path(), private_uri(), parallel);
        TestNode n2("hv2", server.hosts(), dir.path(), private_uri(), parallel);
        n1.start();
        n2.start();
        std::vector<std::string> ids;
        for (int i = 0; i < vms; i++) {
            ids.push_back(uuid_n(1000 + i));
            define(ids.back(), "b" + std::to_string(i), "hv1", "start", "shutdown");
        }
        eventually([&] { for (auto& u : ids) if (!n1.hv->libvirt().running(u)) return false; return true; }, 120s);
        n1.hv->collect();
        auto t0 = std::chrono::steady_clock::now();
        set("node.state.domain", "hv1", "flush");
        bool ok = eventually([&] { return get("node.state.domain", "hv1") == "flushed"; }, 600s);
        auto t1 = std::chrono::steady_clock::now();
        set("node.state.domain", "hv1", "unflush");
        bool ok2 = eventually([&] { return get("node.state.domain", "hv1") == "ready"; }, 600s);
        auto t2 = std::chrono::steady_clock::now();
        int moved = 0;
        for (auto& u : ids) moved += n1.hv->libvirt().running(u);
        auto s = [](auto d) { return std::chrono::duration<double>(d).count(); };
        std::printf("hv_flush_bench: %d VMs, max_parallel_migrations=%d: flush %.2f s (%s), unflush %.2f s (%s), "
                    "%d back on hv1\n", vms, parallel, s(t1 - t0), ok ? "flushed" : "TIMEOUT", s(t2 - t1),
                    ok2 ? "ready" : "TIMEOUT", moved);
        n1.stop();
        n2.stop();
        TearDown();
    }
};
}  // namespace

int main(int argc, char** argv) {
    int vms = argc > 1 ? std::atoi(argv[1]) : 50;
    for (int parallel : {1, 4}) {
        Bench b;
        b.run(vms, parallel);
    }
    return 0;
}
