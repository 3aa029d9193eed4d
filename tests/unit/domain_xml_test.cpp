// The one reading of libvirt domain XML shared by the CLI and the node
// daemon (pvc/domain_xml.hpp).
#include "pvc/domain_xml.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace {

using pvc::DomainXml;
using pvc::parse_domain_xml;

DomainXml with(const std::string& inner) { return parse_domain_xml("<domain type='kvm'>" + inner + "</domain>"); }

std::optional<std::uint64_t> memory(const std::string& value, const std::string& unit) {
    std::string attr = unit.empty() ? "" : " unit='" + unit + "'";
    return with("<name>m</name><memory" + attr + ">" + value + "</memory>").memory_kib;
}
std::optional<std::uint64_t> current_memory(const std::string& value, const std::string& unit) {
    std::string attr = unit.empty() ? "" : " unit='" + unit + "'";
    return with("<name>m</name><currentMemory" + attr + ">" + value + "</currentMemory>").current_memory_kib;
}

constexpr std::uint64_t KiB = 1024, MiB = KiB * 1024, GiB = MiB * 1024, TiB = GiB * 1024;
constexpr std::uint64_t KB = 1000, MB = KB * 1000, GB = MB * 1000, TB = GB * 1000;

// Every unit libvirt accepts for <memory> and <currentMemory>, as KiB.
TEST(DomainXmlMemory, EveryLibvirtUnit) {
    struct Case {
        const char* unit;
        std::uint64_t value;
        std::uint64_t bytes;
    };
    const std::vector<Case> cases = {
        {"b", 1 * GiB, 1 * GiB},        {"bytes", 3 * MiB, 3 * MiB},     {"KB", 2048000, 2048000 * KB},
        {"k", 2048, 2048 * KiB},        {"KiB", 2097152, 2097152 * KiB}, {"MB", 1000, 1000 * MB},
        {"M", 512, 512 * MiB},          {"MiB", 64, 64 * MiB},           {"GB", 4, 4 * GB},
        {"G", 2, 2 * GiB},              {"GiB", 16, 16 * GiB},           {"TB", 1, 1 * TB},
        {"T", 1, 1 * TiB},              {"TiB", 2, 2 * TiB},
    };
    for (const auto& c : cases) {
        std::uint64_t kib = c.bytes / KiB + (c.bytes % KiB ? 1 : 0);
        EXPECT_EQ(memory(std::to_string(c.value), c.unit), kib) << c.value << " " << c.unit;
        EXPECT_EQ(current_memory(std::to_string(c.value), c.unit), kib) << c.value << " " << c.unit;
    }
}

// libvirt's default unit for memory is KiB (the reference daemon took MiB).
TEST(DomainXmlMemory, NoUnitIsKiB) {
    EXPECT_EQ(memory("1048576", ""), 1048576u);
    EXPECT_EQ(current_memory("524288", ""), 524288u);
    EXPECT_EQ(with("<name>m</name><memory>1048576</memory>").memory_mib(), 1024);
}

TEST(DomainXmlMemory, UnitsAreCaseInsensitiveAndRoundUpToKiB) {
    EXPECT_EQ(memory("2", "gib"), 2 * GiB / KiB);
    EXPECT_EQ(memory("2", "g"), 2 * GiB / KiB);
    EXPECT_EQ(memory("1000", "kb"), 1000 * KB / KiB + 1);  // 1,000,000 bytes = 976.56 KiB -> 977
    EXPECT_EQ(memory("1", "B"), 1u);
    EXPECT_EQ(memory("1025", "byte"), 2u);
    EXPECT_EQ(memory("1", "PiB"), 1024 * TiB / KiB);
    EXPECT_EQ(memory("1", "EB"), 1000 * 1000 * TB / KiB);
    EXPECT_EQ(memory(" 64 ", "MiB"), 64 * MiB / KiB);  // whitespace around the number, as libvirt's XML reader
}

TEST(DomainXmlMemory, MiBAreTruncated) {
    EXPECT_EQ(with("<memory unit='KiB'>2097151</memory>").memory_mib(), 2047);
    EXPECT_EQ(with("<memory unit='MB'>1000</memory>").memory_mib(), 953);  // 10^9 bytes
    EXPECT_EQ(with("<memory unit='GiB'>2</memory>").memory_mib(), 2048);
}

TEST(DomainXmlMemory, InvalidAmountsAreNone) {
    EXPECT_EQ(memory("64", "mib2"), std::nullopt);
    EXPECT_EQ(memory("64", "Q"), std::nullopt);
    EXPECT_EQ(memory("64", "KiBB"), std::nullopt);
    EXPECT_EQ(memory("64", "iB"), std::nullopt);
    EXPECT_EQ(memory("-64", "MiB"), std::nullopt);
    EXPECT_EQ(memory("1.5", "GiB"), std::nullopt);
    EXPECT_EQ(memory("", "MiB"), std::nullopt);
    EXPECT_EQ(memory("lots", ""), std::nullopt);
    EXPECT_EQ(memory("20000000", "EiB"), std::nullopt);  // overflows 64 bits of bytes
    EXPECT_EQ(pvc::memory_kib(std::to_string(std::numeric_limits<std::uint64_t>::max()), "b"),
              std::numeric_limits<std::uint64_t>::max() / 1024 + 1);
    EXPECT_EQ(with("<name>m</name>").memory_kib, std::nullopt);
    EXPECT_EQ(with("<name>m</name>").memory_mib(), std::nullopt);
}

TEST(DomainXmlVcpu, CountAndCurrent) {
    auto x = with("<vcpu placement='static' current='2'>4</vcpu>");
    EXPECT_EQ(x.vcpus, 4);
    EXPECT_EQ(x.current_vcpus, 2);
    auto y = with("<vcpu> 8 </vcpu>");
    EXPECT_EQ(y.vcpus, 8);
    EXPECT_EQ(y.current_vcpus, std::nullopt);
    EXPECT_EQ(with("<vcpu>two</vcpu>").vcpus, std::nullopt);
    EXPECT_EQ(with("<vcpu current='x'>2</vcpu>").current_vcpus, std::nullopt);
    EXPECT_EQ(with("<name>n</name>").vcpus, std::nullopt);
}

const char* kFull = R"(<domain type='kvm'>
  <name>web1</name>
  <uuid>6A1C3C52-0F4E-4D7B-9A51-2F1E7A0C11A1</uuid>
  <description>front end</description>
  <memory unit='MiB'>2048</memory>
  <currentMemory unit='MiB'>1024</currentMemory>
  <vcpu>2</vcpu>
  <os><type arch='x86_64' machine='pc-q35-7.2'>hvm</type></os>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='network' device='disk'>
      <source protocol='rbd' name='vms/web1_disk0'><host name='ceph1' port='6789'/></source>
      <target dev='sda' bus='scsi'/>
    </disk>
    <disk type='file' device='disk'><source file='/srv/web1.qcow2'/><target dev='vdb'/></disk>
    <disk type='block' device='disk'><source dev='/dev/sdz'/><target dev='vdc'/></disk>
    <disk type='network' device='cdrom'><source protocol='http' name='/iso/x.iso'/><target dev='hdc'/></disk>
    <interface type='bridge'>
      <mac address='52:54:00:aa:bb:cc'/><source bridge='vmbr100'/><target dev='vnet3'/><model type='virtio'/>
    </interface>
    <interface type='direct'><mac address='52:54:00:aa:bb:cd'/><source dev='ens1f1v0' mode='passthrough'/></interface>
    <interface type='hostdev' managed='yes'>
      <mac address='52:54:00:aa:bb:ce'/>
      <source><address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/></source>
    </interface>
    <console type='pty'><target type='serial' port='0'/></console>
    <graphics type='vnc' port='5901' autoport='yes' listen='127.0.0.1'/>
    <graphics type='spice' port='5902'/>
  </devices>
</domain>
)";

TEST(DomainXml, ReadsEveryFactTheClientAndDaemonUse) {
    auto x = parse_domain_xml(kFull);
    EXPECT_EQ(x.name, "web1");
    EXPECT_EQ(x.uuid, "6A1C3C52-0F4E-4D7B-9A51-2F1E7A0C11A1");  // as written; callers normalise
    EXPECT_EQ(x.description, "front end");
    EXPECT_EQ(x.memory_mib(), 2048);
    EXPECT_EQ(x.current_memory_kib, 1024 * 1024u);
    EXPECT_EQ(x.vcpus, 2);
    EXPECT_EQ(x.os_type, "hvm");
    EXPECT_EQ(x.arch, "x86_64");
    EXPECT_EQ(x.machine, "pc-q35-7.2");
    EXPECT_EQ(x.emulator, "/usr/bin/qemu-system-x86_64");
    EXPECT_EQ(x.console_type, "pty");

    ASSERT_EQ(x.disks.size(), 4u);
    EXPECT_EQ(x.disks[0].type, "network");
    EXPECT_EQ(x.disks[0].protocol, "rbd");
    EXPECT_EQ(x.disks[0].source, "vms/web1_disk0");
    EXPECT_EQ(x.disks[0].target, "sda");
    EXPECT_EQ(x.disks[1].type, "file");
    EXPECT_EQ(x.disks[1].source, "/srv/web1.qcow2");
    EXPECT_EQ(x.disks[1].target, "vdb");
    EXPECT_EQ(x.disks[2].type, "block");
    EXPECT_EQ(x.disks[2].source, "/dev/sdz");
    EXPECT_EQ(x.rbd_list(), std::vector<std::string>{"vms/web1_disk0"});  // not the http cdrom

    ASSERT_EQ(x.interfaces.size(), 3u);
    EXPECT_EQ(x.interfaces[0].type, "bridge");
    EXPECT_EQ(x.interfaces[0].mac, "52:54:00:aa:bb:cc");
    EXPECT_EQ(x.interfaces[0].source, "vmbr100");
    EXPECT_EQ(x.interfaces[0].target, "vnet3");
    EXPECT_EQ(x.interfaces[0].model, "virtio");
    EXPECT_EQ(x.interfaces[1].source, "ens1f1v0");
    EXPECT_EQ(x.interfaces[2].type, "hostdev");
    EXPECT_EQ(x.interfaces[2].source, "0000:3b:02.1");

    ASSERT_TRUE(x.graphics);
    EXPECT_EQ(x.graphics->type, "vnc");  // the first one
    EXPECT_EQ(x.graphics->listen, "127.0.0.1");
    EXPECT_EQ(x.graphics->port, "5901");
}

TEST(DomainXml, MissingElementsAreEmpty) {
    auto x = parse_domain_xml("<domain/>");
    EXPECT_EQ(x.name, "");
    EXPECT_EQ(x.uuid, std::nullopt);
    EXPECT_EQ(x.emulator, "");
    EXPECT_EQ(x.arch, "");
    EXPECT_EQ(x.console_type, "");
    EXPECT_TRUE(x.disks.empty());
    EXPECT_FALSE(x.graphics);
}

TEST(DomainXml, RefusesWhatIsNotADomain) {
    try {
        parse_domain_xml("<domain>\n<name>broken</domain>");
        FAIL() << "accepted";
    } catch (const pvc::DomainXmlError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("invalid VM XML"), std::string::npos) << what;
        EXPECT_NE(what.find("at line 2"), std::string::npos) << what;
    }
    EXPECT_THROW(parse_domain_xml("<notadomain/>"), pvc::DomainXmlError);
    EXPECT_THROW(parse_domain_xml(""), pvc::DomainXmlError);
    EXPECT_EQ(pvc::try_parse_domain_xml("<domain><name>broken"), std::nullopt);
    EXPECT_EQ(pvc::try_parse_domain_xml("<notadomain/>"), std::nullopt);
    EXPECT_TRUE(pvc::try_parse_domain_xml("<domain/>"));
}

// No network, no entity expansion: a domain XML is data.
TEST(DomainXml, ExternalEntitiesAreNotRead) {
    auto x = pvc::try_parse_domain_xml(
        "<?xml version='1.0'?><!DOCTYPE domain [<!ENTITY e SYSTEM 'file:///etc/hostname'>]>"
        "<domain><name>&e;</name></domain>");
    if (x) {
        EXPECT_EQ(x->name, "");
    }
}

TEST(DomainXml, InsertsAUuidAfterTheNameKeepingIndentation) {
    std::string in = "<domain type='kvm'>\n  <name>n1</name>\n  <memory unit='MiB'>64</memory>\n</domain>\n";
    std::string out = pvc::insert_domain_uuid(in, "11111111-2222-4333-8444-555555555555");
    EXPECT_EQ(out,
              "<domain type=\"kvm\">\n  <name>n1</name>\n  <uuid>11111111-2222-4333-8444-555555555555</uuid>\n"
              "  <memory unit=\"MiB\">64</memory>\n</domain>\n");
    EXPECT_EQ(parse_domain_xml(out).uuid, "11111111-2222-4333-8444-555555555555");
    EXPECT_THROW(pvc::insert_domain_uuid("<domain/>", "11111111-2222-4333-8444-555555555555"), pvc::DomainXmlError);
}

TEST(DomainXml, UuidShape) {
    EXPECT_TRUE(pvc::is_uuid("6a1c3c52-0f4e-4d7b-9a51-2f1e7a0c11a1"));
    EXPECT_TRUE(pvc::is_uuid("6A1C3C52-0F4E-4D7B-9A51-2F1E7A0C11A1"));
    EXPECT_FALSE(pvc::is_uuid("6a1c3c520f4e4d7b9a512f1e7a0c11a1"));
    EXPECT_FALSE(pvc::is_uuid("6a1c3c52-0f4e-4d7b-9a51-2f1e7a0c11ag"));
    EXPECT_FALSE(pvc::is_uuid(""));
}

// The daemon parses from several threads at once (dispatch, statistics).
TEST(DomainXml, ParsesConcurrently) {
    std::vector<std::thread> threads;
    std::vector<int> ok(8, 0);
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 200; ++i) {
                auto x = pvc::try_parse_domain_xml(i % 2 ? kFull : "<domain><broken");
                if (x && x->memory_mib() == 2048 && x->disks.size() == 4) ++ok[t];
            }
        });
    for (auto& th : threads) th.join();
    for (int t = 0; t < 8; ++t) EXPECT_EQ(ok[t], 100);
}

}  // namespace

TEST(DomainXml, SriovVfOfDirectAndHostdevNics) {
    auto x = parse_domain_xml(R"(<domain><devices>
      <interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='vmbr100'/></interface>
      <interface type='direct'><mac address='52:54:00:00:00:02'/><source dev='ens1f0v3' mode='passthrough'/></interface>
      <interface type='hostdev' managed='yes'>
        <mac address='52:54:00:00:00:03'/>
        <source><address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x4'/></source>
        <sriov_device> ens1f0v4 </sriov_device>
      </interface>
      <interface type='hostdev'><source><address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x5'/></source></interface>
    </devices></domain>)");
    ASSERT_EQ(x.interfaces.size(), 4u);
    EXPECT_EQ(x.interfaces[0].sriov_vf(), "");
    EXPECT_EQ(x.interfaces[1].sriov_vf(), "ens1f0v3");
    EXPECT_EQ(x.interfaces[2].source, "0000:3b:02.4");
    EXPECT_EQ(x.interfaces[2].sriov_device, "ens1f0v4");
    EXPECT_EQ(x.interfaces[2].sriov_vf(), "ens1f0v4");
    EXPECT_EQ(x.interfaces[3].sriov_vf(), "");  // no <sriov_device>: no VF name to track
}

// The bounds checked before libxml2 reads a document (DomainXmlLimits).
namespace {

std::string refusal(const std::string& text) {
    try {
        parse_domain_xml(text);
    } catch (const pvc::DomainXmlError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST(DomainXmlBounds, ADocumentTypeDeclarationIsRefusedBeforeAnyEntityExpands) {
    std::string laughs = "<?xml version='1.0'?><!DOCTYPE domain [<!ENTITY a 'aaaaaaaaaa'>";
    std::string prev = "a";
    for (char e = 'b'; e <= 'j'; ++e) {
        laughs += "<!ENTITY " + std::string(1, e) + " '";
        for (int i = 0; i < 10; ++i) laughs += "&" + prev + ";";
        laughs += "'>";
        prev = std::string(1, e);
    }
    laughs += "]><domain><name>lol</name><description>&j;</description></domain>";
    EXPECT_NE(refusal(laughs).find("<!DOCTYPE>"), std::string::npos) << refusal(laughs);
    EXPECT_NE(refusal("<!DOCTYPE domain SYSTEM 'http://192.0.2.1/x.dtd'><domain/>").find("DOCTYPE"), std::string::npos);
    EXPECT_NE(refusal("<domain><!ENTITY x 'y'></domain>").find("markup declaration"), std::string::npos);
    // Read as UTF-8 whatever it declares: a UTF-16 document (NUL bytes) cannot hide one.
    std::string utf16 = "\xff\xfe";
    for (char ch : std::string("<!DOCTYPE d [<!ENTITY a 'b'>]><domain/>")) utf16 += std::string{ch, '\0'};
    EXPECT_NE(refusal(utf16).find("NUL"), std::string::npos);
    // EBCDIC (IBM037), which libxml2 would detect from its first bytes: no '<' the first pass could see.
    const std::string ebcdic = "\x4c\x6f\xa7\x94\x93\x40\xa5\x85\x99\xa2\x89\x96\x95\x7e\x7d\xf1\x4b\xf0\x7d\x40\x85\x95\x83\x96\x84\x89\x95\x87\x7e\x7d\xc9\xc2\xd4\xf0\xf3\xf7\x7d\x6f\x6e\x4c\x5a\xc4\xd6\xc3\xe3\xe8\xd7\xc5\x40\x84\x40\xba\x4c\x5a\xc5\xd5\xe3\xc9\xe3\xe8\x40\x81\x40\x7d\x82\x7d\x6e\xbb\x6e\x4c\x84\x96\x94\x81\x89\x95\x6e\x4c\x95\x81\x94\x85\x6e\x50\x81\x5e\x4c\x61\x95\x81\x94\x85\x6e\x4c\x61\x84\x96\x94\x81\x89\x95\x6e";
    EXPECT_NE(refusal(ebcdic).find("not UTF-8"), std::string::npos) << refusal(ebcdic);
    EXPECT_NE(refusal("<domain><name>\xc3</name></domain>").find("not UTF-8 at offset 14"), std::string::npos);
    EXPECT_EQ(parse_domain_xml("\xef\xbb\xbf<domain><name>caf\xc3\xa9 \xf0\x9f\x96\xa5</name></domain>").name,
              "caf\xc3\xa9 \xf0\x9f\x96\xa5");  // a BOM and any UTF-8 are fine
    // The text of a comment or a CDATA section is no declaration.
    auto x = parse_domain_xml("<domain><!-- <!DOCTYPE x> --><description><![CDATA[<!DOCTYPE y>]]></description></domain>");
    EXPECT_EQ(x.description, "<!DOCTYPE y>");
}

TEST(DomainXmlBounds, AttributesPerElementAreCountedOutsideQuotes) {
    std::string attrs;
    for (size_t i = 0; i < pvc::DomainXmlLimits::max_attributes; ++i) attrs += " a" + std::to_string(i) + "='x=>y'";
    EXPECT_EQ(with("<os" + attrs + "/>").os_type, "");  // 64 are fine, '=' and '>' in a value count for nothing
    EXPECT_NE(refusal("<domain><os" + attrs + " z='1'/></domain>").find("attributes"), std::string::npos);
    // 100,000 (minutes of CPU in libxml2's duplicate check): refused at once.
    std::string many;
    for (int i = 0; i < 100000; ++i) many += " b='x'";  // one name: under the size bound
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_NE(refusal("<domain" + many + "/>").find("(the limit is 64)"), std::string::npos);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));  // generous: the scan is linear
}

TEST(DomainXmlBounds, DepthElementCountAndSizesAreBounded) {
    using L = pvc::DomainXmlLimits;
    std::string open, close;
    for (size_t i = 1; i < L::max_depth; ++i) {
        open += "<m>";
        close = "</m>" + close;
    }
    EXPECT_EQ(parse_domain_xml("<domain>" + open + close + "<name>deep</name></domain>").name, "deep");
    EXPECT_NE(refusal("<domain>" + open + "<m/><m>" + "<x/></m>" + close + "</domain>").find("nested deeper"),
              std::string::npos);
    std::string elements;
    for (size_t i = 0; i < L::max_elements; ++i) elements += "<e/>";
    EXPECT_NE(refusal("<domain>" + elements + "</domain>").find("more elements"), std::string::npos);
    EXPECT_NE(refusal("<domain><name a='" + std::string(L::max_attribute_bytes + 1, 'v') + "'/></domain>")
                  .find("attribute value"),
              std::string::npos);
    EXPECT_NE(refusal("<domain><description>" + std::string(L::max_text_bytes + 1, 't') + "</description></domain>")
                  .find("text"),
              std::string::npos);
    EXPECT_NE(refusal("<domain><!--" + std::string(L::max_bytes, 'c') + "--></domain>").find("too large"),
              std::string::npos);
    // At the bounds: accepted.
    auto x = with("<description>" + std::string(L::max_text_bytes, 't') + "</description>");
    EXPECT_EQ(x.description.size(), L::max_text_bytes);
}

// Generated input: a valid document cut, spliced and sprinkled with markup
// (declarations, entities, comments, CDATA, quotes). Whatever comes of it,
// the reader answers a DomainXml or a DomainXmlError, and what it reads is
// never more than the text it was given (no entity ever expands).
TEST(DomainXmlBounds, GeneratedDocumentsAreReadOrRefusedNeverExpanded) {
    const std::vector<std::string> pieces = {
        "<", ">", "/>", "'", "\"", "=", "&", ";", "&a;", "&amp;", "&#60;", "<!--", "-->", "<![CDATA[", "]]>", "<?", "?>",
        "<!DOCTYPE domain [<!ENTITY a 'aaaaaaaaaaaaaaaa'>]>", "<!ENTITY a 'x'>", "<!", "<description>&a;&a;&a;</description>",
        "<e a='1' b='2'>", "</e>", "<x/>", "\xc3\xa9", "\xff", " ", "\n"};
    std::mt19937 rng(26);
    const std::string base = kFull;
    size_t parsed = 0;
    for (int i = 0; i < 5000; ++i) {
        std::string doc = base;
        int edits = 1 + static_cast<int>(rng() % 6);
        for (int e = 0; e < edits; ++e) {
            size_t at = rng() % (doc.size() + 1);
            switch (rng() % 3) {
                case 0: doc.insert(at, pieces[rng() % pieces.size()]); break;
                case 1: doc.erase(at, rng() % 16); break;
                default: doc.insert(at, doc.substr(rng() % doc.size(), rng() % 64)); break;
            }
        }
        try {
            auto x = parse_domain_xml(doc);
            ++parsed;
            EXPECT_LE(x.description.size(), doc.size()) << doc;
            EXPECT_LE(x.name.size(), doc.size()) << doc;
        } catch (const pvc::DomainXmlError&) {
        }
    }
    EXPECT_GT(parsed, 100u) << "the generator still makes documents that parse";
}
