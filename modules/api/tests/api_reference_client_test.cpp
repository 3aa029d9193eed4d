// The reference PVC client's network commands against this API, when a
// checkout of the reference client is at hand: PVC_REFERENCE_CLIENT names its
// client-cli/ directory (the one holding the `pvc.lib` package), and Debian's
// python3-click, python3-requests, python3-colorama, python3-lxml,
// python3-requests-toolbelt and python3-yaml are installed. The reference
// client is not part of this repository and CI has no copy of it: the test
// exists only in a build configured with -DPVC_REFERENCE_CLIENT=<client-cli/>
// (CMakeLists.txt here), which sets the variable. reference_client_network.py (beside this
// file) makes each call the reference's `pvc network ...` commands make and
// formats each answer with the reference's own formatters;
// reference_client_storage.py does the same for `pvc storage ...` against a
// mini Ceph (not in sanitizer builds).
#include "api_fixture.hpp"

#include <cstdlib>

#ifdef PVC_REFERENCE_CLIENT_STORAGE
#include "pvc/test/ceph_cluster.hpp"
#endif

namespace pvc::api::test {
namespace {

class ApiReferenceClient : public ApiFixture {};

TEST_F(ApiReferenceClient, NetworkCommandsRunUnchanged) {
    const char* client = std::getenv("PVC_REFERENCE_CLIENT");
    ASSERT_TRUE(client && *client) << "PVC_REFERENCE_CLIENT is not set (a checkout's client-cli/ of the reference PVC client)";
    ASSERT_TRUE(std::filesystem::is_directory(std::filesystem::path(client) / "pvc" / "lib"))
        << client << " holds no pvc.lib package";
    auto r = pvc::test::run_command({"/usr/bin/env", "PYTHONPATH=" + std::string(client), "/usr/bin/python3",
                                     PVC_API_TEST_SOURCE_DIR "/reference_client_network.py", std::to_string(port), token});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::cout << r.out;
    // What the reference client wrote is what ours reads back.
    EXPECT_FALSE(session->exists(schema::path("network.vni", {"1200"})));
}

#ifdef PVC_REFERENCE_CLIENT_STORAGE
// The storage commands need Ceph: a mini Ceph of this suite's own, the pool
// `rbd` and OSD 0 recorded as the primary's collection records them, and the
// cluster status texts it writes.
class ApiReferenceClientStorage : public ApiFixture {
protected:
    static void SetUpTestSuite() {
        ApiFixture::SetUpTestSuite();
        ceph_ = new pvc::test::CephCluster(1);
        auto s = zk::Session::connect({.hosts = zk_->hosts()});
        const std::string pool_stats =
            R"({"id": 1, "free_bytes": 1073741824, "used_bytes": 0, "used_percent": 0.0, "num_objects": 0, )"
            R"("num_object_clones": 0, "num_object_copies": 0, "num_objects_missing_on_primary": 0, )"
            R"("num_objects_unfound": 0, "num_objects_degraded": 0, "read_ops": 0, "read_bytes": 0, )"
            R"("write_ops": 0, "write_bytes": 0})";
        const std::string osd_stats =
            R"({"id": 0, "uuid": "u", "up": 1, "in": 1, "primary_affinity": "1", "utilization": 1.5, "var": 1.0, )"
            R"("pgs": 8, "kb": 10485760, "weight": 0.0098, "reweight": 1.0, "node": "hv1", "used": "150M", )"
            R"("avail": "9.8G", "wr_ops": 0, "wr_data": 0, "rd_ops": 0, "rd_data": 0, "state": "exists,up"})";
        ASSERT_TRUE(s->write({{schema::path("pool.name", {"rbd"}), ""},
                              {schema::path("pool.pgs", {"rbd"}), "8"},
                              {schema::path("pool.tier", {"rbd"}), "default"},
                              {schema::path("pool.stats", {"rbd"}), pool_stats},
                              {"/ceph/volumes/rbd", ""},
                              {"/ceph/snapshots/rbd", ""},
                              {schema::path("osd.id", {"0"}), ""},
                              {schema::path("osd.node", {"0"}), "hv1"},
                              {schema::path("osd.device", {"0"}), "/dev/sdb"},
                              {schema::path("osd.db_device", {"0"}), ""},
                              {schema::path("osd.stats", {"0"}), osd_stats},
                              {schema::path("base.config.primary_node"), "hv1"},
                              {schema::path("base.storage"), "  cluster:\n    health: HEALTH_OK\n"},
                              {schema::path("base.storage.util"), "--- RAW STORAGE ---\n"}}));
        s->close();
    }
    static void TearDownTestSuite() {
        delete ceph_;
        ceph_ = nullptr;
        ApiFixture::TearDownTestSuite();
    }
    void customize(ApiSettings& s) override {
        ceph::Settings c;
        c.config_file = ceph_->conf().string();
        c.keyring = ceph_->keyring().string();
        s.ceph = c;
    }
    static inline pvc::test::CephCluster* ceph_ = nullptr;
};

TEST_F(ApiReferenceClientStorage, StorageCommandsRunUnchanged) {
    const char* client = std::getenv("PVC_REFERENCE_CLIENT");
    ASSERT_TRUE(client && *client) << "PVC_REFERENCE_CLIENT is not set (a checkout's client-cli/ of the reference PVC client)";
    auto r = pvc::test::run_command({"/usr/bin/env", "PYTHONPATH=" + std::string(client), "/usr/bin/python3",
                                     PVC_API_TEST_SOURCE_DIR "/reference_client_storage.py", std::to_string(port), token,
                                     dir.path().string()},
                                    std::chrono::seconds(300));
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::cout << r.out;
    // What the reference client removed is gone from Ceph and ZooKeeper.
    EXPECT_FALSE(session->exists(schema::path("pool.name", {"refpool"})));
    EXPECT_NE(ceph_->ceph({"osd", "pool", "get", "refpool", "size"}).status, 0);
}
#endif

}  // namespace
}  // namespace pvc::api::test
