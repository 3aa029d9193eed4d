// Read your writes, and every other client's: a request never answers "not
// found", nor acts on the view's stale picture, for what ZooKeeper held when
// it arrived (routes.cpp, Api::handle). Writes read ZooKeeper after a sync;
// a read of a named object the view does not answer is answered again from
// ZooKeeper; lists answer from the view.
#include "api_fixture.hpp"

#include <atomic>
#include <thread>

#include "pvc/client.hpp"
#include "pvc/client_network.hpp"

namespace pvc::api::test {
namespace {

using schema::path;

class ApiConfirm : public ApiFixture {
protected:
    void SetUp() override {
        ApiFixture::SetUp();
        other = zk::Session::connect({.hosts = zk_->hosts()});
    }
    void TearDown() override {
        for (const auto& v : other->children(path("base.network")).value_or(std::vector<std::string>{}))
            other->remove_recursive(path("network.vni", {v}));
        other->close();
        ApiFixture::TearDown();
    }
    // A VM defined by the other client (the fixture's session is the API's).
    void define_elsewhere(const std::string& name, const std::string& uuid) {
        client::VmDefinition d;
        d.uuid = uuid;
        d.name = name;
        d.xml = vm_xml(name, uuid);
        d.node = "hv2";
        ASSERT_TRUE(client::define_vm(*other, d));
    }
    void add_network_elsewhere(const std::string& vni) {
        client::NetworkSpec s;
        s.vni = vni;
        s.description = "net" + vni;
        s.nettype = "managed";
        s.ip4_network = "10.40.0.0/24";
        s.ip4_gateway = "10.40.0.1";
        auto r = client::add_network(*other, s);
        ASSERT_TRUE(r.ok()) << r.message;
    }
    std::shared_ptr<zk::Session> other;
};

std::string uuid_of(int i) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "5e1f0000-0000-4000-8000-%012d", i);
    return buf;
}

// Deterministic: the view is stopped, so it never learns of anything the
// other client writes. Every named object is still found (from ZooKeeper),
// writes act on what ZooKeeper holds, and lists keep answering from the view.
TEST_F(ApiConfirm, AFrozenViewNeverHidesWhatZooKeeperHolds) {
    ASSERT_EQ(define("gone1", uuid_of(1)).status, 200u);
    view->stop();
    const std::string u = uuid_of(2);
    define_elsewhere("fresh1", u);
    add_network_elsewhere("410");

    auto r = get("/vm/fresh1");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()[0]["uuid"], u);
    EXPECT_EQ(r.json()[0]["node"], "hv2");
    r = get("/vm/" + u + "/state");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()["state"], "stop");
    r = post("/vm/fresh1/state?state=start");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()["message"], "Starting VM 'fresh1'.");
    EXPECT_EQ(key("domain.state", {u}), "start");
    r = get("/network/410");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()[0]["description"], "net410");
    r = get("/network/net410/acl");  // the network is found; its empty list is the reference's 404
    EXPECT_EQ(r.status, 404u) << r.body;
    EXPECT_EQ(r.json()["message"], "ACL not found.");
    // Lists answer from the view (stopped here, so without them).
    EXPECT_EQ(get("/vm").json().size(), 1u);
    EXPECT_EQ(get("/network").status, 404u);

    // Removed by the other client, still in the view: a write never acts on it.
    const std::string g = uuid_of(1);
    ASSERT_TRUE(other->remove_recursive(path("domain.name", {g})));
    r = post("/vm/gone1/tags?action=add&tag=t1");
    EXPECT_EQ(r.status, 404u) << r.body;
    r = post("/vm/gone1/state?state=start");
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(r.json()["message"], "ERROR: Could not find VM 'gone1' in the cluster!");
    EXPECT_FALSE(session->exists(path("domain.name", {g})));  // nothing written back under it
    // A true miss is still a miss (answered from ZooKeeper too).
    EXPECT_EQ(get("/vm/nosuch").status, 404u);
    EXPECT_EQ(get("/network/999").status, 404u);
    EXPECT_GE(figures.confirmed_reads.load(), 4u);
}

// The view running: another client's write immediately followed by a
// request on the object, many times; never "not found".
TEST_F(ApiConfirm, AnotherClientsWriteIsFoundByTheNextRequest) {
    constexpr int rounds = 60;
    for (int i = 0; i < rounds; ++i) {
        std::string name = "vm" + std::to_string(i), u = uuid_of(100 + i);
        define_elsewhere(name, u);
        // First a write (even rounds) or a read (odd rounds) of the new VM.
        auto write = [&] { return post("/vm/" + name + "/meta?profile=p" + std::to_string(i)); };
        auto read = [&] { return get("/vm/" + name + "/state"); };
        auto r = i % 2 ? read() : write();
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
        r = i % 2 ? write() : read();
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
        r = get("/vm/" + name);
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
        EXPECT_EQ(r.json()[0]["uuid"], u);
    }
    for (int i = 0; i < rounds; ++i) EXPECT_EQ(key("domain.profile", {uuid_of(100 + i)}), "p" + std::to_string(i)) << i;
    for (int i = 0; i < 20; ++i) {
        std::string vni = std::to_string(500 + i);
        add_network_elsewhere(vni);
        auto r = get("/network/" + vni);
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
        r = post("/network/" + vni + "/lease?macaddress=52:54:00:00:10:01&ipaddress=10.40.0.50&hostname=h");
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
        r = get("/network/" + vni + "/lease/52:54:00:00:10:01");
        ASSERT_EQ(r.status, 200u) << "round " << i << ": " << r.body;
    }
}

// The API and another client write the same network at once: neither
// write is lost (each is a versioned transaction, redone when it loses).
TEST_F(ApiConfirm, AWriteRacingAnotherClientsWriteLosesNothing) {
    add_network_elsewhere("420");
    constexpr int rounds = 15;
    std::atomic<bool> failed{false};
    std::thread theirs([&] {
        for (int i = 0; i < rounds && !failed; ++i) {
            client::NetworkChange ch;
            ch.domain = "d" + std::to_string(i) + ".lab";
            if (!client::modify_network(*other, "420", ch).ok()) failed = true;
            char mac[32];
            std::snprintf(mac, sizeof mac, "52:54:00:00:20:%02x", i);
            if (!client::add_reservation(*other, "420", mac, "10.40.0." + std::to_string(100 + i), "o").ok())
                failed = true;
        }
    });
    for (int i = 0; i < rounds; ++i) {
        auto r = call("PUT", "/network/420?mtu=" + std::to_string(1400 + i));
        EXPECT_EQ(r.status, 200u) << r.body;
        char mac[32];
        std::snprintf(mac, sizeof mac, "52:54:00:00:30:%02x", i);
        r = post("/network/420/lease?macaddress=" + std::string(mac) + "&ipaddress=10.40.0." + std::to_string(150 + i) +
                 "&hostname=a");
        EXPECT_EQ(r.status, 200u) << r.body;
    }
    theirs.join();
    EXPECT_FALSE(failed);
    EXPECT_EQ(key("network.mtu", {"420"}), std::to_string(1400 + rounds - 1));
    EXPECT_EQ(key("network.domain", {"420"}), "d" + std::to_string(rounds - 1) + ".lab");
    EXPECT_EQ(client::read_reservations(*session, "420", false).size(), 2u * rounds);
}

}  // namespace
}  // namespace pvc::api::test
