// Time from a client's write to the kernel state it asks for, on a real
// pvcnoded with the network module in a network namespace (issue 11,
// "Benchmark"): a managed network created (vxlan<vni> up in vmbr<vni>, the
// bridge up), the same network deleted (both links gone), and a batch of
// networks written at once (each timed from its own write, and the batch
// until the last one is in place). A switch namespace holds a private
// ZooKeeper; the write is the reference client's one transaction. Then, with
// the batch's networks in place, an ACL added to / deleted from one network
// (client write -> the rule in / out of the kernel's chain, read through
// libnftables), and the rule handles of every other network's chains (and
// the base and dispatch chains) compared before and after: the reference
// reloads the whole ruleset on every change. Root only.
//   network_bench [runs batch]   default 20 100
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <map>
#include <thread>

#include <boost/process.hpp>
#include <fmt/format.h>

#include "firewall.hpp"
#include "netlink.hpp"
#include "nft.hpp"
#include "netns.hpp"
#include "network_config.hpp"
#include "pvc/cluster.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace bp = boost::process;
using namespace pvc::network;
using namespace pvc::network::test;
using Clock = std::chrono::steady_clock;

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void report(const std::string& what, std::vector<double> v) {
    if (v.empty()) return;
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
    std::printf("%-52s n=%-4zu median %8.1f ms  p99 %8.1f ms  max %8.1f ms\n", what.c_str(), v.size(), at(0.5),
                at(0.99), v.back());
}

// `pvc network add <vni> --type managed` as the reference client writes it.
void add_network(pvc::zk::Session& s, uint32_t vni) {
    std::string p = "/networks/" + std::to_string(vni);
    std::string o3 = std::to_string(vni % 250), o2 = std::to_string(100 + vni / 250 % 100);
    pvc::zk::Transaction t(s);
    t.create(p, "net" + std::to_string(vni));
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"nettype", "managed"}, {"mtu", ""}, {"domain", "bench.local"}, {"name_servers", ""},
             {"ip6_network", "None"}, {"ip6_gateway", "None"}, {"dhcp6_flag", "False"},
             {"ip4_network", "10." + o2 + "." + o3 + ".0/24"}, {"ip4_gateway", "10." + o2 + "." + o3 + ".1"},
             {"dhcp4_flag", "False"}, {"dhcp4_start", "None"}, {"dhcp4_end", "None"}, {"dhcp4_reservations", ""},
             {"dhcp4_leases", ""}, {"firewall_rules", ""}, {"firewall_rules/in", ""}, {"firewall_rules/out", ""}})
        t.create(p + "/" + k, v);
    if (auto st = t.commit(); st != pvc::zk::Status::ok)
        throw std::runtime_error("writing network " + std::to_string(vni) + ": " + pvc::zk::to_string(st));
}

// The network's links as the module makes them: vxlan<vni> up in vmbr<vni>, vmbr<vni> up.
bool in_place(const std::map<std::string, LinkState>& links, uint32_t vni) {
    auto vx = links.find("vxlan" + std::to_string(vni)), br = links.find("vmbr" + std::to_string(vni));
    return vx != links.end() && br != links.end() && vx->second.up && br->second.up &&
           vx->second.master == br->second.ifindex;
}
bool gone(const std::map<std::string, LinkState>& links, uint32_t vni) {
    return !links.count("vxlan" + std::to_string(vni)) && !links.count("vmbr" + std::to_string(vni));
}

// chain -> its rules' handles, for table inet filter.
std::map<std::string, std::vector<uint64_t>> handles(Nftables& nft) {
    std::map<std::string, std::vector<uint64_t>> out;
    nlohmann::json j = nft.list("list table inet filter");
    if (!j.is_object()) return out;
    for (const auto& item : j["nftables"]) {
        if (item.contains("chain")) out[item["chain"]["name"].get<std::string>()];
        if (item.contains("rule")) out[item["rule"]["chain"].get<std::string>()].push_back(item["rule"]["handle"]);
    }
    return out;
}

bool chain_has(Nftables& nft, const std::string& chain, const std::string& text) {
    nlohmann::json j = nft.list("list chain inet filter " + chain);
    return j.is_object() && j.dump().find(text) != std::string::npos;
}

std::map<std::string, LinkState> snapshot(Netlink& nl) {
    std::map<std::string, LinkState> m;
    for (auto& l : nl.links()) m[l.name] = l;
    return m;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = argc > 1 ? std::atoi(argv[1]) : 20;
    int batch = argc > 2 ? std::atoi(argv[2]) : 100;
    std::string p = ns_prefix();
    Netns sw(p + "s"), node(p + "a");
    sw.must_exec({"ip", "link", "add", "sw0", "type", "bridge"});
    sw.must_exec({"ip", "addr", "add", "10.231.0.100/24", "dev", "sw0"});
    sw.must_exec({"ip", "link", "set", "sw0", "up"});
    sw.must_exec({"ip", "link", "add", "p1", "type", "veth", "peer", "name", "eth0", "netns", node.name()});
    sw.must_exec({"ip", "link", "set", "p1", "master", "sw0", "up"});
    std::unique_ptr<Netlink> nl;
    {
        InNetns in(node.name());
        nl = std::make_unique<Netlink>();  // its socket stays in the node's namespace
    }
    InNetns in_sw(sw.name());
    pvc::test::ZkServer zk("0.0.0.0");
    pvc::test::TempDir dir("pvc-net-bench");
    NetworkConfigOptions o;
    o.coordinators = "[hv1:" + std::to_string(zk.port()) + "]";
    o.base_dir = dir.path() / "hv1";
    o.module_dir = pvc::test::build_dir() + "/modules";
    auto config = write_network_config(o);
    std::ofstream(dir.path() / "hosts") << "127.0.0.1 localhost\n10.231.0.100 hv1\n";
    auto session = pvc::zk::Session::connect({zk.hosts()});
    pvc::init_cluster(*session);
    auto log = dir.path() / "pvcnoded.log";
    bp::child daemon(bp::search_path("ip"), "netns", "exec", node.name(), "unshare", "-u", "-m", "--propagation",
                     "private", "--", "sh", "-c",
                     "mount --bind \"$3\" /etc/hosts && hostname \"$0\" && exec \"$1\" --config \"$2\"", "hv1",
                     pvc::test::pvcnoded_binary(), config.string(), (dir.path() / "hosts").string(),
                     (bp::std_out & bp::std_err) > log.string(), bp::std_in < bp::null);
    auto fail = [&](const std::string& why) {
        std::fprintf(stderr, "%s\n%s\n", why.c_str(), pvc::test::slurp(log).c_str());
        ::kill(daemon.id(), SIGKILL);
        daemon.wait();
        return 1;
    };
    if (!pvc::test::eventually([&] { return session->get("/nodes/hv1/daemonstate").value_or("") == "run"; },
                               std::chrono::seconds(60)))
        return fail("pvcnoded did not reach run");

    const auto limit = std::chrono::seconds(60);
    auto wait_for = [&](auto pred) {
        auto deadline = Clock::now() + limit;
        while (Clock::now() < deadline) {
            if (pred(snapshot(*nl))) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return false;
    };

    std::vector<double> create, remove;
    for (int i = 0; i < runs; ++i) {
        uint32_t vni = 5000 + static_cast<uint32_t>(i);
        auto t0 = Clock::now();
        add_network(*session, vni);
        if (!wait_for([&](const auto& l) { return in_place(l, vni); }))
            return fail(fmt::format("network {} not in place after 60 s", vni));
        create.push_back(ms(Clock::now() - t0));
        t0 = Clock::now();
        session->remove_recursive("/networks/" + std::to_string(vni));
        if (!wait_for([&](const auto& l) { return gone(l, vni); }))
            return fail(fmt::format("network {} not removed after 60 s", vni));
        remove.push_back(ms(Clock::now() - t0));
    }

    // The batch: every network written back to back; each timed from its own write.
    std::vector<Clock::time_point> written(static_cast<size_t>(batch));
    std::vector<double> each(static_cast<size_t>(batch), -1);
    auto b0 = Clock::now();
    for (int i = 0; i < batch; ++i) {
        written[static_cast<size_t>(i)] = Clock::now();
        add_network(*session, 6000 + static_cast<uint32_t>(i));
    }
    double writes_ms = ms(Clock::now() - b0);
    int pending = batch;
    auto deadline = Clock::now() + std::chrono::seconds(120);
    while (pending && Clock::now() < deadline) {
        auto links = snapshot(*nl);
        auto now = Clock::now();
        for (int i = 0; i < batch; ++i)
            if (each[static_cast<size_t>(i)] < 0 && in_place(links, 6000 + static_cast<uint32_t>(i))) {
                each[static_cast<size_t>(i)] = ms(now - written[static_cast<size_t>(i)]);
                --pending;
            }
        if (pending) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (pending) return fail(fmt::format("{} of {} batch networks not in place after 120 s", pending, batch));
    double batch_ms = ms(Clock::now() - b0);

    // ACLs on network 6000 while the batch's networks exist. The kernel is
    // read from the node's namespace (a thread of its own enters it).
    std::vector<double> acl_add, acl_del;
    std::string acl_error;
    size_t other_chains = 0, changed_chains = 0;
    std::thread acl([&] {
        try {
            InNetns in(node.name());
            Nftables nft;
            const std::string root = "/networks/6000/firewall_rules/in/";
            auto poll = [&](auto pred) {
                auto deadline = Clock::now() + limit;
                while (Clock::now() < deadline) {
                    if (pred()) return true;
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
                return false;
            };
            const std::string last = "vxlan" + std::to_string(6000 + batch - 1) + "-in";
            if (!poll([&] { return chain_has(nft, last, "counter"); }))
                throw std::runtime_error("the batch's firewall chains are not in place");
            // Steady state: the batch's second passes (after the MTU
            // write-backs) are done; an ACL is not queued behind them.
            std::this_thread::sleep_for(std::chrono::seconds(5));
            auto before = handles(nft);
            for (int i = 0; i < runs; ++i) {
                std::string desc = "bench" + std::to_string(i), port = std::to_string(20000 + i);
                auto t0 = Clock::now();
                pvc::zk::Transaction t(*session);
                t.create(root + desc, "");
                t.create(root + desc + "/rule", "tcp dport " + port + " drop");
                t.create(root + desc + "/order", std::to_string(i));
                if (t.commit() != pvc::zk::Status::ok) throw std::runtime_error("ACL write failed");
                if (!poll([&] { return chain_has(nft, "vxlan6000-in", port); }))
                    throw std::runtime_error("ACL " + desc + " not in the kernel after 60 s");
                acl_add.push_back(ms(Clock::now() - t0));
            }
            for (int i = 0; i < runs; ++i) {
                std::string desc = "bench" + std::to_string(i), port = std::to_string(20000 + i);
                auto t0 = Clock::now();
                session->remove_recursive(root + desc);
                if (!poll([&] { return !chain_has(nft, "vxlan6000-in", port); }))
                    throw std::runtime_error("ACL " + desc + " still in the kernel after 60 s");
                acl_del.push_back(ms(Clock::now() - t0));
            }
            auto after = handles(nft);
            for (const auto& [chain, h] : before) {
                if (chain_vni(chain) == 6000u) continue;
                ++other_chains;
                if (after[chain] != h) ++changed_chains;
            }
        } catch (const std::exception& e) {
            acl_error = e.what();
        }
    });
    acl.join();
    if (!acl_error.empty()) return fail(acl_error);

    std::printf("client write -> kernel state, pvcnoded in a namespace (%d runs, batch of %d)\n", runs, batch);
    report("network create (vxlan up in vmbr, vmbr up)", create);
    report("network delete (vxlan and vmbr gone)", remove);
    report(fmt::format("batch of {}: each from its own write", batch), each);
    std::printf("%-52s %8.1f ms (writes took %.1f ms)\n", fmt::format("batch of {}: first write -> last in place", batch).c_str(),
                batch_ms, writes_ms);

    report(fmt::format("ACL added to 1 of {} networks (rule in its chain)", batch), acl_add);
    report(fmt::format("ACL deleted from 1 of {} networks (rule gone)", batch), acl_del);
    std::printf("%-52s %zu of %zu chains changed (rule handles compared)\n",
                fmt::format("after {} ACL changes, the other chains", 2 * runs).c_str(), changed_chains, other_chains);

    ::kill(daemon.id(), SIGTERM);
    if (!daemon.wait_for(std::chrono::seconds(60))) ::kill(daemon.id(), SIGKILL);
    return 0;
}
