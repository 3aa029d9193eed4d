// A private mini Ceph for tests (Debian's Ceph 16.2): one monitor, one
// manager and N memstore OSDs, every file under a fresh temporary directory,
// every daemon on 127.0.0.1 (the monitor on free ports), cephx on, /etc/ceph
// never read or written. Started by the constructor (it waits for HEALTH_OK
// and an `rbd` pool active+clean), torn down by the destructor.
//
// Leftovers of an earlier run that died without its destructor (its daemons
// die with it through PR_SET_PDEATHSIG; a directory may stay) are removed by
// the next constructor: a directory whose owner process is gone goes, and any
// daemon still running from it is killed.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "pvc/test/zk_server.hpp"

namespace pvc::test {

class CephCluster {
public:
    explicit CephCluster(int osds = 1);
    ~CephCluster();
    CephCluster(const CephCluster&) = delete;
    CephCluster& operator=(const CephCluster&) = delete;

    const std::filesystem::path& conf() const;      // ceph.conf (client.admin keyring named in [client])
    const std::filesystem::path& keyring() const;   // client.admin keyring
    const std::filesystem::path& dir() const;
    std::string fsid() const;
    int osds() const;

    // `ceph -c <conf> args...` / `rbd -c <conf> args...` (argv, no shell).
    ProcResult ceph(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(60)) const;
    ProcResult rbd(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(60)) const;
    ProcResult rados(const std::vector<std::string>& args, std::chrono::seconds timeout = std::chrono::seconds(60)) const;

    // A replicated pool of size 1, initialised for RBD, active+clean on return.
    void create_pool(const std::string& name, int pgs = 8);

    // The monitor's outage: SIGTERM and wait / start again on the same ports
    // and data (returns once it answers `mon stat`).
    void stop_mon();
    void start_mon();

    // Waits until `ceph health` reports HEALTH_OK; throws with `ceph -s` on timeout.
    void wait_health_ok(std::chrono::seconds timeout = std::chrono::seconds(120)) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pvc::test
