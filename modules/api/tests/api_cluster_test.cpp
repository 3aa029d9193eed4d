// POST /initialize, GET /backup, POST /restore in-process against a real
// ZooKeeper: the backup's double encoding as the reference client decodes
// it, a restore bringing changed and removed keys back (lock contenders and
// task keys left out), the refusals.
#include <algorithm>

#include "api_fixture.hpp"

namespace pvc::api::test {
namespace {

const std::string U1 = "c1a50000-0000-4000-8000-000000000001";

class ApiCluster : public ApiFixture {};

// The reference client's reading of GET /backup: the body is a JSON string
// holding the backup's JSON text.
nlohmann::ordered_json decode_backup(const Reply& r) {
    auto outer = nlohmann::ordered_json::parse(r.body);
    EXPECT_TRUE(outer.is_string()) << r.body.substr(0, 200);
    return nlohmann::ordered_json::parse(outer.get<std::string>());
}

TEST_F(ApiCluster, BackupIsEveryKeyParentsFirstAndRestoreBringsThemBack) {
    ASSERT_EQ(define("web1", U1, "hv1").status, 200u);
    session->ensure_path("/zookeeper/quota-test");
    auto r = get("/backup");
    ASSERT_EQ(r.status, 200u) << r.body;
    auto b = decode_backup(r);
    ASSERT_TRUE(b.is_object());
    EXPECT_EQ(b.begin().key(), "/");
    EXPECT_EQ(b["/schema/version"], "10");
    EXPECT_EQ(b["/domains/" + U1], "web1");
    EXPECT_FALSE(b.contains("/zookeeper"));
    EXPECT_FALSE(b.contains("/zookeeper/quota-test"));
    // Parents before children.
    std::vector<std::string> order;
    for (const auto& [k, v] : b.items()) order.push_back(k);
    auto at = [&](const std::string& k) { return std::find(order.begin(), order.end(), k) - order.begin(); };
    EXPECT_LT(at("/domains"), at("/domains/" + U1));
    EXPECT_LT(at("/domains/" + U1), at("/domains/" + U1 + "/state"));

    // Changed and removed keys come back; a lock contender and task keys in
    // the backup are not written.
    session->write(schema::path("node.state.daemon", {"hv1"}), "stop");
    session->remove_recursive(schema::path("domain.name", {U1}));
    b["/domains/" + U1 + "/state/abc__lock__0000000001"] = "";
    b["/tasks"] = "";
    b["/tasks/runners"] = "";
    b["/tasks/runners/hv9"] = "{\"handlers\": []}";
    auto missing = post("/restore", form({{"cluster_data", b.dump()}}));
    EXPECT_EQ(missing.status, 400u);
    EXPECT_EQ(missing.json()["message"]["yes-i-really-mean-it"],
              "Restore is destructive; please confirm with the argument 'yes-i-really-mean-it'.");
    auto restored = post("/restore?yes-i-really-mean-it=yes", form({{"cluster_data", b.dump()}}));
    ASSERT_EQ(restored.status, 200u) << restored.body;
    EXPECT_EQ(restored.json()["message"], "Restore completed successfully.");
    EXPECT_EQ(key("node.state.daemon", {"hv1"}), "run");
    EXPECT_EQ(key("domain.name", {U1}), "web1");
    EXPECT_EQ(key("domain.state", {U1}), "stop");
    EXPECT_FALSE(session->exists("/domains/" + U1 + "/state/abc__lock__0000000001"));
    EXPECT_FALSE(session->exists("/tasks/runners/hv9"));

    auto bad = post("/restore?yes-i-really-mean-it=yes", form({{"cluster_data", "{not json"}}));
    EXPECT_EQ(bad.status, 400u);
    EXPECT_EQ(bad.json()["message"].get<std::string>().rfind("ERROR: Failed to parse JSON data: ", 0), 0u) << bad.body;
    b["/schema/version"] = "9";
    auto other = post("/restore?yes-i-really-mean-it=yes", form({{"cluster_data", b.dump()}}));
    EXPECT_EQ(other.status, 400u);
    EXPECT_EQ(other.json()["message"], "ERROR: Schema version of backup (9) does not match cluster schema version (10).");
}

TEST_F(ApiCluster, InitializeRefusesAClusterWithDataUnlessOverwrite) {
    auto confirm = post("/initialize");
    EXPECT_EQ(confirm.status, 400u);
    EXPECT_EQ(confirm.json()["message"]["yes-i-really-mean-it"],
              "Initialization is destructive; please confirm with the argument 'yes-i-really-mean-it'.");
    auto refused = post("/initialize?yes-i-really-mean-it=yes");
    EXPECT_EQ(refused.status, 400u);
    EXPECT_EQ(refused.json()["message"], "ERROR: Cluster contains data and overwrite not set.");
    ASSERT_EQ(define("web1", U1, "hv1").status, 200u);
    session->ensure_path("/patroni/keep");
    auto wiped = post("/initialize?yes-i-really-mean-it=yes&overwrite=True");
    ASSERT_EQ(wiped.status, 200u) << wiped.body;
    EXPECT_EQ(wiped.json()["message"], "Successfully initialized cluster");
    EXPECT_EQ(session->get(schema::path("base.schema.version")).value_or(""), "10");
    EXPECT_FALSE(session->exists(schema::path("domain.name", {U1})));
    EXPECT_FALSE(session->exists(schema::path("node.name", {"hv1"})));
    EXPECT_TRUE(session->exists(schema::path("base.storage.health")));
    EXPECT_TRUE(session->exists("/patroni/keep"));  // foreign trees stay
}

}  // namespace
}  // namespace pvc::api::test
