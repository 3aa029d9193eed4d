// FenceMonitor: the pure decision core (node-lifecycle.md §10.2 made
// skew-proof; modules/fencing/README.md "Detection").
#include "fence_monitor.hpp"

#include <gtest/gtest.h>

using namespace std::chrono_literals;
using pvc::fencing::Clock;
using pvc::fencing::FenceMonitor;
using pvc::fencing::Observation;

namespace {

// A fencer scanning every second: keepalive 1 s × 3 intervals = 3 s deadline.
struct Scanner {
    FenceMonitor monitor{1000ms, 3};
    Clock::time_point now = Clock::time_point{} + 1000h;
    std::vector<std::string> scan(std::vector<Observation> obs, Clock::duration step = 1s) {
        now += step;
        return monitor.scan(now, obs);
    }
};

Observation run_node(const std::string& name, int64_t mzxid, std::optional<long long> written = std::nullopt) {
    return Observation{name, "run", mzxid, written};
}

}  // namespace

TEST(FenceMonitor, SilentRunNodeIsDeadOnlyAfterTheDeadline) {
    Scanner s;
    // Scans 1..4 cover 3 s since the first sight: not yet older than the deadline.
    for (int i = 0; i < 4; ++i) EXPECT_TRUE(s.scan({run_node("hv3", 7)}).empty()) << "scan " << i;
    EXPECT_EQ(s.scan({run_node("hv3", 7)}), std::vector<std::string>{"hv3"});
}

TEST(FenceMonitor, NodeWritingEveryIntervalIsNeverDead) {
    Scanner s;
    for (int64_t i = 0; i < 100; ++i) EXPECT_TRUE(s.scan({run_node("hv2", 100 + i)}).empty());
}

TEST(FenceMonitor, NodePausedForLessThanTheDeadlineIsNotDead) {
    Scanner s;
    int64_t z = 1;
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.scan({run_node("hv2", ++z)}).empty());
    // Silent for 2.9 s (SIGSTOP shorter than the 3 s deadline), then writes again.
    EXPECT_TRUE(s.scan({run_node("hv2", z)}, 1s).empty());
    EXPECT_TRUE(s.scan({run_node("hv2", z)}, 1s).empty());
    EXPECT_TRUE(s.scan({run_node("hv2", z)}, 900ms).empty());
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.scan({run_node("hv2", ++z)}).empty());
}

// The node's clock is 60 s behind the fencer's: the reference would call every
// one of its keepalives 60 s old. The monitor never looks at what it wrote.
TEST(FenceMonitor, NodeClockSixtySecondsBehindIsNotDead) {
    Scanner s;
    const long long fencer_wall = 1'800'000'000;
    for (int i = 0; i < 50; ++i)
        EXPECT_TRUE(s.scan({run_node("hv2", 10 + i, fencer_wall + i - 60)}).empty()) << "scan " << i;
}

// ... and a node 60 s ahead cannot hide its death either.
TEST(FenceMonitor, NodeClockSixtySecondsAheadIsStillDeadWhenSilent) {
    Scanner s;
    const long long fencer_wall = 1'800'000'000;
    std::vector<std::string> dead;
    for (int i = 0; i < 6 && dead.empty(); ++i) dead = s.scan({run_node("hv2", 10, fencer_wall + 60)});
    EXPECT_EQ(dead, std::vector<std::string>{"hv2"});
}

TEST(FenceMonitor, OnlyRunNodesAreJudged) {
    Scanner s;
    for (int i = 0; i < 10; ++i) {
        auto dead = s.scan({Observation{"a", "stop", 1}, Observation{"b", "dead", 2}, Observation{"c", "init", 3},
                            Observation{"d", "fenced", 4}, Observation{"e", "shutdown", 5},
                            Observation{"f", std::nullopt, 6}});
        EXPECT_TRUE(dead.empty()) << "scan " << i;
    }
}

TEST(FenceMonitor, UnreadableKeepaliveIsNotJudged) {
    Scanner s;
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.scan({Observation{"hv2", "run", std::nullopt}}).empty());
}

// The fencer itself was paused (SIGSTOP, a paused VM) past the deadline,
// together with the node, which writes again half a second after both resume.
// The first scan after the pause still sees the old keepalive: it must not judge.
TEST(FenceMonitor, FencerPausedPastTheDeadlineJudgesNobodyUntilFreshObservations) {
    Scanner s;
    int64_t z = 1;
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(s.scan({run_node("hv2", ++z)}).empty());
    EXPECT_TRUE(s.scan({run_node("hv2", z)}, 10s).empty());  // late tick: distrust
    EXPECT_TRUE(s.monitor.distrusting(s.now));
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(s.scan({run_node("hv2", ++z)}).empty());
}

TEST(FenceMonitor, AfterDistrustADeadNodeIsJudgedAfterAFullFreshDeadline) {
    Scanner s;
    for (int i = 0; i < 2; ++i) s.scan({run_node("hv3", 5)});
    s.monitor.distrust(s.now);  // own ZooKeeper reconnection
    // hv3 has been silent for 2 s already, but the fencer counts from the distrust.
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.scan({run_node("hv3", 5)}).empty()) << "scan " << i;
    EXPECT_EQ(s.scan({run_node("hv3", 5)}, 1100ms), std::vector<std::string>{"hv3"});
}

TEST(FenceMonitor, AgeCountsFromTheFirstSightOfTheCurrentKeepalive) {
    Scanner s;
    s.scan({run_node("hv2", 1)});
    auto first = s.now;
    s.scan({run_node("hv2", 1)});
    s.scan({run_node("hv2", 2)});
    EXPECT_EQ(*s.monitor.last_seen("hv2"), first + 2s);
    EXPECT_FALSE(s.monitor.age("nobody", s.now).has_value());
}
