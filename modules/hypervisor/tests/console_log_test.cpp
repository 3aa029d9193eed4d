#include <gtest/gtest.h>
#include <sys/inotify.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "console_log.hpp"
#include "inotify_hub.hpp"
#include "hv_fixture.hpp"
#include "migration.hpp"

namespace pvc::hv {

TEST(ConsoleTail, KeepsTheLastLinesWithTheirNewlines) {
    EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "b\nc\n");
    EXPECT_EQ(tail_lines("a\nb\nc", 2), "b\nc");
    EXPECT_EQ(tail_lines("a\nb\n", 5), "a\nb\n");
}
TEST(ConsoleFile, OnlyAPlainFileNameNamesTheFile) {
    const std::filesystem::path dir = "/srv/console";
    EXPECT_EQ(console_log_file(dir, "web1"), dir / "web1.log");
    EXPECT_EQ(console_log_file(dir, "a.b-c_d"), dir / "a.b-c_d.log");
    EXPECT_EQ(console_log_file(dir, "..x"), dir / "..x.log");
    for (const std::string& bad : std::vector<std::string>{"", ".", "..", "../../var/log/auth", "a/b", "/etc/passwd", std::string("a\0b", 3),
                            std::string("line\nbreak"), std::string(252, 'x')})
        EXPECT_FALSE(console_log_file(dir, bad)) << bad;
    EXPECT_TRUE(console_log_file(dir, std::string(251, 'x')));
}
TEST(ConsoleTail, NormalisesLineBreaksAndReplacesBadBytes) {
    EXPECT_EQ(tail_lines("x\r\ny\rz\n", 3), "x\ny\nz\n");
    EXPECT_EQ(tail_lines("ok\xff\n", 1), "ok\xEF\xBF\xBD\n");
}
TEST(Migration, UrisFromTheTemplate) {
    Settings s;
    s.cluster_domain = "pvc.local";
    EXPECT_EQ(destination_uri(s, "hv2"), "qemu+tcp://hv2.pvc.local/system");
    EXPECT_EQ(migration_data_uri("qemu+tcp://hv2.pvc.local/system"), "tcp://hv2.pvc.local");
    EXPECT_EQ(migration_data_uri("qemu+tcp://root@10.99.0.2:16509/system"), "tcp://10.99.0.2");
}

}  // namespace pvc::hv

namespace pvc::hv::test {

// The inotify instances of this process (each is an fd on "anon_inode:inotify").
int inotify_instances() {
    int n = 0;
    for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(e.path(), ec).string() == "anon_inode:inotify") ++n;
    }
    return n;
}

struct HubTest : ::testing::Test {
    boost::asio::io_context io;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work{io.get_executor()};
    std::thread runner{[this] { io.run(); }};
    pvc::test::TempDir dir{"inotify-hub"};
    std::shared_ptr<InotifyHub> hub = InotifyHub::create(boost::asio::make_strand(io));
    ~HubTest() override {
        if (hub) hub->close();
        work.reset();
        io.stop();
        runner.join();
    }
    std::filesystem::path file(int i) {
        auto f = dir.path() / ("vm" + std::to_string(i) + ".log");
        std::ofstream(f, std::ios::app).flush();
        return f;
    }
};

// More files than the kernel's default of 128 inotify instances per user:
// one instance serves them all, each event reaching only its own subscriber.
TEST_F(HubTest, OneInstanceServesManyFilesEachToItsOwnSubscriber) {
    ASSERT_TRUE(hub);
    int before = inotify_instances();
    constexpr int files = 300;
    std::vector<std::atomic<int>> seen(files);
    for (int i = 0; i < files; ++i)
        ASSERT_GT(hub->add(file(i), IN_MODIFY, [&seen, i](uint32_t mask) {
            if (mask & IN_MODIFY) ++seen[static_cast<size_t>(i)];
        }), 0);
    EXPECT_EQ(inotify_instances(), before);
    EXPECT_EQ(hub->subscriptions(), static_cast<size_t>(files));
    std::ofstream(file(150), std::ios::app) << "booting\n";
    std::ofstream(file(299), std::ios::app) << "login: ";
    ASSERT_TRUE(eventually([&] { return seen[150] > 0 && seen[299] > 0; }, 5s));
    std::this_thread::sleep_for(100ms);  // anything misdelivered has arrived by now
    for (int i = 0; i < files; ++i) {
        if (i == 150 || i == 299) continue;
        EXPECT_EQ(seen[static_cast<size_t>(i)], 0) << i;
    }
}

TEST_F(HubTest, ARemovedSubscriptionHearsNothingWhileAnotherOfTheSameFileStillHears) {
    ASSERT_TRUE(hub);
    std::atomic<int> a{0}, b{0};
    int ida = hub->add(file(1), IN_MODIFY, [&](uint32_t) { ++a; });
    int idb = hub->add(file(1), IN_MODIFY, [&](uint32_t) { ++b; });
    ASSERT_GT(ida, 0);
    ASSERT_GT(idb, 0);
    hub->remove(ida);
    std::ofstream(file(1), std::ios::app) << "x";
    ASSERT_TRUE(eventually([&] { return b > 0; }, 5s));
    EXPECT_EQ(a, 0);
    hub->remove(idb);
    EXPECT_EQ(hub->subscriptions(), 0u);
    int before = b;
    std::ofstream(file(1), std::ios::app) << "y";
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(b, before);
}

TEST_F(HubTest, ADeletedFileEndsItsSubscription) {
    ASSERT_TRUE(hub);
    std::atomic<bool> gone{false};
    ASSERT_GT(hub->add(file(7), IN_MODIFY | IN_DELETE_SELF, [&](uint32_t mask) {
        if (mask & IN_IGNORED) gone = true;
    }), 0);
    std::filesystem::remove(file(7));
    ASSERT_TRUE(eventually([&] { return gone.load(); }, 5s));
    EXPECT_TRUE(eventually([&] { return hub->subscriptions() == 0; }, 5s));
    EXPECT_EQ(hub->add(dir.path() / "absent.log", IN_MODIFY, [](uint32_t) {}), -1);
    hub->close();
    EXPECT_EQ(hub->add(file(8), IN_MODIFY, [](uint32_t) {}), -1);
}

// The XML memory of a VM not running here counts in memprov in libvirt's
// units, as `pvc vm list` shows it: a <memory> without unit is KiB (the
// reference took it as MiB). The unit reading itself: tests/unit/domain_xml_test.
TEST_F(HvTest, MemprovReadsXmlMemoryInLibvirtUnits) {
    register_node("hv1");
    TestNode n1("hv1", server.hosts(), dir.path(), private_uri());
    n1.start();
    auto xml = [](const std::string& name, const std::string& uuid, const std::string& memory) {
        return "<domain type='kvm'><name>" + name + "</name><uuid>" + uuid + "</uuid>" + memory +
               "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices/></domain>";
    };
    auto a = uuid_n(901), b = uuid_n(902), c = uuid_n(903);
    define(a, "nounit", "hv1", "stop", "none", xml("nounit", a, "<memory>1048576</memory>"));
    define(b, "gib", "hv1", "stop", "none", xml("gib", b, "<memory unit='G'>2</memory>"));
    define(c, "bytes", "hv1", "stop", "none", xml("bytes", c, "<memory unit='bytes'>268435456</memory>"));
    ASSERT_TRUE(eventually([&] {
        for (const auto& u : {a, b, c}) {
            auto d = n1.hv->domain(u);
            if (!d || d->cached().node != "hv1") return false;
        }
        return true;
    }));
    n1.hv->collect();
    KeepaliveReport r;
    n1.hv->contribute(r);
    std::map<std::string, std::string> w(r.writes.begin(), r.writes.end());
    EXPECT_EQ(w[schema::path("node.memory.provisioned", {"hv1"})], std::to_string(1024 + 2048 + 256));
    EXPECT_EQ(w[schema::path("node.memory.allocated", {"hv1"})], "0");
}

}  // namespace pvc::hv::test
