// The kernel's link, address and route tables through libnl-3 (rtnetlink),
// in the network namespace of the calling process. One Netlink is used by
// one thread at a time (the module's worker); no `ip` subprocess anywhere.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct nl_sock;
struct rtnl_link;

namespace pvc::network {

// A libnl or kernel failure; `code` is libnl's (negative NLE_*).
class NetlinkError : public std::runtime_error {
public:
    NetlinkError(const std::string& what, int code);
    int code;
    // The kernel has no driver for the requested link kind (e.g. `vlan`
    // without CONFIG_VLAN_8021Q): creation is impossible on this host.
    bool unsupported_kind() const;
};

// What the kernel says about one link.
struct LinkState {
    int ifindex = 0;
    std::string name;
    std::string kind;       // "bridge", "vxlan", "vlan", "veth", "" (physical)
    int master = 0;         // ifindex of the bridge it is a port of, 0 if none
    int parent = 0;         // IFLA_LINK (vlan parent); vxlan: IFLA_VXLAN_LINK
    unsigned mtu = 0;
    bool up = false;
    uint32_t id = 0;        // vxlan VNI / 802.1Q id
    uint16_t port = 0;      // vxlan UDP destination port (host order)
};

// Owned libnl objects (RAII).
struct SocketDeleter { void operator()(nl_sock*) const; };
struct LinkDeleter { void operator()(rtnl_link*) const; };
using LinkPtr = std::unique_ptr<rtnl_link, LinkDeleter>;

// The link objects a creation sends: built apart from sending so tests can
// inspect the request (rtnl_link_build_add_request) on kernels that lack a kind.
LinkPtr bridge_link(const std::string& name);
LinkPtr vxlan_link(const std::string& name, uint32_t vni, uint16_t port, int parent_ifindex);
LinkPtr vlan_link(const std::string& name, uint16_t id, int parent_ifindex);
// The RTM_NEWLINK message (NLM_F_CREATE|NLM_F_EXCL) that adds `link`, as bytes.
std::string add_request(rtnl_link* link);

class Netlink {
public:
    Netlink();  // throws NetlinkError
    ~Netlink();
    Netlink(const Netlink&) = delete;
    Netlink& operator=(const Netlink&) = delete;

    std::optional<LinkState> link(const std::string& name);
    std::optional<LinkState> link(int ifindex);
    // Every link of the namespace.
    std::vector<LinkState> links();
    // Adds the link built above; throws NetlinkError (EEXIST included).
    void add(rtnl_link* link);
    // Changes only what is given.
    void set_mtu(int ifindex, unsigned mtu);
    void set_up(int ifindex, bool up);
    void set_master(int ifindex, int master_ifindex);  // 0 releases
    void remove(const std::string& name);

    // IPv4/IPv6 addresses of a link as "addr/prefix".
    std::vector<std::string> addresses(int ifindex);
    // Adds "addr/prefix"; false if the link had it already.
    bool add_address(int ifindex, const std::string& cidr);
    // Removes "addr/prefix"; false if the link did not have it.
    bool remove_address(int ifindex, const std::string& cidr);

    // The gateway of the main table's IPv4 default route, if one exists.
    std::optional<std::string> default_gateway();
    void add_default_route(const std::string& gateway, int ifindex);

private:
    std::unique_ptr<nl_sock, SocketDeleter> sock_;
};

// TX checksum offload of a link (SIOCETHTOOL ETHTOOL_[GS]TXCSUM).
bool tx_checksum(const std::string& name);
void set_tx_checksum(const std::string& name, bool on);

// A /proc/sys/net key, `key` relative to /proc/sys (interface names stay one
// path component, so "bond0.100" works). Returns false if the key does not
// exist (a debug-level no-op); throws on other failures.
std::optional<std::string> read_sysctl(const std::string& key);
bool write_sysctl(const std::string& key, const std::string& value);

}  // namespace pvc::network
