#include "settings.hpp"

#include <climits>

#include <fmt/format.h>

#include "pvc/address.hpp"

namespace pvc::network {

namespace {

using namespace address;
using At = ConfigNode;

constexpr const char* because_networking = " (required when pvc.functions.enable_networking is true)";

// A mapping (or a key written empty): the section's keys are read. `required`
// reports its absence.
bool section(const At& at, ConfigProblems& p, bool required) {
    return at.section(p, required ? because_networking : nullptr);
}

// pvc.cluster.networks.<role> + pvc.system.configuration.networking.<role>.
// With networking on, a side whose parent section is missing is skipped (the
// parent is reported once) while the other side is still validated.
void read_role(ConfigProblems& p, const std::string& role, const At& cluster_net, const At& sys_net, bool networking,
               bool cluster_parent_ok, bool sys_parent_ok, const HostIdentity& host, NetworkRole& out) {
    if (cluster_net.has_value()) {
        out.domain = cluster_net.child("domain", p).string(p);
        if (role == "upstream") out.gateway = cluster_net.child("gateway", p).string(p);
    }
    if (sys_net.has_value()) {
        out.device = sys_net.child("device", p).string(p);
        out.mtu = sys_net.child("mtu", p).int_value(p, 68, 65535);
    }
    // Without networking these keys are informative only and are not validated.
    if (!networking) {
        if (cluster_net.has_value()) {
            out.network = cluster_net.child("network", p).string(p);
            out.floating_ip = cluster_net.child("floating_ip", p).string(p);
        }
        if (sys_net.has_value()) out.address = sys_net.child("address", p).string(p);
        return;
    }

    bool have_cluster = cluster_parent_ok && cluster_net.section(p, because_networking);
    bool have_sys = sys_parent_ok && sys_net.section(p, because_networking);

    std::optional<IpNetwork> network;
    if (have_cluster) {
        At at = cluster_net.child("network", p);
        out.network = at.required_string(p, because_networking);
        if (out.network) {
            std::string why;
            network = parse_network(*out.network, why);
            if (!network) p.add(at, fmt::format("'{}' is {}", *out.network, why));
        }

        At fl = cluster_net.child("floating_ip", p);
        out.floating_ip = fl.required_string(p, because_networking);
        if (out.floating_ip) {
            auto slash = out.floating_ip->find('/');
            auto addr = parse_ip(out.floating_ip->substr(0, slash));
            if (!addr) {
                p.add(fl, fmt::format("'{}' is not a valid IP address", *out.floating_ip));
            } else if (slash != std::string::npos && !parse_prefix(out.floating_ip->substr(slash + 1), addr->bits())) {
                p.add(fl, fmt::format("'{}' has an invalid prefix length", *out.floating_ip));
            } else if (network && !network->is_host(*addr)) {
                p.add(fl, fmt::format("'{}' is not a usable host address of {}", *out.floating_ip,
                                      network->to_string()));
            }
        }

        if (out.gateway) {
            auto gw = parse_ip(*out.gateway);
            At g = cluster_net.at("gateway");
            if (!gw)
                p.add(g, fmt::format("'{}' is not a valid IP address", *out.gateway));
            else if (network && gw->family != network->address.family)
                p.add(g, fmt::format("'{}' is not of the same address family as {}", *out.gateway,
                                     network->to_string()));
        }
    }

    if (have_sys) {
        At dev = sys_net.at("device");
        if (!dev.has_value()) p.add(dev, fmt::format("required key is missing{}", because_networking));

        At at = sys_net.child("address", p);
        out.address = at.required_string(p, because_networking);
        if (out.address && network) {
            std::string why;
            out.dev_ip = node_address(*network, *out.address, host.node_id, host.hostname, why);
            if (!out.dev_ip) p.add(at, why);
        }
    }
}

void read_database(ConfigProblems& p, const At& at, bool networking, DatabaseConfig& out) {
    if (!networking) {
        if (!at.has_value() || !at.is_map()) return;
        out.host = at.child("host", p).string(p);
        out.port = at.child("port", p).int_value(p, 1, 65535);
        out.name = at.child("name", p).string(p);
        out.user = at.child("user", p).string(p);
        out.pass = at.child("pass", p).string(p);
        return;
    }
    if (!at.section(p, because_networking)) return;
    out.host = at.child("host", p).required_string(p, because_networking);
    out.port = at.child("port", p).required_int(p, 1, 65535, because_networking);
    out.name = at.child("name", p).required_string(p, because_networking);
    out.user = at.child("user", p).required_string(p, because_networking);
    // Never echo the password: only its presence and type are checked.
    out.pass = at.child("pass", p).required_string(p, because_networking);
}

// pvc.system.configuration.networking's own keys: bridge and SR-IOV.
void read_bridge_and_sriov(ConfigProblems& p, const At& net, Settings& s) {
    s.bridge_dev = net.child("bridge_device", p).string(p);
    s.bridge_mtu = net.child("bridge_mtu", p).int_value(p, 68, 65535);
    net.child("sriov_enable", p).read(p, s.enable_sriov);
    At devices = net.child("sriov_device", p);
    if (!devices.has_value()) return;
    if (!devices.is_sequence()) {
        p.add(devices, "expected a list of {phy, mtu, vfcount} entries");
        return;
    }
    for (std::size_t i = 0; i < devices.size(); ++i) {
        At item = devices.item(i);
        if (!item.is_map()) {
            p.add(item, "expected a mapping with phy, vfcount and optional mtu");
            continue;
        }
        SriovDevice d;
        if (auto v = item.child("phy", p).required_string(p)) d.phy = *v;
        if (auto v = item.child("vfcount", p).required_int(p, 0, 4096, "")) d.vfcount = *v;
        d.mtu = item.child("mtu", p).int_value(p, 68, 65535);
        s.sriov_devices.push_back(std::move(d));
    }
}

}  // namespace

Settings Settings::read(const Config& config, ConfigProblems& p) {
    Settings s;
    const bool networking = config.enable_networking;
    const At& doc = config.document;
    // The parent sections (pvc.cluster, pvc.system, pvc.system.configuration)
    // are the core's: it reports them missing or not a mapping.
    auto usable = [](const At& at) { return at.is_map() || at.is_null(); };
    At cluster = doc.at("pvc.cluster");
    At configuration = doc.at("pvc.system.configuration");
    At networks = usable(cluster) ? cluster.child("networks", p) : At();
    At sys_networking = usable(configuration) ? configuration.child("networking", p) : At();

    if (usable(configuration) &&
        (networking ? section(sys_networking, p, true) : sys_networking.has_value() && section(sys_networking, p, false)))
        read_bridge_and_sriov(p, sys_networking, s);

    // Networks: only validated (and only required) with networking enabled.
    if (networking && usable(cluster)) section(networks, p, true);
    bool networks_ok = networks.has_value() && networks.is_map();
    bool sys_ok = sys_networking.has_value() && sys_networking.is_map();
    for (const char* role : {"cluster", "storage", "upstream"}) {
        NetworkRole& out = std::string(role) == "cluster" ? s.cluster : std::string(role) == "storage" ? s.storage
                                                                                                      : s.upstream;
        read_role(p, role, networks_ok ? networks.child(role, p) : At(), sys_ok ? sys_networking.child(role, p) : At(),
                  networking, networks_ok, sys_ok, config.host, out);
    }

    // pvc.coordinator (databases)
    At pvc = doc.at("pvc");
    At coordinator = usable(pvc) ? pvc.child("coordinator", p) : At();
    if (networking) {
        if (usable(pvc) && coordinator.section(p, because_networking)) {
            At dns = coordinator.child("dns", p);
            At metadata = coordinator.child("metadata", p);
            if (dns.section(p, because_networking)) read_database(p, dns.child("database", p), true, s.dns_database);
            if (metadata.section(p, because_networking))
                read_database(p, metadata.child("database", p), true, s.metadata_database);
        }
    } else if (coordinator.has_value() && coordinator.is_map()) {
        At dns = coordinator.child("dns", p);
        At metadata = coordinator.child("metadata", p);
        read_database(p, dns.is_map() ? dns.child("database", p) : At(), false, s.dns_database);
        read_database(p, metadata.is_map() ? metadata.child("database", p) : At(), false, s.metadata_database);
    }
    return s;
}

namespace {
nlohmann::json opt(const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
}  // namespace

void Settings::flat_keys(nlohmann::json& j) const {
    for (const auto& [role, n] : {std::pair<const char*, const NetworkRole*>{"upstream", &upstream},
                                  {"cluster", &cluster},
                                  {"storage", &storage}}) {
        std::string p = role;
        j[p + "_domain"] = opt(n->domain);
        j[p + "_network"] = opt(n->network);
        j[p + "_floating_ip"] = opt(n->floating_ip);
        if (p == "upstream") j[p + "_gateway"] = opt(n->gateway);
        j[p + "_dev"] = opt(n->device);
        j[p + "_mtu"] = opt(n->mtu);
        j[p + "_dev_ip"] = n->dev_ip ? nlohmann::json(*n->dev_ip) : opt(n->address);
    }

    j["bridge_dev"] = opt(bridge_dev);
    j["bridge_mtu"] = opt(bridge_mtu);
    j["enable_sriov"] = enable_sriov;
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& d : sriov_devices) devices.push_back({{"phy", d.phy}, {"mtu", opt(d.mtu)}, {"vfcount", d.vfcount}});
    j["sriov_device"] = std::move(devices);

    for (const auto& [prefix, db] : {std::pair<const char*, const DatabaseConfig*>{"pdns", &dns_database},
                                     {"metadata", &metadata_database}}) {
        std::string p = std::string(prefix) + "_postgresql_";
        j[p + "host"] = opt(db->host);
        j[p + "port"] = opt(db->port);
        j[p + "dbname"] = opt(db->name);
        j[p + "user"] = opt(db->user);
        j[p + "password"] = opt(db->pass);
    }
}

}  // namespace pvc::network
