// pvcnoded.yaml for the network module's tests: networking on, every role on
// one device (the sample's layout) unless told otherwise.
#pragma once

#include <filesystem>
#include <string>

namespace pvc::network::test {

struct NetworkConfigOptions {
    std::string node = "hv1";
    std::string coordinators = "[hv1]";
    std::filesystem::path base_dir = "/tmp/pvc-network-test";
    std::filesystem::path module_dir;          // "" = unset
    std::string cluster_device = "eth0";
    std::string storage_device = "eth0";
    std::string upstream_device = "eth0";
    std::string bridge_device = "eth0";
    int mtu = 1500;
    std::string cluster_net = "10.231.0";      // first three octets of each /24
    std::string storage_net = "10.231.1";
    std::string upstream_net = "10.231.2";
    int keepalive_interval = 1;
    std::string db_host = "localhost";         // both coordinator databases
    int db_port = 5432;
};

std::string network_config_yaml(const NetworkConfigOptions& o);
std::filesystem::path write_network_config(const NetworkConfigOptions& o);

}  // namespace pvc::network::test
