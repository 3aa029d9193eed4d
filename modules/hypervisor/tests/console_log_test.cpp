#include <gtest/gtest.h>

#include "console_log.hpp"
#include "domain_xml.hpp"
#include "migration.hpp"

namespace pvc::hv {

TEST(ConsoleTail, KeepsTheLastLinesWithTheirNewlines) {
    EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "b\nc\n");
    EXPECT_EQ(tail_lines("a\nb\nc", 2), "b\nc");
    EXPECT_EQ(tail_lines("a\nb\n", 5), "a\nb\n");
}
TEST(ConsoleFile, OnlyAPlainFileNameNamesTheFile) {
    const std::filesystem::path dir = "/srv/console";
    EXPECT_EQ(console_log_file(dir, "web1"), dir / "web1.log");
    EXPECT_EQ(console_log_file(dir, "a.b-c_d"), dir / "a.b-c_d.log");
    EXPECT_EQ(console_log_file(dir, "..x"), dir / "..x.log");
    for (const std::string& bad : std::vector<std::string>{"", ".", "..", "../../var/log/auth", "a/b", "/etc/passwd", std::string("a\0b", 3),
                            std::string("line\nbreak"), std::string(252, 'x')})
        EXPECT_FALSE(console_log_file(dir, bad)) << bad;
    EXPECT_TRUE(console_log_file(dir, std::string(251, 'x')));
}
TEST(ConsoleTail, NormalisesLineBreaksAndReplacesBadBytes) {
    EXPECT_EQ(tail_lines("x\r\ny\rz\n", 3), "x\ny\nz\n");
    EXPECT_EQ(tail_lines("ok\xff\n", 1), "ok\xEF\xBF\xBD\n");
}
TEST(DomainXml, MemoryUnitsFollowTheReference) {
    auto x = [](std::string mem) { return parse_domain_xml("<domain><name>n</name>" + mem + "</domain>")->memory_mib; };
    EXPECT_EQ(x("<memory unit='KiB'>2097152</memory>"), 2048);
    EXPECT_EQ(x("<memory unit='GiB'>2</memory>"), 2048);
    EXPECT_EQ(x("<memory unit='MiB'>512</memory>"), 512);
    EXPECT_EQ(x("<memory>512</memory>"), 512);
    EXPECT_FALSE(parse_domain_xml("<domain><name>broken"));
    EXPECT_FALSE(parse_domain_xml("<notadomain/>"));
}
TEST(Migration, UrisFromTheTemplate) {
    Config c;
    c.cluster.domain = "pvc.local";
    EXPECT_EQ(destination_uri(c, "hv2"), "qemu+tcp://hv2.pvc.local/system");
    EXPECT_EQ(migration_data_uri("qemu+tcp://hv2.pvc.local/system"), "tcp://hv2.pvc.local");
    EXPECT_EQ(migration_data_uri("qemu+tcp://root@10.99.0.2:16509/system"), "tcp://10.99.0.2");
}

}  // namespace pvc::hv
