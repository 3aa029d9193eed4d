// The test support's port reservation (tests/support/ports.cpp): the ports
// test servers listen on are below the kernel's ephemeral range and never
// handed to two test processes at once.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "pvc/test/ports.hpp"

namespace {

int ephemeral_low() {
    std::ifstream f("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 0;
    f >> low;
    return low;
}

TEST(TestPorts, ReservedPortsAreDistinctAndBelowTheEphemeralRange) {
    const int low = ephemeral_low();
    ASSERT_GT(low, 1024);
    std::set<int> ports;
    for (int i = 0; i < 40; ++i) {
        int p = pvc::test::reserve_port();
        EXPECT_GE(p, 1024);
        EXPECT_LT(p, low);
        EXPECT_TRUE(ports.insert(p).second) << p << " handed out twice";
    }
}

TEST(TestPorts, AClaimedPortIsRefusedToAnotherProcessAndToThisOne) {
    const int held = pvc::test::reserve_port();
    EXPECT_FALSE(pvc::test::claim_port(held)) << "claimed twice in one process";
    // In another process (forked: it shares this one's descriptors, and
    // still cannot take the lock), the held port is refused and a free one
    // is not.
    pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
        if (pvc::test::claim_port(held)) ::_exit(1);
        // A neighbour of the held port that nobody holds.
        int other = held - 1;
        bool claimed = false;
        for (int i = 0; i < 50 && !claimed; ++i, --other) claimed = pvc::test::claim_port(other);
        if (!claimed) ::_exit(2);
        ::_exit(pvc::test::claim_port(other + 1) ? 3 : 0);  // claimed already: a second claim fails
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_NE(WEXITSTATUS(status), 1) << "the child took a port this process holds";
    EXPECT_NE(WEXITSTATUS(status), 2) << "the child could not claim a free port";
    EXPECT_NE(WEXITSTATUS(status), 3) << "the child claimed one port twice";
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
