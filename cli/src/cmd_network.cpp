// pvc network add | modify | remove | info | list
// pvc network dhcp add | remove | list;  pvc network acl add | remove | list
// pvc network sriov pf list | info;  pvc network sriov vf list | info | set
// The writes are the client library's (pvc/client_network.hpp): the same
// keys, checks and messages as the API's network routes.
#include <iostream>
#include <memory>
#include <regex>

#include <unistd.h>

#include "commands.hpp"
#include "common.hpp"
#include "pvc/client_network.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

// Prints the operation's message; a refusal or failure is a Failure (exit 1).
void report(const client::NetResult& r) {
    if (!r.ok()) throw Failure(r.message);
    std::cout << r.message << std::endl;
}

// A list's LIMIT: a regular expression found anywhere in the name (as the
// reference's fuzzy list filter); empty matches everything.
bool matches(const std::string& limit, const std::vector<std::string>& names) {
    if (limit.empty()) return true;
    try {
        std::regex re(limit);
        for (const auto& n : names)
            if (std::regex_search(n, re)) return true;
        return false;
    } catch (const std::regex_error& e) {
        throw Failure("LIMIT '" + limit + "' is not a valid regular expression: " + e.what(), exit_usage);
    }
}

std::string shown(const std::string& v) { return v.empty() || v == "None" ? "N/A" : v; }

std::string require_network(const std::string& id) {
    auto vni = client::resolve_network(*session(), id);
    if (!vni) throw Failure("ERROR: Could not find network '" + id + "' in the cluster!");
    return *vni;
}

nlohmann::json network_json(const client::NetworkInfo& n) {
    return {{"vni", n.vni},           {"description", n.description}, {"type", n.nettype},
            {"mtu", n.mtu},           {"domain", n.domain},           {"name_servers", split(n.name_servers, ',')},
            {"ip4", {{"network", n.ip4_network}, {"gateway", n.ip4_gateway}, {"dhcp_flag", n.dhcp4_flag},
                     {"dhcp_start", n.dhcp4_start}, {"dhcp_end", n.dhcp4_end}}},
            {"ip6", {{"network", n.ip6_network}, {"gateway", n.ip6_gateway}, {"dhcp_flag", n.dhcp6_flag}}}};
}

// ---------------------------------------------------------------- networks

// The options of add and modify (modify: all optional, no --type).
struct NetworkArgs {
    std::string vni, description, nettype, limit, format = "table";
    std::optional<std::string> mtu, domain, ip4_network, ip4_gateway, ip6_network, ip6_gateway, dhcp4_start, dhcp4_end;
    std::vector<std::string> name_servers;
    std::optional<bool> dhcp;
    bool yes = false, long_info = false;
    bool json() const { return format == "json"; }
};

void add_address_options(CLI::App* cmd, NetworkArgs& a) {
    cmd->add_option("-m,--mtu", a.mtu, "MTU of the network's interfaces");
    cmd->add_option("-n,--domain", a.domain, "DNS domain of the network (managed: default <description>.local)");
    cmd->add_option("--dns-server", a.name_servers, "DNS name server of the network; may be given several times")
        ->expected(1)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    cmd->add_option("-i,--ipnet", a.ip4_network, "IPv4 network, CIDR (10.0.0.0/24)");
    cmd->add_option("-g,--gateway", a.ip4_gateway, "IPv4 gateway address (in the network)");
    cmd->add_option("--i6,--ipnet6", a.ip6_network, "IPv6 network, CIDR (2001:db8::/64)");
    cmd->add_option("--g6,--gateway6", a.ip6_gateway, "IPv6 gateway address (default: the network's first address)");
    cmd->add_flag_function(
        "--dhcp,!--no-dhcp", [&a](std::int64_t n) { a.dhcp = n > 0; }, "Enable (or disable) DHCPv4 for clients");
    cmd->add_option("--dhcp-start", a.dhcp4_start, "First address of the DHCPv4 range");
    cmd->add_option("--dhcp-end", a.dhcp4_end, "Last address of the DHCPv4 range");
}

void network_add(const NetworkArgs& a) {
    client::NetworkSpec s;
    s.vni = a.vni;
    s.description = a.description;
    s.nettype = a.nettype;
    s.mtu = a.mtu.value_or("");
    s.domain = a.domain;
    s.name_servers = a.name_servers;
    s.ip4_network = a.ip4_network;
    s.ip4_gateway = a.ip4_gateway;
    s.ip6_network = a.ip6_network;
    s.ip6_gateway = a.ip6_gateway;
    s.dhcp4 = a.dhcp.value_or(false);
    s.dhcp4_start = a.dhcp4_start;
    s.dhcp4_end = a.dhcp4_end;
    report(client::add_network(*session(), s));
}

void network_modify(const NetworkArgs& a) {
    client::NetworkChange c;
    if (!a.description.empty()) c.description = a.description;
    c.mtu = a.mtu;
    c.domain = a.domain;
    if (!a.name_servers.empty()) c.name_servers = a.name_servers;
    c.ip4_network = a.ip4_network;
    c.ip4_gateway = a.ip4_gateway;
    c.ip6_network = a.ip6_network;
    c.ip6_gateway = a.ip6_gateway;
    c.dhcp4 = a.dhcp;
    c.dhcp4_start = a.dhcp4_start;
    c.dhcp4_end = a.dhcp4_end;
    if (!c.description && !c.mtu && !c.domain && !c.name_servers && !c.ip4_network && !c.ip4_gateway &&
        !c.ip6_network && !c.ip6_gateway && !c.dhcp4 && !c.dhcp4_start && !c.dhcp4_end)
        throw Failure("nothing to modify: give at least one option (see --help)", exit_usage);
    report(client::modify_network(*session(), a.vni, c));
}

void network_remove(const NetworkArgs& a) {
    auto vni = require_network(a.vni);
    confirm(a.yes, "remove network " + a.vni,
            "Remove network " + a.vni + " (VNI " + vni + ")? VMs using it lose it.", "not removed");
    report(client::remove_network(*session(), vni));
}

void network_list(const NetworkArgs& a) {
    std::vector<client::NetworkInfo> nets;
    for (const auto& v : client::network_vnis(*session()))
        if (auto n = client::read_network(*session(), v); n && matches(a.limit, {n->vni, n->description}))
            nets.push_back(*n);
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& n : nets) j.push_back(network_json(n));
        print_json(j);
        return;
    }
    Table t({"VNI", "DESCRIPTION", "TYPE", "MTU", "DOMAIN", "IPV4 NETWORK", "IPV4 GATEWAY", "DHCPV4", "IPV6 NETWORK",
             "IPV6 GATEWAY"});
    for (const auto& n : nets)
        t.add({n.vni, n.description, n.nettype, shown(n.mtu), shown(n.domain), shown(n.ip4_network),
               shown(n.ip4_gateway), n.dhcp4_flag == "True" ? n.dhcp4_start + "-" + n.dhcp4_end : "off",
               shown(n.ip6_network), shown(n.ip6_gateway)});
    t.print(std::cout);
}

void network_info(const NetworkArgs& a) {
    auto n = client::read_network(*session(), require_network(a.vni));
    if (!n) throw Failure("ERROR: Could not find network '" + a.vni + "' in the cluster!");
    if (a.json()) {
        print_json(network_json(*n));
        return;
    }
    print_fields(std::cout, {{"VNI", n->vni},
                             {"Description", n->description},
                             {"Type", n->nettype},
                             {"MTU", shown(n->mtu)},
                             {"Domain", shown(n->domain)},
                             {"DNS servers", shown(join(split(n->name_servers, ','), ", "))},
                             {"IPv4 network", shown(n->ip4_network)},
                             {"IPv4 gateway", shown(n->ip4_gateway)},
                             {"DHCPv4", n->dhcp4_flag == "True" ? n->dhcp4_start + " - " + n->dhcp4_end : "off"},
                             {"IPv6 network", shown(n->ip6_network)},
                             {"IPv6 gateway", shown(n->ip6_gateway)}});
    if (!a.long_info) return;
    std::cout << "\nDHCP reservations and leases:\n";
    Table r({"MAC", "IP", "HOSTNAME", "KIND"});
    for (const auto& x : client::read_reservations(*session(), n->vni, true))
        r.add({x.mac, x.ip, shown(x.hostname), x.is_static ? "static" : "dynamic"});
    r.print(std::cout);
    std::cout << "\nFirewall rules:\n";
    Table f({"DIRECTION", "ORDER", "DESCRIPTION", "RULE"});
    for (const auto& x : client::read_acls(*session(), n->vni, ""))
        f.add({x.direction, std::to_string(x.order), x.description, x.rule});
    f.print(std::cout);
}

// ---------------------------------------------------------------- DHCP

struct DhcpArgs {
    std::string net, ip, mac, limit, format = "table";
    std::optional<std::string> hostname;
    bool only_static = false;
    bool json() const { return format == "json"; }
};

void dhcp_list(const DhcpArgs& a) {
    auto vni = require_network(a.net);
    std::vector<client::Reservation> out;
    for (const auto& x : client::read_reservations(*session(), vni, !a.only_static))
        if (matches(a.limit, {x.mac, x.ip, x.hostname})) out.push_back(x);
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& x : out)
            j.push_back({{"mac_address", x.mac}, {"ip4_address", x.ip}, {"hostname", x.hostname},
                         {"static", x.is_static}, {"expiry", x.expiry}, {"client_id", x.client_id}});
        print_json(j);
        return;
    }
    Table t({"MAC", "IP", "HOSTNAME", "KIND", "EXPIRY"});
    for (const auto& x : out)
        t.add({x.mac, x.ip, shown(x.hostname), x.is_static ? "static" : "dynamic", x.is_static ? "N/A" : shown(x.expiry)});
    t.print(std::cout);
}

// ---------------------------------------------------------------- ACLs

struct AclArgs {
    std::string net, description, rule, direction, limit, format = "table";
    std::optional<std::string> order;
    bool yes = false;
    bool json() const { return format == "json"; }
};

void acl_list(const AclArgs& a) {
    auto vni = require_network(a.net);
    std::vector<client::Acl> out;
    for (const auto& x : client::read_acls(*session(), vni, a.direction))
        if (matches(a.limit, {x.description})) out.push_back(x);
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& x : out)
            j.push_back({{"direction", x.direction}, {"order", x.order}, {"description", x.description}, {"rule", x.rule}});
        print_json(j);
        return;
    }
    Table t({"DIRECTION", "ORDER", "DESCRIPTION", "RULE"});
    for (const auto& x : out) t.add({x.direction, std::to_string(x.order), x.description, x.rule});
    t.print(std::cout);
}

// ---------------------------------------------------------------- SR-IOV

struct SriovArgs {
    std::string node, name, format = "table";
    std::optional<std::string> pf;
    client::VfConfig config;
    bool json() const { return format == "json"; }
};

nlohmann::json vf_json(const client::SriovVf& v) {
    return {{"phy", v.phy},
            {"pf", v.pf},
            {"mtu", v.mtu},
            {"mac", v.mac},
            {"config", {{"vlan_id", v.vlan_id}, {"vlan_qos", v.vlan_qos}, {"tx_rate_min", v.tx_rate_min},
                        {"tx_rate_max", v.tx_rate_max}, {"link_state", v.link_state}, {"spoof_check", v.spoof_check},
                        {"trust", v.trust}, {"query_rss", v.query_rss}}},
            {"pci", {{"domain", v.pci_domain}, {"bus", v.pci_bus}, {"slot", v.pci_slot}, {"function", v.pci_function}}},
            {"usage", {{"used", v.used}, {"domain", v.used_by}}}};
}

std::vector<client::SriovPf> pfs_of(const std::string& node) {
    auto pfs = client::read_sriov_pfs(*session(), node);
    if (!pfs) throw Failure("ERROR: Specified node '" + node + "' is invalid.");
    return *pfs;
}

std::vector<client::SriovVf> vfs_of(const std::string& node, const std::optional<std::string>& pf) {
    auto vfs = client::read_sriov_vfs(*session(), node, pf);
    if (!vfs) throw Failure("ERROR: Specified node '" + node + "' is invalid.");
    return *vfs;
}

void pf_show(const SriovArgs& a, bool one) {
    std::vector<client::SriovPf> out;
    for (const auto& p : pfs_of(a.node))
        if (!one || p.phy == a.name) out.push_back(p);
    if (one && out.empty()) throw Failure("No PF '" + a.name + "' found on node '" + a.node + "'");
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& p : out) j.push_back({{"phy", p.phy}, {"mtu", p.mtu}, {"vfs", p.vfs}});
        print_json(one ? j[0] : j);
        return;
    }
    Table t({"PF", "MTU", "VFS"});
    for (const auto& p : out) t.add({p.phy, p.mtu, join(p.vfs, ", ")});
    t.print(std::cout);
}

void vf_list(const SriovArgs& a) {
    auto vfs = vfs_of(a.node, a.pf);
    if (a.json()) {
        nlohmann::json j = nlohmann::json::array();
        for (const auto& v : vfs) j.push_back(vf_json(v));
        print_json(j);
        return;
    }
    Table t({"VF", "PF", "MTU", "MAC", "VLAN", "QOS", "TX MIN", "TX MAX", "LINK", "SPOOF", "TRUST", "RSS", "USED",
             "USED BY"});
    for (const auto& v : vfs)
        t.add({v.phy, v.pf, v.mtu, v.mac, v.vlan_id, v.vlan_qos, v.tx_rate_min, v.tx_rate_max, v.link_state,
               v.spoof_check, v.trust, v.query_rss, v.used, shown(v.used_by)});
    t.print(std::cout);
}

void vf_info(const SriovArgs& a) {
    for (const auto& v : vfs_of(a.node, std::nullopt)) {
        if (v.phy != a.name) continue;
        if (a.json()) return print_json(vf_json(v));
        print_fields(std::cout, {{"VF", v.phy},
                                 {"PF", v.pf},
                                 {"MTU", v.mtu},
                                 {"MAC", v.mac},
                                 {"VLAN ID / QoS", v.vlan_id + " / " + v.vlan_qos},
                                 {"TX rate min / max", v.tx_rate_min + " / " + v.tx_rate_max},
                                 {"Link state", v.link_state},
                                 {"Spoof check", v.spoof_check},
                                 {"Trust", v.trust},
                                 {"Query RSS", v.query_rss},
                                 {"PCI", v.pci_domain + ":" + v.pci_bus + ":" + v.pci_slot + "." + v.pci_function},
                                 {"Used", v.used},
                                 {"Used by", shown(v.used_by)}});
        return;
    }
    throw Failure("No VF '" + a.name + "' found on node '" + a.node + "'");
}

template <class Args, class Fn>
void bind(CLI::App* cmd, std::shared_ptr<Args> args, Fn fn) {
    cmd->callback([args, fn] { fn(*args); });
}

}  // namespace

void add_network_commands(CLI::App& app) {
    auto* network = app.add_subcommand("network", "Manage client networks, DHCP reservations, ACLs and SR-IOV");
    network->require_subcommand(1);
    network->footer("Examples:\n  pvc network list\n"
                    "  pvc network add 100 -d office -p managed -i 10.100.0.0/24 -g 10.100.0.1 --dhcp "
                    "--dhcp-start 10.100.0.100 --dhcp-end 10.100.0.199\n"
                    "  pvc network dhcp add office 10.100.0.10 52:54:00:12:34:56 --hostname web1\n"
                    "  pvc network acl add office --in -d ssh -r 'tcp dport 22 accept'");

    // add
    auto* add = network->add_subcommand("add", "Add a client network");
    auto add_args = std::make_shared<NetworkArgs>();
    add->add_option("vni", add_args->vni, "VNI: VXLAN id of a managed network (1-16777215), VLAN id of a bridged one (1-4094)")
        ->required();
    add->add_option("-d,--description", add_args->description, "Description: a unique name of the network")->required();
    add->add_option("-p,--type", add_args->nettype, "managed (PVC routes it, DHCP, DNS, firewall) or bridged (a VLAN)")
        ->required()
        ->check(CLI::IsMember({"managed", "bridged"}));
    add_address_options(add, *add_args);
    add->footer("Examples:\n  pvc network add 100 -d office -p managed -i 10.100.0.0/24 -g 10.100.0.1 "
                "--dns-server 10.100.0.1 --dhcp --dhcp-start 10.100.0.100 --dhcp-end 10.100.0.199\n"
                "  pvc network add 200 -d storage-vlan -p bridged -m 9000");
    bind(add, add_args, network_add);

    // modify
    auto* modify = network->add_subcommand("modify", "Change a client network's settings");
    auto modify_args = std::make_shared<NetworkArgs>();
    modify->add_option("vni", modify_args->vni, "Network: VNI or description")->required();
    modify->add_option("-d,--description", modify_args->description, "New description");
    add_address_options(modify, *modify_args);
    modify->footer("Only the options given are changed; --dns-server replaces all name servers.\n"
                   "An empty value (--ipnet6 '') clears a field.\n\n"
                   "Examples:\n  pvc network modify office --mtu 9000\n  pvc network modify 100 --no-dhcp");
    bind(modify, modify_args, network_modify);

    // remove
    auto* remove = network->add_subcommand("remove", "Remove a client network");
    auto remove_args = std::make_shared<NetworkArgs>();
    remove->alias("delete");
    remove->add_option("vni", remove_args->vni, "Network: VNI or description")->required();
    remove->add_flag("-y,--yes", remove_args->yes, "Do not ask for confirmation");
    remove->footer("Examples:\n  pvc network remove office --yes");
    bind(remove, remove_args, network_remove);

    // info
    auto* info = network->add_subcommand("info", "Show one client network");
    auto info_args = std::make_shared<NetworkArgs>();
    info->add_option("vni", info_args->vni, "Network: VNI or description")->required();
    info->add_flag("-l,--long", info_args->long_info, "Also show DHCP reservations, leases and firewall rules");
    add_format_option(info, info_args->format);
    info->footer("Examples:\n  pvc network info office --long\n  pvc network info 100 --format json");
    bind(info, info_args, network_info);

    // list
    auto* list = network->add_subcommand("list", "List client networks");
    auto list_args = std::make_shared<NetworkArgs>();
    list->add_option("limit", list_args->limit, "Only networks whose VNI or description matches this regular expression");
    add_format_option(list, list_args->format);
    list->footer("Examples:\n  pvc network list\n  pvc network list office --format json");
    bind(list, list_args, network_list);

    // dhcp
    auto* dhcp = network->add_subcommand("dhcp", "Manage DHCP reservations of a managed network");
    dhcp->require_subcommand(1);
    dhcp->footer("Examples:\n  pvc network dhcp list office\n  pvc network dhcp add office 10.100.0.10 52:54:00:12:34:56\n"
                 "  pvc network dhcp remove office 52:54:00:12:34:56");
    auto* dadd = dhcp->add_subcommand("add", "Add a DHCP reservation");
    auto dadd_args = std::make_shared<DhcpArgs>();
    dadd->add_option("net", dadd_args->net, "Network: VNI or description")->required();
    dadd->add_option("ipaddr", dadd_args->ip, "IPv4 address to reserve")->required();
    dadd->add_option("macaddr", dadd_args->mac, "MAC address of the client (':' separated)")->required();
    dadd->add_option("--hostname", dadd_args->hostname, "Hostname given to the client");
    dadd->footer("Examples:\n  pvc network dhcp add office 10.100.0.10 52:54:00:12:34:56 --hostname web1");
    bind(dadd, dadd_args, [](const DhcpArgs& a) { report(client::add_reservation(*session(), a.net, a.mac, a.ip, a.hostname)); });

    auto* dremove = dhcp->add_subcommand("remove", "Remove a DHCP reservation or lease");
    auto dremove_args = std::make_shared<DhcpArgs>();
    dremove->alias("delete");
    dremove->add_option("net", dremove_args->net, "Network: VNI or description")->required();
    dremove->add_option("macaddr", dremove_args->mac, "MAC address, hostname or IP address of the reservation or lease")
        ->required();
    dremove->footer("Examples:\n  pvc network dhcp remove office 52:54:00:12:34:56\n  pvc network dhcp remove office web1");
    bind(dremove, dremove_args, [](const DhcpArgs& a) { report(client::remove_reservation(*session(), a.net, a.mac)); });

    auto* dlist = dhcp->add_subcommand("list", "List DHCP reservations and leases");
    auto dlist_args = std::make_shared<DhcpArgs>();
    dlist->add_option("net", dlist_args->net, "Network: VNI or description")->required();
    dlist->add_option("limit", dlist_args->limit, "Only entries whose MAC, IP or hostname matches this regular expression");
    dlist->add_flag("-s,--static", dlist_args->only_static, "Only static reservations, no dynamic leases");
    add_format_option(dlist, dlist_args->format);
    dlist->footer("Examples:\n  pvc network dhcp list office --static");
    bind(dlist, dlist_args, dhcp_list);

    // acl
    auto* acl = network->add_subcommand("acl", "Manage firewall ACLs of a managed network");
    acl->require_subcommand(1);
    acl->footer("Examples:\n  pvc network acl list office\n  pvc network acl add office --in -d ssh -r 'tcp dport 22 accept'\n"
                "  pvc network acl remove office ssh");
    auto* aadd = acl->add_subcommand("add", "Add a firewall ACL");
    auto aadd_args = std::make_shared<AclArgs>();
    aadd_args->direction = "in";
    aadd->add_option("net", aadd_args->net, "Network: VNI or description")->required();
    aadd->add_flag_callback("--in", [a = aadd_args.get()] { a->direction = "in"; }, "Inbound rule (default)");
    aadd->add_flag_callback("--out", [a = aadd_args.get()] { a->direction = "out"; }, "Outbound rule");
    aadd->add_option("-d,--description", aadd_args->description, "Description: unique, without whitespace")->required();
    aadd->add_option("-r,--rule", aadd_args->rule, "The nftables rule ('tcp dport 22 accept')")->required();
    aadd->add_option("-o,--order", aadd_args->order, "Position in the direction's list, from 0 (default: last)");
    aadd->footer("Examples:\n  pvc network acl add office --in -d ssh -r 'tcp dport 22 accept' --order 0");
    bind(aadd, aadd_args, [](const AclArgs& a) {
        report(client::add_acl(*session(), a.net, a.description, a.rule, a.direction, a.order));
    });

    auto* aremove = acl->add_subcommand("remove", "Remove a firewall ACL");
    auto aremove_args = std::make_shared<AclArgs>();
    aremove->alias("delete");
    aremove->add_option("net", aremove_args->net, "Network: VNI or description")->required();
    aremove->add_option("rule", aremove_args->description, "Description of the ACL")->required();
    aremove->add_flag("-y,--yes", aremove_args->yes, "Do not ask for confirmation (accepted; nothing is asked)");
    aremove->footer("Examples:\n  pvc network acl remove office ssh");
    bind(aremove, aremove_args, [](const AclArgs& a) { report(client::remove_acl(*session(), a.net, a.description)); });

    auto* alist = acl->add_subcommand("list", "List firewall ACLs");
    auto alist_args = std::make_shared<AclArgs>();
    alist->add_option("net", alist_args->net, "Network: VNI or description")->required();
    alist->add_option("limit", alist_args->limit, "Only ACLs whose description matches this regular expression");
    alist->add_flag_callback("--in", [a = alist_args.get()] { a->direction = "in"; }, "Only inbound ACLs");
    alist->add_flag_callback("--out", [a = alist_args.get()] { a->direction = "out"; }, "Only outbound ACLs");
    add_format_option(alist, alist_args->format);
    alist->footer("Examples:\n  pvc network acl list office --in");
    bind(alist, alist_args, acl_list);

    // sriov
    auto* sriov = network->add_subcommand("sriov", "SR-IOV physical and virtual functions of a node");
    sriov->require_subcommand(1);
    sriov->footer("Examples:\n  pvc network sriov pf list hv1\n  pvc network sriov vf list hv1\n"
                  "  pvc network sriov vf set hv1 ens1f0v0 --vlan-id 100");
    auto* pf = sriov->add_subcommand("pf", "SR-IOV physical functions (PFs)");
    pf->require_subcommand(1);
    pf->footer("Examples:\n  pvc network sriov pf list hv1\n  pvc network sriov pf info hv1 ens1f0");
    auto* pflist = pf->add_subcommand("list", "List a node's PFs");
    auto pflist_args = std::make_shared<SriovArgs>();
    pflist->add_option("node", pflist_args->node, "Node name")->required();
    add_format_option(pflist, pflist_args->format);
    pflist->footer("Examples:\n  pvc network sriov pf list hv1");
    bind(pflist, pflist_args, [](const SriovArgs& a) { pf_show(a, false); });
    auto* pfinfo = pf->add_subcommand("info", "Show one PF of a node");
    auto pfinfo_args = std::make_shared<SriovArgs>();
    pfinfo->add_option("node", pfinfo_args->node, "Node name")->required();
    pfinfo->add_option("pf", pfinfo_args->name, "PF name")->required();
    add_format_option(pfinfo, pfinfo_args->format);
    pfinfo->footer("Examples:\n  pvc network sriov pf info hv1 ens1f0");
    bind(pfinfo, pfinfo_args, [](const SriovArgs& a) { pf_show(a, true); });

    auto* vf = sriov->add_subcommand("vf", "SR-IOV virtual functions (VFs)");
    vf->require_subcommand(1);
    vf->footer("Examples:\n  pvc network sriov vf list hv1 ens1f0\n  pvc network sriov vf info hv1 ens1f0v0\n"
               "  pvc network sriov vf set hv1 ens1f0v0 --trust");
    auto* vflist = vf->add_subcommand("list", "List a node's VFs");
    auto vflist_args = std::make_shared<SriovArgs>();
    vflist->add_option("node", vflist_args->node, "Node name")->required();
    vflist->add_option("pf", vflist_args->pf, "Only the VFs of this PF");
    add_format_option(vflist, vflist_args->format);
    vflist->footer("Examples:\n  pvc network sriov vf list hv1\n  pvc network sriov vf list hv1 ens1f0");
    bind(vflist, vflist_args, vf_list);
    auto* vfinfo = vf->add_subcommand("info", "Show one VF of a node");
    auto vfinfo_args = std::make_shared<SriovArgs>();
    vfinfo->add_option("node", vfinfo_args->node, "Node name")->required();
    vfinfo->add_option("vf", vfinfo_args->name, "VF name")->required();
    add_format_option(vfinfo, vfinfo_args->format);
    vfinfo->footer("Examples:\n  pvc network sriov vf info hv1 ens1f0v0");
    bind(vfinfo, vfinfo_args, vf_info);
    auto* vfset = vf->add_subcommand("set", "Change a VF's settings (applied by its node)");
    auto vfset_args = std::make_shared<SriovArgs>();
    vfset->add_option("node", vfset_args->node, "Node name")->required();
    vfset->add_option("vf", vfset_args->name, "VF name")->required();
    auto& cfg = vfset_args->config;
    vfset->add_option("--vlan-id", cfg.vlan_id, "VLAN id, 0 (none) to 4095");
    vfset->add_option("--qos-prio", cfg.vlan_qos, "VLAN QoS priority, 0 to 7");
    vfset->add_option("--tx-min", cfg.tx_rate_min, "Minimum transmit rate, Mbit/s");
    vfset->add_option("--tx-max", cfg.tx_rate_max, "Maximum transmit rate, Mbit/s");
    vfset->add_option("--link-state", cfg.link_state, "auto, enable or disable")
        ->check(CLI::IsMember({"auto", "enable", "disable"}));
    vfset->add_flag_function(
        "--spoof-check,!--no-spoof-check", [&cfg](std::int64_t n) { cfg.spoof_check = n > 0 ? "True" : "False"; },
        "Enable (or disable) MAC spoof checking");
    vfset->add_flag_function(
        "--trust,!--no-trust", [&cfg](std::int64_t n) { cfg.trust = n > 0 ? "True" : "False"; },
        "Trust (or do not trust) the VM's MAC and promiscuous settings");
    vfset->add_flag_function(
        "--query-rss,!--no-query-rss", [&cfg](std::int64_t n) { cfg.query_rss = n > 0 ? "True" : "False"; },
        "Allow (or refuse) the VM's RSS configuration queries");
    vfset->footer("Examples:\n  pvc network sriov vf set hv1 ens1f0v0 --vlan-id 100 --trust");
    bind(vfset, vfset_args, [](const SriovArgs& a) { report(client::set_vf(*session(), a.node, a.name, a.config)); });
}

}  // namespace pvc::cli
