// A real ZooKeeper for tests: Debian's zookeeper jar run directly with a small
// heap, a private data dir and a free loopback port. Torn down by the destructor.
#pragma once

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "pvc/test/timing.hpp"
#include "pvc/zk.hpp"

namespace pvc::test {

// A fresh temporary directory, removed (recursively) by the destructor.
class TempDir {
public:
    explicit TempDir(const std::string& tag = "pvc");
    ~TempDir();
    const std::filesystem::path& path() const { return path_; }
private:
    std::filesystem::path path_;
};

// Standalone server on 127.0.0.1:<free port>.
class ZkServer {
public:
    // Starts and waits until it answers `ruok`; throws on failure.
    ZkServer();
    // Listening on `client_address` instead of 127.0.0.1 ("0.0.0.0": every
    // address of the caller's network namespace, for tests whose daemons run
    // in namespaces of their own); hosts() stays 127.0.0.1:PORT.
    explicit ZkServer(const std::string& client_address);
    ~ZkServer();
    std::string hosts() const;        // "127.0.0.1:PORT"
    int port() const;
    void stop();                      // SIGTERM, wait
    void start();                     // again, same data dir and port
private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// 3-member (or n) ensemble on 127.0.0.1 with distinct ports.
class ZkEnsemble {
public:
    explicit ZkEnsemble(int members = 3);
    ~ZkEnsemble();
    std::string hosts() const;        // all members
    std::string host(int i) const;    // one member
    void kill(int i);                 // SIGKILL member i
    void start(int i);                // restart member i
    // Index of the current leader, -1 if none answers.
    int leader() const;
    // Waits until a quorum serves requests.
    void wait_quorum(std::chrono::milliseconds timeout = std::chrono::seconds(30));
private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// A name unique to this test run ("t<pid>x<n>"), usable as a node name.
std::string unique_name(const std::string& base = "node");

// Runs `/usr/bin/python3 -c script args...` and returns {exit status, stdout}.
struct ProcResult { int status; std::string out; std::string err; };
ProcResult run_python(const std::string& script, const std::vector<std::string>& args = {},
                      std::chrono::seconds timeout = std::chrono::seconds(60));
// Ends `session` on the server at `port` the way ZooKeeper expires one: a
// second connection takes the session over (its id and password) and closes
// it; the owner then sees it expired. Status 0 once the server confirmed.
ProcResult close_session(int port, const zk::Session& session);
// Runs a command (argv), captures output.
ProcResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout = std::chrono::seconds(60));

// Polls `pred` every 20 ms until true or timeout; returns the last result.
// The timeout is scaled for sanitizer builds (timing.hpp) and there never
// below 30 s: two sanitizer tests at once on two cores can keep an event
// waiting longer than a short bound times the factor. The normal build keeps
// an explicit timeout as written (a time bound the test asserts); the
// default, 30 s, is only how long to wait before giving up.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    auto bound = scaled(timeout);
    if (time_scale() > 1) bound = std::max(bound, std::chrono::milliseconds(30000));
    auto end = std::chrono::steady_clock::now() + bound;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return pred();
}

}  // namespace pvc::test
