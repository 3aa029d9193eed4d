// Memory of the health host over many passes (issue: RSS grew over passes):
// twelve legacy Python plugins, as many as the shipped set, run 1,000
// measured passes; the process's resident memory and thread count stay flat.
// A test of growth, not of time.
#include "health_support.hpp"

#include <fstream>

#include <fmt/format.h>

using namespace std::chrono_literals;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitizer_build = true;  // not built under TSan (tests/integration/CMakeLists.txt)
#else
constexpr bool sanitizer_build = false;
#endif

#if defined(__SANITIZE_ADDRESS__)
// AddressSanitizer holds freed memory in a quarantine of 256 MiB before reusing
// it, which reads as growth here. This test measures the steady state of the
// allocator, so the quarantine is off in this binary only (ASan's other checks
// stay on; the environment's ASAN_OPTIONS still apply on top).
extern "C" const char* __asan_default_options() {
    return "quarantine_size_mb=0:thread_local_quarantine_size_kb=0";
}
#endif

namespace {

long status_field(const char* name) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(name, 0) == 0) return std::stol(line.substr(std::string(name).size()));
    return -1;
}

class HealthMemoryTest : public pvc::test::HealthTest {};

TEST_F(HealthMemoryTest, TwelvePythonPluginsStayFlatOverAThousandPasses) {
    for (int i = 0; i < 12; ++i) {
        // Each pass makes fresh objects, a message and data, as the shipped plugins do.
        python_plugin(fmt::format("p{:02d}", i), fmt::format("p{:02d}", i),
                      "        rows = [{'n': n, 's': 'x' * 64} for n in range(200)]\n"
                      "        self.plugin_result.set_health_delta(0)\n"
                      "        self.plugin_result.set_message('{} rows'.format(len(rows)))\n"
                      "        self.plugin_result.set_data({'rows': rows[:5]})\n"
                      "        return self.plugin_result\n");
    }
    auto h = host(config());
    h->load();
    ASSERT_EQ(h->plugin_names().size(), 12u);
    // Warm-up: the interpreter's, the allocator's and ZooKeeper's pools fill first.
    for (int i = 0; i < 100; ++i) pass(*h);
    const long rss0 = status_field("VmRSS:"), threads0 = status_field("Threads:");
    const int passes = 1000;
    for (int i = 0; i < passes; ++i) pass(*h);
    // Threads of the last pass end just after it is counted.
    pvc::test::eventually([&] { return status_field("Threads:") <= threads0; }, 10s);
    const long rss1 = status_field("VmRSS:"), threads1 = status_field("Threads:");
    std::cout << fmt::format("RSS {} -> {} KiB, threads {} -> {} over {} passes of 12 plugins\n", rss0, rss1,
                             threads0, threads1, passes);
    // 1 KiB per plugin call kept would be 11.7 MiB; the bound is well below
    // that. Under a sanitizer the runtime's
    // own bookkeeping grows with every thread a pass starts and every object
    // carries redzones (measured 1.5-2.4 MiB under ASan with its quarantine
    // off), so there the bound is 1 KiB per plugin call: a leak of a plugin's
    // result still fails. (Under TSan the same bookkeeping alone measured
    // 4.7 MiB: the test is not built there.)
    const long bound = sanitizer_build ? passes * 12 : 2048;
    EXPECT_LE(rss1 - rss0, bound) << "resident memory grew over " << passes << " passes";
    EXPECT_LE(threads1, threads0) << "threads left behind by passes";
    h->shutdown(5s);
}

}  // namespace
