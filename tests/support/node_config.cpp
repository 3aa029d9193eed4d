#include "pvc/test/node_config.hpp"

#include <fstream>

#include <fmt/format.h>

namespace pvc::test {

std::string node_config_yaml(const NodeConfigOptions& o) {
    auto plugins = o.plugin_dir.empty() ? o.base_dir / "plugins" : o.plugin_dir;
    std::filesystem::create_directories(plugins);
    std::filesystem::create_directories(o.base_dir / "console");  // libvirt's console logs live there
    std::string modules = o.module_dir.empty() ? "" : "        module_directory: " + o.module_dir.string() + "\n";
    return fmt::format(R"(---
pvc:
  node: {node}
  debug: true
  functions:
    enable_hypervisor: {hv}
    enable_networking: false
    enable_storage: {st}
    enable_api: false
{functions}  cluster:
    coordinators: {coords}
    networks:
      cluster:
        domain: pvc.local
  system:
    intervals:
      vm_shutdown_timeout: 5
      keepalive_interval: {ka}
      fence_intervals: 6
      suicide_intervals: 0
    fencing:
      actions:
        successful_fence: migrate
        failed_fence: None
      ipmi:
        host: ""
        user: admin
        pass: s3cr3tpass
    migration:
      target_selector: mem
    configuration:
      directories:
        plugin_directory: {plugins}
        dynamic_directory: {base}/run
        log_directory: {base}/log
        console_log_directory: {base}/console
{modules}      logging:
        file_logging: true
        stdout_logging: {stdout}
        zookeeper_logging: {zkl}
        log_colours: false
        log_dates: true
        log_keepalives: true
        log_keepalive_cluster_details: true
        log_keepalive_plugin_details: true
        console_log_lines: 100
        node_log_lines: 200
{extra})",
                       fmt::arg("node", o.node), fmt::arg("hv", o.enable_hypervisor ? "true" : "false"), fmt::arg("st", o.enable_storage ? "true" : "false"),
                       fmt::arg("coords", o.coordinators), fmt::arg("ka", o.keepalive_interval),
                       fmt::arg("plugins", plugins.string()), fmt::arg("base", o.base_dir.string()),
                       fmt::arg("modules", modules), fmt::arg("stdout", o.stdout_logging ? "true" : "false"),
                       fmt::arg("zkl", o.zookeeper_logging ? "true" : "false"), fmt::arg("extra", o.extra_system_yaml), fmt::arg("functions", o.extra_functions_yaml));
}

std::filesystem::path write_node_config(const NodeConfigOptions& o) {
    std::filesystem::create_directories(o.base_dir);
    auto path = o.base_dir / "pvcnoded.yaml";
    std::ofstream(path) << node_config_yaml(o);
    return path;
}

}  // namespace pvc::test
