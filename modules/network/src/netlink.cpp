#include "netlink.hpp"

#include <arpa/inet.h>
#include <linux/ethtool.h>
#include <linux/if.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <netlink/addr.h>
#include <netlink/msg.h>
#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/bridge.h>
#include <netlink/route/link/vlan.h>
#include <netlink/route/link/vxlan.h>
#include <netlink/route/route.h>

namespace pvc::network {

namespace {

struct CacheDeleter { void operator()(nl_cache* c) const { nl_cache_free(c); } };
struct AddrDeleter { void operator()(nl_addr* a) const { nl_addr_put(a); } };
struct RtAddrDeleter { void operator()(rtnl_addr* a) const { rtnl_addr_put(a); } };
struct RouteDeleter { void operator()(rtnl_route* r) const { rtnl_route_put(r); } };
struct MsgDeleter { void operator()(nl_msg* m) const { nlmsg_free(m); } };
using CachePtr = std::unique_ptr<nl_cache, CacheDeleter>;
using AddrPtr = std::unique_ptr<nl_addr, AddrDeleter>;

void check(int err, const std::string& what) {
    if (err < 0) throw NetlinkError(what + ": " + nl_geterror(err), err);
}

AddrPtr parse_addr(const std::string& text, int family) {
    nl_addr* a = nullptr;
    check(nl_addr_parse(text.c_str(), family, &a), "address '" + text + "'");
    return AddrPtr(a);
}

LinkState state_of(rtnl_link* l) {
    LinkState s;
    s.ifindex = rtnl_link_get_ifindex(l);
    if (const char* name = rtnl_link_get_name(l)) s.name = name;
    if (const char* kind = rtnl_link_get_type(l)) s.kind = kind;
    s.master = rtnl_link_get_master(l);
    s.parent = rtnl_link_get_link(l);
    s.mtu = rtnl_link_get_mtu(l);
    s.up = (rtnl_link_get_flags(l) & IFF_UP) != 0;
    if (s.kind == "vxlan") {
        uint32_t v = 0;
        if (rtnl_link_vxlan_get_id(l, &v) == 0) s.id = v;
        if (rtnl_link_vxlan_get_port(l, &v) == 0) s.port = static_cast<uint16_t>(v);
        if (rtnl_link_vxlan_get_link(l, &v) == 0) s.parent = static_cast<int>(v);
    } else if (s.kind == "vlan") {
        int id = rtnl_link_vlan_get_id(l);
        if (id > 0) s.id = static_cast<uint32_t>(id);
    }
    return s;
}

// A change request carrying only the attributes set on it.
void change(nl_sock* sock, int ifindex, const std::string& what, void (*fill)(rtnl_link*, long), long value) {
    LinkPtr orig(rtnl_link_alloc());
    LinkPtr changes(rtnl_link_alloc());
    rtnl_link_set_ifindex(orig.get(), ifindex);
    fill(changes.get(), value);
    check(rtnl_link_change(sock, orig.get(), changes.get(), 0), what);
}

// The address object `cidr` on `ifindex`, as adding and removing send it.
std::unique_ptr<rtnl_addr, RtAddrDeleter> address_object(int ifindex, const std::string& cidr) {
    int family = cidr.find(':') == std::string::npos ? AF_INET : AF_INET6;
    AddrPtr local = parse_addr(cidr, family);
    std::unique_ptr<rtnl_addr, RtAddrDeleter> a(rtnl_addr_alloc());
    rtnl_addr_set_ifindex(a.get(), ifindex);
    check(rtnl_addr_set_local(a.get(), local.get()), "address " + cidr);
    rtnl_addr_set_prefixlen(a.get(), static_cast<int>(nl_addr_get_prefixlen(local.get())));
    return a;
}

}  // namespace

NetlinkError::NetlinkError(const std::string& what, int c) : std::runtime_error(what), code(c) {}
bool NetlinkError::unsupported_kind() const { return code == -NLE_OPNOTSUPP; }

void SocketDeleter::operator()(nl_sock* s) const { nl_socket_free(s); }
void LinkDeleter::operator()(rtnl_link* l) const { rtnl_link_put(l); }

LinkPtr bridge_link(const std::string& name) {
    LinkPtr l(rtnl_link_bridge_alloc());
    if (!l) throw NetlinkError("cannot allocate a bridge link", -NLE_NOMEM);
    rtnl_link_set_name(l.get(), name.c_str());
    return l;
}

LinkPtr vxlan_link(const std::string& name, uint32_t vni, uint16_t port, int parent_ifindex) {
    LinkPtr l(rtnl_link_vxlan_alloc());
    if (!l) throw NetlinkError("cannot allocate a vxlan link", -NLE_NOMEM);
    rtnl_link_set_name(l.get(), name.c_str());
    check(rtnl_link_vxlan_set_id(l.get(), vni), name + " VNI");
    // libnl 3.7 converts the host-order port to network order itself.
    check(rtnl_link_vxlan_set_port(l.get(), port), name + " port");
    check(rtnl_link_vxlan_set_link(l.get(), static_cast<uint32_t>(parent_ifindex)), name + " device");
    return l;
}

LinkPtr vlan_link(const std::string& name, uint16_t id, int parent_ifindex) {
    LinkPtr l(rtnl_link_vlan_alloc());
    if (!l) throw NetlinkError("cannot allocate a vlan link", -NLE_NOMEM);
    rtnl_link_set_name(l.get(), name.c_str());
    check(rtnl_link_vlan_set_id(l.get(), id), name + " 802.1Q id");
    rtnl_link_set_link(l.get(), parent_ifindex);
    return l;
}

std::string add_request(rtnl_link* link) {
    nl_msg* raw = nullptr;
    check(rtnl_link_build_add_request(link, NLM_F_CREATE | NLM_F_EXCL, &raw), "building the link request");
    std::unique_ptr<nl_msg, MsgDeleter> msg(raw);
    nlmsghdr* h = nlmsg_hdr(msg.get());
    return std::string(reinterpret_cast<const char*>(h), h->nlmsg_len);
}

Netlink::Netlink() : sock_(nl_socket_alloc()) {
    if (!sock_) throw NetlinkError("cannot allocate a netlink socket", -NLE_NOMEM);
    check(nl_connect(sock_.get(), NETLINK_ROUTE), "connecting to rtnetlink");
}
Netlink::~Netlink() = default;

std::optional<LinkState> Netlink::link(const std::string& name) {
    rtnl_link* l = nullptr;
    int err = rtnl_link_get_kernel(sock_.get(), 0, name.c_str(), &l);
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return std::nullopt;
    check(err, "reading link " + name);
    LinkPtr owned(l);
    return state_of(l);
}

std::optional<LinkState> Netlink::link(int ifindex) {
    rtnl_link* l = nullptr;
    int err = rtnl_link_get_kernel(sock_.get(), ifindex, nullptr, &l);
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return std::nullopt;
    check(err, "reading link " + std::to_string(ifindex));
    LinkPtr owned(l);
    return state_of(l);
}

void Netlink::add(rtnl_link* link) {
    const char* name = rtnl_link_get_name(link);
    check(rtnl_link_add(sock_.get(), link, NLM_F_CREATE | NLM_F_EXCL), std::string("creating ") + (name ? name : "a link"));
}

void Netlink::set_mtu(int ifindex, unsigned mtu) {
    change(sock_.get(), ifindex, "setting the MTU of link " + std::to_string(ifindex),
           [](rtnl_link* l, long v) { rtnl_link_set_mtu(l, static_cast<unsigned>(v)); }, mtu);
}

void Netlink::set_up(int ifindex, bool up) {
    change(sock_.get(), ifindex, std::string(up ? "bringing up" : "setting down") + " link " + std::to_string(ifindex),
           [](rtnl_link* l, long v) {
               if (v) rtnl_link_set_flags(l, IFF_UP);
               else rtnl_link_unset_flags(l, IFF_UP);
           },
           up ? 1 : 0);
}

void Netlink::set_master(int ifindex, int master_ifindex) {
    change(sock_.get(), ifindex, "setting the master of link " + std::to_string(ifindex),
           [](rtnl_link* l, long v) { rtnl_link_set_master(l, static_cast<int>(v)); }, master_ifindex);
}

void Netlink::remove(const std::string& name) {
    LinkPtr l(rtnl_link_alloc());
    rtnl_link_set_name(l.get(), name.c_str());
    int err = rtnl_link_delete(sock_.get(), l.get());
    if (err == -NLE_OBJ_NOTFOUND || err == -NLE_NODEV) return;
    check(err, "deleting link " + name);
}

std::vector<LinkState> Netlink::links() {
    nl_cache* raw = nullptr;
    check(rtnl_link_alloc_cache(sock_.get(), AF_UNSPEC, &raw), "reading links");
    CachePtr cache(raw);
    std::vector<LinkState> out;
    for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o))
        out.push_back(state_of(reinterpret_cast<rtnl_link*>(o)));
    return out;
}

std::vector<std::string> Netlink::addresses(int ifindex) {
    nl_cache* raw = nullptr;
    check(rtnl_addr_alloc_cache(sock_.get(), &raw), "reading addresses");
    CachePtr cache(raw);
    std::vector<std::string> out;
    for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
        auto* a = reinterpret_cast<rtnl_addr*>(o);
        if (rtnl_addr_get_ifindex(a) != ifindex) continue;
        nl_addr* local = rtnl_addr_get_local(a);
        if (!local) continue;
        char buf[128];
        out.emplace_back(nl_addr2str(local, buf, sizeof buf));
        if (out.back().find('/') == std::string::npos)
            out.back() += "/" + std::to_string(rtnl_addr_get_prefixlen(a));
    }
    return out;
}

bool Netlink::add_address(int ifindex, const std::string& cidr) {
    auto a = address_object(ifindex, cidr);
    int err = rtnl_addr_add(sock_.get(), a.get(), NLM_F_EXCL);
    if (err == -NLE_EXIST) return false;
    check(err, "adding address " + cidr);
    return true;
}

bool Netlink::remove_address(int ifindex, const std::string& cidr) {
    auto a = address_object(ifindex, cidr);
    int err = rtnl_addr_delete(sock_.get(), a.get(), 0);
    if (err == -NLE_NOADDR || err == -NLE_OBJ_NOTFOUND) return false;
    check(err, "removing address " + cidr);
    return true;
}

std::optional<std::string> Netlink::default_gateway() {
    nl_cache* raw = nullptr;
    check(rtnl_route_alloc_cache(sock_.get(), AF_INET, 0, &raw), "reading routes");
    CachePtr cache(raw);
    for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o)) {
        auto* r = reinterpret_cast<rtnl_route*>(o);
        if (rtnl_route_get_table(r) != RT_TABLE_MAIN) continue;
        nl_addr* dst = rtnl_route_get_dst(r);
        if (dst && nl_addr_get_prefixlen(dst) != 0) continue;
        if (rtnl_route_get_nnexthops(r) < 1) return std::string();
        nl_addr* gw = rtnl_route_nh_get_gateway(rtnl_route_nexthop_n(r, 0));
        if (!gw) return std::string();
        char buf[64];
        std::string s = nl_addr2str(gw, buf, sizeof buf);
        return s.substr(0, s.find('/'));
    }
    return std::nullopt;
}

void Netlink::add_default_route(const std::string& gateway, int ifindex) {
    std::unique_ptr<rtnl_route, RouteDeleter> r(rtnl_route_alloc());
    rtnl_route_set_family(r.get(), AF_INET);
    rtnl_route_set_table(r.get(), RT_TABLE_MAIN);
    rtnl_route_set_scope(r.get(), RT_SCOPE_UNIVERSE);
    rtnl_route_set_type(r.get(), RTN_UNICAST);
    rtnl_route_set_protocol(r.get(), RTPROT_BOOT);
    AddrPtr dst = parse_addr("0.0.0.0/0", AF_INET);
    check(rtnl_route_set_dst(r.get(), dst.get()), "default route");
    AddrPtr gw = parse_addr(gateway, AF_INET);
    rtnl_nexthop* nh = rtnl_route_nh_alloc();
    rtnl_route_nh_set_gateway(nh, gw.get());
    rtnl_route_nh_set_ifindex(nh, ifindex);
    rtnl_route_add_nexthop(r.get(), nh);  // the route owns it now
    check(rtnl_route_add(sock_.get(), r.get(), NLM_F_EXCL), "adding default route via " + gateway);
}

namespace {
struct Fd {
    int fd;
    ~Fd() { if (fd >= 0) ::close(fd); }
};
void ethtool(const std::string& name, ethtool_value& v) {
    Fd s{::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
    if (s.fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, name.c_str(), IFNAMSIZ - 1);
    ifr.ifr_data = reinterpret_cast<char*>(&v);
    if (::ioctl(s.fd, SIOCETHTOOL, &ifr) < 0)
        throw std::runtime_error("ethtool on " + name + ": " + std::strerror(errno));
}
}  // namespace

bool tx_checksum(const std::string& name) {
    ethtool_value v{};
    v.cmd = ETHTOOL_GTXCSUM;
    ethtool(name, v);
    return v.data != 0;
}

void set_tx_checksum(const std::string& name, bool on) {
    ethtool_value v{};
    v.cmd = ETHTOOL_STXCSUM;
    v.data = on ? 1 : 0;
    ethtool(name, v);
}

std::optional<std::string> read_sysctl(const std::string& key) {
    std::ifstream in(std::filesystem::path("/proc/sys") / key);
    if (!in) return std::nullopt;
    std::string v;
    std::getline(in, v);
    return v;
}

bool write_sysctl(const std::string& key, const std::string& value) {
    auto path = std::filesystem::path("/proc/sys") / key;
    if (!std::filesystem::exists(path)) return false;
    std::ofstream out(path);
    out << value;
    out.flush();
    if (!out) throw std::runtime_error("cannot write " + path.string());
    return true;
}

}  // namespace pvc::network
