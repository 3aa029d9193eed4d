// pvcnoded: the PVC node daemon.
//
//   pvcnoded [--config FILE]          run (FILE, else $PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml)
//   pvcnoded --check-config FILE      validate FILE and exit (0 ok, 78 invalid)
//   pvcnoded --init-cluster [--config FILE]
//                                     create the base keys of an empty cluster (schema 10) and exit
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "daemon/daemon.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/zk.hpp"
#include "pvc/config.hpp"

namespace {

// Loads the configuration or prints every problem and returns nullopt.
std::optional<pvc::Config> load(const std::filesystem::path& path) {
    try {
        return pvc::load_config(path);
    } catch (const pvc::ConfigError& e) {
        std::cerr << "pvcnoded: invalid configuration " << e.file << " (" << e.problems.size() << " problem"
                  << (e.problems.size() == 1 ? "" : "s") << "):\n";
        for (const auto& p : e.problems) std::cerr << "  " << p.to_string(e.file) << "\n";
        return std::nullopt;
    }
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"pvcnoded: the Parallel Virtual Cluster node daemon"};
    std::optional<std::string> config;
    std::optional<std::string> check;
    app.add_option("-c,--config", config, "Configuration file (default: $PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml)");
    app.add_option("--check-config", check, "Validate a configuration file and exit (0 valid, 78 invalid)");
    bool init = false;
    app.add_flag("--init-cluster", init, "Initialise an empty cluster (base keys, schema version 10) and exit");
    app.set_version_flag("--version", std::string(PVC_VERSION));
    CLI11_PARSE(app, argc, argv);

    if (check) {
        auto cfg = load(*check);
        if (!cfg) return pvc::exit_config_error;
        std::cout << "pvcnoded: configuration " << *check << " is valid (node " << cfg->node << ", "
                  << cfg->daemon_mode << ")\n";
        return 0;
    }

    auto path = pvc::config_path(config);
    auto cfg = load(path);
    if (!cfg) return pvc::exit_config_error;
    if (init) {
        try {
            auto zk = pvc::zk::Session::connect({cfg->zookeeper_hosts});
            pvc::init_cluster(*zk);
            std::cout << "pvcnoded: cluster on " << cfg->zookeeper_hosts << " is initialised (schema version "
                      << pvc::schema::version << ")\n";
            return 0;
        } catch (const std::exception& e) {
            std::cerr << "pvcnoded: cannot initialise the cluster: " << e.what() << "\n";
            return 1;
        }
    }
    cfg->pvcnoded_version = PVC_VERSION;
    auto sink = pvc::make_log_sink(&*cfg);
    pvc::Daemon daemon(std::move(*cfg), sink);
    return daemon.run();
}
