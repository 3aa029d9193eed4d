#include "pvc/client_network.hpp"

#include <algorithm>
#include <cctype>
#include <climits>
#include <thread>

#include "pvc/address.hpp"
#include "pvc/client.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

#include <spdlog/spdlog.h>

namespace pvc::client {

using schema::path;

namespace {

NetResult refused(std::string text) { return {400, std::move(text)}; }
NetResult done(std::string text) { return {200, std::move(text)}; }

std::string not_found(const std::string& id) { return "ERROR: Could not find network '" + id + "' in the cluster!"; }

bool all_digits(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
}
bool has_control(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}
bool has_space(std::string_view s) {
    return std::any_of(s.begin(), s.end(), [](unsigned char c) { return std::isspace(c) != 0; });
}
std::optional<long> to_number(std::string_view s, long max) {
    if (!all_digits(s) || s.size() > 9) return std::nullopt;
    long v = std::stol(std::string(s));
    if (v > max) return std::nullopt;
    return v;
}
// "" and "None" are unset, as the network module reads them.
bool unset(const std::optional<std::string>& v) { return !v || v->empty() || *v == "None"; }

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// A read-modify-write: `build(tx)` reads what it needs and either answers
// (a refusal, or nothing to do: tx left empty) or adds the operations of one
// transaction, which sets or checks every key it decided on at the version
// read. Committed; redone from fresh reads when another writer got in
// between (bad_version, node_exists, no_node, not_empty), so a lost race is
// neither a failure nor a lost update. `failed` is the answer when
// ZooKeeper itself fails.
template <class Build>
NetResult guarded(zk::Session& s, const std::string& failed, Build&& build) {
    constexpr int max_rounds = 100;
    for (int round = 0; round < max_rounds; ++round) {
        zk::Transaction tx(s);
        zk::Status st;
        NetResult answer;
        try {
            answer = build(tx);
            if (!answer.ok() || tx.empty()) return answer;
            if (tx.request_bytes() > zk::max_request_bytes)
                return refused("ERROR: The values to write are " + std::to_string(tx.request_bytes()) +
                               " bytes together, over ZooKeeper's limit of " + std::to_string(zk::max_request_bytes) +
                               " bytes for one transaction.");
            st = s.commit(tx);
        } catch (const zk::Error& e) {
            spdlog::error("ZooKeeper: {}", e.what());
            return {500, failed};
        }
        if (st == zk::Status::ok) {
            for (const auto& op : tx.ops()) {
                if (op.kind == zk::Transaction::Op::remove) answer.written.emplace_back(op.path, std::nullopt);
                else if (op.kind != zk::Transaction::Op::check) answer.written.emplace_back(op.path, op.data);
            }
            return answer;
        }
        if (st != zk::Status::bad_version && st != zk::Status::node_exists && st != zk::Status::no_node &&
            st != zk::Status::not_empty) {
            spdlog::error("ZooKeeper transaction failed: {}", zk::to_string(st));
            return {500, failed};
        }
        if (round >= 2) std::this_thread::sleep_for(std::chrono::milliseconds(std::min(round, 20)));
    }
    spdlog::error("ZooKeeper write lost {} races in a row; giving up", max_rounds);
    return {500, failed};
}

// Sets `p` (any version) when it exists, else creates it.
void put(zk::Session& s, zk::Transaction& tx, const std::string& p, const std::string& data) {
    if (s.exists(p)) tx.set(p, data, -1);
    else tx.create(p, data);
}

// Removes `p` and its children (two levels: the keys of a reservation,
// lease or ACL) in `tx`.
void remove_tree(zk::Session& s, zk::Transaction& tx, const std::string& p) {
    for (const auto& c : s.raw_children(p).value_or(std::vector<std::string>{})) {
        const std::string child = p + "/" + c;
        for (const auto& g : s.raw_children(child).value_or(std::vector<std::string>{})) tx.remove(child + "/" + g);
        tx.remove(child);
    }
    tx.remove(p);
}

// The description of every network but `except`.
std::optional<std::string> network_with_description(zk::Session& s, const std::string& description,
                                                    const std::string& except = {}) {
    for (const auto& v : s.children(path("base.network")).value_or(std::vector<std::string>{}))
        if (v != except && s.get(path("network.vni", {v})).value_or("") == description) return v;
    return std::nullopt;
}

// Checks of a network's values as a whole (the stored values with a change
// applied): "" when fine, else the message.
struct Values {
    std::optional<std::string> description, mtu, domain, ip4_network, ip4_gateway, ip6_network, ip6_gateway,
        dhcp4_start, dhcp4_end;
    std::vector<std::string> name_servers;
    bool dhcp4 = false;
};

std::string check_address_in(const std::string& what, const std::string& value, int family,
                             const std::optional<address::IpNetwork>& net, const std::string& net_text) {
    auto a = address::parse_ip(value);
    if (!a || a->family != family)
        return "ERROR: " + what + " '" + value + "' is not a valid IPv" + std::to_string(family) + " address!";
    if (net && !net->is_host(*a))
        return "ERROR: " + what + " '" + value + "' is not a host address of network '" + net_text + "'!";
    return "";
}

std::string check_values(const Values& v) {
    if (v.description) {
        if (v.description->empty()) return "ERROR: A network description must not be empty!";
        if (has_control(*v.description) || v.description->size() > 255)
            return "ERROR: Network description '" + *v.description + "' is not valid!";
    }
    if (!unset(v.mtu) && !to_number(*v.mtu, 65535))
        return "ERROR: MTU '" + *v.mtu + "' is not valid: it must be a number of bytes (at most 65535)!";
    if (v.domain && (has_space(*v.domain) || has_control(*v.domain) || v.domain->size() > 253))
        return "ERROR: Domain '" + *v.domain + "' is not valid!";
    for (const auto& ns : v.name_servers)
        if (!address::parse_ip(ns)) return "ERROR: Name server '" + ns + "' is not a valid IP address!";
    std::optional<address::IpNetwork> net4, net6;
    std::string why;
    if (!unset(v.ip4_network)) {
        net4 = address::parse_network(*v.ip4_network, why);
        if (!net4 || net4->address.family != 4)
            return "ERROR: IPv4 network '" + *v.ip4_network + "' is not valid (address/prefix, no host bits)!";
    }
    if (!unset(v.ip6_network)) {
        net6 = address::parse_network(*v.ip6_network, why);
        if (!net6 || net6->address.family != 6)
            return "ERROR: IPv6 network '" + *v.ip6_network + "' is not valid (address/prefix, no host bits)!";
    }
    if (!unset(v.ip4_gateway) && !net4)
        return "ERROR: IPv4 gateway '" + *v.ip4_gateway + "' is set without an IPv4 network!";
    if (!unset(v.ip6_gateway) && !net6)
        return "ERROR: IPv6 gateway '" + *v.ip6_gateway + "' is set without an IPv6 network!";
    if (!unset(v.ip4_gateway)) {
        if (auto e = check_address_in("IPv4 gateway", *v.ip4_gateway, 4, net4, v.ip4_network.value_or(""));
            !e.empty())
            return e;
    }
    if (!unset(v.ip6_gateway)) {
        if (auto e = check_address_in("IPv6 gateway", *v.ip6_gateway, 6, net6, v.ip6_network.value_or(""));
            !e.empty())
            return e;
    }
    if (v.dhcp4 && (unset(v.dhcp4_start) || unset(v.dhcp4_end)))
        return "ERROR: DHCPv4 start and end addresses are required for a DHCPv4-enabled network.";
    if (v.dhcp4 && !net4) return "ERROR: A DHCPv4-enabled network needs an IPv4 network!";
    for (const auto& [what, value] : {std::pair{"DHCPv4 start address", v.dhcp4_start}, {"DHCPv4 end address", v.dhcp4_end}})
        if (!unset(value))
            if (auto e = check_address_in(what, *value, 4, net4, v.ip4_network.value_or("")); !e.empty()) return e;
    if (v.dhcp4) {
        auto a = address::parse_ip(*v.dhcp4_start), b = address::parse_ip(*v.dhcp4_end);
        if (a->value > b->value)
            return "ERROR: DHCPv4 start address '" + *v.dhcp4_start + "' is after end address '" + *v.dhcp4_end + "'!";
    }
    return "";
}

// The IPv6 gateway of a network given without one: its first address
// (the reference appends "1" to the text before '/', the same for a
// network written as "<prefix>::/<len>").
std::string ip6_default_gateway(const std::string& network) {
    std::string why;
    auto n = address::parse_network(network, why);
    if (!n) return network.substr(0, network.find('/')) + "1";
    address::IpAddress a = n->address;
    a.value += 1;
    return address::format_ip(a);
}

std::vector<std::string> clean_servers(const std::vector<std::string>& in) {
    std::vector<std::string> out;
    for (const auto& s : in)
        for (const auto& part : split(s, ','))
            if (auto t = trim(part); !t.empty()) out.push_back(t);
    return out;
}

bool valid_mac(const std::string& mac) {
    if (mac.size() != 17) return false;
    for (size_t i = 0; i < mac.size(); ++i) {
        if (i % 3 == 2) {
            if (mac[i] != ':') return false;
        } else if (!std::isxdigit(static_cast<unsigned char>(mac[i]))) {
            return false;
        }
    }
    return true;
}

bool valid_ip4(const std::string& ip) {
    auto parts = split_all(ip, '.');
    if (parts.size() != 4) return false;
    for (const auto& p : parts)
        if (!to_number(p, 255) || p.size() > 3) return false;
    return true;
}

long order_of(const std::string& v) { return to_number(v, LONG_MAX / 2).value_or(LONG_MAX); }

// The ACLs of a direction with the version of each `order` key.
struct StoredAcl {
    std::string description, order;
    int32_t order_version = -1;
};
std::vector<StoredAcl> stored_acls(zk::Session& s, const std::string& vni, const std::string& dir) {
    std::vector<StoredAcl> out;
    for (const auto& d : s.children(path("network.rule." + dir, {vni})).value_or(std::vector<std::string>{})) {
        zk::Stat st;
        StoredAcl a{d, s.get(path("rule.order", {vni, dir, d}), &st).value_or(""), -1};
        a.order_version = st.version;
        out.push_back(std::move(a));
    }
    std::stable_sort(out.begin(), out.end(), [](const StoredAcl& a, const StoredAcl& b) {
        long x = order_of(a.order), y = order_of(b.order);
        return x != y ? x < y : a.description < b.description;
    });
    return out;
}

// Writes index i as the order of every ACL of `list` whose order differs.
void renumber(zk::Session& s, zk::Transaction& tx, const std::string& vni, const std::string& dir,
              const std::vector<StoredAcl>& list) {
    for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].order == std::to_string(i)) continue;
        const std::string p = path("rule.order", {vni, dir, list[i].description});
        if (list[i].order_version >= 0) tx.set(p, std::to_string(i), list[i].order_version);
        else if (s.exists(path("rule.description", {vni, dir, list[i].description}))) tx.create(p, std::to_string(i));
    }
}

// Natural order: digit runs compared as numbers.
bool natural_less(const std::string& a, const std::string& b) {
    size_t i = 0, j = 0;
    while (i < a.size() && j < b.size()) {
        if (std::isdigit(static_cast<unsigned char>(a[i])) && std::isdigit(static_cast<unsigned char>(b[j]))) {
            size_t i2 = i, j2 = j;
            while (i2 < a.size() && std::isdigit(static_cast<unsigned char>(a[i2]))) ++i2;
            while (j2 < b.size() && std::isdigit(static_cast<unsigned char>(b[j2]))) ++j2;
            std::string x = a.substr(i, i2 - i), y = b.substr(j, j2 - j);
            x.erase(0, std::min(x.find_first_not_of('0'), x.size()));
            y.erase(0, std::min(y.find_first_not_of('0'), y.size()));
            if (x.size() != y.size()) return x.size() < y.size();
            if (x != y) return x < y;
            i = i2;
            j = j2;
        } else {
            if (a[i] != b[j]) return a[i] < b[j];
            ++i;
            ++j;
        }
    }
    return a.size() - i < b.size() - j;
}

}  // namespace

std::optional<std::string> resolve_network(zk::Session& session, const std::string& id) {
    if (!is_safe_name(id)) return std::nullopt;
    if (all_digits(id)) {
        if (session.exists(path("network.vni", {id}))) return id;
        return std::nullopt;
    }
    return network_with_description(session, id);
}

NetResult add_network(zk::Session& session, const NetworkSpec& spec) {
    if (spec.nettype != "managed" && spec.nettype != "bridged") return refused("A valid nettype must be specified");
    const long max_vni = spec.nettype == "bridged" ? 4094 : 16777215;
    auto vni_number = to_number(spec.vni, max_vni);
    if (!vni_number || *vni_number < 1 || spec.vni[0] == '0')
        return refused("ERROR: VNI '" + spec.vni + "' is not valid: a " + spec.nettype + " network's VNI is 1-" +
                       std::to_string(max_vni) + "!");
    Values v{spec.description, spec.mtu, spec.domain, spec.ip4_network, spec.ip4_gateway, spec.ip6_network,
             spec.ip6_gateway, spec.dhcp4_start, spec.dhcp4_end, clean_servers(spec.name_servers), spec.dhcp4};
    if (auto e = check_values(v); !e.empty()) return refused(e);
    if (spec.description.size() && all_digits(spec.description))
        return refused("ERROR: Network description '" + spec.description + "' is not valid: it must not be all digits!");

    const std::string vni = spec.vni;
    return guarded(session, "ERROR: Failed to add network.", [&](zk::Transaction& tx) -> NetResult {
        if (session.exists(path("network.vni", {vni})))
            return refused("ERROR: A network with VNI '" + vni + "' already exists!");
        if (network_with_description(session, spec.description))
            return refused("ERROR: A network with description '" + spec.description + "' already exists!");
        auto or_none = [](const std::optional<std::string>& s) { return s ? *s : std::string("None"); };
        std::string ip6_gateway = or_none(spec.ip6_gateway);
        const bool ip6 = !unset(spec.ip6_network);
        if (ip6 && unset(spec.ip6_gateway)) ip6_gateway = ip6_default_gateway(*spec.ip6_network);
        std::string domain = or_none(spec.domain);
        if (spec.nettype == "managed" && unset(spec.domain)) domain = spec.description + ".local";
        // Guards the description check: two networks added at once with
        // one description cannot both pass it.
        zk::Stat base;
        if (!session.exists(path("base.network"), &base)) session.ensure_path(path("base.network"));
        session.exists(path("base.network"), &base);
        tx.set(path("base.network"), "", base.version);
        tx.create(path("network.vni", {vni}), spec.description);
        tx.create(path("network.type", {vni}), spec.nettype);
        tx.create(path("network.mtu", {vni}), spec.mtu.value_or(""));
        tx.create(path("network.domain", {vni}), domain);
        tx.create(path("network.nameservers", {vni}), join(v.name_servers, ","));
        tx.create(path("network.ip6.network", {vni}), or_none(spec.ip6_network));
        tx.create(path("network.ip6.gateway", {vni}), ip6_gateway);
        tx.create(path("network.ip6.dhcp", {vni}), zk::py_bool(ip6));
        tx.create(path("network.ip4.network", {vni}), or_none(spec.ip4_network));
        tx.create(path("network.ip4.gateway", {vni}), or_none(spec.ip4_gateway));
        tx.create(path("network.ip4.dhcp", {vni}), zk::py_bool(spec.dhcp4));
        tx.create(path("network.ip4.dhcp_start", {vni}), or_none(spec.dhcp4_start));
        tx.create(path("network.ip4.dhcp_end", {vni}), or_none(spec.dhcp4_end));
        tx.create(path("network.lease", {vni}), "");
        tx.create(path("network.reservation", {vni}), "");
        tx.create(path("network.rule", {vni}), "");
        tx.create(path("network.rule.in", {vni}), "");
        tx.create(path("network.rule.out", {vni}), "");
        return done("Network '" + spec.description + "' added successfully!");
    });
}

NetResult modify_network(zk::Session& session, const std::string& id, const NetworkChange& change) {
    std::optional<std::vector<std::string>> servers;
    if (change.name_servers) servers = clean_servers(*change.name_servers);
    return guarded(session, "ERROR: Failed to modify network '" + id + "'.", [&](zk::Transaction& tx) -> NetResult {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        auto get = [&](const char* key) { return session.get(path(key, {*vni})); };
        zk::Stat root;
        std::string description = session.get(path("network.vni", {*vni}), &root).value_or("");
        if (root.version < 0) return refused(not_found(id));
        // The values as they will be, checked together.
        Values v;
        v.description = change.description;
        v.mtu = change.mtu;
        v.domain = change.domain;
        v.ip4_network = change.ip4_network ? change.ip4_network : get("network.ip4.network");
        // A network cleared without a gateway given clears its gateway too
        // (the network module refuses a gateway without its network).
        const bool clear4 = change.ip4_network && unset(change.ip4_network) && !change.ip4_gateway;
        const bool clear6 = change.ip6_network && unset(change.ip6_network) && !change.ip6_gateway;
        v.ip4_gateway = change.ip4_gateway ? change.ip4_gateway : clear4 ? std::nullopt : get("network.ip4.gateway");
        v.ip6_network = change.ip6_network ? change.ip6_network : get("network.ip6.network");
        v.ip6_gateway = change.ip6_gateway ? change.ip6_gateway : get("network.ip6.gateway");
        if (change.ip6_network && !change.ip6_gateway)
            v.ip6_gateway = unset(change.ip6_network) ? std::nullopt : std::optional(ip6_default_gateway(*change.ip6_network));
        v.dhcp4 = change.dhcp4 ? *change.dhcp4 : get("network.ip4.dhcp").value_or("") == "True";
        v.dhcp4_start = change.dhcp4_start ? change.dhcp4_start : get("network.ip4.dhcp_start");
        v.dhcp4_end = change.dhcp4_end ? change.dhcp4_end : get("network.ip4.dhcp_end");
        if (servers) v.name_servers = *servers;
        if (auto e = check_values(v); !e.empty()) return refused(e);
        if (change.description) {
            if (all_digits(*change.description))
                return refused("ERROR: Network description '" + *change.description +
                               "' is not valid: it must not be all digits!");
            if (network_with_description(session, *change.description, *vni))
                return refused("ERROR: A network with description '" + *change.description + "' already exists!");
            zk::Stat base;
            session.exists(path("base.network"), &base);
            tx.set(path("base.network"), "", base.version);
        }
        // The network's own key at the version read: a change races
        // neither its removal nor another change of it.
        tx.set(path("network.vni", {*vni}), change.description.value_or(description), root.version);
        auto write = [&](const char* key, const std::string& value) { put(session, tx, path(key, {*vni}), value); };
        if (change.mtu) write("network.mtu", *change.mtu);
        if (change.domain) write("network.domain", *change.domain);
        if (servers) write("network.nameservers", join(*servers, ","));
        if (change.ip4_network) write("network.ip4.network", *change.ip4_network);
        if (change.ip4_gateway) write("network.ip4.gateway", *change.ip4_gateway);
        else if (clear4) write("network.ip4.gateway", "None");
        if (change.ip6_network) {
            write("network.ip6.network", *change.ip6_network);
            write("network.ip6.dhcp", zk::py_bool(!unset(change.ip6_network)));
        }
        if (change.ip6_gateway) write("network.ip6.gateway", *change.ip6_gateway);
        else if (clear6) write("network.ip6.gateway", "None");
        else if (change.ip6_network) write("network.ip6.gateway", *v.ip6_gateway);
        if (change.dhcp4) write("network.ip4.dhcp", zk::py_bool(*change.dhcp4));
        if (change.dhcp4_start) write("network.ip4.dhcp_start", *change.dhcp4_start);
        if (change.dhcp4_end) write("network.ip4.dhcp_end", *change.dhcp4_end);
        return done("Network '" + id + "' modified successfully!");
    });
}

NetResult remove_network(zk::Session& session, const std::string& id) {
    try {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        std::string description = session.get(path("network.vni", {*vni})).value_or(id);
        session.remove_recursive(path("network.vni", {*vni}));
        NetResult r = done("Network '" + description + "' removed successfully!");
        r.written.emplace_back(path("network.vni", {*vni}), std::nullopt);
        return r;
    } catch (const zk::Error& e) {
        spdlog::error("ZooKeeper: {}", e.what());
        return {500, "ERROR: Failed to remove network '" + id + "'."};
    }
}

NetResult add_reservation(zk::Session& session, const std::string& id, const std::string& mac_in,
                          const std::string& ip, const std::optional<std::string>& hostname) {
    const std::string mac = lower(mac_in);
    if (hostname && (hostname->empty() || has_space(*hostname) || has_control(*hostname) || hostname->size() > 253))
        return refused("ERROR: Hostname '" + *hostname + "' is not valid!");
    return guarded(session, "ERROR: Failed to add DHCP reservation '" + mac + "'.", [&](zk::Transaction& tx) -> NetResult {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        if (!valid_mac(mac)) return refused("ERROR: MAC address '" + mac + "' is not valid! Always use ':' as a separator.");
        if (!valid_ip4(ip)) return refused("ERROR: IP address '" + ip + "' is not valid!");
        std::string net_text = session.get(path("network.ip4.network", {*vni})).value_or("");
        std::string why;
        if (!unset(net_text))
            if (auto net = address::parse_network(net_text, why); net && !net->is_host(*address::parse_ip(ip)))
                return refused("ERROR: IP address '" + ip + "' is not a host address of network '" + net_text + "'!");
        // The reservation list at its version: concurrent adds are redone
        // one after the other, each seeing the others' reservations.
        zk::Stat list;
        if (!session.exists(path("network.reservation", {*vni}), &list)) return refused(not_found(id));
        if (session.exists(path("reservation.mac", {*vni, mac})))
            return refused("ERROR: A reservation with MAC '" + mac + "' already exists!");
        for (const auto& m : session.children(path("network.reservation", {*vni})).value_or(std::vector<std::string>{}))
            if (session.get(path("reservation.ip", {*vni, m})).value_or("") == ip)
                return refused("ERROR: A reservation with IP address '" + ip + "' already exists!");
        tx.set(path("network.reservation", {*vni}), "", list.version);
        tx.create(path("reservation.mac", {*vni, mac}), "static");
        tx.create(path("reservation.hostname", {*vni, mac}), hostname.value_or("None"));
        tx.create(path("reservation.ip", {*vni, mac}), ip);
        return done("DHCP reservation '" + mac + "' added successfully!");
    });
}

NetResult remove_reservation(zk::Session& session, const std::string& id, const std::string& match) {
    return guarded(session, "ERROR: Failed to remove DHCP reservation '" + match + "'.", [&](zk::Transaction& tx) -> NetResult {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        std::string found, kind;
        for (const char* k : {"reservation", "lease"}) {
            const bool res = std::string(k) == "reservation";
            for (const auto& m : session.children(path(res ? "network.reservation" : "network.lease", {*vni}))
                                     .value_or(std::vector<std::string>{})) {
                auto host = session.get(path(res ? "reservation.hostname" : "lease.hostname", {*vni, m}));
                auto ip = session.get(path(res ? "reservation.ip" : "lease.ip", {*vni, m}));
                if (m == match || host == match || ip == match) {
                    found = m;
                    kind = k;
                }
            }
        }
        if (found.empty()) return refused("ERROR: No DHCP reservation or lease exists matching '" + match + "'!");
        const bool res = kind == "reservation";
        zk::Stat list;
        if (res && session.exists(path("network.reservation", {*vni}), &list))
            tx.set(path("network.reservation", {*vni}), "", list.version);
        remove_tree(session, tx, path(res ? "reservation.mac" : "lease.mac", {*vni, found}));
        return done(res ? "DHCP static reservation '" + found + "' removed successfully!"
                        : "DHCP dynamic lease '" + found + "' removed successfully!");
    });
}

NetResult add_acl(zk::Session& session, const std::string& id, const std::string& description, const std::string& rule,
                  const std::string& direction, const std::optional<std::string>& order) {
    if (direction != "in" && direction != "out") return refused("A valid direction must be specified.");
    if (!is_safe_name(description) || has_space(description) || description.size() > 255)
        return refused("ERROR: Firewall rule description '" + description +
                       "' is not valid: it must be non-empty, without whitespace or '/'!");
    if (rule.find_first_not_of(" \t") == std::string::npos || has_control(rule))
        return refused("ERROR: Firewall rule '" + rule + "' is not valid!");
    std::optional<long> wanted;
    if (order && !order->empty()) {
        wanted = to_number(*order, LONG_MAX / 2);
        if (!wanted) return refused("ERROR: Order '" + *order + "' is not valid: it must be a number from 0!");
    }
    return guarded(session, "ERROR: Failed to add firewall rule '" + description + "'.", [&](zk::Transaction& tx) -> NetResult {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        zk::Stat rules;
        if (!session.exists(path("network.rule", {*vni}), &rules)) return refused(not_found(id));
        for (const char* d : {"in", "out"})
            if (session.exists(path("rule.description", {*vni, d, description})))
                return refused("ERROR: A rule with description '" + description + "' already exists!");
        auto list = stored_acls(session, *vni, direction);
        size_t at = wanted && static_cast<size_t>(*wanted) < list.size() ? static_cast<size_t>(*wanted) : list.size();
        // The rules' parent at its version: two changes of one network's
        // rules at once are redone one after the other.
        tx.set(path("network.rule", {*vni}), "", rules.version);
        tx.create(path("rule.description", {*vni, direction, description}), "");
        tx.create(path("rule.order", {*vni, direction, description}), std::to_string(at));
        tx.create(path("rule.rule", {*vni, direction, description}), rule);
        // The others at their new places (after the new one: one further).
        for (size_t i = 0; i < list.size(); ++i) {
            const size_t now = i < at ? i : i + 1;
            if (list[i].order == std::to_string(now)) continue;
            if (list[i].order_version >= 0)
                tx.set(path("rule.order", {*vni, direction, list[i].description}), std::to_string(now),
                       list[i].order_version);
            else
                tx.create(path("rule.order", {*vni, direction, list[i].description}), std::to_string(now));
        }
        return done("Firewall rule '" + description + "' added successfully!");
    });
}

NetResult remove_acl(zk::Session& session, const std::string& id, const std::string& description) {
    return guarded(session, "ERROR: Failed to remove firewall rule '" + description + "'.", [&](zk::Transaction& tx) -> NetResult {
        auto vni = resolve_network(session, id);
        if (!vni) return refused(not_found(id));
        zk::Stat rules;
        if (!session.exists(path("network.rule", {*vni}), &rules)) return refused(not_found(id));
        std::string dir;
        if (is_safe_name(description))
            for (const char* d : {"in", "out"})
                if (session.exists(path("rule.description", {*vni, d, description}))) dir = d;
        if (dir.empty()) return refused("ERROR: No firewall rule exists matching description '" + description + "'!");
        auto list = stored_acls(session, *vni, dir);
        list.erase(std::remove_if(list.begin(), list.end(), [&](const StoredAcl& a) { return a.description == description; }),
                   list.end());
        tx.set(path("network.rule", {*vni}), "", rules.version);
        remove_tree(session, tx, path("rule.description", {*vni, dir, description}));
        renumber(session, tx, *vni, dir, list);
        return done("Firewall rule '" + description + "' removed successfully!");
    });
}

std::vector<std::string> network_vnis(zk::Session& session) {
    auto v = session.children(path("base.network")).value_or(std::vector<std::string>{});
    std::sort(v.begin(), v.end(), natural_less);
    return v;
}

std::optional<NetworkInfo> read_network(zk::Session& session, const std::string& vni) {
    if (!is_safe_name(vni)) return std::nullopt;
    auto desc = session.get(path("network.vni", {vni}));
    if (!desc) return std::nullopt;
    const std::vector<std::string> keys = {"network.type",         "network.mtu",           "network.domain",
                                           "network.nameservers",  "network.ip4.network",   "network.ip4.gateway",
                                           "network.ip4.dhcp",     "network.ip4.dhcp_start", "network.ip4.dhcp_end",
                                           "network.ip6.network",  "network.ip6.gateway",   "network.ip6.dhcp"};
    std::vector<std::string> paths;
    for (const auto& k : keys) paths.push_back(path(k, {vni}));
    auto v = session.get_many(paths);
    auto at = [&](size_t i) { return v[i].value_or(""); };
    return NetworkInfo{vni,    *desc,  at(0),  at(1), at(2), at(3), at(4), at(5), at(6),
                       at(7),  at(8),  at(9),  at(10), at(11)};
}

std::vector<Reservation> read_reservations(zk::Session& session, const std::string& vni, bool leases) {
    std::vector<Reservation> out;
    for (const auto& m : session.children(path("network.reservation", {vni})).value_or(std::vector<std::string>{})) {
        auto v = session.get_many({path("reservation.ip", {vni, m}), path("reservation.hostname", {vni, m})});
        out.push_back({m, v[0].value_or(""), v[1].value_or(""), "", "", true});
    }
    if (!leases) return out;
    for (const auto& m : session.children(path("network.lease", {vni})).value_or(std::vector<std::string>{})) {
        auto v = session.get_many({path("lease.ip", {vni, m}), path("lease.hostname", {vni, m}),
                                   path("lease.expiry", {vni, m}), path("lease.client_id", {vni, m})});
        out.push_back({m, v[0].value_or(""), v[1].value_or(""), v[2].value_or(""), v[3].value_or(""), false});
    }
    return out;
}

std::vector<Acl> read_acls(zk::Session& session, const std::string& vni, const std::string& direction) {
    std::vector<Acl> out;
    for (const std::string d : {"in", "out"}) {
        if (!direction.empty() && direction != d) continue;
        for (const auto& a : stored_acls(session, vni, d))
            out.push_back({d, a.description, session.get(path("rule.rule", {vni, d, a.description})).value_or(""),
                           order_of(a.order) == LONG_MAX ? -1 : order_of(a.order)});
    }
    return out;
}

std::optional<std::vector<SriovPf>> read_sriov_pfs(zk::Session& session, const std::string& node) {
    if (!is_safe_name(node) || !session.exists(path("node.name", {node}))) return std::nullopt;
    auto vfs = read_sriov_vfs(session, node);
    std::vector<SriovPf> out;
    for (const auto& pf : session.children(path("node.sriov.pf", {node})).value_or(std::vector<std::string>{})) {
        SriovPf p{pf, session.get(path("sriov_pf.mtu", {node, pf})).value_or(""), {}};
        for (const auto& vf : vfs.value_or(std::vector<SriovVf>{}))
            if (vf.pf == pf) p.vfs.push_back(vf.phy);
        out.push_back(std::move(p));
    }
    return out;
}

std::optional<std::vector<SriovVf>> read_sriov_vfs(zk::Session& session, const std::string& node,
                                                   const std::optional<std::string>& pf) {
    if (!is_safe_name(node) || !session.exists(path("node.name", {node}))) return std::nullopt;
    auto names = session.children(path("node.sriov.vf", {node})).value_or(std::vector<std::string>{});
    std::sort(names.begin(), names.end(), natural_less);
    std::vector<SriovVf> out;
    for (const auto& n : names) {
        const std::vector<std::string> keys = {
            "sriov_vf.pf",          "sriov_vf.mtu",        "sriov_vf.mac",
            "sriov_vf.config.vlan_id", "sriov_vf.config.vlan_qos", "sriov_vf.config.tx_rate_min",
            "sriov_vf.config.tx_rate_max", "sriov_vf.config.link_state", "sriov_vf.config.spoof_check",
            "sriov_vf.config.trust", "sriov_vf.config.query_rss", "sriov_vf.pci.domain",
            "sriov_vf.pci.bus",     "sriov_vf.pci.slot",   "sriov_vf.pci.function",
            "sriov_vf.used",        "sriov_vf.used_by"};
        std::vector<std::string> paths;
        for (const auto& k : keys) paths.push_back(path(k, {node, n}));
        auto v = session.get_many(paths);
        auto at = [&](size_t i) { return v[i].value_or(""); };
        SriovVf vf{n,     at(0),  at(1),  at(2),  at(3),  at(4),  at(5),  at(6),  at(7),
                   at(8), at(9),  at(10), at(11), at(12), at(13), at(14), at(15), at(16)};
        if (pf && vf.pf != *pf) continue;
        out.push_back(std::move(vf));
    }
    return out;
}

NetResult set_vf(zk::Session& session, const std::string& node, const std::string& vf, const VfConfig& config) {
    const std::string failed = "Failed to modify configuration of SR-IOV VF '" + vf + "' on node '" + node + "'.";
    std::vector<std::pair<const char*, std::string>> values;
    auto number = [&](const char* key, const std::optional<std::string>& v, long max) -> std::string {
        if (!v) return "";
        if (!to_number(*v, max))
            return "ERROR: " + std::string(key) + " '" + *v + "' is not valid: a number from 0 to " + std::to_string(max) + "!";
        values.emplace_back(key, *v);
        return "";
    };
    auto boolean = [&](const char* key, const std::optional<std::string>& v) -> std::string {
        if (!v) return "";
        auto b = zk::lenient_bool(*v);
        if (!b) return "ERROR: " + std::string(key) + " '" + *v + "' is not valid: True or False!";
        values.emplace_back(key, zk::py_bool(*b));
        return "";
    };
    for (const auto& e : {number("vlan_id", config.vlan_id, 4095), number("vlan_qos", config.vlan_qos, 7),
                          number("tx_rate_min", config.tx_rate_min, 100000000),
                          number("tx_rate_max", config.tx_rate_max, 100000000)})
        if (!e.empty()) return refused(e);
    if (config.link_state) {
        if (*config.link_state != "auto" && *config.link_state != "enable" && *config.link_state != "disable")
            return refused("A valid state must be specified");
        values.emplace_back("link_state", *config.link_state);
    }
    for (const auto& e : {boolean("spoof_check", config.spoof_check), boolean("trust", config.trust),
                          boolean("query_rss", config.query_rss)})
        if (!e.empty()) return refused(e);
    return guarded(session, failed, [&](zk::Transaction& tx) -> NetResult {
        if (!is_safe_name(node) || !session.exists(path("node.name", {node})))
            return refused("ERROR: Specified node '" + node + "' is invalid.");
        zk::Stat st;
        if (!is_safe_name(vf) || !session.exists(path("sriov_vf.phy", {node, vf}), &st))
            return refused("ERROR: Could not find SR-IOV VF '" + vf + "' on node '" + node + "'.");
        if (values.empty()) return refused("ERROR: No changes to apply.");
        tx.check(path("sriov_vf.phy", {node, vf}), st.version);  // not removed meanwhile
        if (!session.exists(path("sriov_vf.config", {node, vf}))) tx.create(path("sriov_vf.config", {node, vf}), "");
        for (const auto& [key, value] : values)
            put(session, tx, path(std::string("sriov_vf.config.") + key, {node, vf}), value);
        return done("Successfully modified configuration of SR-IOV VF '" + vf + "' on node '" + node + "'.");
    });
}

}  // namespace pvc::client
