// Concurrent writers on one VM through the client library and the session's
// write, against a real ZooKeeper: a write that loses a version race to
// another writer is redone with fresh versions (never reported as a failure,
// so never an API 500 or a failed `pvc` command), and no writer's change is
// lost: the final metadata is one writer's whole write, every tag added is
// there, and of VMs claiming one SR-IOV VF at once exactly one gets it.
#include <atomic>
#include <barrier>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace pvc;
using namespace std::chrono_literals;
using schema::path;

namespace {

constexpr int kWriters = 8;

class ClientRace : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        zk_ = connect();
        zk_->ensure_path(path("base.domain"));
        uuid_ = client::new_uuid();
        client::VmDefinition vm;
        vm.uuid = uuid_;
        vm.name = test::unique_name("vm");
        vm.xml = "<domain/>";
        vm.node = "hv1";
        ASSERT_TRUE(client::define_vm(*zk_, vm));
    }
    static std::shared_ptr<zk::Session> connect() { return zk::Session::connect({server_->hosts(), 10s, 15s, 10s}); }

    // Runs `body(writer)` on kWriters threads, each with its own session (as
    // separate `pvc` commands or API workers on separate connections), all
    // released at once.
    template <class Body>
    void race(Body body) {
        std::vector<std::shared_ptr<zk::Session>> sessions;
        for (int i = 0; i < kWriters; ++i) sessions.push_back(connect());
        std::barrier start(kWriters);
        std::vector<std::thread> threads;
        for (int i = 0; i < kWriters; ++i)
            threads.emplace_back([&, i] {
                start.arrive_and_wait();
                body(i, sessions[static_cast<size_t>(i)]);
            });
        for (auto& t : threads) t.join();
    }

    static test::ZkServer* server_;
    std::shared_ptr<zk::Session> zk_;
    std::string uuid_;
};
test::ZkServer* ClientRace::server_ = nullptr;

// Eight writers set the same VM's metadata (two keys in one write, as `pvc vm
// meta` and POST /vm/<vm>/meta do) many times at once: every write is
// acknowledged, and the final value is one writer's whole write (both keys
// from the same write, the last of some writer).
TEST_F(ClientRace, EightMetadataWritersAreAllAcknowledgedAndOneWins) {
    constexpr int rounds = 25;
    std::atomic<int> failed{0};
    race([&](int w, const std::shared_ptr<zk::Session>& s) {
        for (int r = 0; r < rounds; ++r) {
            std::string v = fmt::format("w{}r{}", w, r);
            if (!s->write({{path("domain.meta.node_limit", {uuid_}), "limit-" + v},
                           {path("domain.meta.node_selector", {uuid_}), "sel-" + v}}))
                ++failed;
        }
    });
    EXPECT_EQ(failed, 0) << "writes reported as failed out of " << kWriters * rounds;
    std::string limit = zk_->get(path("domain.meta.node_limit", {uuid_})).value_or("");
    std::string selector = zk_->get(path("domain.meta.node_selector", {uuid_})).value_or("");
    std::smatch m;
    ASSERT_TRUE(std::regex_match(limit, m, std::regex(R"(limit-w(\d)r(\d+))"))) << limit;
    EXPECT_EQ(selector, "sel-" + limit.substr(6)) << "the two keys of the final value come from different writes";
    EXPECT_EQ(std::stoi(m[2]), rounds - 1) << "the final value is not the last write of writer " << m[1];
    zk::Stat st;
    zk_->get(path("domain.meta.node_limit", {uuid_}), &st);
    EXPECT_EQ(st.version, kWriters * rounds) << "a write was acknowledged but not applied";
}

// The same with one shared session (the API module's: all its workers write
// through one connection).
TEST_F(ClientRace, EightWritersOnOneSessionAreAllAcknowledged) {
    constexpr int rounds = 25;
    std::atomic<int> failed{0};
    race([&](int w, const std::shared_ptr<zk::Session>&) {
        for (int r = 0; r < rounds; ++r)
            if (!zk_->write(path("domain.meta.autostart", {uuid_}), fmt::format("w{}r{}", w, r))) ++failed;
    });
    EXPECT_EQ(failed, 0);
    zk::Stat st;
    std::string last = zk_->get(path("domain.meta.autostart", {uuid_}), &st).value_or("");
    EXPECT_TRUE(std::regex_match(last, std::regex(R"(w\dr24)"))) << last;
    EXPECT_EQ(st.version, kWriters * rounds);
}

// Eight writers each add tags of their own to one VM at once (as `vm tag
// add`): every write is acknowledged and no tag is lost.
TEST_F(ClientRace, EightTagWritersLoseNoTag) {
    constexpr int per_writer = 5;
    std::atomic<int> failed{0};
    race([&](int w, const std::shared_ptr<zk::Session>& s) {
        for (int t = 0; t < per_writer; ++t)
            if (!s->write(client::vm_tag_keys(uuid_, fmt::format("tag-{}-{}", w, t), "False"))) ++failed;
    });
    EXPECT_EQ(failed, 0);
    auto tags = zk_->children(path("domain.meta.tags", {uuid_})).value_or(std::vector<std::string>{});
    std::set<std::string> have(tags.begin(), tags.end());
    for (int w = 0; w < kWriters; ++w)
        for (int t = 0; t < per_writer; ++t) {
            std::string tag = fmt::format("tag-{}-{}", w, t);
            EXPECT_TRUE(have.count(tag)) << "tag " << tag << " lost";
            EXPECT_EQ(zk_->get(path("tag.type", {uuid_, tag})).value_or(""), "user") << tag;
        }
    EXPECT_EQ(have.size(), static_cast<size_t>(kWriters * per_writer));
}

// Eight writers change the same VM's state under the state lock (`vm start`,
// `vm stop`...) at once: each is acknowledged.
TEST_F(ClientRace, EightStateWritersUnderTheLockAreAllAcknowledged) {
    std::atomic<int> failed{0};
    std::vector<std::string> wrote(kWriters);
    race([&](int w, const std::shared_ptr<zk::Session>& s) {
        wrote[static_cast<size_t>(w)] = fmt::format("state-{}", w);
        if (!client::write_under_state_lock(s, uuid_, {{path("domain.state", {uuid_}), wrote[static_cast<size_t>(w)]}},
                                            0ms))
            ++failed;
    });
    EXPECT_EQ(failed, 0);
    std::string last = zk_->get(path("domain.state", {uuid_})).value_or("");
    EXPECT_NE(std::find(wrote.begin(), wrote.end(), last), wrote.end()) << last;
}

// Eight VMs defined at once, each claiming the same SR-IOV VF (a
// reservation): exactly one gets it, the others are refused with VfInUse and
// nothing of theirs is written; the VF names the winner.
TEST_F(ClientRace, EightClaimsOfOneVfGiveItToExactlyOne) {
    const std::string node = test::unique_name("hv");
    const std::string vf = "ens1f0v0";
    zk_->ensure_path(path("node.sriov.vf", {node}));
    ASSERT_TRUE(zk_->write({{path("sriov_vf.phy", {node, vf}), ""},
                            {path("sriov_vf.mac", {node, vf}), "00:00:00:00:00:00"},
                            {path("sriov_vf.phy_mac", {node, vf}), "00:00:00:00:00:00"},
                            {path("sriov_vf.used", {node, vf}), "False"},
                            {path("sriov_vf.used_by", {node, vf}), ""}}));
    std::vector<std::string> uuids;
    for (int i = 0; i < kWriters; ++i) uuids.push_back(client::new_uuid());
    std::atomic<int> won{0}, refused{0}, failed{0};
    race([&](int w, const std::shared_ptr<zk::Session>& s) {
        const auto& u = uuids[static_cast<size_t>(w)];
        std::string xml = fmt::format("<domain><name>vf{}</name><uuid>{}</uuid><devices><interface type='direct'>"
                                      "<mac address='52:54:00:00:00:0{}'/><source dev='{}' mode='passthrough'/>"
                                      "</interface></devices></domain>",
                                      w, u, w, vf);
        client::VmDefinition vm;
        vm.uuid = u;
        vm.name = fmt::format("vf{}", w);
        vm.xml = xml;
        vm.node = node;
        try {
            if (client::define_vm(*s, vm)) ++won;
            else ++failed;
        } catch (const client::VfInUse&) {
            ++refused;
        }
    });
    EXPECT_EQ(failed, 0);
    EXPECT_EQ(won, 1);
    EXPECT_EQ(refused, kWriters - 1);
    std::string owner = zk_->get(path("sriov_vf.used_by", {node, vf})).value_or("");
    EXPECT_EQ(zk_->get(path("sriov_vf.used", {node, vf})).value_or(""), "True");
    int defined = 0;
    for (const auto& u : uuids) defined += zk_->exists(path("domain.name", {u}));
    EXPECT_EQ(defined, 1) << "a refused VM was written";
    EXPECT_TRUE(zk_->exists(path("domain.name", {owner}))) << "the VF names " << owner;
}

}  // namespace
