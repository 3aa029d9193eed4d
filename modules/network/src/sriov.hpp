// SR-IOV: the PFs' VF count through sysfs before host
// networking, PF/VF registration under /nodes/<node>/sriov after the
// ZooKeeper connection, and each VF's configuration applied from ZooKeeper.
//
// Two seams make it testable without SR-IOV hardware: SriovSysfs reads and
// writes the same files under a root directory (the real one: /sys; tests: a
// temporary tree shaped like class/net/<pf>/device/sriov_*), and VfControl is
// what the kernel says about a PF's VFs and how a VF is configured (the real
// one: rtnetlink; tests: a fake that records).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "pvc/zk.hpp"
#include "settings.hpp"

namespace pvc::network {

struct PciAddress {
    std::string domain, bus, slot, function;  // hex text, as in PCI_SLOT_NAME=0000:03:10.1
};
// PCI_SLOT_NAME of a uevent file's text.
std::optional<PciAddress> parse_pci_slot(const std::string& uevent);

class SriovSysfs {
public:
    explicit SriovSysfs(std::filesystem::path root = "/sys") : root_(std::move(root)) {}
    // class/net/<pf>/device/sriov_numvfs; nothing when the file is missing
    // (a device without SR-IOV).
    std::optional<unsigned> numvfs(const std::string& pf) const;
    // Writes it; throws std::runtime_error (the kernel refuses to change a
    // non-zero count to another non-zero one).
    void set_numvfs(const std::string& pf, unsigned count) const;
    // class/net/<vf>/device/uevent's PCI address; nothing when absent (a VF
    // bound to vfio has no netdev).
    std::optional<PciAddress> pci_address(const std::string& netdev) const;
    // module/vfio_iommu_type1/parameters/allow_unsafe_interrupts = Y; false if absent.
    bool allow_unsafe_interrupts() const;
    const std::filesystem::path& root() const { return root_; }

private:
    std::filesystem::path root_;
};

// One VF as the PF reports it (RTM_GETLINK, IFLA_VFINFO_LIST). Fields a
// driver does not report keep their defaults (the reference crashed on them).
struct VfInfo {
    uint32_t index = 0;
    std::string mac = "00:00:00:00:00:00";
    uint32_t vlan = 0, qos = 0;
    uint32_t tx_rate_min = 0, tx_rate_max = 0;
    bool spoof_check = false, trust = false, query_rss = false;
    std::string link_state = "auto";          // auto | enable | disable
};

// A VF's configuration as ZooKeeper holds it, with the defaults for
// missing keys and C++'s lenient booleans.
struct VfConfig {
    uint32_t vlan_id = 0, vlan_qos = 0;
    uint32_t tx_rate_min = 0, tx_rate_max = 0;
    bool spoof_check = false, trust = false, query_rss = false;
    std::string link_state = "auto";
    bool operator==(const VfConfig&) const = default;
};
// From the values of config/<key> ("" or absent: default); what was not
// understood is said in `warnings` and the default kept.
VfConfig parse_vf_config(const std::map<std::string, std::string>& values, std::vector<std::string>& warnings);

class VfControl {
public:
    virtual ~VfControl() = default;
    // The PF's VFs; throws std::runtime_error when the PF is not there.
    virtual std::vector<VfInfo> vfs(const std::string& pf) = 0;
    // The whole configuration of VF `vf` of `pf`, in one request.
    virtual void configure(const std::string& pf, uint32_t vf, const VfConfig& c) = 0;
    // The VF netdev's MTU (no up); false if the netdev does not exist.
    virtual bool set_mtu(const std::string& netdev, unsigned mtu) = 0;
};
// The kernel's, through libnl-3 (rtnl_link_vf_*), in the caller's namespace.
std::unique_ptr<VfControl> netlink_vf_control();

// Before host networking: each PF's VF count written; what happened, one line each.
std::vector<std::string> prepare_pfs(const SriovSysfs& sys, const std::vector<SriovDevice>& devices);

// PF/VF registration under /nodes/<node>/sriov and its cleanup. Returns the VF names registered now or before,
// with the lines for the log.
struct SriovRegistration {
    std::vector<std::string> vfs;           // every VF of a configured PF found (registered now or before)
    std::vector<std::string> log;
};
SriovRegistration register_sriov(zk::Session& zk, const std::string& node, const std::vector<SriovDevice>& devices,
                                 const SriovSysfs& sys, VfControl& control);

// A VF's configuration as ZooKeeper holds it.
VfConfig read_vf_config(zk::Session& zk, const std::string& node, const std::string& vf,
                        std::vector<std::string>& warnings);
// Reads it and, when it differs from `applied` (what was sent last), sends
// the whole of it in one request. Returns what was sent, nothing when
// unchanged; throws when the kernel refuses.
std::optional<VfConfig> apply_vf_config(zk::Session& zk, const std::string& node, const std::string& vf,
                                        const std::string& pf, uint32_t index, VfControl& control,
                                        const std::optional<VfConfig>& applied, std::vector<std::string>& warnings);

}  // namespace pvc::network
