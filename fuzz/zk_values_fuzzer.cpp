// Values the modules take from ZooKeeper or from Ceph's JSON replies, as a
// reader of a cluster it does not control must take them. The first byte
// chooses the reader; the value starts after the first line (so a seed's
// first line is a readable "<digit> <what>"):
//   0  `ceph df` JSON: each pool's statistics (modules/storage/src/stats.cpp)
//   1  `ceph osd dump` JSON, `osd df` JSON and `osd status` text (separated by
//      "%%" lines): the merged OSD statistics
//   2  `ceph-volume lvm list` JSON: an OSD's disk (modules/storage/src/ceph_objects.cpp)
//   3  a client network's keys (/networks/<vni>/..., `key=value` lines,
//      `vni=` the VNI, `acl:<in|out>:<description>:<order>=<rule>` its ACLs):
//      validation, gateways, the firewall fragment (modules/network/src)
//   4  one ACL rule text, and an ordering of ACLs by their stored orders
//   5  names: pool names, OSD ids, nft chain names
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "ceph_objects.hpp"
#include "client_network.hpp"
#include "firewall.hpp"
#include "pvc/strings.hpp"
#include "stats.hpp"

using namespace pvc;

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t nl = text.find('\n', pos);
        if (nl == std::string::npos) nl = text.size();
        out.push_back(text.substr(pos, nl - pos));
        pos = nl + 1;
    }
    return out;
}

void ceph_df(const std::string& text) {
    std::map<std::string, nlohmann::json> pools;
    try {
        pools = storage::df_pools(text);
    } catch (const std::exception&) {
        return;
    }
    storage::PoolCounters counters;
    counters.num_objects = 7;
    counters.read_bytes = UINT64_MAX;
    for (const auto& [name, pool] : pools) {
        (void)storage::valid_pool_name(name);
        try {
            auto stats = storage::pool_stats(pool, counters);
            (void)storage::python_json(stats);
        } catch (const std::exception&) {
        }
    }
}

// Three texts separated by "\n%%\n" lines: `osd dump`, `osd df`, `osd status`.
void ceph_osds(const std::string& text) {
    std::string part[3];
    size_t pos = 0;
    for (int i = 0; i < 3; ++i) {
        size_t end = i < 2 ? text.find("\n%%\n", pos) : std::string::npos;
        part[i] = text.substr(std::min(pos, text.size()), end == std::string::npos ? std::string::npos : end - pos);
        if (end == std::string::npos) break;
        pos = end + 4;
    }
    std::map<std::string, storage::OrderedJson> dump, df;
    try {
        dump = storage::osd_dump_fields(part[0]);
    } catch (const std::exception&) {
    }
    try {
        df = storage::osd_df_fields(part[1]);
    } catch (const std::exception&) {
    }
    std::map<std::string, storage::OsdStatusRow> status;
    try {
        status = storage::parse_osd_status(part[2]);
    } catch (const std::exception&) {
    }
    std::set<std::string> ids;
    for (const auto& m : {&dump, &df}) for (const auto& [id, _] : *m) ids.insert(id);
    for (const auto& [id, _] : status) ids.insert(id);
    for (const auto& id : ids) {
        try {
            auto stats = storage::osd_stats(id, dump, df, status);
            if (stats) (void)storage::python_json(*stats);
        } catch (const std::exception&) {
        }
    }
}

void ceph_volume(const std::string& text) {
    for (const char* id : {"0", "3", "4", "12"}) {
        try {
            auto disk = storage::parse_ceph_volume(text, id);
            (void)disk;
        } catch (const std::exception&) {
        }
    }
}

void client_network(const std::string& text) {
    network::NetworkKeys keys;
    std::string vni = "100";
    std::vector<network::Acl> acls;
    for (const auto& l : lines(text)) {
        auto eq = l.find('=');
        if (eq == std::string::npos) continue;
        std::string key = l.substr(0, eq), value = l.substr(eq + 1);
        if (key == "vni") {
            vni = value;
        } else if (key.rfind("acl:", 0) == 0) {
            auto parts = split_all(key.substr(4), ':');
            network::Acl a;
            a.direction = parts.size() > 0 ? parts[0] : "";
            a.description = parts.size() > 1 ? parts[1] : "";
            a.order = parts.size() > 2 ? parts[2] : "";
            a.rule = value;
            acls.push_back(std::move(a));
        } else {
            keys[key] = value;
        }
    }
    auto parsed = network::parse_network(vni, keys);
    check(parsed.network.has_value() || !parsed.error.empty());
    if (!parsed.network) return;
    const auto& n = *parsed.network;
    (void)network::gateway_addresses(n);
    (void)n.base_link();
    network::FirewallNetwork f;
    f.vni = n.vni;
    f.ip4_network = n.ip4_network;
    f.ip4_gateway = n.ip4_gateway;
    f.ip6_network = n.ip6_network;
    f.ip6_gateway = n.ip6_gateway;
    f.acls = acls;
    auto frag = network::render_fragment(f);
    for (const auto& [line, description] : frag.acl_lines) check(line >= 1);
    for (const auto& chain : network::network_chains(n.vni)) check(network::chain_vni(chain) == n.vni);
}

void acl_rules(const std::string& text) {
    (void)network::acl_text_problem(text);
    std::vector<network::Acl> acls;
    int i = 0;
    for (const auto& l : lines(text)) {
        network::Acl a;
        a.direction = i % 3 == 2 ? "out" : "in";
        a.description = "acl" + std::to_string(i++ % 4);
        a.order = l;
        a.rule = l;
        acls.push_back(std::move(a));
    }
    for (const char* d : {"in", "out"}) {
        auto sorted = network::ordered(acls, d);
        for (const auto& a : sorted) check(a.direction == d);
    }
}

void names(const std::string& text) {
    (void)storage::valid_pool_name(text);
    (void)storage::valid_osd_id(text);
    auto vni = network::chain_vni(text);
    if (vni) (void)network::network_chains(*vni);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    std::string all(reinterpret_cast<const char*>(data), size);
    auto nl = all.find('\n');
    std::string text = nl == std::string::npos ? all.substr(1) : all.substr(nl + 1);
    switch (data[0] % 6) {
        case 0: ceph_df(text); break;
        case 1: ceph_osds(text); break;
        case 2: ceph_volume(text); break;
        case 3: client_network(text); break;
        case 4: acl_rules(text); break;
        default: names(text); break;
    }
    return 0;
}
