// pvcnoded-dnsmasq-lease: dnsmasq's --dhcp-script for PVC client networks
// (the reference's lease script). dnsmasq runs it once per lease event, serially:
//
//   pvcnoded-dnsmasq-lease init            print the network's leases (dnsmasq
//                                          keeps none itself: --leasefile-ro)
//   pvcnoded-dnsmasq-lease add|old MAC IP [HOSTNAME]
//   pvcnoded-dnsmasq-lease del MAC IP [HOSTNAME]
//
// Environment (dnsmasq passes the daemon's on): DNSMASQ_BRIDGE_INTERFACE
// (vmbr<vni>), PVCD_CONFIG_FILE (a YAML with pvc.cluster.coordinators; the
// daemon points it at a file it writes with its own coordinators), and
// dnsmasq's DNSMASQ_LEASE_EXPIRES / DNSMASQ_CLIENT_ID. It talks to ZooKeeper
// directly (not through the daemon), bounded in time: dnsmasq waits for it.
// Errors go to stderr, which is dnsmasq's log; exit 1 on failure.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "dhcp_lease.hpp"
#include "pvc/zk.hpp"

int main(int argc, char** argv) {
    using namespace pvc::network;
    const char* me = "pvcnoded-dnsmasq-lease";
    if (argc < 2) {
        std::cerr << me << ": no action given\n";
        return 1;
    }
    std::string action = argv[1];
    std::vector<std::string> args(argv + 2, argv + argc);
    if (action != "init" && action != "add" && action != "old" && action != "del") return 0;  // nothing to do

    const char* bridge = std::getenv("DNSMASQ_BRIDGE_INTERFACE");
    auto vni = bridge ? bridge_vni(bridge) : std::nullopt;
    if (!vni) {
        std::cerr << me << ": DNSMASQ_BRIDGE_INTERFACE is missing or has no VNI\n";
        return 1;
    }
    const char* config = std::getenv("PVCD_CONFIG_FILE");
    std::string config_file = config && *config ? config : "/etc/pvc/pvcnoded.yaml";
    std::vector<std::string> coordinators;
    try {
        YAML::Node doc = YAML::LoadFile(config_file);
        for (const auto& c : doc["pvc"]["cluster"]["coordinators"]) coordinators.push_back(c.as<std::string>());
    } catch (const std::exception& e) {
        std::cerr << me << ": cannot read pvc.cluster.coordinators from " << config_file << ": " << e.what() << "\n";
        return 1;
    }
    if (coordinators.empty()) {
        std::cerr << me << ": " << config_file << " names no coordinators\n";
        return 1;
    }
    try {
        pvc::zk::SessionOptions o;
        o.hosts = pvc::zk::connect_string(coordinators);
        o.connect_timeout = std::chrono::seconds(5);
        o.op_timeout = std::chrono::seconds(5);
        o.session_timeout = std::chrono::seconds(10);
        auto zk = pvc::zk::Session::connect(o);
        int rc = 0;
        if (action == "init") {
            for (const Lease& l : read_leases(*zk, *vni)) std::cout << init_line(l) << "\n";
        } else if (action == "del") {
            if (!args.empty()) delete_lease(*zk, *vni, args[0]);
        } else if (args.size() >= 2) {  // add, and old (renewal: new expiry, client id)
            Lease l = lease_from_event(args, std::getenv("DNSMASQ_LEASE_EXPIRES"), std::getenv("DNSMASQ_CLIENT_ID"));
            auto st = write_lease(*zk, *vni, l);
            if (st != pvc::zk::Status::ok) {
                std::cerr << me << ": lease " << l.mac << " on network " << *vni << " not written: "
                          << pvc::zk::to_string(st) << "\n";
                rc = 1;
            }
        }
        std::cout.flush();
        zk->close();
        return rc;
    } catch (const std::exception& e) {
        std::cerr << me << ": " << action << " on network " << *vni << ": " << e.what() << "\n";
        return 1;
    }
}
