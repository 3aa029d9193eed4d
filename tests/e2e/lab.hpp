// The e2e lab: the project's harness scripts (tools/lab) driven from a test.
//
// Topology: every node N is a network namespace with its own libvirtd
// (qemu+tcp://<net>.N/system) and its own pvcnoded (the real daemon binary,
// loading the real module .so files), both sharing the node's mount and UTS
// namespaces (hostname hvN, /etc/hosts naming every node). ZooKeeper runs in
// the switch namespace. The test process stays in the root namespace and
// reaches nodes and ZooKeeper through the harness's host link, acting as a
// PVC client would: ZooKeeper writes plus libvirt read-only polling.
//
// Anything missing (root, scripts, binaries, libvirtd) fails the test with a
// clear message: nothing is skipped silently.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <libvirt/libvirt.h>

#include "pvc/zk.hpp"

namespace pvc::e2e {

struct CommandResult {
    int status = -1;
    std::string output;  // stdout and stderr
};
// Runs argv (no shell), waits, returns status and output.
CommandResult run(const std::vector<std::string>& argv);

struct LabOptions {
    std::vector<int> nodes{1};
    int vm_shutdown_timeout = 3;
    int keepalive_interval = 5;
    // Fencing: a BMC per node (tools/lab/bmc.sh; power off kills the node's
    // daemon, libvirtd and guests, power on boots them), the fencing module
    // loaded, and these nodes as coordinators (the ones that fence).
    bool fencing = false;
    std::vector<int> coordinators{};
    int fence_intervals = 6;
    int saving_throws = 6;
    std::string successful_fence = "none";
};

class Lab {
public:
    // Brings the whole lab up; throws std::runtime_error with the reason.
    explicit Lab(LabOptions options);
    ~Lab();
    Lab(const Lab&) = delete;
    Lab& operator=(const Lab&) = delete;

    static std::string node_name(int n) { return "hv" + std::to_string(n); }
    std::string libvirt_uri(int n) const;           // qemu+tcp://<net>.n/system
    const std::string& zk_hosts() const { return zk_hosts_; }
    const std::string& domain_type() const { return domain_type_; }  // kvm | qemu
    const std::filesystem::path& console_dir() const { return console_dir_; }
    std::shared_ptr<zk::Session> zk() const { return zk_; }

    // Runs argv inside node n's network namespace.
    CommandResult in_node(int n, const std::vector<std::string>& argv) const;

    // PID of node n's libvirtd (the test may SIGSTOP/SIGCONT it); -1 if not running.
    int libvirtd_pid(int n) const;

    void start_daemon(int n);
    void stop_daemon(int n);
    bool daemon_running(int n) const;
    // Waits until node n's daemonstate is `run`; false on timeout.
    bool wait_daemon_run(int n, std::chrono::milliseconds timeout) const;

    // Node n's BMC (LabOptions::fencing): its address, and `ipmitool ... chassis
    // power <op>` run against it as a client would (off|on|status).
    std::string bmc_addr(int n) const;
    CommandResult chassis_power(int n, const std::string& op) const;
    // What the BMC did (tools/lab/chassis.sh's log).
    std::string chassis_log(int n) const;
    std::string daemon_log(int n) const;
    // The daemons' output, for failure messages.
    std::string all_daemon_logs() const;

private:
    CommandResult script(const std::string& name, const std::vector<std::string>& args) const;
    void must(const std::string& name, const std::vector<std::string>& args) const;
    void teardown() noexcept;

    LabOptions options_;
    std::filesystem::path tools_, dir_, console_dir_;
    std::string zk_hosts_, domain_type_;
    std::shared_ptr<zk::Session> zk_;
    bool owns_dir_ = false;
};

// A read-only libvirt view of one node (what the test checks reality with).
class NodeView {
public:
    explicit NodeView(const std::string& uri);
    ~NodeView();
    // libvirt state of the domain (VIR_DOMAIN_*), nullopt when absent.
    std::optional<int> state(const std::string& uuid);
    bool running(const std::string& uuid) { return state(uuid) == VIR_DOMAIN_RUNNING; }
    // libvirt domain id (changes with each new QEMU), -1 when absent/inactive.
    int id(const std::string& uuid);
    // virDomainDestroy behind the daemon's back; true on success.
    bool destroy(const std::string& uuid);
    // Suspends and resumes the guest: two lifecycle events, nothing else changes.
    bool pause_and_resume(const std::string& uuid);
    // False once the node's libvirtd is gone (its power was cut).
    bool connected() const;

private:
    std::string uri_;
    virConnectPtr conn_ = nullptr;
};

// What a PVC client writes (docs/wire-contract.md §5.10).
class Client {
public:
    explicit Client(std::shared_ptr<zk::Session> zk) : zk_(std::move(zk)) {}
    // define: every key of /domains/<uuid> in one transaction.
    void define(const std::string& uuid, const std::string& name, const std::string& xml,
                const std::string& node, const std::string& state = "stop",
                const std::string& migration_method = "none");
    // change_state(S): lock /state, write, hold 0.5 s, release.
    void change_state(const std::string& uuid, const std::string& state);
    // migrate/move/unmigrate: under the state lock, state (kept unless `start`),
    // node and lastnode in one write.
    void migrate(const std::string& uuid, const std::string& target, const std::string& lastnode,
                 bool live = false);
    std::string get(const std::string& key, const std::string& uuid) const;
    std::string node_key(const std::string& key, const std::string& node) const;

private:
    std::shared_ptr<zk::Session> zk_;
};

// A 64 MiB disk-less guest (SeaBIOS only, so it ignores ACPI power-off),
// serial console on a pty logged to <console_dir>/<name>.log (PVC's convention).
std::string tiny_domain_xml(const std::string& type, const std::string& name, const std::string& uuid,
                            const std::filesystem::path& console_dir);

// A fresh random UUID (lowercase 8-4-4-4-12).
std::string random_uuid();

// Polls `pred` every `step` until true or `timeout`; returns the last result.
template <class Pred>
bool wait_for(Pred pred, std::chrono::milliseconds timeout,
              std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
        if (pred()) return true;
        std::this_thread::sleep_for(step);
    }
    return pred();
}

// Seconds since `t0`.
inline double since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// True if `word` is one of the space-separated items of `list`.
inline bool contains_word(const std::string& list, const std::string& word) {
    return (" " + list + " ").find(" " + word + " ") != std::string::npos;
}

}  // namespace pvc::e2e
