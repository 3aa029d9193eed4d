// `pvc` usage errors, without a cluster: an unknown command, subcommand or
// option, or an extra argument, is exit status 2 with one line naming it,
// before --help is honoured and before anything connects. The cluster given
// is unreachable on purpose: a command that ran anyway would fail with status
// 1 ("cannot reach ...") instead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "pvc/test/zk_server.hpp"

namespace {

pvc::test::ProcResult pvc_run(std::vector<std::string> args) {
    std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", "127.0.0.1:9", "--connect-timeout", "1"};
    argv.insert(argv.end(), args.begin(), args.end());
    return pvc::test::run_command(argv);
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& message) {
    auto r = pvc_run(args);
    std::string shown;
    for (const auto& a : args) shown += " " + a;
    EXPECT_EQ(r.status, 2) << "pvc" << shown << "\nstdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_NE(r.err.find("pvc: error: " + message), std::string::npos) << "pvc" << shown << "\nstderr: " << r.err;
    EXPECT_EQ(r.out, "") << "pvc" << shown << ": no help or output on a usage error";
}

TEST(PvcCliUsage, UnknownCommandIsNamedEvenWithHelp) {
    const std::string msg = "'netwrk' is not a command of 'pvc' (its commands: cluster, node, vm, network, storage, completion)";
    expect_usage_error({"netwrk"}, msg);
    expect_usage_error({"netwrk", "--help"}, msg);
    expect_usage_error({"netwrk", "list", "-h"}, msg);
}

TEST(PvcCliUsage, UnknownSubcommandIsNamedWithTheCommandsOfItsParent) {
    expect_usage_error({"node", "bogus"},
                       "'bogus' is not a command of 'pvc node' (its commands: list, info, flush, ready, primary, "
                       "secondary, log)");
    expect_usage_error({"vm", "frobnicate", "--help"}, "'frobnicate' is not a command of 'pvc vm'");
    expect_usage_error({"cluster", "stats"}, "'stats' is not a command of 'pvc cluster'");
    expect_usage_error({"storage", "volume", "snapshot", "purge"},
                       "'purge' is not a command of 'pvc storage volume snapshot' (its commands: add, rename, remove, "
                       "list)");
    expect_usage_error({"storage", "pool", "add", "vms"}, "pvc storage pool add: pgs is required");
}

TEST(PvcCliUsage, UnknownOptionIsNamedWithItsCommand) {
    expect_usage_error({"vm", "list", "--bogus"}, "unknown option '--bogus' for 'pvc vm list'");
    expect_usage_error({"vm", "list", "--bogus=1", "--help"}, "unknown option '--bogus' for 'pvc vm list'");
    expect_usage_error({"--verbose", "node", "list"}, "unknown option '--verbose' for 'pvc node list'");
    expect_usage_error({"node", "flush", "hv1", "-q"}, "unknown option '-q' for 'pvc node flush'");
}

TEST(PvcCliUsage, ExtraPositionalIsNamed) {
    expect_usage_error({"vm", "start", "web1", "web2"}, "unexpected argument 'web2' for 'pvc vm start'");
    expect_usage_error({"node", "list", "hv1"}, "unexpected argument 'hv1' for 'pvc node list'");
    expect_usage_error({"cluster", "maintenance", "on", "now"}, "unexpected argument 'now' for 'pvc cluster maintenance'");
}

TEST(PvcCliUsage, TheErrorSaysWhereTheHelpIs) {
    auto r = pvc_run({"node", "bogus"});
    EXPECT_NE(r.err.find("Run 'pvc node --help' for its usage."), std::string::npos) << r.err;
}

TEST(PvcCliUsage, HelpOfKnownCommandsStillExitsZero) {
    for (std::vector<std::string> args : {std::vector<std::string>{"--help"}, {"node", "--help"}, {"vm", "list", "-h"}}) {
        auto r = pvc_run(args);
        EXPECT_EQ(r.status, 0) << args.back() << " " << r.err;
        EXPECT_NE(r.out.find("Examples:"), std::string::npos) << r.out;
    }
}

TEST(PvcCliUsage, MissingCommandsArgumentsAndBadValuesNameTheirCommand) {
    expect_usage_error({}, "'pvc' needs a command (its commands: cluster, node, vm, network, storage, completion)");
    expect_usage_error({"vm"}, "'pvc vm' needs a command (its commands: list, info, define,");
    expect_usage_error({"vm", "start"}, "pvc vm start: vm is required");
    expect_usage_error({"vm", "list", "--format", "xml"}, "pvc vm list: --format: xml not in {table,json}");
    expect_usage_error({"cluster", "maintenance", "maybe"}, "pvc cluster maintenance: mode: maybe not in {on,off}");
}

}  // namespace
