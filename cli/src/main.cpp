// pvc: the PVC cluster command line. Talks to the cluster's ZooKeeper
// directly and writes exactly what the reference client writes.
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.hpp"
#include "common.hpp"

using namespace pvc::cli;

namespace {

// The deepest command the arguments selected: pvc, pvc vm, pvc vm list, ...
const CLI::App* selected_command(const CLI::App& app) {
    const CLI::App* cmd = &app;
    for (auto subs = cmd->get_subcommands(); !subs.empty(); subs = cmd->get_subcommands()) cmd = subs.front();
    return cmd;
}

std::string command_path(const CLI::App* cmd) {
    std::string path = cmd->get_name();
    for (const CLI::App* p = cmd->get_parent(); p; p = p->get_parent()) path = p->get_name() + " " + path;
    return path;
}

// The names of `cmd`'s subcommands, "a, b, c" ("" for a leaf command).
std::string command_names(const CLI::App* cmd) {
    std::string names;
    for (const auto* sub : cmd->get_subcommands([](const CLI::App*) { return true; }))
        names += (names.empty() ? "" : ", ") + sub->get_name();
    return names;
}

// Any other usage error (a missing command or argument, a value out of its
// choices), in the same form: one line naming the command, then where its
// help is.
void report_usage_error(const CLI::App& app, const CLI::ParseError& e) {
    const CLI::App* cmd = selected_command(app);
    const std::string where = command_path(cmd);
    const std::string names = command_names(cmd);
    std::string message = where + ": " + e.what();
    if (dynamic_cast<const CLI::RequiredError*>(&e) && !names.empty())
        message = "'" + where + "' needs a command (its commands: " + names + ")";
    std::cerr << "pvc: error: " << message << "\nRun '" << where << " --help' for its usage." << std::endl;
}

// Arguments no command took (an unknown command or option, an extra
// positional): one line naming the first, and exit status 2. Checked before
// --help is honoured and before a missing subcommand is reported, so
// `pvc network --help` says that network is not a command instead of
// printing the top-level help.
bool report_unexpected(const CLI::App& app) {
    auto extras = app.remaining(true);
    if (extras.empty()) return false;
    const CLI::App* cmd = selected_command(app);
    const std::string where = command_path(cmd);
    const std::string& first = extras.front();
    std::string message;
    const std::string names = command_names(cmd);
    if (first.size() > 1 && first[0] == '-') {
        message = "unknown option '" + first.substr(0, first.find('=')) + "' for '" + where + "'";
    } else if (!names.empty()) {
        message = "'" + first + "' is not a command of '" + where + "' (its commands: " + names + ")";
    } else {
        message = "unexpected argument '" + first + "' for '" + where + "'";
    }
    std::cerr << "pvc: error: " << message << "\nRun '" << where << " --help' for its usage." << std::endl;
    return true;
}

}  // namespace

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
    app.add_option("--timeout", g.wait_timeout, "Give up a --wait after this many seconds (default: wait on)")
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
    add_network_commands(app);
    add_storage_commands(app);
    add_task_commands(app);
    add_vm_rename_command(app);
    add_backup_commands(app);
    add_vm_device_commands(app);
    add_osd_commands(app);
    add_completion_command(app);

    int status = exit_ok;
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help, a missing subcommand or an extra argument: an argument no
        // command knows is named first (exit 2); otherwise the help is
        // printed (exit 0) or the usage error named with its command (exit 2).
        if (report_unexpected(app)) {
            status = exit_usage;
        } else if (e.get_exit_code() == 0) {
            app.exit(e);  // --help
            status = exit_ok;
        } else {
            report_usage_error(app, e);
            status = exit_usage;
        }
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
