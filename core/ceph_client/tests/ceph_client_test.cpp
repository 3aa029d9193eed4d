// The Ceph client library (pvc/ceph_client.hpp) against a private mini
// Ceph (tests/support CephCluster: one monitor, one manager, one memstore
// OSD) and a real ZooKeeper, through the library itself, through `pvc
// storage` and through the API's routes with an HTTP client; everything read
// back with the `ceph`/`rbd` commands and the ZooKeeper keys. One mini Ceph
// for the whole binary (its start is most of the run time).
#include <gtest/gtest.h>

#include <fstream>

#include <rados/librados.h>

#include "api_fixture.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/timing.hpp"

namespace pvc::api::test {
namespace {

using nlohmann::json;
using schema::path;

class CephClientTest : public ApiFixture {
protected:
    static void SetUpTestSuite() {
        ApiFixture::SetUpTestSuite();
        ceph_ = new pvc::test::CephCluster(1);
        ASSERT_EQ(rados_create(&rados_, nullptr), 0);
        ASSERT_EQ(rados_conf_read_file(rados_, ceph_->conf().c_str()), 0);
        ASSERT_EQ(rados_conf_set(rados_, "keyring", ceph_->keyring().c_str()), 0);
        ASSERT_EQ(rados_connect(rados_), 0);
        // The fixture's `rbd` pool, recorded as a pool add records one:
        // the volume and snapshot tests use it (a pool's creation and
        // removal take seconds; the pool tests do their own).
        auto s = zk::Session::connect({.hosts = zk_->hosts()});
        ASSERT_TRUE(s->write({{path("pool.name", {"rbd"}), ""},
                              {path("pool.pgs", {"rbd"}), "8"},
                              {path("pool.tier", {"rbd"}), "default"},
                              {path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 1073741824})"},
                              {"/ceph/volumes/rbd", ""},
                              {"/ceph/snapshots/rbd", ""}}));
        s->close();
    }
    static void TearDownTestSuite() {
        if (rados_) rados_shutdown(rados_);
        rados_ = nullptr;
        delete ceph_;
        ceph_ = nullptr;
        ApiFixture::TearDownTestSuite();
    }
    void customize(ApiSettings& s) override { s.ceph = ceph_settings(); }
    void SetUp() override {
        ApiFixture::SetUp();
        client = std::make_unique<ceph::Client>(session, ceph_settings());
    }
    void TearDown() override {
        client.reset();
        ApiFixture::TearDown();
    }

    static ceph::Settings ceph_settings() {
        ceph::Settings s;
        s.config_file = ceph_->conf().string();
        s.keyring = ceph_->keyring().string();
        s.timeout = std::chrono::seconds(3);
        return s;
    }

    // A pool that works on one OSD (two copies wanted, one enough for I/O).
    void make_pool(const std::string& pool) {
        auto r = client->add_pool(pool, "8", "copies=2,mincopies=1", std::nullopt);
        ASSERT_EQ(r.status, 200) << r.message;
    }
    std::string zk(const std::string& p) { return session->get(p).value_or("<absent>"); }
    bool zk_has(const std::string& p) { return session->exists(p); }
    json rbd_json(const std::vector<std::string>& args) {
        auto a = args;
        a.insert(a.end(), {"--format", "json"});
        auto r = ceph_->rbd(a);
        EXPECT_EQ(r.status, 0) << r.err;
        return json::parse(r.out, nullptr, false);
    }
    // A monitor command's JSON answer through librados (the `ceph` command
    // takes half a second to start); null when Ceph refused it.
    json ceph_json(json cmd) {
        cmd["format"] = "json";
        const std::string text = cmd.dump();
        const char* argv[] = {text.c_str()};
        char *out = nullptr, *status = nullptr;
        size_t out_len = 0, status_len = 0;
        int rc = rados_mon_command(rados_, argv, 1, "", 0, &out, &out_len, &status, &status_len);
        std::string o = out ? std::string(out, out_len) : "";
        if (out) rados_buffer_free(out);
        if (status) rados_buffer_free(status);
        return rc < 0 ? json(nullptr) : json::parse(o, nullptr, false);
    }
    json pool_get(const std::string& pool, const std::string& var) {
        return ceph_json({{"prefix", "osd pool get"}, {"pool", pool}, {"var", var}});
    }
    // The PG count asked for (Ceph moves the pool's pg_num there step by step).
    int pg_num_target(const std::string& pool) {
        auto pools = ceph_json({{"prefix", "osd pool ls"}, {"detail", "detail"}});
        for (const auto& p : pools)
            if (p.value("pool_name", "") == pool) return p.value("pg_num_target", -1);
        return -2;
    }
    std::vector<std::string> images(const std::string& pool) {
        auto j = rbd_json({"ls", pool});
        return j.is_array() ? j.get<std::vector<std::string>>() : std::vector<std::string>{};
    }
    bool has_image(const std::string& pool, const std::string& name) {
        auto l = images(pool);
        return std::find(l.begin(), l.end(), name) != l.end();
    }
    // `pvc` with this node's settings file and the test's ZooKeeper.
    pvc::test::ProcResult pvc_cli(std::vector<std::string> args) {
        auto yaml = dir.path() / "pvcnoded.yaml";
        if (!std::filesystem::exists(yaml)) {
            std::ofstream(yaml) << "pvc:\n  system:\n    configuration:\n      storage:\n        ceph_config_file: \""
                                << ceph_->conf().string() << "\"\n        ceph_admin_keyring: \""
                                << ceph_->keyring().string() << "\"\n        ceph_timeout: 3\n";
        }
        std::vector<std::string> argv = {PVC_CLI_BINARY, "-z", zk_->hosts(), "--config", yaml.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, std::chrono::seconds(120));
    }
    Reply put(const std::string& target, const std::string& body = "") { return call("PUT", target, body); }
    Reply del(const std::string& target) { return call("DELETE", target); }
    std::string message_of(const Reply& r) {
        auto j = r.json();
        return j.is_object() && j.contains("message") ? j["message"].dump() : r.body;
    }

    static inline pvc::test::CephCluster* ceph_ = nullptr;
    static inline rados_t rados_ = nullptr;  // the tests' own reader of Ceph's state
    std::unique_ptr<ceph::Client> client;
};

// ---------------------------------------------------------------- sizes

TEST(CephSizes, ParsedAndFormattedAsTheReference) {
    EXPECT_EQ(ceph::parse_size("1024"), 1024u);
    EXPECT_EQ(ceph::parse_size("10G"), 10737418240u);
    EXPECT_EQ(ceph::parse_size("10GiB"), 10737418240u);
    EXPECT_EQ(ceph::parse_size("10GB"), 10737418240u);
    EXPECT_EQ(ceph::parse_size("4M"), 4194304u);
    bool unit = false;
    EXPECT_FALSE(ceph::parse_size("10k", &unit));
    EXPECT_TRUE(unit);
    EXPECT_FALSE(ceph::parse_size("1.5G", &unit));
    EXPECT_FALSE(unit);
    EXPECT_FALSE(ceph::parse_size("G10"));
    EXPECT_FALSE(ceph::parse_size(""));
    EXPECT_FALSE(ceph::parse_size("99999999999999999999"));
    EXPECT_EQ(ceph::human_size(10737418240u), "10G");
    EXPECT_EQ(ceph::human_size(1610612736u), "1536M");
    EXPECT_EQ(ceph::human_size(0), "0B");
    EXPECT_EQ(ceph::human_size(10000), "10K");  // rounded up
}

// ---------------------------------------------------------------- library

TEST_F(CephClientTest, PoolAddSetPgsRemove) {
    auto r = client->add_pool("lib_pool", "8", "copies=2,mincopies=1", std::nullopt);
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Created RBD pool \"lib_pool\" with 8 PGs");
    EXPECT_EQ(pool_get("lib_pool", "size")["size"], 2);
    EXPECT_EQ(pool_get("lib_pool", "min_size")["min_size"], 1);
    EXPECT_EQ(pool_get("lib_pool", "pg_num")["pg_num"], 8);
    auto apps = ceph_json({{"prefix", "osd pool application get"}, {"pool", "lib_pool"}});
    EXPECT_TRUE(apps.contains("rbd")) << apps.dump();
    EXPECT_EQ(zk(path("pool.name", {"lib_pool"})), "");
    EXPECT_EQ(zk(path("pool.pgs", {"lib_pool"})), "8");
    EXPECT_EQ(zk(path("pool.tier", {"lib_pool"})), "default");
    EXPECT_EQ(zk(path("pool.stats", {"lib_pool"})), "{}");
    EXPECT_EQ(zk("/ceph/volumes/lib_pool"), "");
    EXPECT_EQ(zk("/ceph/snapshots/lib_pool"), "");

    // Refusals: nothing changes.
    r = client->add_pool("lib_pool", "8", "copies=2,mincopies=1", std::nullopt);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message, "ERROR: Pool \"lib_pool\" is already present in the cluster.");
    r = client->add_pool("other", "8", "copies=2", std::nullopt);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message, "ERROR: Replication configuration \"copies=2\" is not valid.");
    r = client->add_pool("other", "8", "copies=0,mincopies=1", std::nullopt);
    EXPECT_EQ(r.status, 400);
    r = client->add_pool("bad/name", "8", "copies=2,mincopies=1", std::nullopt);
    EXPECT_EQ(r.status, 400);
    r = client->add_pool("other", "eight", "copies=2,mincopies=1", std::nullopt);
    EXPECT_EQ(r.status, 400);
    EXPECT_FALSE(zk_has(path("pool.name", {"other"})));
    EXPECT_TRUE(pool_get("other", "size").is_null());

    r = client->set_pool_pgs("lib_pool", "12");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message, "ERROR: Invalid PGs number '12': must be a non-zero power of 2.");
    r = client->set_pool_pgs("nopool", "16");
    EXPECT_EQ(r.message, "ERROR: No pool with name 'nopool' is present in the cluster.");
    r = client->set_pool_pgs("lib_pool", "16");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Set PGs count to 16 for RBD pool 'lib_pool'.");
    EXPECT_EQ(pg_num_target("lib_pool"), 16);
    EXPECT_EQ(zk(path("pool.pgs", {"lib_pool"})), "16");

    // A pool whose volume a VM uses is not removed.
    ASSERT_EQ(client->add_volume("lib_pool", "vm1_disk0", "4M").status, 200);
    ASSERT_TRUE(session->write({{path("domain.name", {"a1b2c3d4-0000-4000-8000-000000000001"}), "vm1"},
                                {path("domain.storage.volumes", {"a1b2c3d4-0000-4000-8000-000000000001"}),
                                 "lib_pool/vm1_disk0"}}));
    r = client->remove_pool("lib_pool");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.message.find("used by VM 'vm1'"), std::string::npos) << r.message;
    EXPECT_EQ(pool_get("lib_pool", "size")["size"], 2);
    session->remove_recursive(path("domain.name", {"a1b2c3d4-0000-4000-8000-000000000001"}));

    r = client->remove_pool("lib_pool");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Removed RBD pool 'lib_pool' and all volumes.");
    EXPECT_TRUE(pool_get("lib_pool", "size").is_null());
    EXPECT_FALSE(zk_has(path("pool.name", {"lib_pool"})));
    EXPECT_FALSE(zk_has("/ceph/volumes/lib_pool"));
    EXPECT_FALSE(zk_has("/ceph/snapshots/lib_pool"));
    EXPECT_EQ(client->remove_pool("lib_pool").message, "ERROR: No pool with name 'lib_pool' is present in the cluster.");
}

TEST_F(CephClientTest, VolumesAsRbdSeesThem) {
    auto r = client->add_volume("rbd", "v1", "8M");
    ASSERT_EQ(r.status, 200) << r.message;
    // Sizes shown as the reference shows them: the smallest unit up to 9999 of it.
    EXPECT_EQ(r.message, "Created RBD volume 'v1' of size '8192K' in pool 'rbd'.");
    // The stats are `rbd info --format json`: same members, same order, same values.
    std::string stats = zk(path("volume.stats", {"rbd", "v1"}));
    auto ours = nlohmann::ordered_json::parse(stats);
    auto rbd = ceph_->rbd({"info", "--format", "json", "rbd/v1"});
    ASSERT_EQ(rbd.status, 0) << rbd.err;
    auto theirs = nlohmann::ordered_json::parse(rbd.out);
    for (auto* j : {&ours, &theirs}) j->erase("access_timestamp"), j->erase("modify_timestamp");
    EXPECT_EQ(ours.dump(), theirs.dump());
    EXPECT_EQ(stats.back(), '\n');
    EXPECT_EQ(zk(path("volume.name", {"rbd", "v1"})), "");
    EXPECT_EQ(zk("/ceph/snapshots/rbd/v1"), "");

    // Bad input: nothing in Ceph, nothing in ZooKeeper.
    EXPECT_EQ(client->add_volume("rbd", "v2", "10k").message,
              "ERROR: Requested volume size '10k' does not have a valid SI unit");
    EXPECT_EQ(client->add_volume("rbd", "v2", "1.5G").status, 400);
    r = client->add_volume("rbd", "v2", "1P");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.message.find("is greater than the available free space in the pool"), std::string::npos) << r.message;
    EXPECT_EQ(client->add_volume("nopool", "v2", "8M").message,
              "ERROR: No pool with name 'nopool' is present in the cluster.");
    EXPECT_EQ(client->add_volume("rbd", "bad@name", "8M").status, 400);
    EXPECT_FALSE(has_image("rbd", "v2"));
    EXPECT_FALSE(zk_has(path("volume.name", {"rbd", "v2"})));
    r = client->add_volume("rbd", "v1", "8M");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message, "ERROR: Failed to create RBD volume 'v1': rbd: create error: (17) File exists");

    // Resize: rounded as `rbd resize --size <human size>`; no shrinking.
    r = client->resize_volume("rbd", "v1", "16M");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Resized RBD volume 'v1' to size '16M' in pool 'rbd'.");
    EXPECT_EQ(rbd_json({"info", "rbd/v1"})["size"], 16777216);
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"rbd", "v1"})))["size"], 16777216);
    r = client->resize_volume("rbd", "v1", "4M");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.message.find("shrinking"), std::string::npos) << r.message;
    EXPECT_EQ(rbd_json({"info", "rbd/v1"})["size"], 16777216);
    EXPECT_EQ(client->resize_volume("rbd", "nov", "16M").message,
              "ERROR: No volume with name 'nov' is present in pool 'rbd'.");

    // Clone: a full copy, recorded as a new volume.
    r = client->clone_volume("rbd", "v1", "v1copy");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Cloned RBD volume 'v1' to 'v1copy' in pool 'rbd'");
    EXPECT_TRUE(has_image("rbd", "v1copy"));
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"rbd", "v1copy"})))["size"], 16777216);

    // Rename: the keys move, snapshots with them.
    ASSERT_EQ(client->add_snapshot("rbd", "v1copy", "s1").status, 200);
    r = client->rename_volume("rbd", "v1copy", "v1moved");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Renamed RBD volume 'v1copy' to 'v1moved' in pool 'rbd'.");
    EXPECT_FALSE(has_image("rbd", "v1copy"));
    EXPECT_TRUE(has_image("rbd", "v1moved"));
    EXPECT_FALSE(zk_has(path("volume.name", {"rbd", "v1copy"})));
    EXPECT_FALSE(zk_has("/ceph/snapshots/rbd/v1copy"));
    EXPECT_EQ(zk(path("snapshot.name", {"rbd", "v1moved", "s1"})), "");
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"rbd", "v1moved"})))["name"], "v1moved");
    EXPECT_EQ(client->rename_volume("rbd", "v1moved", "v1").status, 400);  // taken

    // A volume a VM uses is neither removed nor renamed.
    const std::string uuid = "a1b2c3d4-0000-4000-8000-000000000002";
    ASSERT_TRUE(session->write({{path("domain.name", {uuid}), "web"},
                                {path("domain.storage.volumes", {uuid}), "other/x,rbd/v1moved"}}));
    r = client->remove_volume("rbd", "v1moved");
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(r.message.find("used by VM 'web'"), std::string::npos) << r.message;
    EXPECT_EQ(client->rename_volume("rbd", "v1moved", "v9").status, 400);
    EXPECT_TRUE(has_image("rbd", "v1moved"));
    session->remove_recursive(path("domain.name", {uuid}));

    // Remove: its snapshots go too.
    r = client->remove_volume("rbd", "v1moved");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Removed RBD volume 'v1moved' in pool 'rbd'.");
    EXPECT_FALSE(has_image("rbd", "v1moved"));
    EXPECT_FALSE(zk_has(path("volume.name", {"rbd", "v1moved"})));
    EXPECT_FALSE(zk_has("/ceph/snapshots/rbd/v1moved"));

    // A removal ZooKeeper missed (the image already gone) is finished.
    ASSERT_EQ(ceph_->rbd({"rm", "rbd/v1"}).status, 0);
    r = client->remove_volume("rbd", "v1");
    EXPECT_EQ(r.status, 200) << r.message;
    EXPECT_FALSE(zk_has(path("volume.name", {"rbd", "v1"})));
}

TEST_F(CephClientTest, SnapshotsCountedAndProtectedOnesKept) {
    ASSERT_EQ(client->add_volume("rbd", "v", "4M").status, 200);
    auto r = client->add_snapshot("rbd", "v", "a");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Created RBD snapshot 'a' of volume 'v' in pool 'rbd'.");
    EXPECT_EQ(zk(path("snapshot.name", {"rbd", "v", "a"})), "");
    EXPECT_EQ(zk(path("snapshot.stats", {"rbd", "v", "a"})), "{}");
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"rbd", "v"})))["snapshot_count"], 1);
    auto listed = rbd_json({"snap", "ls", "rbd/v"});
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_EQ(listed[0]["name"], "a");
    EXPECT_EQ(client->add_snapshot("rbd", "v", "a").status, 400);  // exists
    EXPECT_EQ(client->add_snapshot("rbd", "nov", "a").message,
              "ERROR: No volume with name 'nov' is present in pool 'rbd'.");

    r = client->rename_snapshot("rbd", "v", "a", "b");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Renamed RBD snapshot 'a' to 'b' for volume 'v' in pool 'rbd'.");
    EXPECT_FALSE(zk_has(path("snapshot.name", {"rbd", "v", "a"})));
    EXPECT_EQ(zk(path("snapshot.stats", {"rbd", "v", "b"})), "{}");
    EXPECT_EQ(rbd_json({"snap", "ls", "rbd/v"})[0]["name"], "b");
    EXPECT_EQ(client->rename_snapshot("rbd", "v", "a", "c").message,
              "ERROR: No snapshot with name 'a' is present for volume 'v' in pool 'rbd'.");

    // A protected snapshot stays, in Ceph and in ZooKeeper.
    ASSERT_EQ(ceph_->rbd({"snap", "protect", "rbd/v@b"}).status, 0);
    r = client->remove_snapshot("rbd", "v", "b");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message, "Failed to remove RBD snapshot 'b' of volume 'v' in pool 'rbd': rbd: snapshot 'b' is "
                         "protected from removal.");
    EXPECT_TRUE(zk_has(path("snapshot.name", {"rbd", "v", "b"})));
    EXPECT_EQ(rbd_json({"snap", "ls", "rbd/v"}).size(), 1u);
    ASSERT_EQ(ceph_->rbd({"snap", "unprotect", "rbd/v@b"}).status, 0);

    r = client->remove_snapshot("rbd", "v", "b");
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Removed RBD snapshot 'b' of volume 'v' in pool 'rbd'.");
    EXPECT_FALSE(zk_has(path("snapshot.name", {"rbd", "v", "b"})));
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"rbd", "v"})))["snapshot_count"], 0);
    EXPECT_EQ(rbd_json({"snap", "ls", "rbd/v"}).size(), 0u);
    EXPECT_EQ(client->remove_snapshot("rbd", "v", "b").message,
              "ERROR: No snapshot with name 'b' is present of volume v in pool rbd.");
    EXPECT_EQ(client->remove_volume("rbd", "v").status, 200);
}

// ---------------------------------------------------------------- pvc

TEST_F(CephClientTest, PvcStorageCommands) {
    // Pools (their creation and removal are the library's, tested above and
    // through the API: seconds each): a refused add, set-pgs, list.
    auto r = pvc_cli({"storage", "pool", "add", "rbd", "8", "--replcfg", "copies=2,mincopies=1"});
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.err, "pvc: error: ERROR: Pool \"rbd\" is already present in the cluster.\n");
    r = pvc_cli({"storage", "pool", "set-pgs", "rbd", "8", "--yes"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Set PGs count to 8 for RBD pool 'rbd'.\n");
    r = pvc_cli({"storage", "pool", "list", "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(json::parse(r.out)[0]["name"], "rbd");
    r = pvc_cli({"storage", "volume", "add", "rbd", "cv", "4M"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(has_image("rbd", "cv"));
    r = pvc_cli({"storage", "volume", "snapshot", "add", "rbd", "cv", "s"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(rbd_json({"snap", "ls", "rbd/cv"})[0]["name"], "s");
    r = pvc_cli({"storage", "volume", "list", "^cv$", "--pool", "rbd", "--format", "json"});
    ASSERT_EQ(r.status, 0) << r.err;
    auto list = json::parse(r.out);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["name"], "cv");
    EXPECT_EQ(list[0]["stats"]["size"], "4096K");
    EXPECT_EQ(list[0]["stats"]["snapshot_count"], 1);
    r = pvc_cli({"storage", "volume", "snapshot", "list", "--format", "json"});
    EXPECT_EQ(json::parse(r.out)[0]["snapshot"], "s");
    r = pvc_cli({"storage", "volume", "resize", "rbd", "cv", "8M", "--yes"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(rbd_json({"info", "rbd/cv"})["size"], 8388608);

    // Raw upload from a local file, read back with `rbd export`.
    std::string data(3 * 1024 * 1024 + 17, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>((i * 131 + 7) % 251);
    auto file = dir.path() / "image.raw";
    std::ofstream(file, std::ios::binary) << data;
    r = pvc_cli({"storage", "volume", "upload", "rbd", "cv", file.string()});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "Wrote uploaded file to volume 'cv' in pool 'rbd'.\n");
    auto out = dir.path() / "export.raw";
    ASSERT_EQ(ceph_->rbd({"export", "rbd/cv", out.string()}).status, 0);
    EXPECT_EQ(pvc::test::slurp(out).substr(0, data.size()), data);

    // Refusals: exit 1 with the message; bad commands exit 2.
    r = pvc_cli({"storage", "volume", "remove", "rbd", "nov", "--yes"});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("ERROR: No volume with name 'nov' is present in pool 'rbd'."), std::string::npos) << r.err;
    r = pvc_cli({"storage", "volume", "frobnicate"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("'frobnicate' is not a command of 'pvc storage volume'"), std::string::npos) << r.err;
    r = pvc::test::run_command({PVC_CLI_BINARY, "-z", zk_->hosts(), "--config", (dir.path() / "none.yaml").string(),
                                "storage", "pool", "add", "x", "8"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("there is no " + (dir.path() / "none.yaml").string()), std::string::npos) << r.err;
    auto empty_yaml = dir.path() / "nostorage.yaml";
    std::ofstream(empty_yaml) << "pvc:\n  node: hv1\n";
    r = pvc::test::run_command({PVC_CLI_BINARY, "-z", zk_->hosts(), "--config", empty_yaml.string(), "storage", "pool",
                                "add", "x", "8"});
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("has no pvc.system.configuration.storage.ceph_config_file"), std::string::npos) << r.err;

    r = pvc_cli({"storage", "volume", "snapshot", "remove", "rbd", "cv", "s", "--yes"});
    ASSERT_EQ(r.status, 0) << r.err;
    r = pvc_cli({"storage", "volume", "remove", "rbd", "cv", "--yes"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_FALSE(has_image("rbd", "cv"));
}

// ---------------------------------------------------------------- API

TEST_F(CephClientTest, ApiRoutes) {
    auto r = post("/storage/ceph/pool", form({{"pool", "apipool"}, {"pgs", "8"}, {"replcfg", "copies=2,mincopies=1"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Created RBD pool \"apipool\" with 8 PGs");
    EXPECT_EQ(zk(path("pool.pgs", {"apipool"})), "8");
    // The view shows the write when the answer comes.
    EXPECT_EQ(get("/storage/ceph/pool/apipool").status, 200);

    r = post("/storage/ceph/pool", form({{"pool", "p2"}, {"pgs", "8"}}));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["replcfg"], "A valid replication configuration must be specified.");
    r = post("/storage/ceph/pool/p2", form({{"pgs", "8"}, {"replcfg", "copies=2,mincopies=1"}, {"tier", "tape"}}));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["tier"], "A valid tier must be specified");

    r = put("/storage/ceph/pool/apipool", form({{"pgs", "16"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(pg_num_target("apipool"), 16);

    r = post("/storage/ceph/volume", form({{"volume", "av"}, {"pool", "apipool"}, {"size", "4M"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Created RBD volume 'av' of size '4096K' in pool 'apipool'.");
    EXPECT_TRUE(has_image("apipool", "av"));
    auto v = get("/storage/ceph/volume/apipool/av");
    ASSERT_EQ(v.status, 200) << v.body;
    EXPECT_EQ(v.json()[0]["stats"]["size"], "4096K");
    r = post("/storage/ceph/volume/apipool/av2", form({{"size", "10k"}}));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: Requested volume size '10k' does not have a valid SI unit");

    r = put("/storage/ceph/volume/apipool/av", form({{"new_size", "8M"}, {"new_name", "x"}}));
    EXPECT_EQ(r.json()["message"], "Can only perform one modification at once");
    r = put("/storage/ceph/volume/apipool/av");
    EXPECT_EQ(r.json()["message"], "At least one modification must be specified");
    r = put("/storage/ceph/volume/apipool/av", form({{"new_size", "8M"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(rbd_json({"info", "apipool/av"})["size"], 8388608);
    r = post("/storage/ceph/volume/apipool/av/clone", form({{"new_volume", "avc"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has_image("apipool", "avc"));
    r = put("/storage/ceph/volume/apipool/avc", form({{"new_name", "avr"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(has_image("apipool", "avr"));
    EXPECT_EQ(get("/storage/ceph/volume/apipool/avr").status, 200);

    // Snapshots: both forms of create, element read, rename, removal.
    r = post("/storage/ceph/snapshot", form({{"snapshot", "s1"}, {"volume", "av"}, {"pool", "apipool"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    r = post("/storage/ceph/snapshot/apipool/av/s2");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(rbd_json({"snap", "ls", "apipool/av"}).size(), 2u);
    r = get("/storage/ceph/snapshot/apipool/av/s2");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json(), json::parse(R"([{"pool":"apipool","volume":"av","snapshot":"s2"}])"));
    EXPECT_EQ(get("/storage/ceph/snapshot/apipool/av/nosnap").status, 404);
    r = put("/storage/ceph/snapshot/apipool/av/s2", form({{"new_name", "s3"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Renamed RBD snapshot 's2' to 's3' for volume 'av' in pool 'apipool'.");
    r = del("/storage/ceph/snapshot/apipool/av/s3");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(rbd_json({"snap", "ls", "apipool/av"}).size(), 1u);
    EXPECT_EQ(json::parse(zk(path("volume.stats", {"apipool", "av"})))["snapshot_count"], 1);

    // Upload: raw as the reference client sends it (multipart, no file_size).
    std::string data(1024 * 1024, 'x');
    for (size_t i = 0; i < data.size(); i += 4096) data[i] = static_cast<char>(i / 4096);
    Call up;
    up.method = "POST";
    up.target = "/api/v1/storage/ceph/volume/apipool/avr/upload?image_format=raw";
    up.api_key = token;
    up.content_type = "multipart/form-data; boundary=XyZ";
    up.body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"filename\"\r\n"
              "Content-Type: application/octet-stream\r\n\r\n" + data + "\r\n--XyZ--\r\n";
    r = request("127.0.0.1", port, up);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Wrote uploaded file to volume 'avr' in pool 'apipool'.");
    auto out = dir.path() / "avr.raw";
    ASSERT_EQ(ceph_->rbd({"export", "apipool/avr", out.string()}).status, 0);
    EXPECT_EQ(pvc::test::slurp(out).substr(0, data.size()), data);
    up.target = "/api/v1/storage/ceph/volume/apipool/avr/upload?image_format=iso";
    EXPECT_EQ(request("127.0.0.1", port, up).json()["message"], "Image type 'iso' is not valid.");
    up.target = "/api/v1/storage/ceph/volume/apipool/nov/upload?image_format=raw";
    EXPECT_EQ(request("127.0.0.1", port, up).json()["message"], "Target volume 'nov' does not exist in pool 'apipool'.");

    // qcow2: converted by qemu-img from a temporary volume, which goes.
    auto raw = dir.path() / "q.raw";
    auto qcow = dir.path() / "q.qcow2";
    std::ofstream(raw, std::ios::binary) << data;
    auto conv = pvc::test::run_command({"qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw.string(), qcow.string()});
    ASSERT_EQ(conv.status, 0) << conv.err;
    std::string qdata = pvc::test::slurp(qcow);
    up.target = "/api/v1/storage/ceph/volume/apipool/av/upload?image_format=qcow2&file_size=" +
                std::to_string(qdata.size());
    up.body = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"filename\"\r\n\r\n" + qdata +
              "\r\n--XyZ--\r\n";
    r = request("127.0.0.1", port, up);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Converted and wrote uploaded file to volume 'av' in pool 'apipool'.");
    out = dir.path() / "av.raw";
    ASSERT_EQ(ceph_->rbd({"export", "apipool/av", out.string()}).status, 0);
    EXPECT_EQ(pvc::test::slurp(out).substr(0, data.size()), data);
    EXPECT_FALSE(has_image("apipool", "av_tmp"));
    EXPECT_FALSE(zk_has(path("volume.name", {"apipool", "av_tmp"})));

    // OSD state and flags.
    ASSERT_TRUE(session->write({{path("osd.id", {"0"}), ""},
                                {path("osd.stats", {"0"}), R"({"uuid": "u", "up": 1, "in": 1})"}}));
    // A named read answers from the view (which follows ZooKeeper by its watches).
    auto until = std::chrono::steady_clock::now() + pvc::test::scaled(std::chrono::seconds(30));
    do {
        r = get("/storage/ceph/osd/0/state");
    } while (r.json() != json::parse(R"({"id":"0","in":1,"up":1})") && std::chrono::steady_clock::now() < until);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json(), json::parse(R"({"id":"0","in":1,"up":1})"));
    EXPECT_EQ(get("/storage/ceph/osd/5/state").status, 404);
    r = post("/storage/ceph/osd/0/state", form({{"state", "out"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Set OSD 0 offline.");
    r = post("/storage/ceph/osd/0/state", form({{"state", "in"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    r = post("/storage/ceph/osd/0/state", form({{"state", "sideways"}}));
    EXPECT_EQ(r.json()["message"]["state"], "A valid state must be specified.");
    r = post("/storage/ceph/option", form({{"option", "norebalance"}, {"action", "set"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(ceph_json({{"prefix", "osd dump"}})["flags"].get<std::string>().find("norebalance"), std::string::npos);
    r = post("/storage/ceph/option", form({{"option", "norebalance"}, {"action", "unset"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    session->remove_recursive(path("osd.id", {"0"}));

    // Removals.
    r = del("/storage/ceph/volume/apipool/avr");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(has_image("apipool", "avr"));
    r = del("/storage/ceph/pool/apipool");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["yes-i-really-mean-it"], "Please confirm that 'yes-i-really-mean-it'.");
    r = del("/storage/ceph/pool/apipool?yes-i-really-mean-it=yes");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Removed RBD pool 'apipool' and all volumes.");
    EXPECT_EQ(get("/storage/ceph/pool/apipool").status, 404);
}

// After the volume tests: an OSD set out and in again leaves Ceph's free
// space figures at 0 for a few seconds.
TEST_F(CephClientTest, OsdStateAndFlags) {
    ASSERT_TRUE(session->write({{path("osd.id", {"0"}), ""}, {path("osd.node", {"0"}), "hv1"}}));
    auto in_state = [&] {
        auto dump = ceph_json({{"prefix", "osd dump"}});
        for (const auto& o : dump["osds"])
            if (o["osd"] == 0) return o["in"].get<int>();
        return -1;
    };
    auto r = client->set_osd_state("0", false);
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Set OSD 0 offline.");
    EXPECT_EQ(in_state(), 0);
    r = client->set_osd_state("0", true);
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Set OSD 0 online.");
    EXPECT_EQ(in_state(), 1);
    EXPECT_EQ(client->set_osd_state("7", true).message, "ERROR: No OSD with ID '7' is present in the cluster.");

    auto flags = [&] { return ceph_json({{"prefix", "osd dump"}})["flags"].get<std::string>(); };
    r = client->set_osd_option("noout", true);
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Set OSD property 'noout'.");
    EXPECT_NE(flags().find("noout"), std::string::npos);
    r = client->set_osd_option("noout", false);
    ASSERT_EQ(r.status, 200) << r.message;
    EXPECT_EQ(r.message, "Unset OSD property 'noout'.");
    EXPECT_EQ(flags().find("noout"), std::string::npos);
    r = client->set_osd_option("nosuchflag", true);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.message.rfind("ERROR: Failed to set property 'nosuchflag': Error EINVAL", 0), 0u) << r.message;
    session->remove_recursive(path("osd.id", {"0"}));
}

// Runs last (its name): the monitor stops under a request and comes back.
TEST_F(CephClientTest, ZzCephDownIsABoundedClearError) {
    auto made = client->add_volume("rbd", "d", "4M");
    ASSERT_EQ(made.status, 200) << made.message;
    ceph_->stop_mon();
    struct Restart {
        pvc::test::CephCluster* c;
        bool done = false;
        ~Restart() {
            if (!done) c->start_mon();
        }
    } restart{ceph_};
    auto t0 = std::chrono::steady_clock::now();
    auto r = post("/storage/ceph/option", form({{"option", "noout"}, {"action", "set"}}));
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_EQ(r.status, 503) << r.body;
    EXPECT_NE(r.json()["message"].get<std::string>().find("Ceph did not answer"), std::string::npos) << r.body;
    EXPECT_LT(took, pvc::test::scaled(std::chrono::seconds(30)));
    // A new client (as `pvc` is) cannot connect: bounded too, nothing recorded.
    ceph::Client fresh(session, ceph_settings());
    t0 = std::chrono::steady_clock::now();
    auto f = fresh.add_pool("never", "8", "copies=2,mincopies=1", std::nullopt);
    EXPECT_EQ(f.status, 503) << f.message;
    EXPECT_LT(std::chrono::steady_clock::now() - t0, pvc::test::scaled(std::chrono::seconds(30)));
    EXPECT_FALSE(zk_has(path("pool.name", {"never"})));

    ceph_->start_mon();
    restart.done = true;
    // Back: the next request connects again.
    r = post("/storage/ceph/snapshot/rbd/d/after");
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(client->remove_volume("rbd", "d").status, 200);
}

}  // namespace
}  // namespace pvc::api::test
