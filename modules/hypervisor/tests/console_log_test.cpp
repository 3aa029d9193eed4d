#include <gtest/gtest.h>

#include "console_log.hpp"
#include "hv_fixture.hpp"
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
TEST(Migration, UrisFromTheTemplate) {
    Config c;
    c.cluster.domain = "pvc.local";
    EXPECT_EQ(destination_uri(Settings{}, c, "hv2"), "qemu+tcp://hv2.pvc.local/system");
    EXPECT_EQ(migration_data_uri("qemu+tcp://hv2.pvc.local/system"), "tcp://hv2.pvc.local");
    EXPECT_EQ(migration_data_uri("qemu+tcp://root@10.99.0.2:16509/system"), "tcp://10.99.0.2");
}

}  // namespace pvc::hv

namespace pvc::hv::test {

// The XML memory of a VM not running here counts in memprov in libvirt's
// units, as `pvc vm list` shows it: a <memory> without unit is KiB (the
// reference took it as MiB). The unit reading itself: tests/unit/domain_xml_test.
TEST_F(HvTest, MemprovReadsXmlMemoryInLibvirtUnits) {
    register_node("hv1");
    TestNode n1("hv1", server.hosts(), dir.path(), private_uri());
    n1.start();
    auto xml = [](const std::string& name, const std::string& uuid, const std::string& memory) {
        return "<domain type='kvm'><name>" + name + "</name><uuid>" + uuid + "</uuid>" + memory +
               "<vcpu>1</vcpu><os><type arch='x86_64'>hvm</type></os><devices/></domain>";
    };
    auto a = uuid_n(901), b = uuid_n(902), c = uuid_n(903);
    define(a, "nounit", "hv1", "stop", "none", xml("nounit", a, "<memory>1048576</memory>"));
    define(b, "gib", "hv1", "stop", "none", xml("gib", b, "<memory unit='G'>2</memory>"));
    define(c, "bytes", "hv1", "stop", "none", xml("bytes", c, "<memory unit='bytes'>268435456</memory>"));
    ASSERT_TRUE(eventually([&] {
        for (const auto& u : {a, b, c}) {
            auto d = n1.hv->domain(u);
            if (!d || d->cached().node != "hv1") return false;
        }
        return true;
    }));
    n1.hv->collect();
    KeepaliveReport r;
    n1.hv->contribute(r);
    std::map<std::string, std::string> w(r.writes.begin(), r.writes.end());
    EXPECT_EQ(w[schema::path("node.memory.provisioned", {"hv1"})], std::to_string(1024 + 2048 + 256));
    EXPECT_EQ(w[schema::path("node.memory.allocated", {"hv1"})], "0");
}

}  // namespace pvc::hv::test
