// pvc: the PVC cluster command line. Talks to the cluster's ZooKeeper
// directly and writes exactly what the reference client writes.
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common.hpp"

using namespace pvc::cli;

int main(int argc, char** argv) {
    CLI::App app{"pvc: administer a PVC (Parallel Virtual Cluster) cluster through its ZooKeeper"};
    app.name("pvc");
    app.require_subcommand(1);
    app.fallthrough();  // global options may also follow the subcommands
    auto& g = globals();
    app.add_option("-z,--zookeeper", g.zookeeper,
                   "ZooKeeper ensemble, HOST[:PORT],... (default port 2181); also env PVC_ZOOKEEPER");
    app.add_option("-c,--config", g.config_file,
                   "Take the ensemble from the coordinators of this pvcnoded.yaml (pvc.cluster.coordinators)");
    app.add_option("--connect-timeout", g.connect_timeout, "Seconds to wait for the cluster (default 5)")
        ->check(CLI::PositiveNumber);
    app.add_option("--timeout", wait_timeout(), "Give up a --wait after this many seconds (default: wait on)")
        ->check(CLI::NonNegativeNumber);
    app.add_flag("--no-color", g.no_color, "Never colour the output (also env NO_COLOR)");
    app.footer(
        "The cluster is found from --zookeeper, else --config, else PVC_ZOOKEEPER, else /etc/pvc/pvcnoded.yaml.\n"
        "Exit status: 0 done, 1 operation failed or refused, 2 usage error.\n\n"
        "Examples:\n"
        "  pvc -z hv1,hv2,hv3 cluster status\n"
        "  export PVC_ZOOKEEPER=hv1:2181; pvc vm list\n"
        "  pvc --config /etc/pvc/pvcnoded.yaml node list --format json\n"
        "  pvc vm define web1.xml --node hv1 && pvc vm start web1 --wait\n"
        "  source <(pvc completion bash)");

    add_cluster_commands(app);
    add_node_commands(app);
    add_vm_commands(app);
    add_completion_command(app);

    int status = exit_ok;
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        app.exit(e);
        status = exit_ok;
    } catch (const CLI::CallForAllHelp& e) {
        app.exit(e);
        status = exit_ok;
    } catch (const CLI::ParseError& e) {
        app.exit(e);
        status = e.get_exit_code() == 0 ? exit_ok : exit_usage;
    } catch (const Failure& e) {
        std::cerr << "pvc: error: " << e.what() << std::endl;
        status = e.status;
    } catch (const pvc::zk::Error& e) {
        std::cerr << "pvc: error: cluster: " << e.what() << std::endl;
        status = exit_failed;
    } catch (const std::exception& e) {
        std::cerr << "pvc: error: " << e.what() << std::endl;
        status = exit_failed;
    }
    try {
        close_session();
    } catch (...) {
    }
    return status;
}
