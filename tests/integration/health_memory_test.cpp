// Memory of the health host over many passes (issue: RSS grew over passes):
// twelve legacy Python plugins, as many as the shipped set, run hundreds of
// passes; the process's resident memory and thread count stay flat. A test of
// growth, not of time.
#include "health_support.hpp"

#include <fstream>

#include <fmt/format.h>

using namespace std::chrono_literals;

namespace {

long status_field(const char* name) {
    std::ifstream f("/proc/self/status");
    for (std::string line; std::getline(f, line);)
        if (line.rfind(name, 0) == 0) return std::stol(line.substr(std::string(name).size()));
    return -1;
}

class HealthMemoryTest : public pvc::test::HealthTest {};

TEST_F(HealthMemoryTest, TwelvePythonPluginsStayFlatOverHundredsOfPasses) {
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
    const int passes = 400;
    for (int i = 0; i < passes; ++i) pass(*h);
    // Threads of the last pass end just after it is counted.
    pvc::test::eventually([&] { return status_field("Threads:") <= threads0; }, 10s);
    const long rss1 = status_field("VmRSS:"), threads1 = status_field("Threads:");
    std::cout << fmt::format("RSS {} -> {} KiB, threads {} -> {} over {} passes of 12 plugins\n", rss0, rss1,
                             threads0, threads1, passes);
    // 1 KiB per plugin call kept would be 4.8 MiB; the bound is well below that.
    EXPECT_LE(rss1 - rss0, 2048) << "resident memory grew over " << passes << " passes";
    EXPECT_LE(threads1, threads0) << "threads left behind by passes";
    h->shutdown(5s);
}

}  // namespace
