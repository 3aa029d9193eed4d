// The daemon's log sink: the ZooKeeper ring (/logs/<node>/messages, batched
// to at most one write per zookeeper_log_interval_ms, routine lines held for
// zookeeper_log_batch_ms unless a warning or error comes, drained at shutdown
// but not over a lost connection, same value as the reference) against a
// real ZooKeeper, and the log file reopened on SIGHUP while many threads log.
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <csignal>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pvc/config.hpp"
#include "pvc/log.hpp"
#include "log_batch.hpp"  // the daemon's batch of keepalive lines
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> split_lines(const std::string& value) {
    std::vector<std::string> out;
    std::istringstream in(value);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
}

// Every line the ZooKeeper copy holds starts with the reference's timestamp.
const std::regex zk_line(R"(^\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} info: (.*)$)");

class ZooKeeperLog : public ::testing::Test {
protected:
    void SetUp() override { zk = pvc::zk::Session::connect({server.hosts()}); }

    // batch_ms 0: routine lines are written as warnings are (the tests of
    // the interval); the batching of routine lines has tests of its own.
    std::shared_ptr<pvc::LogSink> sink(int lines, int interval_ms, int batch_ms = 0) {
        pvc::Config c;
        c.zookeeper_logging = true;
        c.node_log_lines = lines;
        c.zookeeper_log_interval_ms = interval_ms;
        c.zookeeper_log_batch_ms = batch_ms;
        return pvc::make_log_sink(&c);
    }
    std::string messages() { return zk->get(messages_path).value_or(""); }
    int32_t version() {
        pvc::zk::Stat st;
        zk->get(messages_path, &st);
        return st.version;
    }

    pvc::test::ZkServer server;
    std::shared_ptr<pvc::zk::Session> zk;
    const std::string messages_path = pvc::schema::path("logs.messages", {"hv1"});
};

TEST_F(ZooKeeperLog, ALineAppearsWithinThePeriod) {
    auto s = sink(100, 300);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("first line");
    // The bound is one period (0.3 s); the margin is for a loaded machine.
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("first line") != std::string::npos; }, 10s))
        << messages();
    std::smatch m;
    auto lines = split_lines(messages());
    ASSERT_EQ(lines.size(), 1u) << messages();
    ASSERT_TRUE(std::regex_match(lines[0], m, zk_line)) << lines[0];
    EXPECT_EQ(m[1], "first line");
    pvc::shutdown_log_sink(s);
}

TEST_F(ZooKeeperLog, ALocalLoggersLinesNeverReachTheRing) {
    auto s = sink(100, 300);
    pvc::Logger log(s, "api");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.local().info("local only");
    log.local().child("api2").info("local child");
    log.info("shared line");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("shared line") != std::string::npos; }, 10s))
        << messages();
    EXPECT_EQ(messages().find("local"), std::string::npos) << messages();
    pvc::shutdown_log_sink(s);
}

TEST_F(ZooKeeperLog, ABurstIsBatchedAndKeepsTheLastLines) {
    const int kept = 200, period_ms = 400;
    auto s = sink(kept, period_ms);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("before the burst");
    ASSERT_TRUE(pvc::test::eventually([&] { return !messages().empty(); }, 10s));
    const int32_t v0 = version();
    const auto t0 = Clock::now();
    // A burst of 3,000 lines at once, then 2 s of a line every 5 ms.
    int n = 0;
    for (; n < 3000; ++n) log.info("line {}", n);
    for (auto end = Clock::now() + 2s; Clock::now() < end; ++n) {
        log.info("line {}", n);
        std::this_thread::sleep_for(5ms);
    }
    const std::string last = fmt::format("line {}", n - 1);
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find(last) != std::string::npos; }, 10s));
    const double periods = std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / period_ms;
    const int32_t writes = version() - v0;
    // Without batching this would be one write per line (> 3,000).
    EXPECT_LE(writes, static_cast<int>(periods) + 2) << n << " lines over " << periods << " periods";
    EXPECT_GE(writes, 1);

    // The value is exactly the last `kept` lines, oldest first, joined by '\n'.
    auto value = messages();
    EXPECT_NE(value.back(), '\n');
    auto lines = split_lines(value);
    ASSERT_EQ(lines.size(), static_cast<size_t>(kept));
    for (int i = 0; i < kept; ++i) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(lines[i], m, zk_line)) << lines[i];
        EXPECT_EQ(m[1], fmt::format("line {}", n - kept + i));
    }
    pvc::shutdown_log_sink(s);
}

// A keepalive logs two lines a moment apart after seconds of quiet: one
// write of the ring for both (before, the first line was written at once and
// the second one a period later: two writes of the whole ring per tick).
TEST_F(ZooKeeperLog, LinesLoggedTogetherAfterQuietShareOneWrite) {
    const int period_ms = 2000;
    auto s = sink(100, period_ms);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("start");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("start") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms + 200));  // quiet for more than a period
    const int32_t v0 = version();
    log.info("keepalive line");
    std::this_thread::sleep_for(20ms);
    log.info("cluster details line");
    ASSERT_TRUE(pvc::test::eventually(
        [&] { return messages().find("cluster details line") != std::string::npos; }, 10s));
    EXPECT_EQ(version(), v0 + 1) << messages();
    pvc::shutdown_log_sink(s);
}

// The keepalive's lines are a held batch: released after a quiet period,
// the ring is written on the releasing thread before release returns (the
// writer thread is not woken for them), in one write.
TEST_F(ZooKeeperLog, AHeldBatchIsWrittenByItsReleaseAfterAQuietPeriod) {
    const int period_ms = 1000;
    auto s = sink(100, period_ms);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("start");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("start") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms + 200));  // quiet for more than a period
    const int32_t v0 = version();
    pvc::hold_zookeeper_log(s);
    log.info("keepalive line");
    log.info("cluster details line");
    pvc::release_zookeeper_log(s);
    auto lines = split_lines(messages());
    ASSERT_EQ(lines.size(), 3u) << messages();
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[1], m, zk_line)) << lines[1];
    EXPECT_EQ(m[1], "keepalive line");
    ASSERT_TRUE(std::regex_match(lines[2], m, zk_line)) << lines[2];
    EXPECT_EQ(m[1], "cluster details line");
    EXPECT_EQ(version(), v0 + 1);
    pvc::shutdown_log_sink(s);
}

// A batch released less than a period after the last write is left to the
// writer: still one write per period, and its lines still get written.
TEST_F(ZooKeeperLog, AHeldBatchWithinThePeriodIsWrittenByTheWriter) {
    const int period_ms = 3000;
    auto s = sink(100, period_ms);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("start");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("start") != std::string::npos; }, 10s));
    const auto written = Clock::now();
    const int32_t v0 = version();
    pvc::hold_zookeeper_log(s);
    log.info("held line");
    pvc::release_zookeeper_log(s);
    // Only meaningful while the period since that write has not passed.
    if (Clock::now() - written < std::chrono::milliseconds(period_ms - 500)) {
        EXPECT_EQ(messages().find("held line"), std::string::npos) << messages();
        EXPECT_EQ(version(), v0);
    }
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("held line") != std::string::npos; }, 10s));
    EXPECT_EQ(version(), v0 + 1);
    pvc::shutdown_log_sink(s);
}

// Lines of other threads logged while a batch is held are written with it.
TEST_F(ZooKeeperLog, LinesOfOtherThreadsDuringAHoldAreWrittenWithTheBatch) {
    const int period_ms = 500;
    auto s = sink(100, period_ms);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("start");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("start") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(std::chrono::milliseconds(period_ms + 200));
    pvc::hold_zookeeper_log(s);
    std::thread([&] { log.info("other thread"); }).join();
    log.info("batch line");
    pvc::release_zookeeper_log(s);
    auto value = messages();
    EXPECT_NE(value.find("other thread"), std::string::npos) << value;
    EXPECT_NE(value.find("batch line"), std::string::npos) << value;
    pvc::shutdown_log_sink(s);
}

TEST_F(ZooKeeperLog, ShutdownWritesTheLinesOfThePeriodAtOnce) {
    auto s = sink(100, 60000);  // nothing but the first write and shutdown within this test
    pvc::Logger log(s, "");
    log.info("before attach");
    pvc::attach_zookeeper(s, zk, "hv1");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("before attach") != std::string::npos; }, 10s));
    const int32_t v0 = version();
    for (int i = 0; i < 50; ++i) log.info("late line {}", i);
    std::this_thread::sleep_for(500ms);
    EXPECT_EQ(messages().find("late line"), std::string::npos) << "written before the period ended";
    pvc::shutdown_log_sink(s);
    auto lines = split_lines(messages());
    ASSERT_EQ(lines.size(), 51u) << messages();
    EXPECT_NE(lines.back().find("late line 49"), std::string::npos) << lines.back();
    EXPECT_EQ(version(), v0 + 1);
}

// Routine lines (info, the keepalive's) wait for the batch window; a
// warning is written at once (well within 1 s) and takes them along, in one
// write. The lines logged before attach_zookeeper (the start-up's) are
// written at once.
TEST_F(ZooKeeperLog, RoutineLinesWaitForTheWindowAndAWarningTakesThemAlong) {
    auto s = sink(100, 1000, 60000);
    pvc::Logger log(s, "");
    log.info("start-up line");
    pvc::attach_zookeeper(s, zk, "hv1");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("start-up line") != std::string::npos; }, 10s));
    const int32_t v0 = version();
    log.info("routine line");
    pvc::hold_zookeeper_log(s);
    log.tick("keepalive line");
    pvc::release_zookeeper_log(s);
    // More than the interval: only the batch window holds them back.
    std::this_thread::sleep_for(1500ms);
    EXPECT_EQ(version(), v0) << messages();
    EXPECT_EQ(messages().find("routine line"), std::string::npos);
    const auto warned = Clock::now();
    log.warn("something is wrong");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("something is wrong") != std::string::npos; }, 10s));
    const auto took = Clock::now() - warned;
    EXPECT_LT(took, pvc::test::scaled(1s)) << std::chrono::duration<double>(took).count() << " s";
    auto value = messages();
    EXPECT_NE(value.find("routine line"), std::string::npos) << value;
    EXPECT_NE(value.find("keepalive line"), std::string::npos) << value;
    EXPECT_EQ(version(), v0 + 1);
    pvc::shutdown_log_sink(s);
}

// Routine lines alone are written when the window of the oldest ends, in one write.
TEST_F(ZooKeeperLog, RoutineLinesAreWrittenWhenTheWindowEnds) {
    const auto window = 1500ms;
    auto s = sink(100, 100, static_cast<int>(window.count()));
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.error("attach");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("attach") != std::string::npos; }, 10s));
    std::this_thread::sleep_for(300ms);
    const int32_t v0 = version();
    const auto first = Clock::now();
    for (int i = 0; i < 5; ++i) {
        log.info("routine {}", i);
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("routine 4") != std::string::npos; }, 10s));
    EXPECT_GE(Clock::now() - first, window - 50ms);
    EXPECT_EQ(version(), v0 + 1) << messages();
    pvc::shutdown_log_sink(s);
}

// ZooKeeper gone: the drain at shutdown does not wait for a connection
// (each write would wait an operation timeout); the lines stay in the file.
TEST_F(ZooKeeperLog, TheDrainDoesNotWaitForALostConnection) {
    auto s = sink(100, 1000, 60000);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    ASSERT_TRUE(pvc::test::eventually([&] { return version() >= 0; }, 10s));
    server.stop();
    ASSERT_TRUE(pvc::test::eventually([&] { return !zk->connected(); }, 10s));
    log.info("a line nobody will read in ZooKeeper");
    const auto t0 = Clock::now();
    pvc::shutdown_log_sink(s);
    const auto took = Clock::now() - t0;
    EXPECT_LT(took, pvc::test::scaled(1s)) << std::chrono::duration<double>(took).count() << " s";
}

TEST_F(ZooKeeperLog, LinesOfEarlierRunsAreKeptInFront) {
    zk->ensure_path(pvc::schema::path("logs.node", {"hv1"}));
    zk->write(messages_path, "2020/01/01 00:00:00.000000 info: old 1\n2020/01/01 00:00:00.000000 info: old 2\n"
                             "2020/01/01 00:00:00.000000 info: old 3");
    auto s = sink(3, 100);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("new 1");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("new 1") != std::string::npos; }, 10s));
    auto lines = split_lines(messages());
    ASSERT_EQ(lines.size(), 3u) << messages();
    EXPECT_EQ(lines[0], "2020/01/01 00:00:00.000000 info: old 2");
    EXPECT_EQ(lines[1], "2020/01/01 00:00:00.000000 info: old 3");
    EXPECT_NE(lines[2].find("info: new 1"), std::string::npos);
    pvc::shutdown_log_sink(s);
}

TEST_F(ZooKeeperLog, AWriteBehindOurBackIsOverwrittenWithTheRing) {
    auto s = sink(10, 100);
    pvc::Logger log(s, "");
    pvc::attach_zookeeper(s, zk, "hv1");
    log.info("one");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("one") != std::string::npos; }, 10s));
    // Another writer (an operator, a restore) changes the version the writer knows.
    zk->write(messages_path, "foreign");
    log.info("two");
    ASSERT_TRUE(pvc::test::eventually([&] { return messages().find("two") != std::string::npos; }, 10s))
        << messages();
    auto lines = split_lines(messages());
    ASSERT_EQ(lines.size(), 2u) << messages();
    EXPECT_NE(lines[0].find("info: one"), std::string::npos);
    pvc::shutdown_log_sink(s);
}

// SIGHUP (logrotate) while many threads log: the file is renamed away and the
// signal makes the sink reopen pvc.log, as the daemon does. No line may be
// lost, doubled or split between the files.
TEST(LogFile, SighupUnderHeavyLoggingLosesAndGarblesNoLine) {
    pvc::test::TempDir dir("logfile");
    pvc::Config c;
    c.file_logging = true;
    c.log_directory = dir.path();
    auto s = pvc::make_log_sink(&c);

    boost::asio::io_context io;
    boost::asio::signal_set hup(io, SIGHUP);
    std::atomic<int> reopened{0};
    std::function<void(const boost::system::error_code&, int)> on_hup = [&](const boost::system::error_code& ec, int) {
        if (ec) return;
        pvc::reopen_log_file(s);
        ++reopened;
        hup.async_wait(on_hup);
    };
    hup.async_wait(on_hup);
    std::thread signal_thread([&] { io.run(); });

    // Each writer logs at least per_thread lines and keeps going until the log
    // has been rotated a few times, however fast or loaded the machine is.
    const int threads = 8, per_thread = 3000, min_rotations = 3;
    const std::string padding(120, 'x');
    std::atomic<int> done{0};
    std::atomic<int> rotations{0};
    std::vector<int> written(threads, 0);
    std::vector<std::thread> writers;
    for (int t = 0; t < threads; ++t)
        writers.emplace_back([&, t] {
            pvc::Logger log(s, fmt::format("writer {}", t));
            int i = 0;
            for (; i < per_thread || rotations < min_rotations; ++i) log.info("line {} {}", i, padding);
            written[static_cast<size_t>(t)] = i;
            ++done;
        });
    while (done < threads) {
        std::filesystem::rename(dir.path() / "pvc.log", dir.path() / fmt::format("pvc.log.{}", rotations + 1));
        ++rotations;
        int before = reopened;
        ::kill(::getpid(), SIGHUP);
        ASSERT_TRUE(pvc::test::eventually([&] { return reopened > before; }, 10s));
        std::this_thread::sleep_for(2ms);
    }
    for (auto& w : writers) w.join();
    hup.cancel();
    signal_thread.join();
    EXPECT_GE(rotations, min_rotations);

    std::map<std::pair<int, int>, int> seen;
    size_t files_with_lines = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
        std::ifstream in(e.path());
        bool any = false;
        for (std::string l; std::getline(in, l);) {
            // "info: writer T - line I xxx...x", nothing more, nothing less
            int t = -1, i = -1, end = 0;
            std::sscanf(l.c_str(), "info: writer %d - line %d %n", &t, &i, &end);
            ASSERT_TRUE(t >= 0 && i >= 0 && end > 0 && l.substr(static_cast<size_t>(end)) == padding)
                << "garbled line in " << e.path() << ": " << l;
            ++seen[{t, i}];
            any = true;
        }
        files_with_lines += any;
    }
    EXPECT_GE(files_with_lines, 2u);
    size_t expected = 0;
    for (int n : written) expected += static_cast<size_t>(n);
    ASSERT_EQ(seen.size(), expected);
    for (const auto& [key, count] : seen)
        ASSERT_TRUE(key.first < threads && key.second < written[static_cast<size_t>(key.first)]) << "writer " << key.first << " line " << key.second;
    for (const auto& [key, count] : seen) EXPECT_EQ(count, 1) << "writer " << key.first << " line " << key.second;
}

}  // namespace

// A module's password (Module::secrets) is masked in every line logged once
// the daemon added it; "null" and very short values are not secrets.
TEST(LogFile, ASecretAddedByAModuleIsMaskedFromThenOn) {
    pvc::test::TempDir dir("logsecret");
    pvc::Config c;
    c.file_logging = true;
    c.log_directory = dir.path();
    auto s = pvc::make_log_sink(&c);
    pvc::Logger log(s, "");
    log.info("before: s3cr3tpass");
    pvc::add_log_secret(s, "s3cr3tpass");
    pvc::add_log_secret(s, "null");
    pvc::add_log_secret(s, "ab");
    log.info("after: s3cr3tpass and again s3cr3tpass, null, ab");
    pvc::shutdown_log_sink(s);
    std::ifstream in(dir.path() / "pvc.log");
    std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    EXPECT_NE(text.find("before: s3cr3tpass"), std::string::npos) << text;
    EXPECT_NE(text.find("after: ******** and again ********, null, ab"), std::string::npos) << text;
}
