#include "sriov.hpp"

#include <linux/if_ether.h>
#include <linux/if_link.h>
#include <netlink/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/sriov.h>

#include <algorithm>
#include <charconv>
#include <fstream>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "netlink.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::network {

namespace {

std::optional<std::string> read_text(const std::filesystem::path& p) {
    std::ifstream f(p);
    if (!f) return std::nullopt;
    return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::optional<uint32_t> number(const std::string& s) {
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
    return v;
}

std::string mtu_text(const SriovDevice& d) { return std::to_string(d.mtu.value_or(1500)); }

}  // namespace

std::optional<PciAddress> parse_pci_slot(const std::string& uevent) {
    const std::string key = "PCI_SLOT_NAME=";
    auto p = uevent.find(key);
    if (p == std::string::npos) return std::nullopt;
    auto end = uevent.find('\n', p);
    std::string v = uevent.substr(p + key.size(), end == std::string::npos ? std::string::npos : end - p - key.size());
    // DDDD:BB:SS.F
    auto c1 = v.find(':'), c2 = v.find(':', c1 + 1), dot = v.find('.', c2 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos || dot == std::string::npos) return std::nullopt;
    PciAddress a{v.substr(0, c1), v.substr(c1 + 1, c2 - c1 - 1), v.substr(c2 + 1, dot - c2 - 1), v.substr(dot + 1)};
    for (const auto* f : {&a.domain, &a.bus, &a.slot, &a.function})
        if (f->empty() || f->find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) return std::nullopt;
    return a;
}

std::optional<unsigned> SriovSysfs::numvfs(const std::string& pf) const {
    auto t = read_text(root_ / "class" / "net" / pf / "device" / "sriov_numvfs");
    if (!t) return std::nullopt;
    auto n = number(trim(*t));
    if (!n) throw std::runtime_error("sriov_numvfs of " + pf + " reads '" + trim(*t) + "'");
    return *n;
}

void SriovSysfs::set_numvfs(const std::string& pf, unsigned count) const {
    auto path = root_ / "class" / "net" / pf / "device" / "sriov_numvfs";
    std::ofstream f(path);
    f << count;
    f.flush();
    if (!f) throw std::runtime_error("writing " + std::to_string(count) + " to " + path.string() + " failed");
}

std::optional<PciAddress> SriovSysfs::pci_address(const std::string& netdev) const {
    auto t = read_text(root_ / "class" / "net" / netdev / "device" / "uevent");
    if (!t) return std::nullopt;
    return parse_pci_slot(*t);
}

bool SriovSysfs::allow_unsafe_interrupts() const {
    auto path = root_ / "module" / "vfio_iommu_type1" / "parameters" / "allow_unsafe_interrupts";
    if (!std::filesystem::exists(path)) return false;
    std::ofstream f(path);
    f << "Y";
    f.flush();
    return static_cast<bool>(f);
}

VfConfig parse_vf_config(const std::map<std::string, std::string>& values, std::vector<std::string>& warnings) {
    VfConfig c;
    auto get = [&](const char* k) -> std::optional<std::string> {
        auto it = values.find(k);
        if (it == values.end() || it->second.empty()) return std::nullopt;
        return it->second;
    };
    auto num = [&](const char* k, uint32_t& out) {
        if (auto v = get(k)) {
            if (auto n = number(*v)) out = *n;
            else warnings.push_back(fmt::format("{} '{}' is not a number: 0 used", k, *v));
        }
    };
    auto boolean = [&](const char* k, bool& out) {
        auto v = get(k);
        if (!v) return;
        if (*v == "True") out = true;
        else if (*v == "False") out = false;
        else if (auto b = zk::lenient_bool(*v)) {
            out = *b;
            warnings.push_back(fmt::format("{} '{}' read as {} (the reference writes True/False)", k, *v,
                                           *b ? "True" : "False"));
        } else {
            warnings.push_back(fmt::format("{} '{}' is not a boolean: off", k, *v));
        }
    };
    num("vlan_id", c.vlan_id);
    num("vlan_qos", c.vlan_qos);
    num("tx_rate_min", c.tx_rate_min);
    num("tx_rate_max", c.tx_rate_max);
    boolean("spoof_check", c.spoof_check);
    boolean("trust", c.trust);
    boolean("query_rss", c.query_rss);
    if (auto v = get("link_state")) {
        if (*v == "auto" || *v == "enable" || *v == "disable") c.link_state = *v;
        else warnings.push_back(fmt::format("link_state '{}' is not auto, enable or disable: auto", *v));
    }
    return c;
}

namespace {

class NetlinkVfControl final : public VfControl {
public:
    NetlinkVfControl() : sock_(nl_socket_alloc()) {
        if (!sock_ || nl_connect(sock_.get(), NETLINK_ROUTE) < 0) throw std::runtime_error("netlink: cannot connect");
    }
    std::vector<VfInfo> vfs(const std::string& pf) override {
        LinkPtr link = get(pf);
        std::vector<VfInfo> out;
        uint32_t n = 0;
        if (rtnl_link_get_num_vf(link.get(), &n) < 0) return out;
        for (uint32_t i = 0; i < n; ++i) {
            rtnl_link_vf* vf = rtnl_link_vf_get(link.get(), i);
            if (!vf) continue;
            VfInfo v;
            uint32_t x = 0;
            if (rtnl_link_vf_get_index(vf, &x) == 0) v.index = x;
            else v.index = i;
            nl_addr* mac = nullptr;
            if (rtnl_link_vf_get_addr(vf, &mac) == 0 && mac) {
                char buf[64];
                v.mac = nl_addr2str(mac, buf, sizeof buf);
            }
            nl_vf_vlans_t* vlans = nullptr;
            if (rtnl_link_vf_get_vlans(vf, &vlans) == 0 && vlans && vlans->size > 0) {
                v.vlan = vlans->vlans[0].vf_vlan;
                v.qos = vlans->vlans[0].vf_vlan_qos;
            }
            nl_vf_rate rate{};
            if (rtnl_link_vf_get_rate(vf, &rate) == 0) {
                v.tx_rate_min = rate.min_tx_rate;
                v.tx_rate_max = rate.max_tx_rate ? rate.max_tx_rate : rate.rate;
            }
            if (rtnl_link_vf_get_spoofchk(vf, &x) == 0) v.spoof_check = x != 0;
            if (rtnl_link_vf_get_trust(vf, &x) == 0) v.trust = x != 0;
            if (rtnl_link_vf_get_rss_query_en(vf, &x) == 0) v.query_rss = x != 0;
            if (rtnl_link_vf_get_linkstate(vf, &x) == 0)
                v.link_state = x == IFLA_VF_LINK_STATE_ENABLE ? "enable" : x == IFLA_VF_LINK_STATE_DISABLE ? "disable" : "auto";
            rtnl_link_vf_put(vf);
            out.push_back(v);
        }
        return out;
    }
    void configure(const std::string& pf, uint32_t index, const VfConfig& c) override {
        LinkPtr link = get(pf);
        LinkPtr change(rtnl_link_alloc());
        rtnl_link_vf* vf = rtnl_link_vf_alloc();
        rtnl_link_vf_set_index(vf, index);
        nl_vf_vlans_t* vlans = nullptr;
        if (rtnl_link_vf_vlan_alloc(&vlans, 1) == 0) {
            vlans->vlans[0].vf_vlan = c.vlan_id;
            vlans->vlans[0].vf_vlan_qos = c.vlan_qos;
            vlans->vlans[0].vf_vlan_proto = ETH_P_8021Q;
            rtnl_link_vf_set_vlans(vf, vlans);
            rtnl_link_vf_vlan_put(vlans);
        }
        // The kernel sets both rates at once: both always sent.
        nl_vf_rate rate{RTNL_LINK_VF_RATE_API_NEW, 0, c.tx_rate_max, c.tx_rate_min};
        rtnl_link_vf_set_rate(vf, &rate);
        rtnl_link_vf_set_spoofchk(vf, c.spoof_check);
        rtnl_link_vf_set_trust(vf, c.trust);
        rtnl_link_vf_set_rss_query_en(vf, c.query_rss);
        rtnl_link_vf_set_linkstate(vf, c.link_state == "enable"    ? IFLA_VF_LINK_STATE_ENABLE
                                       : c.link_state == "disable" ? IFLA_VF_LINK_STATE_DISABLE
                                                                   : IFLA_VF_LINK_STATE_AUTO);
        int rc = rtnl_link_vf_add(change.get(), vf);
        rtnl_link_vf_put(vf);
        if (rc < 0) throw NetlinkError("VF " + std::to_string(index) + " of " + pf, rc);
        rc = rtnl_link_change(sock_.get(), link.get(), change.get(), 0);
        if (rc < 0) throw NetlinkError("configuring VF " + std::to_string(index) + " of " + pf, rc);
    }
    bool set_mtu(const std::string& netdev, unsigned mtu) override {
        Netlink nl;
        auto l = nl.link(netdev);
        if (!l) return false;
        if (l->mtu != mtu) nl.set_mtu(l->ifindex, mtu);
        return true;
    }

private:
    LinkPtr get(const std::string& name) {
        rtnl_link* l = nullptr;
        int rc = rtnl_link_get_kernel(sock_.get(), 0, name.c_str(), &l);
        if (rc < 0 || !l) throw NetlinkError("PF " + name, rc);
        return LinkPtr(l);
    }
    std::unique_ptr<nl_sock, SocketDeleter> sock_;
};

}  // namespace

std::unique_ptr<VfControl> netlink_vf_control() { return std::make_unique<NetlinkVfControl>(); }

std::vector<std::string> prepare_pfs(const SriovSysfs& sys, const std::vector<SriovDevice>& devices) {
    std::vector<std::string> out;
    for (const auto& d : devices) {
        std::optional<unsigned> current;
        try {
            current = sys.numvfs(d.phy);
        } catch (const std::exception& e) {
            out.push_back(fmt::format("warning: SR-IOV PF {}: {}", d.phy, e.what()));
            continue;
        }
        if (!current) {
            out.push_back(fmt::format("warning: SR-IOV PF {}: no sriov_numvfs (not an SR-IOV device)", d.phy));
            continue;
        }
        // Rewriting the same count is accepted; another non-zero count is
        // refused by the kernel and not forced (some NICs need a reboot).
        try {
            sys.set_numvfs(d.phy, static_cast<unsigned>(d.vfcount));
            out.push_back(fmt::format("ok: SR-IOV PF {}: {} VFs", d.phy, d.vfcount));
        } catch (const std::exception& e) {
            out.push_back(fmt::format("warning: SR-IOV PF {}: {} VFs refused ({} now): {}", d.phy, d.vfcount, *current,
                                      e.what()));
        }
    }
    return out;
}

SriovRegistration register_sriov(zk::Session& zk, const std::string& node, const std::vector<SriovDevice>& devices,
                                 const SriovSysfs& sys, VfControl& control) {
    SriovRegistration r;
    zk.ensure_path(schema::path("node.sriov.pf", {node}));
    zk.ensure_path(schema::path("node.sriov.vf", {node}));
    std::set<std::string> pfs;
    for (const auto& d : devices) {
        pfs.insert(d.phy);
        // PF keys: rewritten on every start.
        zk.write({{schema::path("sriov_pf.phy", {node, d.phy}), ""},
                  {schema::path("sriov_pf.mtu", {node, d.phy}), mtu_text(d)},
                  {schema::path("sriov_pf.vfcount", {node, d.phy}), std::to_string(d.vfcount)}});
        std::vector<VfInfo> vfs;
        try {
            vfs = control.vfs(d.phy);
        } catch (const std::exception& e) {
            r.log.push_back(fmt::format("warning: SR-IOV PF {}: its VFs cannot be read: {}", d.phy, e.what()));
            continue;
        }
        for (const VfInfo& v : vfs) {
            std::string name = d.phy + "v" + std::to_string(v.index);
            const auto key = [&](const char* k) { return schema::path(k, {node, name}); };
            if (zk.exists(key("sriov_vf.phy"))) {
                r.vfs.push_back(name);  // administrator config and usage survive restarts
                continue;
            }
            auto pci = sys.pci_address(name);
            if (!pci) {
                r.log.push_back(fmt::format("warning: SR-IOV VF {}: no PCI address (no netdev): not registered", name));
                continue;
            }
            zk::Transaction tx(zk);
            tx.create(key("sriov_vf.phy"), "");
            tx.create(key("sriov_vf.pf"), d.phy);
            tx.create(key("sriov_vf.mtu"), mtu_text(d));
            tx.create(key("sriov_vf.mac"), v.mac);
            tx.create(key("sriov_vf.phy_mac"), v.mac);
            tx.create(key("sriov_vf.config"), "");
            tx.create(key("sriov_vf.config.vlan_id"), std::to_string(v.vlan));
            tx.create(key("sriov_vf.config.vlan_qos"), std::to_string(v.qos));
            tx.create(key("sriov_vf.config.tx_rate_min"), std::to_string(v.tx_rate_min));
            tx.create(key("sriov_vf.config.tx_rate_max"), std::to_string(v.tx_rate_max));
            tx.create(key("sriov_vf.config.spoof_check"), zk::py_bool(v.spoof_check));
            tx.create(key("sriov_vf.config.link_state"), v.link_state);
            tx.create(key("sriov_vf.config.trust"), zk::py_bool(v.trust));
            tx.create(key("sriov_vf.config.query_rss"), zk::py_bool(v.query_rss));
            tx.create(key("sriov_vf.pci"), "");
            tx.create(key("sriov_vf.pci.domain"), pci->domain);
            tx.create(key("sriov_vf.pci.bus"), pci->bus);
            tx.create(key("sriov_vf.pci.slot"), pci->slot);
            tx.create(key("sriov_vf.pci.function"), pci->function);
            tx.create(key("sriov_vf.used"), "False");
            tx.create(key("sriov_vf.used_by"), "");
            if (auto st = tx.commit(); st != zk::Status::ok) {
                r.log.push_back(fmt::format("error: SR-IOV VF {}: registration failed: {}", name, zk::to_string(st)));
                continue;
            }
            r.vfs.push_back(name);
            r.log.push_back(fmt::format("ok: SR-IOV VF {} registered (PF {}, PCI {}:{}:{}.{})", name, d.phy, pci->domain,
                                        pci->bus, pci->slot, pci->function));
        }
    }
    // Cleanup: PFs no longer configured, and VFs of such PFs.
    for (const auto& pf : zk.children(schema::path("node.sriov.pf", {node})).value_or(std::vector<std::string>{}))
        if (!pfs.count(pf)) {
            zk.remove_recursive(schema::path("sriov_pf.phy", {node, pf}));
            r.log.push_back("ok: SR-IOV PF " + pf + " is no longer configured: removed");
        }
    for (const auto& vf : zk.children(schema::path("node.sriov.vf", {node})).value_or(std::vector<std::string>{})) {
        auto pf = zk.get(schema::path("sriov_vf.pf", {node, vf}));
        if (pf && pfs.count(*pf)) continue;
        zk.remove_recursive(schema::path("sriov_vf.phy", {node, vf}));
        r.log.push_back("ok: SR-IOV VF " + vf + " (of a PF no longer configured) removed");
    }
    return r;
}

VfConfig read_vf_config(zk::Session& zk, const std::string& node, const std::string& vf,
                        std::vector<std::string>& warnings) {
    std::map<std::string, std::string> values;
    for (const char* k : {"vlan_id", "vlan_qos", "tx_rate_min", "tx_rate_max", "spoof_check", "link_state", "trust",
                          "query_rss"})
        values[k] = zk.get(schema::path(std::string("sriov_vf.config.") + k, {node, vf})).value_or("");
    return parse_vf_config(values, warnings);
}

std::optional<VfConfig> apply_vf_config(zk::Session& zk, const std::string& node, const std::string& vf,
                                        const std::string& pf, uint32_t index, VfControl& control,
                                        const std::optional<VfConfig>& applied, std::vector<std::string>& warnings) {
    VfConfig c = read_vf_config(zk, node, vf, warnings);
    if (applied && *applied == c) return std::nullopt;
    control.configure(pf, index, c);
    return c;
}

}  // namespace pvc::network
