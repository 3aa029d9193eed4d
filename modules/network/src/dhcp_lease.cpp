#include "dhcp_lease.hpp"

#include <algorithm>
#include <cctype>

#include "pvc/schema.hpp"

namespace pvc::network {

std::optional<std::string> bridge_vni(const std::string& interface) {
    auto start = std::find_if(interface.begin(), interface.end(), [](char c) { return std::isdigit((unsigned char)c); });
    if (start == interface.end()) return std::nullopt;
    auto end = std::find_if(start, interface.end(), [](char c) { return !std::isdigit((unsigned char)c); });
    return std::string(start, end);
}

Lease lease_from_event(const std::vector<std::string>& args, const char* expires_env, const char* client_id_env) {
    Lease l;
    if (args.size() > 0) l.mac = args[0];
    if (args.size() > 1) l.ip = args[1];
    if (args.size() > 2) l.hostname = args[2];
    l.expiry = expires_env ? expires_env : "0";
    l.client_id = client_id_env ? client_id_env : "*";
    return l;
}

std::string init_line(const Lease& l) {
    auto star = [](const std::string& s) { return s.empty() ? std::string("*") : s; };
    return star(l.expiry) + " " + l.mac + " " + l.ip + " " + star(l.hostname) + " " + star(l.client_id);
}

std::vector<Lease> read_leases(zk::Session& zk, const std::string& vni) {
    std::vector<Lease> out;
    auto macs = zk.children(schema::path("network.lease", {vni}));
    if (!macs) return out;
    for (const auto& mac : *macs) {
        Lease l;
        l.mac = mac;
        auto ip = zk.get(schema::path("lease.ip", {vni, mac}));
        if (!ip) continue;  // deleted meanwhile, or half written
        l.ip = *ip;
        l.hostname = zk.get(schema::path("lease.hostname", {vni, mac})).value_or("");
        l.expiry = zk.get(schema::path("lease.expiry", {vni, mac})).value_or("0");
        l.client_id = zk.get(schema::path("lease.client_id", {vni, mac})).value_or("*");
        out.push_back(std::move(l));
    }
    return out;
}

zk::Status write_lease(zk::Session& zk, const std::string& vni, const Lease& l) {
    const std::string node = schema::path("lease.mac", {vni, l.mac});
    zk::Status st = zk::Status::other;
    // Twice: a concurrent change of the old node's children fails the first.
    for (int attempt = 0; attempt < 2; ++attempt) {
        zk::Transaction tx(zk);
        if (auto old = zk.children(node)) {
            for (const auto& c : *old) tx.remove(node + "/" + c);
            tx.remove(node);
        }
        tx.create(node, "");
        tx.create(schema::path("lease.expiry", {vni, l.mac}), l.expiry);
        tx.create(schema::path("lease.ip", {vni, l.mac}), l.ip);
        tx.create(schema::path("lease.hostname", {vni, l.mac}), l.hostname);
        tx.create(schema::path("lease.client_id", {vni, l.mac}), l.client_id);
        st = tx.commit();
        if (st == zk::Status::ok) break;
    }
    return st;
}

void delete_lease(zk::Session& zk, const std::string& vni, const std::string& mac) {
    zk.remove_recursive(schema::path("lease.mac", {vni, mac}));
}

}  // namespace pvc::network
