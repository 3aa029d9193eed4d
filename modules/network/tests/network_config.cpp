#include "network_config.hpp"

#include <fstream>

#include <fmt/format.h>

namespace pvc::network::test {

std::string network_config_yaml(const NetworkConfigOptions& o) {
    std::string modules = o.module_dir.empty() ? "" : "        module_directory: " + o.module_dir.string() + "\n";
    return fmt::format(R"(---
pvc:
  node: {node}
  debug: true
  functions:
    enable_hypervisor: false
    enable_networking: true
    enable_storage: false
    enable_api: false
  cluster:
    coordinators: {coords}
    networks:
      upstream:
        domain: example.com
        network: {up}.0/24
        floating_ip: {up}.250/24
        gateway: {up}.254
      cluster:
        domain: pvc.local
        network: {cl}.0/24
        floating_ip: {cl}.250/24
      storage:
        domain: pvc.storage
        network: {st}.0/24
        floating_ip: {st}.250/24
  coordinator:
    dns:
      database:
        host: {dbhost}
        port: {dbport}
        name: pvcdns
        user: pvcdns
        pass: pvcdns
    metadata:
      database:
        host: {dbhost}
        port: {dbport}
        name: pvcapi
        user: pvcapi
        pass: pvcapi
  system:
    intervals:
      vm_shutdown_timeout: 5
      keepalive_interval: {ka}
      fence_intervals: 6
      suicide_intervals: 0
    fencing:
      actions:
        successful_fence: None
        failed_fence: None
      ipmi:
        host: ""
        user: admin
        pass: pass
    migration:
      target_selector: mem
    configuration:
      directories:
        plugin_directory: {base}/plugins
        dynamic_directory: {base}/run
        log_directory: {base}/log
        console_log_directory: {base}/console
{modules}      logging:
        file_logging: false
        stdout_logging: true
        zookeeper_logging: false
        log_colours: false
        log_dates: true
        log_keepalives: false
        log_keepalive_cluster_details: false
        log_keepalive_plugin_details: false
        console_log_lines: 100
        node_log_lines: 200
      networking:
        bridge_device: {brdev}
        upstream:
          device: {updev}
          mtu: {mtu}
          address: by-id
        cluster:
          device: {cldev}
          mtu: {mtu}
          address: by-id
        storage:
          device: {stdev}
          mtu: {mtu}
          address: by-id
)",
                       fmt::arg("node", o.node), fmt::arg("coords", o.coordinators), fmt::arg("up", o.upstream_net),
                       fmt::arg("cl", o.cluster_net), fmt::arg("st", o.storage_net), fmt::arg("ka", o.keepalive_interval),
                       fmt::arg("base", o.base_dir.string()), fmt::arg("modules", modules),
                       fmt::arg("brdev", o.bridge_device), fmt::arg("updev", o.upstream_device),
                       fmt::arg("cldev", o.cluster_device), fmt::arg("stdev", o.storage_device), fmt::arg("mtu", o.mtu),
                       fmt::arg("dbhost", o.db_host), fmt::arg("dbport", o.db_port));
}

std::filesystem::path write_network_config(const NetworkConfigOptions& o) {
    std::filesystem::create_directories(o.base_dir / "plugins");
    std::filesystem::create_directories(o.base_dir / "console");
    auto path = o.base_dir / "pvcnoded.yaml";
    std::ofstream(path) << network_config_yaml(o);
    return path;
}

}  // namespace pvc::network::test
