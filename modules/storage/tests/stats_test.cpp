// The encodings and parsers: pool and OSD statistics, OSD information, RBD lock owners.
#include <gtest/gtest.h>

#include "ceph_objects.hpp"
#include "rbd_lock_service.hpp"
#include "stats.hpp"

using namespace pvc::storage;

TEST(PythonJson, UsesTheReferenceSeparatorsAndKeepsKeyOrder) {
    OrderedJson j;
    j["id"] = 2;
    j["used_percent"] = 0.25;
    j["state"] = "exists,up";
    j["list"] = {1, 2};
    j["a"] = nlohmann::ordered_json::object();
    EXPECT_EQ(python_json(j), R"({"id": 2, "used_percent": 0.25, "state": "exists,up", "list": [1, 2], "a": {}})");
}

TEST(PythonJson, EscapesNonAsciiAsPythonDoes) {
    EXPECT_EQ(python_json(OrderedJson("é")), R"("\u00e9")");
}

TEST(PoolStats, FieldsInTheReferenceOrderFromCephDfAndRadosCounters) {
    auto df = df_pools(R"({"stats": {}, "pools": [{"name": "vms", "id": 3, "stats": {"stored": 100, "objects": 4,
        "kb_used": 1, "bytes_used": 300, "percent_used": 0.5, "max_avail": 9000}}]})");
    PoolCounters c;
    c.num_object_copies = 4;
    c.read_ops = 7;
    c.read_bytes = 2048;
    c.write_ops = 8;
    c.write_bytes = 4096;
    EXPECT_EQ(python_json(pool_stats(df.at("vms"), c)),
              R"({"id": 3, "stored_bytes": 100, "free_bytes": 9000, "used_bytes": 300, "used_percent": 0.5, )"
              R"("num_objects": 4, "num_object_clones": 0, "num_object_copies": 4, "num_objects_missing_on_primary": 0, )"
              R"("num_objects_unfound": 0, "num_objects_degraded": 0, "read_ops": 7, "read_bytes": 2048, )"
              R"("write_ops": 8, "write_bytes": 4096})");
}

TEST(PoolStats, MissingFieldThrowsSoThatPoolIsSkipped) {
    auto df = df_pools(R"({"pools": [{"name": "vms", "id": 3, "stats": {"stored": 100}}]})");
    EXPECT_ANY_THROW(pool_stats(df.at("vms"), PoolCounters{}));
}

TEST(OsdStatus, ParsesCeph16TableWithColoursAndIgnoresHeaderAndBorders) {
    std::string text =
        "ID  HOST         USED  AVAIL  WR OPS  WR DATA  RD OPS  RD DATA  STATE      \n"
        " 0  hv1.example  1026M  1021M      0        0       0        0   \x1b[32mexists,up\x1b[0m  \n"
        " 1  hv2         2489M   236G      3     12k       1      0    exists,up  \n";
    auto rows = parse_osd_status(text);
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows.at("0").node, "hv1");
    EXPECT_EQ(rows.at("0").used, "1026M");
    EXPECT_EQ(rows.at("0").state, "exists,up");
    EXPECT_EQ(rows.at("1").avail, "236G");
    EXPECT_EQ(rows.at("1").wr_data, "12k");
}

TEST(OsdStatus, ParsesCeph14Layout) {
    std::string text =
        "+----+------+-------+-------+--------+---------+--------+---------+-----------+\n"
        "| id | host |  used | avail | wr ops | wr data | rd ops | rd data |   state   |\n"
        "+----+------+-------+-------+--------+---------+--------+---------+-----------+\n"
        "| 4  | hv3.x | 1.0G | 9.0G |    0   |     0   |    0   |     0   | exists,up |\n";
    auto rows = parse_osd_status(text);
    ASSERT_EQ(rows.size(), 1u);
    EXPECT_EQ(rows.at("4").node, "hv3");
    EXPECT_EQ(rows.at("4").state, "exists,up");
}

TEST(OsdStats, MergedInTheReferenceKeyOrderAndSkippedWhenAnIdIsMissing) {
    auto dump = osd_dump_fields(R"({"osds": [{"osd": 0, "uuid": "u0", "up": 1, "in": 1, "primary_affinity": 1.0}]})");
    auto df = osd_df_fields(R"({"nodes": [{"id": 0, "device_class": "ssd", "crush_weight": 0.0009, "reweight": 1.0,
        "kb": 1, "kb_used": 2, "kb_used_data": 3, "kb_used_omap": 4, "kb_used_meta": 5, "kb_avail": 6,
        "utilization": 0.1, "var": 1.0, "pgs": 9}]})");
    auto status = parse_osd_status(" 0  hv1  1M  2M  0  0  0  0  exists,up\n");
    auto merged = osd_stats("0", dump, df, status);
    ASSERT_TRUE(merged);
    std::vector<std::string> keys;
    for (const auto& [k, v] : merged->items()) keys.push_back(k);
    std::vector<std::string> want{"uuid", "up", "in", "primary_affinity", "utilization", "var", "pgs", "kb",
                                  "kb_used", "kb_used_data", "kb_used_omap", "kb_used_meta", "kb_avail", "weight",
                                  "reweight", "class", "node", "used", "avail", "wr_ops", "wr_data", "rd_ops",
                                  "rd_data", "state"};
    EXPECT_EQ(keys, want);
    EXPECT_EQ((*merged)["class"], "ssd");
    EXPECT_FALSE(osd_stats("1", dump, df, status));
}

TEST(Names, PoolNamesThatWouldBreakAPathOrCommandAreRefused) {
    EXPECT_TRUE(valid_pool_name("vms"));
    EXPECT_TRUE(valid_pool_name(".mgr"));
    for (const std::string& bad : std::vector<std::string>{"", "a/b", "a b", "..", "a@b", "a\nb", std::string(300, 'x')})
        EXPECT_FALSE(valid_pool_name(bad)) << bad;
    EXPECT_TRUE(valid_osd_id("12"));
    EXPECT_FALSE(valid_osd_id("x1"));
    EXPECT_FALSE(valid_osd_id(""));
}

TEST(LockOwner, AddressUpToTheFirstColonWithOrWithoutMessengerPrefix) {
    EXPECT_EQ(lock_owner("10.0.0.1:0/123456"), "10.0.0.1");
    EXPECT_EQ(lock_owner("v1:10.0.0.2:6801/99"), "10.0.0.2");
    EXPECT_FALSE(lock_owner("garbage"));
    EXPECT_FALSE(lock_owner(""));
    EXPECT_FALSE(lock_owner("host:port"));
}

TEST(Volumes, PoolSlashVolumeOnly) {
    EXPECT_TRUE(split_volume("vms/disk0"));
    EXPECT_FALSE(split_volume("disk0"));
    EXPECT_FALSE(split_volume("a/b/c"));
    EXPECT_FALSE(split_volume("/disk"));
    EXPECT_FALSE(split_volume("vms/"));
}

TEST(CephVolume, SelectsTheBlockEntryOfTheOsdId) {
    std::string json = R"({
      "3": [{"type": "db", "tags": {"ceph.osd_id": "3"}, "devices": ["/dev/nvme0n1"], "vg_name": "osd-db", "lv_name": "osd-3"},
            {"type": "block", "devices": ["/dev/sdb"], "vg_name": "ceph-aaa", "lv_name": "osd-block-bbb",
             "tags": {"ceph.osd_id": "3", "ceph.osd_fsid": "bbb", "ceph.cluster_fsid": "ccc"}}],
      "4": [{"type": "block", "devices": ["/dev/sdb"], "vg_name": "ceph-x", "lv_name": "osd-block-y",
             "tags": {"ceph.osd_id": "4", "ceph.osd_fsid": "y", "ceph.cluster_fsid": "ccc"}}]})";
    auto info = parse_ceph_volume(json, "3");
    ASSERT_TRUE(info);
    EXPECT_EQ(info->device, "/dev/sdb");
    EXPECT_EQ(info->osd_fsid, "bbb");
    EXPECT_EQ(info->cluster_fsid, "ccc");
    EXPECT_EQ(info->vg, "ceph-aaa");
    EXPECT_EQ(info->lv, "osd-block-bbb");
    EXPECT_EQ(parse_ceph_volume(json, "4")->vg, "ceph-x");
    EXPECT_FALSE(parse_ceph_volume(json, "5"));
    EXPECT_FALSE(parse_ceph_volume(R"({"3": [{"type": "block", "tags": {"ceph.osd_id": "3"}}]})", "3"));
    EXPECT_ANY_THROW(parse_ceph_volume("not json", "3"));
}
