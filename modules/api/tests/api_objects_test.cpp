// The API's objects over values a node or client wrote, read through the
// view from an in-memory tree (tree_session.hpp). Regression of an
// api_objects fuzzer finding (fuzz/corpus/api_objects/crash_plugin_name_with_slash):
// a health plugin name with a '/' in /nodes/<n>/monitoring_plugins made
// node_object throw, so GET /node, /status and the metrics answered 500.
#include <gtest/gtest.h>

#include <chrono>

#include "cluster_view.hpp"
#include "objects.hpp"
#include "tree_session.hpp"

using namespace pvc::api;
using namespace std::chrono_literals;

TEST(ApiObjects, PluginNameThatIsNoZnodeNameLeavesTheNodeReadable) {
    auto session = std::make_shared<test::TreeSession>(test::parse_tree(
        "/nodes/hv1/staticdata\n4 6.1.0-13-amd64 GNU/Linux x86_64\n%%\n"
        "/nodes/hv1/monitoring_plugins\ndisk bad/name\n%%\n"
        "/nodes/hv1/monitoring_data/disk/health_delta\n10\n%%\n"
        "/nodes/hv1/monitoring_data/disk/message\nDisk sda is failing\n%%\n"));
    ClusterView view(session);
    view.start();
    ASSERT_TRUE(view.wait_ready(10s));
    {
        auto r = view.read();
        Json n;
        ASSERT_NO_THROW(n = node_object(r, "hv1"));
        EXPECT_EQ(n["cpu_count"], 4);
        EXPECT_EQ(n["arch"], "x86_64");
        EXPECT_EQ(n["health_plugins"], Json::array({"disk", "bad/name"}));
        ASSERT_EQ(n["health_details"].size(), 1u);
        EXPECT_EQ(n["health_details"][0]["name"], "disk");
        EXPECT_EQ(n["health_details"][0]["health_delta"], 10);
        EXPECT_EQ(n["health_details"][0]["message"], "Disk sda is failing");
        VmCache vms;
        EXPECT_NO_THROW(cluster_status(r, vms));
    }
    view.stop();
}
