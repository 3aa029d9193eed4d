// The DNS aggregator's pure parts: pdns_server's arguments, the zone
// difference against the database rows, the SOA serial, and the parsing of
// a zone transfer's messages (as dnsmasq sends them).
#include <gtest/gtest.h>

#include <algorithm>

#include "axfr.hpp"
#include "dns_aggregator.hpp"

using namespace pvc::network;

TEST(PdnsArguments, AreTheReferencesWithThePackagedPowerDnsNames) {
    PdnsOptions o;
    o.local_addresses = {"10.0.0.254", "192.168.1.254"};
    o.socket_dir = "/run/pvc/pdns";
    o.db = {"localhost", "pvcdns", "pvcdns", "secret", 5432};
    auto a = pdns_arguments(o);
    std::vector<std::string> want = {"--no-config", "--daemon=no", "--guardian=yes", "--disable-syslog=yes",
                                     "--disable-axfr=no", "--allow-axfr-ips=0.0.0.0/0",
                                     "--local-address=10.0.0.254,192.168.1.254", "--local-port=53",
                                     "--log-dns-details=on", "--loglevel=3", "--master=yes", "--slave=yes",
                                     "--slave-renotify=yes", "--version-string=powerdns",
                                     "--default-soa-content=dns.pvc.local hostmaster.@ 0 10800 3600 604800 3600",
                                     "--zone-cache-refresh-interval=0", "--socket-dir=/run/pvc/pdns", "--launch=gpgsql",
                                     "--gpgsql-host=localhost", "--gpgsql-port=5432", "--gpgsql-dbname=pvcdns",
                                     "--gpgsql-user=pvcdns", "--gpgsql-password=secret", "--gpgsql-dnssec=no"};
    EXPECT_EQ(a, want);
}

TEST(ZoneDiff, KeepsOnlyAddressesBelowTheApexAndRemovesStaleAndChangedRows) {
    std::vector<DnsRecord> axfr = {
        {"net.local", 600, "SOA", ""},          {"net.local", 600, "NS", "ns"},
        {"vm1.net.local", 600, "A", "10.0.0.5"}, {"vm2.net.local", 600, "A", "10.0.0.7"},
        {"vm2.net.local", 600, "AAAA", "fd00::7"}, {"net.local", 600, "A", "10.0.0.1"},
        {"Vm3", 600, "A", "10.0.0.9"}};
    std::vector<DbRecord> db = {
        {"1", {"vm1.net.local", 600, "A", "10.0.0.5"}},   // unchanged
        {"2", {"vm2.net.local", 600, "A", "10.0.0.6"}},   // changed address
        {"3", {"gone.net.local", 600, "A", "10.0.0.8"}},  // stale
        {"4", {"vm1.net.local", 600, "A", "10.0.0.5"}}};  // a duplicate row
    ZoneDiff d = diff_zone("Net.Local", axfr, db);
    std::sort(d.remove_ids.begin(), d.remove_ids.end());
    EXPECT_EQ(d.remove_ids, (std::vector<std::string>{"2", "3", "4"}));
    std::vector<DnsRecord> add = {{"vm2.net.local", 600, "A", "10.0.0.7"},
                                  {"vm2.net.local", 600, "AAAA", "fd00::7"},
                                  {"vm3.net.local", 600, "A", "10.0.0.9"}};
    EXPECT_EQ(d.add, add);
    // In step: nothing to do.
    std::vector<DbRecord> same = {{"1", {"vm1.net.local", 600, "A", "10.0.0.5"}}};
    EXPECT_TRUE(diff_zone("net.local", {{"vm1.net.local", 600, "A", "10.0.0.5"}}, same).empty());
    // An empty transfer empties the zone's addresses.
    EXPECT_EQ(diff_zone("net.local", {}, same).remove_ids, std::vector<std::string>{"1"});
}

TEST(Soa, SerialIsIncremented) {
    EXPECT_EQ(next_soa("nsX.example.com root.example.com 1 10800 1800 86400 86400"),
              "nsX.example.com root.example.com 2 10800 1800 86400 86400");
    EXPECT_EQ(next_soa("garbage"), "garbage");
}

namespace {
// A message as dnsmasq writes one: header, question, then records with
// compressed names.
std::string message(uint16_t id, uint16_t flags) {
    std::string m;
    auto u16 = [&](unsigned v) {
        m += static_cast<char>(v >> 8);
        m += static_cast<char>(v & 0xFF);
    };
    u16(id);
    u16(flags);
    u16(1);
    u16(3);
    u16(0);
    u16(0);
    m += std::string("\x03net\x05local\x00", 11);  // offset 12
    u16(252);
    u16(1);
    // SOA at the apex (pointer to 12)
    m += "\xC0\x0C";
    u16(6);
    u16(1);
    u16(0);
    u16(600);
    std::string soa = std::string("\x00\x00", 2) + std::string(20, '\0');
    u16(static_cast<unsigned>(soa.size()));
    m += soa;
    // vm1.net.local A 10.0.0.5
    m += "\x03vm1\xC0\x0C";
    u16(1);
    u16(1);
    u16(0);
    u16(600);
    u16(4);
    m += std::string("\x0A\x00\x00\x05", 4);
    // vm1.net.local AAAA fd00::5
    m += "\x03VM1\xC0\x0C";
    u16(28);
    u16(1);
    u16(0);
    u16(600);
    u16(16);
    std::string v6(16, '\0');
    v6[0] = '\xfd';
    v6[15] = '\x05';
    m += v6;
    return m;
}
}  // namespace

TEST(Axfr, ParsesCompressedNamesAddressesAndCountsTheSoa) {
    std::vector<DnsRecord> out;
    EXPECT_EQ(parse_axfr_message(message(7, 0x8400), 7, out), 1);
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].type, "SOA");
    EXPECT_EQ(out[0].name, "net.local");
    EXPECT_EQ(out[1], (DnsRecord{"vm1.net.local", 600, "A", "10.0.0.5"}));
    EXPECT_EQ(out[2], (DnsRecord{"vm1.net.local", 600, "AAAA", "fd00::5"}));
}

TEST(Axfr, RefusesAnotherIdARefusalAndTruncation) {
    std::vector<DnsRecord> out;
    EXPECT_THROW(parse_axfr_message(message(7, 0x8400), 8, out), AxfrError);
    try {
        parse_axfr_message(message(7, 0x8405), 7, out);
        FAIL();
    } catch (const AxfrError& e) {
        EXPECT_NE(std::string(e.what()).find("refused"), std::string::npos);
    }
    std::string m = message(7, 0x8400);
    EXPECT_THROW(parse_axfr_message(m.substr(0, m.size() - 3), 7, out), AxfrError);
    // A compression loop is refused, not followed forever.
    std::string loop = message(7, 0x8400);
    loop[12 + 11 + 4] = '\xC0';
    loop[12 + 11 + 5] = static_cast<char>(12 + 11 + 4);
    EXPECT_THROW(parse_axfr_message(loop, 7, out), AxfrError);
}

TEST(Axfr, ANonAddressServerOrNothingListeningFails) {
    EXPECT_THROW(axfr("not-an-ip", "net.local", std::chrono::milliseconds(500)), AxfrError);
    // Nothing listens on this loopback port: refused at once.
    EXPECT_THROW(axfr("127.0.0.1", "net.local", std::chrono::milliseconds(2000), 1), AxfrError);
}
