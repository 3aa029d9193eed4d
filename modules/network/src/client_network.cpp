#include "client_network.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <tuple>

#include <fmt/format.h>

namespace pvc::network {

namespace {

constexpr uint32_t max_vxlan_vni = 16777215;
constexpr uint32_t max_vlan_id = 4094;

std::optional<uint64_t> decimal(const std::string& s) {
    if (s.empty() || s.size() > 12) return std::nullopt;
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

bool unset(const std::string& v) { return v.empty() || v == "None"; }

std::optional<std::string> value(const NetworkKeys& keys, const char* key) {
    auto it = keys.find(key);
    if (it == keys.end() || unset(it->second)) return std::nullopt;
    return it->second;
}

// An address of `family` as bytes, or nothing.
std::optional<std::vector<unsigned char>> address(const std::string& text, int family) {
    unsigned char buf[16];
    if (inet_pton(family, text.c_str(), buf) != 1) return std::nullopt;
    return std::vector<unsigned char>(buf, buf + (family == AF_INET ? 4 : 16));
}

// An address's canonical text (inet_ntop: what the kernel reports).
std::string canonical(const std::vector<unsigned char>& bytes, int family) {
    char text[INET6_ADDRSTRLEN];
    if (!inet_ntop(family, bytes.data(), text, sizeof text)) throw std::runtime_error("inet_ntop failed");
    return text;
}

struct Subnet {
    std::vector<unsigned char> bytes;
    unsigned prefix = 0;
    bool contains(const std::vector<unsigned char>& a) const {
        for (unsigned bit = 0; bit < prefix; ++bit) {
            unsigned char m = static_cast<unsigned char>(0x80 >> (bit % 8));
            if ((bytes[bit / 8] & m) != (a[bit / 8] & m)) return false;
        }
        return true;
    }
};

// A strict CIDR (host bits zero), as the API validates it.
std::optional<Subnet> subnet(const std::string& text, int family, std::string& why) {
    auto slash = text.find('/');
    if (slash == std::string::npos) {
        why = "has no /prefix";
        return std::nullopt;
    }
    auto a = address(text.substr(0, slash), family);
    auto p = decimal(text.substr(slash + 1));
    unsigned max = family == AF_INET ? 32 : 128;
    if (!a || !p || *p > max) {
        why = "is not a network address with a prefix";
        return std::nullopt;
    }
    Subnet s{*a, static_cast<unsigned>(*p)};
    for (unsigned bit = s.prefix; bit < max; ++bit)
        if (s.bytes[bit / 8] & (0x80 >> (bit % 8))) {
            why = "has host bits set";
            return std::nullopt;
        }
    return s;
}

std::string check_family(const NetworkKeys& keys, const char* net_key, const char* gw_key, int family,
                         std::optional<std::string>& net_out, std::optional<std::string>& gw_out) {
    net_out = value(keys, net_key);
    gw_out = value(keys, gw_key);
    std::optional<Subnet> net;
    if (net_out) {
        std::string why;
        net = subnet(*net_out, family, why);
        if (!net) return fmt::format("{} '{}' {}", net_key, *net_out, why);
    }
    if (gw_out) {
        auto gw = address(*gw_out, family);
        if (!gw) return fmt::format("{} '{}' is not an address", gw_key, *gw_out);
        if (!net) return fmt::format("{} '{}' is set without {}", gw_key, *gw_out, net_key);
        if (!net->contains(*gw)) return fmt::format("{} '{}' is outside {} '{}'", gw_key, *gw_out, net_key, *net_out);
        gw_out = canonical(*gw, family);
    }
    // The kernel's text for them (lower case, zeros compressed), so that a
    // gateway written "FD00::0001" is found among the link's addresses.
    if (net) net_out = canonical(net->bytes, family) + "/" + std::to_string(net->prefix);
    return "";
}

}  // namespace

std::string ClientNetwork::base_link() const {
    return (type == NetType::managed ? "vxlan" : "vlan") + std::to_string(vni);
}

std::vector<std::string> gateway_addresses(const ClientNetwork& n) {
    std::vector<std::string> out;
    if (n.type != NetType::managed) return out;
    auto add = [&](const std::optional<std::string>& gw, const std::optional<std::string>& net) {
        if (gw && net) out.push_back(*gw + net->substr(net->find('/')));
    };
    add(n.ip6_gateway, n.ip6_network);
    add(n.ip4_gateway, n.ip4_network);
    return out;
}

ParsedNetwork parse_network(const std::string& vni_text, const NetworkKeys& keys) {
    ParsedNetwork out;
    auto vni = decimal(vni_text);
    if (!vni || (vni_text.size() > 1 && vni_text[0] == '0')) {
        out.error = fmt::format("'{}' is not a decimal VNI", vni_text);
        return out;
    }
    ClientNetwork n;
    auto type = keys.find("nettype");
    if (type == keys.end() || (type->second != "managed" && type->second != "bridged")) {
        out.error = fmt::format("nettype '{}' is neither managed nor bridged: no links",
                                type == keys.end() ? "" : type->second);
        return out;
    }
    n.type = type->second == "managed" ? NetType::managed : NetType::bridged;
    uint32_t max = n.type == NetType::managed ? max_vxlan_vni : max_vlan_id;
    if (*vni < 1 || *vni > max) {
        out.error = fmt::format("VNI {} is outside 1-{} for a {} network", vni_text, max, type->second);
        return out;
    }
    n.vni = static_cast<uint32_t>(*vni);
    if (auto d = keys.find(""); d != keys.end()) n.description = d->second;
    if (auto m = value(keys, "mtu")) {
        auto v = decimal(*m);
        if (v && *v >= 68 && *v <= 65535) n.mtu = static_cast<unsigned>(*v);
        else n.mtu_garbage = true;
    }
    if (n.type == NetType::managed) {
        std::string e = check_family(keys, "ip4_network", "ip4_gateway", AF_INET, n.ip4_network, n.ip4_gateway);
        if (e.empty()) e = check_family(keys, "ip6_network", "ip6_gateway", AF_INET6, n.ip6_network, n.ip6_gateway);
        if (!e.empty()) {
            out.error = e;
            return out;
        }
    }
    out.network = std::move(n);
    return out;
}

namespace {
// Two strict subnets of one family overlap exactly when the shorter prefix
// contains the other's network address.
bool overlap(const Subnet& a, const Subnet& b) {
    return a.prefix <= b.prefix ? a.contains(b.bytes) : b.contains(a.bytes);
}
}  // namespace

bool subnets_overlap(const std::string& a, const std::string& b, int family) {
    std::string why;
    auto x = subnet(a, family, why);
    auto y = subnet(b, family, why);
    return x && y && overlap(*x, *y);
}

std::vector<SubnetOverlap> find_overlaps(const std::map<std::string, NetworkSubnets>& networks) {
    struct Parsed {
        const std::string* vni;
        const std::string* text;
        Subnet net;
    };
    std::vector<Parsed> v4, v6;
    for (const auto& [vni, s] : networks) {
        std::string why;
        if (s.ip4)
            if (auto n = subnet(*s.ip4, AF_INET, why)) v4.push_back({&vni, &*s.ip4, *n});
        if (s.ip6)
            if (auto n = subnet(*s.ip6, AF_INET6, why)) v6.push_back({&vni, &*s.ip6, *n});
    }
    std::vector<SubnetOverlap> out;
    for (const auto* family : {&v4, &v6})
        for (size_t i = 0; i < family->size(); ++i)
            for (size_t j = i + 1; j < family->size(); ++j) {
                const Parsed& a = (*family)[i];
                const Parsed& b = (*family)[j];
                if (overlap(a.net, b.net)) out.push_back({*a.vni, *a.text, *b.vni, *b.text});
            }
    std::stable_sort(out.begin(), out.end(), [](const SubnetOverlap& x, const SubnetOverlap& y) {
        return std::tie(x.vni_a, x.vni_b) < std::tie(y.vni_a, y.vni_b);
    });
    return out;
}

MtuDecision decide_mtu(const ClientNetwork& n, unsigned maximum, std::optional<unsigned> current) {
    MtuDecision d;
    if (n.mtu_garbage) {
        d.mtu = current.value_or(maximum);
        d.warning = fmt::format("MTU is not a number; keeping {}", d.mtu);
    } else if (!n.mtu) {
        d.mtu = maximum;
        d.write_back = true;
        d.warning = fmt::format("MTU unset; using the maximum {}", maximum);
    } else if (*n.mtu > maximum) {
        d.mtu = maximum;
        d.write_back = true;
        d.warning = fmt::format("MTU {} is above the maximum; clamped to {}", *n.mtu, maximum);
    } else {
        d.mtu = *n.mtu;
    }
    return d;
}

LinkPlan plan_links(const ClientNetwork& n, const std::string& parent, unsigned mtu) {
    LinkPlan p;
    p.type = n.type;
    p.vni = n.vni;
    p.base = n.base_link();
    p.bridge = n.bridge();
    p.parent = parent;
    p.mtu = mtu;
    return p;
}

ReconcileResult reconcile(Netlink& nl, const LinkPlan& plan, const std::set<std::string>& host_devices) {
    ReconcileResult r;
    // Names PVC does not own here: refused before anything is changed, so a
    // host device is never deleted, re-enslaved or given another MTU.
    for (const std::string* name : {&plan.base, &plan.bridge})
        if (host_devices.count(*name))
            throw LinkConflict(*name + " is a host device of this node's configuration: not used for a client network");
    auto parent = nl.link(plan.parent);
    if (!parent) throw std::runtime_error("parent device " + plan.parent + " does not exist");

    const char* kind = plan.type == NetType::managed ? "vxlan" : "vlan";
    auto base = nl.link(plan.base);
    auto bridge = nl.link(plan.bridge);
    if (bridge && bridge->kind != "bridge")
        throw LinkConflict(fmt::format("{} exists and is not a bridge (kind '{}'): not PVC's, left alone", plan.bridge,
                                       bridge->kind));
    if (base && base->kind != kind)
        throw LinkConflict(fmt::format("{} exists and is not a {} link (kind '{}'): not PVC's, left alone", plan.base,
                                       kind, base->kind));
    if (base && base->master && (!bridge || base->master != bridge->ifindex)) {
        auto master = nl.link(base->master);
        throw LinkConflict(fmt::format("{} is a port of {}: not PVC's, left alone", plan.base,
                                       master ? master->name : "bridge #" + std::to_string(base->master)));
    }
    if (base) {
        bool right = base->kind == kind && base->id == plan.vni && base->parent == parent->ifindex &&
                     (plan.type != NetType::managed || base->port == plan.port);
        if (!right) {
            // A link of ours by name but with other attributes: they cannot be
            // changed in place, so it is replaced.
            r.changes.push_back(fmt::format("replaced {} (kind {}, id {}, port {}, parent {})", plan.base, base->kind,
                                            base->id, base->port, base->parent));
            nl.remove(plan.base);
            base.reset();
        }
    }
    if (!base) {
        LinkPtr l = plan.type == NetType::managed
                        ? vxlan_link(plan.base, plan.vni, plan.port, parent->ifindex)
                        : vlan_link(plan.base, static_cast<uint16_t>(plan.vni), parent->ifindex);
        nl.add(l.get());
        base = nl.link(plan.base);
        if (!base) throw std::runtime_error(plan.base + " vanished after its creation");
        r.changes.push_back("created " + plan.base);
    }

    if (!bridge) {
        LinkPtr l = bridge_link(plan.bridge);
        nl.add(l.get());
        bridge = nl.link(plan.bridge);
        if (!bridge) throw std::runtime_error(plan.bridge + " vanished after its creation");
        r.changes.push_back("created " + plan.bridge);
    }

    // MTU: base link MTU and up, then the bridge's.
    if (base->mtu != plan.mtu) {
        nl.set_mtu(base->ifindex, plan.mtu);
        r.changes.push_back(fmt::format("{} MTU {} -> {}", plan.base, base->mtu, plan.mtu));
    }
    if (!base->up) {
        nl.set_up(base->ifindex, true);
        r.changes.push_back(plan.base + " up");
    }
    if (bridge->mtu != plan.mtu) {
        nl.set_mtu(bridge->ifindex, plan.mtu);
        r.changes.push_back(fmt::format("{} MTU {} -> {}", plan.bridge, bridge->mtu, plan.mtu));
    }
    if (!bridge->up) {
        nl.set_up(bridge->ifindex, true);
        r.changes.push_back(plan.bridge + " up");
    }
    // TX checksum offload off, as the reference does: guests with old DHCP clients break on offloaded checksums.
    if (tx_checksum(plan.bridge)) {
        set_tx_checksum(plan.bridge, false);
        r.changes.push_back(plan.bridge + " TX checksum off");
    }
    // Managed: the IPv6 gateway moves between nodes and must be usable at
    // once. Bridged: the host takes no SLAAC address on client VLANs.
    std::string key = plan.type == NetType::managed ? "net/ipv6/conf/" + plan.bridge + "/accept_dad"
                                                    : "net/ipv6/conf/" + plan.bridge + "/disable_ipv6";
    std::string want = plan.type == NetType::managed ? "0" : "1";
    if (auto v = read_sysctl(key); v && *v != want) {
        write_sysctl(key, want);
        r.changes.push_back(key + " = " + want);
    }
    if (base->master != bridge->ifindex) {
        nl.set_master(base->ifindex, bridge->ifindex);
        r.changes.push_back(plan.base + " enslaved to " + plan.bridge);
    }
    return r;
}

void remove_links(Netlink& nl, const std::string& base, const std::string& bridge) {
    auto b = nl.link(bridge);
    auto l = nl.link(base);
    if (b && b->up) nl.set_up(b->ifindex, false);
    if (l && l->up) nl.set_up(l->ifindex, false);
    if (l && l->master) nl.set_master(l->ifindex, 0);
    if (b) nl.remove(bridge);
    if (l) nl.remove(base);
}

std::optional<std::string> client_link_vni(const LinkState& link) {
    for (const auto& [prefix, kind] : {std::pair{"vxlan", "vxlan"}, std::pair{"vmbr", "bridge"}, std::pair{"vlan", "vlan"}}) {
        std::string_view p(prefix);
        if (link.name.size() <= p.size() || link.name.compare(0, p.size(), p) != 0) continue;
        std::string vni = link.name.substr(p.size());
        if (link.kind != kind || !decimal(vni) || (vni.size() > 1 && vni[0] == '0')) return std::nullopt;
        return vni;
    }
    return std::nullopt;
}

SweepResult plan_orphan_sweep(const std::vector<LinkState>& links, const SweepInput& in) {
    auto ifindex_of = [&](const std::optional<std::string>& name) {
        if (!name) return 0;
        for (const LinkState& l : links)
            if (l.name == *name) return l.ifindex;
        return 0;
    };
    const int cluster = ifindex_of(in.cluster_device), bridge_dev = ifindex_of(in.bridge_device);
    // Why a base link named like PVC's is not PVC's ("" if it is), its master aside.
    auto base_problem = [&](const LinkState& l, const std::string& vni) -> std::string {
        if (std::to_string(l.id) != vni) return fmt::format("id {}", l.id);
        if (l.kind == "vxlan") {
            if (l.port != in.port) return fmt::format("UDP port {}", l.port);
            if (!cluster || l.parent != cluster) return "not over the cluster device";
        } else if (!bridge_dev || l.parent != bridge_dev) {
            return "not on bridge_device";
        }
        return "";
    };
    SweepResult out;
    std::set<int> bridges;  // ifindexes of the bridges removed
    // Number 0 is no network's (VNIs and VLAN ids start at 1): vmbr0 is an admin's.
    auto candidate = [&](const LinkState& l, std::optional<std::string>& vni) {
        vni = client_link_vni(l);
        if (!vni || in.wanted.count(*vni) || in.keep.count(l.name)) return false;
        if (*vni != "0") return true;
        out.left.push_back(l.name + " (no network has number 0)");
        return false;
    };
    for (const LinkState& l : links) {
        std::optional<std::string> vni;
        if (l.kind != "bridge" || !candidate(l, vni)) continue;
        std::string why;
        for (const LinkState& p : links) {
            if (p.master != l.ifindex) continue;
            bool ours = (p.name == "vxlan" + *vni || p.name == "vlan" + *vni) && client_link_vni(p) &&
                        base_problem(p, *vni).empty() && !in.keep.count(p.name);
            if (!ours && p.kind != "tun") {
                why = "has port " + p.name;
                break;
            }
        }
        if (why.empty()) {
            bridges.insert(l.ifindex);
            out.removed.push_back(l.name);
        } else {
            out.left.push_back(fmt::format("{} ({})", l.name, why));
        }
    }
    for (const LinkState& l : links) {
        std::optional<std::string> vni;
        if (l.kind == "bridge" || !candidate(l, vni)) continue;
        std::string why = base_problem(l, *vni);
        if (why.empty() && l.master && !bridges.count(l.master)) why = "a port of a bridge that stays";
        // PVC's vlan link is always in its bridge; ifupdown names the host's
        // own VLANs vlan<id> too, on the same NIC.
        if (why.empty() && l.kind == "vlan" && !l.master) why = "in no bridge";
        if (why.empty()) out.removed.push_back(l.name);
        else out.left.push_back(fmt::format("{} ({})", l.name, why));
    }
    return out;
}

SweepResult remove_orphan_links(Netlink& nl, const SweepInput& in) {
    SweepResult plan = plan_orphan_sweep(nl.links(), in);
    SweepResult done;
    done.left = plan.left;
    for (const std::string& name : plan.removed) {
        nl.remove(name);
        done.removed.push_back(name);
    }
    return done;
}

}  // namespace pvc::network
