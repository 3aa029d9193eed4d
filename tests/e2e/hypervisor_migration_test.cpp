// Live migration between two real libvirtd nodes, each with the real pvcnoded:
// a running guest moves hv1 -> hv2 and back through ZooKeeper state changes
// alone (a client's migrate/unmigrate, docs/wire-contract.md §5.6), never running on both.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <iostream>
#include <memory>
#include <thread>

#include "lab.hpp"

namespace {

using namespace std::chrono_literals;
using pvc::e2e::Client;
using pvc::e2e::Lab;
using pvc::e2e::NodeView;
using pvc::e2e::wait_for;
using pvc::e2e::since;
using pvc::e2e::contains_word;
using Clock = std::chrono::steady_clock;

// Polls both libvirtds while a migration runs. The target is read before the
// source: a source seen RUNNING after the target was seen RUNNING means both
// ran at the target's sample time (a finished source never runs again).
class DoubleRunWatch {
public:
    DoubleRunWatch(const Lab& lab, std::string uuid, int from, int to)
        : uuid_(std::move(uuid)), source_(lab.libvirt_uri(from)), target_(lab.libvirt_uri(to)) {
        thread_ = std::thread([this] {
            while (!stop_) {
                bool t = target_.running(uuid_);
                bool s = source_.running(uuid_);
                if (t && s) ++both_;
                ++samples_;
                std::this_thread::sleep_for(5ms);
            }
        });
    }
    ~DoubleRunWatch() { finish(); }
    void finish() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    int both() const { return both_; }
    int samples() const { return samples_; }

private:
    std::string uuid_;
    NodeView source_, target_;
    std::atomic<bool> stop_{false};
    std::atomic<int> both_{0}, samples_{0};
    std::thread thread_;
};

class HypervisorMigration : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            lab_ = std::make_unique<Lab>(pvc::e2e::LabOptions{{1, 2}, 3, 5});
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { lab_.reset(); }

    void SetUp() override { ASSERT_TRUE(lab_) << "lab did not come up: " << setup_error_; }
    void TearDown() override {
        if (HasFailure() && lab_) std::cerr << lab_->all_daemon_logs();
    }

    // Moves the running guest `uuid` from node `from` to node `to` as a client
    // would and checks the outcome; returns the seconds until acknowledged.
    double migrate_and_check(Client& client, const std::string& uuid, int from, int to, const std::string& lastnode) {
        NodeView src(lab_->libvirt_uri(from)), dst(lab_->libvirt_uri(to));
        std::string target = Lab::node_name(to);
        DoubleRunWatch watch(*lab_, uuid, from, to);
        auto t0 = Clock::now();
        client.migrate(uuid, target, lastnode);
        bool done = wait_for([&] {
            return client.get("domain.state", uuid) == "start" && client.get("domain.node", uuid) == target &&
                   dst.running(uuid) && !src.state(uuid).has_value();
        }, 60s);
        double took = since(t0);
        watch.finish();
        EXPECT_TRUE(done) << "migration " << Lab::node_name(from) << " -> " << target
                          << " not completed: state=" << client.get("domain.state", uuid)
                          << " node=" << client.get("domain.node", uuid) << " on target running=" << dst.running(uuid)
                          << " on source state=" << src.state(uuid).value_or(-1);
        EXPECT_EQ(watch.both(), 0) << "the guest ran on both nodes in " << watch.both() << " of " << watch.samples()
                                   << " samples";
        EXPECT_GT(watch.samples(), 10);
        EXPECT_EQ(client.get("domain.last_node", uuid), lastnode);
        EXPECT_EQ(client.get("domain.failed_reason", uuid), "");
        EXPECT_TRUE(wait_for([&] { return contains_word(client.node_key("node.running_domains", target), uuid); }, 10s))
            << "target runningdomains=" << client.node_key("node.running_domains", target);
        EXPECT_TRUE(wait_for([&] {
            return !contains_word(client.node_key("node.running_domains", Lab::node_name(from)), uuid);
        }, 10s)) << "source runningdomains=" << client.node_key("node.running_domains", Lab::node_name(from));
        return took;
    }

    static std::unique_ptr<Lab> lab_;
    static std::string setup_error_;
};

std::unique_ptr<Lab> HypervisorMigration::lab_;
std::string HypervisorMigration::setup_error_;

TEST_F(HypervisorMigration, RunningGuestMovesThereAndBackLive) {
    Client client(lab_->zk());
    std::string uuid = pvc::e2e::random_uuid();
    std::string name = "e2e-mig-" + uuid.substr(0, 8);
    client.define(uuid, name, pvc::e2e::tiny_domain_xml(lab_->domain_type(), name, uuid, lab_->console_dir()), "hv1",
                  "stop", "live");
    NodeView hv1(lab_->libvirt_uri(1)), hv2(lab_->libvirt_uri(2));
    client.change_state(uuid, "start");
    ASSERT_TRUE(wait_for([&] { return hv1.running(uuid); }, 20s))
        << "guest not running on hv1: state=" << client.get("domain.state", uuid);
    ASSERT_TRUE(wait_for([&] { return client.get("domain.state", uuid) == "start"; }, 5s));

    // migrate: node=hv2, lastnode=hv1 (a temporary move).
    double there = migrate_and_check(client, uuid, 1, 2, "hv1");
    // unmigrate: back home, lastnode cleared.
    double back = migrate_and_check(client, uuid, 2, 1, "");
    std::cout << "[ figures  ] migrate hv1->hv2 acknowledged in " << there << " s, back in " << back
              << " s (domain type " << lab_->domain_type() << ")\n";
    EXPECT_TRUE(hv1.running(uuid));
    EXPECT_FALSE(hv2.state(uuid).has_value());

    client.change_state(uuid, "stop");
    EXPECT_TRUE(wait_for([&] { return !hv1.running(uuid); }, 10s));
}

TEST_F(HypervisorMigration, StoppedGuestIsOnlyReassigned) {
    Client client(lab_->zk());
    std::string uuid = pvc::e2e::random_uuid();
    std::string name = "e2e-mig-" + uuid.substr(0, 8);
    client.define(uuid, name, pvc::e2e::tiny_domain_xml(lab_->domain_type(), name, uuid, lab_->console_dir()), "hv1");
    NodeView hv1(lab_->libvirt_uri(1)), hv2(lab_->libvirt_uri(2));
    client.migrate(uuid, "hv2", "hv1");
    std::this_thread::sleep_for(2s);
    EXPECT_EQ(client.get("domain.state", uuid), "stop") << "migrate keeps a non-start state, as the reference client writes it";
    EXPECT_EQ(client.get("domain.node", uuid), "hv2");
    EXPECT_FALSE(hv1.state(uuid).has_value());
    EXPECT_FALSE(hv2.state(uuid).has_value());
    // Started where it now belongs.
    client.change_state(uuid, "start");
    EXPECT_TRUE(wait_for([&] { return hv2.running(uuid); }, 20s)) << "state=" << client.get("domain.state", uuid);
    EXPECT_FALSE(hv1.state(uuid).has_value());
    client.change_state(uuid, "stop");
    EXPECT_TRUE(wait_for([&] { return !hv2.running(uuid); }, 10s));
}

TEST_F(HypervisorMigration, FailedLiveOnlyMigrationIsAbortedAndTheGuestStaysHome) {
    Client client(lab_->zk());
    std::string uuid = pvc::e2e::random_uuid();
    std::string name = "e2e-mig-" + uuid.substr(0, 8);
    client.define(uuid, name, pvc::e2e::tiny_domain_xml(lab_->domain_type(), name, uuid, lab_->console_dir()), "hv1",
                  "stop", "live");
    NodeView hv1(lab_->libvirt_uri(1)), hv2(lab_->libvirt_uri(2));
    client.change_state(uuid, "start");
    ASSERT_TRUE(wait_for([&] { return hv1.running(uuid); }, 20s)) << "state=" << client.get("domain.state", uuid);

    // hv2 refuses QEMU's migration stream (libvirt's default migration ports):
    // every live attempt fails, and live is required (method `live`).
    const std::vector<std::string> rule{"INPUT", "-p", "tcp", "--dport", "49152:49215", "-j", "REJECT",
                                        "--reject-with", "tcp-reset"};
    auto iptables = [&](const std::string& op) {
        std::vector<std::string> argv{"iptables", op};
        argv.insert(argv.end(), rule.begin(), rule.end());
        return lab_->in_node(2, argv);
    };
    auto blocked = iptables("-A");
    ASSERT_EQ(blocked.status, 0) << "cannot block the migration ports in hv2's netns: " << blocked.output;
    struct Unblock {
        std::function<void()> f;
        ~Unblock() { f(); }
    } unblock{[&] { iptables("-D"); }};

    {
        DoubleRunWatch watch(*lab_, uuid, 1, 2);
        auto t0 = Clock::now();
        client.migrate(uuid, "hv2", "hv1");
        bool aborted = wait_for([&] {
            return client.get("domain.state", uuid) == "start" && client.get("domain.node", uuid) == "hv1";
        }, 60s);
        watch.finish();
        ASSERT_TRUE(aborted) << "no abort: state=" << client.get("domain.state", uuid)
                             << " node=" << client.get("domain.node", uuid);
        std::cout << "[ figures  ] failed live migration aborted in " << since(t0) << " s\n";
        EXPECT_EQ(client.get("domain.last_node", uuid), "") << "abort restores the previous lastnode";
        EXPECT_EQ(watch.both(), 0);
    }
    EXPECT_TRUE(hv1.running(uuid));
    EXPECT_TRUE(wait_for([&] { return !hv2.state(uuid).has_value(); }, 10s)) << "hv2 kept a copy";
    // The receiver clears the sync lock value when it has seen the abort: that
    // write follows the source's, so wait for it rather than race it.
    EXPECT_TRUE(wait_for([&] { return client.get("domain.migrate.sync_lock", uuid).empty(); }, 10s))
        << "sync lock value left: " << client.get("domain.migrate.sync_lock", uuid);

    // The abort released every lock (the reference leaks the sync lock): the next
    // migration goes through at once.
    unblock.f();
    unblock.f = [] {};
    migrate_and_check(client, uuid, 1, 2, "hv1");
    client.change_state(uuid, "stop");
    EXPECT_TRUE(wait_for([&] { return !hv2.running(uuid); }, 10s));
}

}  // namespace
