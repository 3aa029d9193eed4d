// pvcnoded: the PVC node daemon.
//
//   pvcnoded [--config FILE]          run (FILE, else $PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml)
//   pvcnoded --check-config FILE      validate FILE and exit (0 ok, 78 invalid)
//   pvcnoded --init-cluster [--config FILE]
//                                     create the base keys of an empty cluster (schema 10) and exit
#include <malloc.h>

#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "daemon/daemon.hpp"
#include "daemon/module_host.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/zk.hpp"
#include "config_reader.hpp"

namespace {

void print_problems(const std::string& file, const std::vector<pvc::ConfigProblem>& problems) {
    std::cerr << "pvcnoded: invalid configuration " << file << " (" << problems.size() << " problem"
              << (problems.size() == 1 ? "" : "s") << "):\n";
    for (const auto& p : problems) std::cerr << "  " << p.to_string(file) << "\n";
}

// Loads the configuration or prints every problem and returns nullopt.
std::optional<pvc::Config> load(const std::filesystem::path& path) {
    try {
        return pvc::load_config(path);
    } catch (const pvc::ConfigError& e) {
        print_problems(e.file, e.problems);
        return std::nullopt;
    }
}

// --check-config: the core's keys and every enabled module's, all problems at
// once. A module that is not installed here cannot check its keys: said, not fatal.
int check_config(const std::filesystem::path& path) {
    pvc::ConfigProblems problems;
    std::optional<pvc::Config> cfg;
    try {
        cfg = pvc::read_config(pvc::parse_config_tree(pvc::read_config_file(path), path.string()), problems);
    } catch (const pvc::ConfigError& e) {
        print_problems(e.file, e.problems);
        return pvc::exit_config_error;
    }
    pvc::Logger log(pvc::make_log_sink(nullptr), "");
    pvc::ModuleHost modules(pvc::module_directory(*cfg), log);
    try {
        modules.load(*cfg);
        modules.configure_all(*cfg, problems);
    } catch (const pvc::ModuleLoadError& e) {
        std::cerr << "pvcnoded: " << e.what() << "; its configuration keys were not checked\n";
    }
    if (!problems.empty()) {
        print_problems(path.string(), problems.sorted());
        return pvc::exit_config_error;
    }
    std::cout << "pvcnoded: configuration " << path.string() << " is valid (node " << cfg->node << ", "
              << cfg->daemon_mode << ")\n";
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    // glibc gives each thread that allocates its own arena (up to 8 per core),
    // each keeping freed memory resident; the daemon's threads mostly sleep,
    // so two arenas serve them without contention worth the memory.
    mallopt(M_ARENA_MAX, 2);
    CLI::App app{"pvcnoded: the Parallel Virtual Cluster node daemon"};
    std::optional<std::string> config;
    std::optional<std::string> check;
    app.add_option("-c,--config", config, "Configuration file (default: $PVCD_CONFIG_FILE, else /etc/pvc/pvcnoded.yaml)");
    app.add_option("--check-config", check, "Validate a configuration file and exit (0 valid, 78 invalid)");
    bool init = false;
    app.add_flag("--init-cluster", init, "Initialise an empty cluster (base keys, schema version 10) and exit");
    app.set_version_flag("--version", std::string(PVC_VERSION));
    CLI11_PARSE(app, argc, argv);

    if (check) return check_config(*check);

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
