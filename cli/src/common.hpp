// Shared pieces of the pvc command line: failures with an exit status,
// the cluster connection, output format and small value helpers.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/strings.hpp"
#include "pvc/zk.hpp"

namespace pvc::cli {

// Exit statuses of the command line.
inline constexpr int exit_ok = 0;
inline constexpr int exit_failed = 1;
inline constexpr int exit_usage = 2;

// An operation that cannot be done; main() prints the one-line message and
// exits with `status`. Thrown before anything is written whenever the
// problem is in the input.
class Failure : public std::runtime_error {
public:
    explicit Failure(const std::string& what, int status = exit_failed)
        : std::runtime_error(what), status(status) {}
    int status;
};

// The top-level options (pvc --zookeeper ... <command>): bound by main() to
// the top-level command only, read by the helpers below. A subcommand's own
// arguments (and its --format) live in a struct of that subcommand.
struct GlobalOptions {
    std::string zookeeper;          // --zookeeper HOST[:PORT],...
    std::string config_file;        // --config pvcnoded.yaml
    double connect_timeout = 5.0;   // seconds
    double wait_timeout = 0;        // --timeout: seconds after which --wait gives up (0 = never)
    bool no_color = false;
};

GlobalOptions& globals();

// The ZooKeeper connect string chosen from --zookeeper, PVC_ZOOKEEPER or the
// coordinators of --config; throws Failure(exit_usage) if none is given.
std::string resolve_hosts(const GlobalOptions& g);

// The session of this invocation, connected on first use (bounded by
// --connect-timeout; a clear Failure if the cluster cannot be reached).
std::shared_ptr<zk::Session> session();
void close_session();

// True when colour escapes should be written to stdout.
bool use_color();

// Prints a JSON document (pretty) to stdout.
void print_json(const nlohmann::json& j);

// Reads a key; "" when absent.
std::string read(const std::string& path);
std::optional<std::string> read_opt(const std::string& path);
std::vector<std::string> children(const std::string& path);

// split, join, trim: pvc/strings.hpp (split drops empty items).
std::optional<long> to_long(const std::string& s);
std::optional<double> to_double(const std::string& s);

// Sleeps `d`.
void pause(std::chrono::milliseconds d);

// A new random UUID (version 4), canonical lowercase.
std::string new_uuid();

// Unless `yes` (--yes): refuses "refusing to <action> without --yes" (exit
// status 2) when standard input is not a terminal, else asks `question`
// ("<action>?" when empty) with " [y/N]" and throws `declined` on anything
// but y, Y or yes.
void confirm(bool yes, const std::string& action, const std::string& question = {},
             const std::string& declined = "not done");

}  // namespace pvc::cli
