#include "host_network.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace pvc::network {

bool valid_ifname(const std::string& n) {
    if (n.empty() || n.size() > 15 || n == "." || n == "..") return false;
    return std::none_of(n.begin(), n.end(), [](char c) { return c == '/' || c == ':' || c <= ' ' || c == 0x7f; });
}

HostPlan plan_host(const Config& cfg, const Settings& net, ConfigProblems& problems) {
    HostPlan plan;
    struct Role {
        const char* name;
        const NetworkRole& r;
    };
    // Precedence order: the first role on a device names its bridge.
    const Role roles[] = {{"cluster", net.cluster}, {"storage", net.storage}, {"upstream", net.upstream}};
    for (const Role& role : roles) {
        if (!role.r.device) continue;
        const std::string& dev = *role.r.device;
        if (!valid_ifname(dev)) {
            problems.add(cfg.document.at(std::string("pvc.system.configuration.networking.") + role.name + ".device"),
                         fmt::format("'{}' is not a network interface name (1 to 15 characters, no '/', ':' or spaces)",
                                     dev));
            continue;
        }
        auto it = std::find_if(plan.bridges.begin(), plan.bridges.end(),
                               [&](const CoreBridge& b) { return b.device == dev; });
        if (it == plan.bridges.end()) {
            CoreBridge b;
            b.name = std::string("br") + role.name;
            b.device = dev;
            if (role.r.mtu) b.mtu = static_cast<unsigned>(*role.r.mtu);
            plan.bridges.push_back(b);
            it = std::prev(plan.bridges.end());
        }
        if (role.r.mtu) it->device_mtu = std::max(it->device_mtu.value_or(0), static_cast<unsigned>(*role.r.mtu));
        if (role.r.dev_ip && std::find(it->addresses.begin(), it->addresses.end(), *role.r.dev_ip) == it->addresses.end())
            it->addresses.push_back(*role.r.dev_ip);
        plan.role_bridge[role.name] = it->name;
    }
    if (net.bridge_dev && !valid_ifname(*net.bridge_dev))
        problems.add(cfg.document.at("pvc.system.configuration.networking.bridge_device"),
                     fmt::format("'{}' is not a network interface name", *net.bridge_dev));
    plan.gateway = net.upstream.gateway;

    // The reference's sysctls, in its order; keys this kernel lacks are skipped quietly.
    for (const char* k : {"net/ipv4/ip_forward", "net/ipv6/ip_forward", "net/ipv4/conf/all/send_redirects",
                          "net/ipv4/conf/default/send_redirects", "net/ipv6/conf/all/send_redirects",
                          "net/ipv6/conf/default/send_redirects", "net/ipv4/conf/all/accept_source_route",
                          "net/ipv4/conf/default/accept_source_route", "net/ipv6/conf/all/accept_source_route",
                          "net/ipv6/conf/default/accept_source_route"})
        plan.sysctls.emplace_back(k, "1");
    auto rp = [&](const std::optional<std::string>& ifname) {
        if (ifname && valid_ifname(*ifname)) plan.sysctls.emplace_back("net/ipv4/conf/" + *ifname + "/rp_filter", "0");
    };
    rp(net.cluster.device);
    rp(plan.role_bridge.count("cluster") ? std::optional(plan.role_bridge["cluster"]) : std::nullopt);
    rp(net.upstream.device);
    rp(plan.role_bridge.count("upstream") ? std::optional(plan.role_bridge["upstream"]) : std::nullopt);
    return plan;
}

namespace {

// One bridge: exists as a bridge, device enslaved, MTUs, up, addresses.
void apply_bridge(Netlink& nl, const CoreBridge& b, std::vector<std::string>& changes) {
    auto dev = nl.link(b.device);
    if (!dev) throw std::runtime_error("device " + b.device + " does not exist");
    if (b.device_mtu && dev->mtu != *b.device_mtu) {
        nl.set_mtu(dev->ifindex, *b.device_mtu);
        changes.push_back(fmt::format("{} MTU {} -> {}", b.device, dev->mtu, *b.device_mtu));
    }
    if (!dev->up) {
        nl.set_up(dev->ifindex, true);
        changes.push_back(b.device + " up");
    }
    auto br = nl.link(b.name);
    if (br && br->kind != "bridge") throw std::runtime_error(b.name + " exists but is a " + br->kind + ", not a bridge");
    if (!br) {
        nl.add(bridge_link(b.name).get());
        br = nl.link(b.name);
        if (!br) throw std::runtime_error(b.name + " vanished after its creation");
        changes.push_back("created " + b.name);
    }
    if (dev->master != br->ifindex) {
        nl.set_master(dev->ifindex, br->ifindex);
        changes.push_back(b.device + " enslaved to " + b.name);
    }
    br = nl.link(b.name);  // enslaving may have changed the bridge's MTU
    if (b.mtu && br->mtu != *b.mtu) {
        nl.set_mtu(br->ifindex, *b.mtu);
        changes.push_back(fmt::format("{} MTU {} -> {}", b.name, br->mtu, *b.mtu));
    }
    if (!br->up) {
        nl.set_up(br->ifindex, true);
        changes.push_back(b.name + " up");
    }
    auto have = nl.addresses(br->ifindex);
    for (const auto& a : b.addresses) {
        if (std::find(have.begin(), have.end(), a) != have.end()) continue;
        if (nl.add_address(br->ifindex, a)) changes.push_back("address " + a + " on " + b.name);
    }
}

}  // namespace

std::vector<std::string> apply_host(Netlink& nl, const HostPlan& plan, const Logger& log) {
    std::vector<std::string> changes;
    for (const auto& b : plan.bridges) {
        try {
            apply_bridge(nl, b, changes);
        } catch (const std::exception& e) {
            log.error("Host network: bridge {} on {}: {}", b.name, b.device, e.what());
        }
    }
    if (plan.gateway) {
        try {
            auto br = plan.role_bridge.count("upstream") ? nl.link(plan.role_bridge.at("upstream")) : std::nullopt;
            auto existing = nl.default_gateway();
            if (!br) {
                log.error("Host network: no upstream bridge for the default route via {}", *plan.gateway);
            } else if (!existing) {
                nl.add_default_route(*plan.gateway, br->ifindex);
                changes.push_back("default route via " + *plan.gateway);
            } else if (*existing != *plan.gateway) {
                log.warn("Host network: a default route via '{}' exists; leaving it (configured gateway {})",
                         *existing, *plan.gateway);
            }
        } catch (const std::exception& e) {
            log.error("Host network: default route via {}: {}", *plan.gateway, e.what());
        }
    }
    for (const auto& [key, value] : plan.sysctls) {
        try {
            auto now = read_sysctl(key);
            if (!now) {
                log.debug("Host network: sysctl {} does not exist here", key);
                continue;
            }
            if (*now == value) continue;
            write_sysctl(key, value);
            changes.push_back(key + " = " + value);
        } catch (const std::exception& e) {
            log.error("Host network: sysctl {}: {}", key, e.what());
        }
    }
    return changes;
}

}  // namespace pvc::network
