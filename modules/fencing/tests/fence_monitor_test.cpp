// FenceMonitor: the pure decision core (the reference's detection made
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

// Judged at the deadline, not at the next scan after it. The keepalive is
// seen by a watch 300 ms after a scan; the scans come every second.
TEST(FenceMonitor, NodeIsDueForJudgementOneDeadlineAfterItsKeepaliveWasSeen) {
    Scanner s;
    for (int i = 0; i < 5; ++i) s.scan({run_node("hv3", 7)});  // past the trust window
    const auto seen = s.now + 300ms;
    s.monitor.observe("hv3", 8, seen);  // its last keepalive, through the watch
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(s.scan({run_node("hv3", 8)}).empty());  // ticks at seen + 0.7, 1.7, 2.7 s
    auto due = s.monitor.next_judgement(s.now);
    ASSERT_TRUE(due.has_value());
    EXPECT_EQ(*due, seen + 3s + 1ms);
    // A scan just before that moment judges nobody; one at it judges hv3.
    EXPECT_TRUE(s.monitor.scan(*due - 1ms, {run_node("hv3", 8)}, FenceMonitor::Cause::deadline).empty());
    EXPECT_EQ(s.monitor.scan(*due, {run_node("hv3", 8)}, FenceMonitor::Cause::deadline),
              std::vector<std::string>{"hv3"});
    // The ticks alone would have judged it at the next one, seen + 3.7 s.
}

// Our own keepalive tick is overdue (more than 1.5 intervals since the last):
// we may be the one that was stalled, so a deadline judges nobody; the late
// tick then distrusts.
TEST(FenceMonitor, DeadlineScanWhileOwnTickIsOverdueJudgesNobody) {
    Scanner s;
    for (int i = 0; i < 4; ++i) s.scan({run_node("hv3", 7)});  // hv3 silent, not yet past the deadline
    auto due = s.monitor.next_judgement(s.now);
    ASSERT_TRUE(due.has_value());
    ASSERT_GT(*due - s.now, 0ms);
    const auto stalled = s.now + 1600ms;  // ticks stopped at s.now
    ASSERT_GT(stalled, *due);
    EXPECT_TRUE(s.monitor.scan(stalled, {run_node("hv3", 7)}, FenceMonitor::Cause::deadline).empty());
    int distrusts = s.monitor.distrust_count();
    EXPECT_TRUE(s.scan({run_node("hv3", 7)}, 2s).empty());  // the late tick
    EXPECT_EQ(s.monitor.distrust_count(), distrusts + 1);
}

// A deadline scan is not a tick: it neither starts the trust window nor
// hides a late tick.
TEST(FenceMonitor, DeadlineScansDoNotCountAsTicks) {
    Scanner s;
    EXPECT_TRUE(s.monitor.scan(s.now, {run_node("hv3", 7)}, FenceMonitor::Cause::deadline).empty());
    EXPECT_TRUE(s.monitor.distrusting(s.now));
    for (int i = 0; i < 5; ++i) s.scan({run_node("hv3", 7)});
    int distrusts = s.monitor.distrust_count();
    s.monitor.scan(s.now + 1s, {run_node("hv3", 7)}, FenceMonitor::Cause::deadline);
    s.scan({run_node("hv3", 7)}, 2s);  // 2 s after the previous tick, 1 s after the deadline scan
    EXPECT_EQ(s.monitor.distrust_count(), distrusts + 1);
}

TEST(FenceMonitor, FreshKeepaliveMovesTheJudgementLater) {
    Scanner s;
    s.scan({run_node("hv2", 1)});
    auto first = s.monitor.next_judgement(s.now);
    s.monitor.observe("hv2", 2, s.now + 600ms);
    EXPECT_EQ(*s.monitor.next_judgement(s.now), *first + 600ms);
}

// A watch fires again with the value it already gave (session recovery
// re-arms every watch): the node does not get younger.
TEST(FenceMonitor, SameKeepaliveSeenAgainDoesNotRestartTheAge) {
    Scanner s;
    s.scan({run_node("hv2", 5)});
    auto since = *s.monitor.last_seen("hv2");
    s.monitor.observe("hv2", 5, s.now + 2s);
    EXPECT_EQ(*s.monitor.last_seen("hv2"), since);
}

// A watch's read delivered after a scan read a newer keepalive: the age only
// restarts (later detection), never goes back to the older first sight.
TEST(FenceMonitor, OutOfOrderObservationsOnlyMakeTheNodeYounger) {
    Scanner s;
    s.scan({run_node("hv2", 5)});
    s.scan({run_node("hv2", 6)});
    const auto newer = *s.monitor.last_seen("hv2");
    s.monitor.observe("hv2", 5, s.now + 100ms);
    EXPECT_GE(*s.monitor.last_seen("hv2"), newer);
}

TEST(FenceMonitor, AfterDistrustTheJudgementWaitsAFullDeadlineFromTheDistrust) {
    Scanner s;
    s.scan({run_node("hv3", 5)});
    s.scan({run_node("hv3", 5)});
    s.monitor.distrust(s.now);  // own ZooKeeper reconnection
    EXPECT_EQ(*s.monitor.next_judgement(s.now), s.now + 3s + 1ms);
}

// Once a scan has passed a node's judgement, it is not due again (no busy
// loop of scans for a node that stays silent, e.g. one in `stop`).
TEST(FenceMonitor, NothingIsDueAfterTheLastJudgementWasScanned) {
    Scanner s;
    for (int i = 0; i < 4; ++i) s.scan({Observation{"hv4", "stop", 9}});
    auto due = s.monitor.next_judgement(s.now);
    ASSERT_TRUE(due.has_value());
    ASSERT_LE(*due - s.now, 1s);
    s.monitor.scan(*due, {Observation{"hv4", "stop", 9}}, FenceMonitor::Cause::deadline);
    EXPECT_FALSE(s.monitor.next_judgement(*due).has_value());
}

TEST(FenceMonitor, NothingIsDueBeforeTheFirstScan) {
    FenceMonitor m{1000ms, 3};
    m.observe("hv2", 1, Clock::time_point{} + 1h);
    EXPECT_FALSE(m.next_judgement(Clock::time_point{}).has_value());
}
