// pvcnoded and systemd's watchdog: with WatchdogSec set (systemd passes
// $WATCHDOG_USEC), every keepalive tick sends WATCHDOG=1 on $NOTIFY_SOCKET;
// without it, none is sent. The test plays systemd's notify socket.
#include <sys/socket.h>
#include <sys/un.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "pvc/cluster.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::test::DaemonProcess;

namespace {

// A datagram socket where sd_notify() messages arrive.
class NotifySocket {
public:
    explicit NotifySocket(const std::filesystem::path& p) : path_(p) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un a{};
        a.sun_family = AF_UNIX;
        std::snprintf(a.sun_path, sizeof a.sun_path, "%s", p.c_str());
        if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
            throw std::runtime_error("cannot bind " + p.string());
    }
    ~NotifySocket() { ::close(fd_); }
    // Messages (one per datagram) received within `d`.
    std::vector<std::string> receive_for(std::chrono::milliseconds d) {
        std::vector<std::string> out;
        auto end = std::chrono::steady_clock::now() + d;
        while (true) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char buf[4096];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) out.emplace_back(buf, n);
        }
        return out;
    }
    // Messages up to and including the first that contains `what`, waiting at
    // most `max` for it.
    std::vector<std::string> receive_until(const std::string& what, std::chrono::milliseconds max) {
        std::vector<std::string> out;
        auto end = std::chrono::steady_clock::now() + max;
        while (out.empty() || out.back().find(what) == std::string::npos) {
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - std::chrono::steady_clock::now());
            if (left.count() <= 0) break;
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
            char buf[4096];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) out.emplace_back(buf, n);
        }
        return out;
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
    int fd_ = -1;
};

size_t count(const std::vector<std::string>& msgs, const std::string& what) {
    size_t n = 0;
    for (auto& m : msgs) n += m.find(what) != std::string::npos;
    return n;
}

class DaemonWatchdog : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    // Starts the daemon with systemd's variables set only for it.
    std::unique_ptr<DaemonProcess> start(const std::string& node, const NotifySocket& sock, const char* watchdog_usec) {
        pvc::test::NodeConfigOptions o;
        o.node = node;
        o.coordinators = "[" + node + ":" + std::to_string(server.port()) + "]";
        o.base_dir = dir.path() / node;
        o.module_dir = pvc::test::build_dir() + "/test-modules/none";
        o.keepalive_interval = 1;
        auto cfg = pvc::test::write_node_config(o);
        ::setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
        if (watchdog_usec) ::setenv("WATCHDOG_USEC", watchdog_usec, 1);
        auto d = std::make_unique<DaemonProcess>(node, cfg, o.base_dir / "out.log");
        ::unsetenv("NOTIFY_SOCKET");
        ::unsetenv("WATCHDOG_USEC");
        return d;
    }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"watchdog"};
    std::shared_ptr<pvc::zk::Session> zk;
};

TEST_F(DaemonWatchdog, EveryKeepaliveTickFeedsTheWatchdog) {
    NotifySocket sock(dir.path() / "notify.sock");
    auto d = start("hv1", sock, "30000000");
    // Start-up (slower on sanitizer builds), then ticks every 1 s.
    auto start_up = sock.receive_until("READY=1", pvc::test::scaled(10s));
    ASSERT_EQ(count(start_up, "READY=1"), 1u);
    auto msgs = sock.receive_for(3500ms);
    EXPECT_EQ(count(msgs, "READY=1"), 0u);
    EXPECT_GE(count(msgs, "WATCHDOG=1"), 3u);
}

TEST_F(DaemonWatchdog, NoWatchdogMessagesWhenSystemdDoesNotAskForThem) {
    NotifySocket sock(dir.path() / "notify.sock");
    auto d = start("hv2", sock, nullptr);
    auto start_up = sock.receive_until("READY=1", pvc::test::scaled(10s));
    ASSERT_EQ(count(start_up, "READY=1"), 1u);
    EXPECT_EQ(count(start_up, "WATCHDOG=1"), 0u);
    EXPECT_EQ(count(sock.receive_for(3500ms), "WATCHDOG=1"), 0u);
}

}  // namespace
