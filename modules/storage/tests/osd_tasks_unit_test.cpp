// The OSD tasks' parsers (osd_tasks.hpp): detect strings over `lsscsi -s`
// output, sizes, partition names, JSON inside interleaved command output.
#include <gtest/gtest.h>

#include "osd_tasks.hpp"

using namespace pvc::storage;

TEST(OsdTaskParsers, DetectStringPicksTheIndexthMatchingDisk) {
    const std::string lsscsi =
        "[0:0:0:0]    disk    ATA      INTEL SSDSC2KB48 0150  /dev/sda    480GB\n"
        "[1:0:0:0]    disk    ATA      INTEL SSDSC2KB48 0150  /dev/sdb    480GB\n"
        "[2:0:0:0]    disk    ATA      Samsung SSD 860  4B6Q  /dev/sdc    500GB\n"
        "[3:0:0:0]    cd/dvd  QEMU     QEMU DVD-ROM     2.5+  /dev/sr0        -\n"
        "[4:0:0:0]    disk    ATA      INTEL SSDSC2KG96 0150  /dev/sdd    960GB\n";
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:480GB:0"), "/dev/sda");
    EXPECT_EQ(detect_device_in(lsscsi, "detect:intel:480GB:1"), "/dev/sdb");   // case-insensitive name
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:447GB:0"), std::nullopt);  // 7 % off: no
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:470GB:0"), "/dev/sda");  // within 3 %
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:960GB:0"), "/dev/sdd");
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:480GB:2"), std::nullopt);
    EXPECT_EQ(detect_device_in(lsscsi, "detect:QEMU:1GB:0"), std::nullopt);  // not a disk
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:480GB"), std::nullopt);
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:480GB:x"), std::nullopt);
    EXPECT_EQ(detect_device_in(lsscsi, "detect:INTEL:480GB:-1"), std::nullopt);
}

TEST(OsdTaskParsers, Sizes) {
    EXPECT_EQ(parse_size_bytes("1024"), 1024u);
    EXPECT_EQ(parse_size_bytes("256M"), 256ULL << 20);
    EXPECT_EQ(parse_size_bytes("20G"), 20ULL << 30);
    EXPECT_EQ(parse_size_bytes("20GB"), 20ULL << 30);
    EXPECT_EQ(parse_size_bytes("1T"), 1ULL << 40);
    EXPECT_EQ(parse_size_bytes("10g"), std::nullopt);
    EXPECT_EQ(parse_size_bytes("G10"), std::nullopt);
    EXPECT_EQ(parse_size_bytes(""), std::nullopt);
    EXPECT_EQ(parse_size_bytes("99999999999999999999"), std::nullopt);
    EXPECT_EQ(parse_size_bytes("99999999999P"), std::nullopt);  // overflows
}

TEST(OsdTaskParsers, FirstPartition) {
    EXPECT_EQ(first_partition("/dev/sdb"), "/dev/sdb1");
    EXPECT_EQ(first_partition("/dev/nvme0n1"), "/dev/nvme0n1p1");
    EXPECT_EQ(first_partition("/dev/loop3"), "/dev/loop3p1");
    EXPECT_EQ(first_partition("/dev/disk/by-id/ata-INTEL_X"), "/dev/disk/by-id/ata-INTEL_X-part1");
    EXPECT_EQ(first_partition("/dev/disk/by-path/pci-0000:03:00.0-scsi-0:1:0:0"),
              "/dev/disk/by-path/pci-0000:03:00.0-scsi-0:1:0:0-part1");
}

TEST(OsdTaskParsers, JsonInInterleavedOutput) {
    auto j = json_in_output("  WARNING: something\n{\n  \"1\": [ {\"type\": \"block\"} ]\n}\n--> done\n");
    ASSERT_TRUE(j);
    EXPECT_EQ((*j)["1"][0]["type"], "block");
    auto a = json_in_output("[0,1,2]\n");
    ASSERT_TRUE(a);
    EXPECT_EQ(a->size(), 3u);
    EXPECT_FALSE(json_in_output("no json here"));
    EXPECT_FALSE(json_in_output("{ broken"));
}
