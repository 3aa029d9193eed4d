// A private mini Ceph per test run (see ceph_cluster.hpp).
#include "pvc/test/ceph_cluster.hpp"

#include "pvc/test/ports.hpp"
#include "pvc/test/process_group.hpp"
#include "pvc/strings.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace pvc::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* dir_prefix = "pvc-ceph-";

std::string read_file(const fs::path& p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

void write_file(const fs::path& p, const std::string& s) {
    std::ofstream f(p);
    f << s;
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

bool process_alive(pid_t pid) { return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM); }

// Removes the directories of earlier runs whose owner is gone, killing any
// daemon still running from one (only a process whose command line names
// that directory: a recycled pid is left alone).
void remove_leftovers() {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(fs::temp_directory_path(), ec)) {
        const auto name = entry.path().filename().string();
        if (name.rfind(dir_prefix, 0) != 0 || !entry.is_directory(ec)) continue;
        pid_t owner = 0;
        try {
            owner = static_cast<pid_t>(std::stol(read_file(entry.path() / "owner")));
        } catch (...) {
            // No owner file: a directory still being created, or a crash
            // before it was written; only remove it when it is old.
            auto age = fs::file_time_type::clock::now() - fs::last_write_time(entry.path(), ec);
            if (ec || age < std::chrono::minutes(10)) continue;
        }
        if (owner > 0 && process_alive(owner)) continue;
        for (const auto& f : fs::directory_iterator(entry.path(), ec)) {
            if (f.path().extension() != ".pid") continue;
            pid_t pid = 0;
            try {
                pid = static_cast<pid_t>(std::stol(read_file(f.path())));
            } catch (...) {
                continue;
            }
            std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
            if (pid > 0 && cmdline.find(entry.path().string()) != std::string::npos) ::kill(pid, SIGKILL);
        }
        fs::remove_all(entry.path(), ec);
    }
}

// One Ceph daemon in the foreground; its pid file lets a later run kill it
// when this process died without cleaning up.
class Daemon {
public:
    Daemon(std::string name, std::vector<std::string> argv, fs::path dir)
        : name_(std::move(name)), dir_(std::move(dir)), proc_(std::move(argv), dir_ / "log" / (name_ + ".out")) {}

    void spawn() {
        if (proc_.alive()) return;
        proc_.spawn();
        write_file(dir_ / (name_ + ".pid"), std::to_string(proc_.pid()));
    }
    // SIGTERM, then SIGKILL after `grace`.
    void stop(std::chrono::milliseconds grace) { proc_.stop(SIGTERM, grace); }

private:
    std::string name_;
    fs::path dir_;
    ProcessGroup proc_;
};

}  // namespace

struct CephCluster::Impl {
    TempDir tmp{"pvc-ceph"};
    fs::path dir, conf, keyring;
    std::string fsid;
    int osds = 1;
    int port_v2 = 0, port_v1 = 0;
    std::unique_ptr<Daemon> mon, mgr;
    std::vector<std::unique_ptr<Daemon>> osd;

    std::vector<std::string> with_conf(const char* tool, const std::vector<std::string>& args) const {
        std::vector<std::string> argv{tool, "-c", conf.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return argv;
    }

    ProcResult must(const std::vector<std::string>& argv, std::chrono::seconds timeout = std::chrono::seconds(60)) const {
        auto r = run_command(argv, timeout);
        if (r.status != 0) {
            std::string cmd;
            for (const auto& a : argv) cmd += a + " ";
            throw std::runtime_error("mini ceph: `" + cmd + "` failed (" + std::to_string(r.status) + "): " + r.err + r.out);
        }
        return r;
    }

    // Polls `pred` every 100 ms until true or `timeout` (scaled for sanitizer builds).
    template <class Pred>
    void wait_for(const std::string& what, Pred pred, std::chrono::seconds timeout = std::chrono::seconds(90)) const {
        auto end = Clock::now() + scaled(std::chrono::milliseconds(timeout));
        while (Clock::now() < end) {
            if (pred()) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        auto status = run_command(with_conf("ceph", {"--connect-timeout", "5", "-s"}), std::chrono::seconds(10));
        throw std::runtime_error("mini ceph: timed out waiting for " + what + "\n" + status.out + status.err);
    }

    bool answers(const std::vector<std::string>& args, const std::string& needle = "") const {
        auto argv = with_conf("ceph", {"--connect-timeout", "2"});
        argv.insert(argv.end(), args.begin(), args.end());
        auto r = run_command(argv, std::chrono::seconds(10));
        return r.status == 0 && (needle.empty() || r.out.find(needle) != std::string::npos);
    }

    void write_conf() {
        std::string mon_host =
            "[v2:127.0.0.1:" + std::to_string(port_v2) + ",v1:127.0.0.1:" + std::to_string(port_v1) + "]";
        std::string d = dir.string();
        write_file(conf,
                   "[global]\n"
                   "fsid = " + fsid + "\n"
                   "mon host = " + mon_host + "\n"
                   "public addr = 127.0.0.1\n"
                   "ms bind ipv6 = false\n"
                   "run dir = " + d + "/run\n"
                   "admin socket = " + d + "/run/$name.asok\n"
                   "log file = " + d + "/log/$name.log\n"
                   "pid file = " + d + "/run/$name.pid\n"
                   "log to stderr = false\n"
                   "err to stderr = false\n"
                   "mon data = " + d + "/mon/$name\n"
                   "mgr data = " + d + "/mgr/$name\n"
                   "osd data = " + d + "/osd/$name\n"
                   // One OSD, one copy: a healthy cluster without redundancy.
                   "osd pool default size = 1\n"
                   "osd pool default min size = 1\n"
                   "osd pool default pg autoscale mode = off\n"
                   "osd crush chooseleaf type = 0\n"
                   "mon allow pool size one = true\n"
                   "mon allow pool delete = true\n"
                   "mon warn on pool no redundancy = false\n"
                   "auth allow insecure global id reclaim = false\n"
                   // Must satisfy nearfull < backfillfull < full < 0.97, or HEALTH_ERR.
                   "mon_osd_full_ratio = .95\n"
                   "mon_osd_nearfull_ratio = .90\n"
                   "mon_osd_backfillfull_ratio = .92\n"
                   "osd objectstore = memstore\n"
                   "memstore device bytes = 1073741824\n"
                   "osd memory target = 536870912\n"
                   "osd op num shards = 1\n"
                   "osd op num threads per shard = 2\n"
                   "[client]\n"
                   "keyring = " + keyring.string() + "\n"
                   "[mon]\n"
                   "keyring = " + keyring.string() + "\n"
                   "mon data avail warn = 1\n"
                   "mon data avail crit = 0\n"
                   // The mgr and OSDs need their own keyrings, or "failed to fetch mon config".
                   "[mgr]\n"
                   "keyring = " + d + "/mgr/$name/keyring\n"
                   "[osd]\n"
                   "keyring = " + d + "/osd/$name/keyring\n");
    }

    void start(int n) {
        osds = n;
        dir = tmp.path();
        conf = dir / "ceph.conf";
        keyring = dir / "keyring";
        write_file(dir / "owner", std::to_string(getpid()));
        for (const char* sub : {"run", "log", "mon", "mgr", "osd"}) fs::create_directories(dir / sub);
        fsid = trim(read_file("/proc/sys/kernel/random/uuid"));
        port_v2 = reserve_port();
        port_v1 = reserve_port();
        write_conf();
        std::string k = keyring.string();
        must({"ceph-authtool", "--create-keyring", k, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"});
        must({"ceph-authtool", k, "--gen-key", "-n", "client.admin", "--cap", "mon", "allow *", "--cap", "osd",
              "allow *", "--cap", "mgr", "allow *", "--cap", "mds", "allow *"});
        std::string monmap = (dir / "monmap").string();
        must({"monmaptool", "--create", "--fsid", fsid, "--addv", "a",
              "[v2:127.0.0.1:" + std::to_string(port_v2) + ",v1:127.0.0.1:" + std::to_string(port_v1) + "]", monmap});
        must({"ceph-mon", "-c", conf.string(), "--mkfs", "-i", "a", "--monmap", monmap, "--keyring", k});
        mon = std::make_unique<Daemon>("mon", std::vector<std::string>{"ceph-mon", "-c", conf.string(), "-i", "a", "-f"}, dir);
        mon->spawn();
        wait_for("the monitor", [&] { return answers({"mon", "stat"}); });

        fs::create_directories(dir / "mgr" / "mgr.x");
        must(with_conf("ceph", {"auth", "get-or-create", "mgr.x", "mon", "allow profile mgr", "osd", "allow *", "mds",
                                "allow *", "-o", (dir / "mgr" / "mgr.x" / "keyring").string()}));
        mgr = std::make_unique<Daemon>("mgr", std::vector<std::string>{"ceph-mgr", "-c", conf.string(), "-i", "x", "-f"}, dir);
        mgr->spawn();

        for (int i = 0; i < n; ++i) {
            std::string uuid = trim(read_file("/proc/sys/kernel/random/uuid"));
            fs::path odir = dir / "osd" / ("osd." + std::to_string(i));
            fs::create_directories(odir);
            std::string okey = (odir / "keyring").string();
            must({"ceph-authtool", "--create-keyring", okey, "--gen-key", "-n", "osd." + std::to_string(i)});
            std::string secret = trim(must({"ceph-authtool", "-p", "-n", "osd." + std::to_string(i), okey}).out);
            write_file(odir / "new.json", "{\"cephx_secret\": \"" + secret + "\"}");
            std::string id = trim(must(with_conf("ceph", {"osd", "new", uuid, "-i", (odir / "new.json").string()})).out);
            must({"ceph-osd", "-c", conf.string(), "-i", id, "--mkfs", "--osd-uuid", uuid});
            auto d = std::make_unique<Daemon>("osd." + id,
                                              std::vector<std::string>{"ceph-osd", "-c", conf.string(), "-i", id, "-f"}, dir);
            d->spawn();
            osd.push_back(std::move(d));
        }
        wait_for(std::to_string(n) + " OSDs up",
                 [&] { return answers({"osd", "stat", "-f", "json"}, "\"num_up_osds\":" + std::to_string(n) + ","); });
        create_pool("rbd", 8);
        wait_for("the manager", [&] { return answers({"mgr", "stat"}, "\"available\": true"); });
    }

    bool pgs_clean() const {
        auto r = run_command(with_conf("ceph", {"--connect-timeout", "2", "pg", "stat"}), std::chrono::seconds(10));
        // "N pgs: N active+clean; ..." (any count: the mgr makes a pool of its own)
        std::istringstream in(r.out);
        std::string total, pgs, clean_count, clean_state;
        in >> total >> pgs >> clean_count >> clean_state;
        if (!clean_state.empty() && clean_state.back() == ';') clean_state.pop_back();
        return r.status == 0 && pgs == "pgs:" && total == clean_count && clean_state == "active+clean";
    }

    void create_pool(const std::string& name, int pgs) {
        must(with_conf("ceph", {"osd", "pool", "create", name, std::to_string(pgs), std::to_string(pgs)}));
        must(with_conf("rbd", {"pool", "init", name}));
        wait_for("pool " + name + " active+clean", [&] { return pgs_clean(); });
    }
};

CephCluster::CephCluster(int osds) {
    remove_leftovers();
    impl_ = std::make_unique<Impl>();
    impl_->start(osds);
    wait_health_ok();
}

CephCluster::~CephCluster() {
    if (!impl_) return;
    // OSDs and manager first, so none of them logs a lost monitor for long.
    for (auto& d : impl_->osd) d->stop(std::chrono::seconds(5));
    if (impl_->mgr) impl_->mgr->stop(std::chrono::seconds(5));
    if (impl_->mon) impl_->mon->stop(std::chrono::seconds(5));
}

const fs::path& CephCluster::conf() const { return impl_->conf; }
const fs::path& CephCluster::keyring() const { return impl_->keyring; }
const fs::path& CephCluster::dir() const { return impl_->dir; }
std::string CephCluster::fsid() const { return impl_->fsid; }
int CephCluster::osds() const { return impl_->osds; }

ProcResult CephCluster::ceph(const std::vector<std::string>& args, std::chrono::seconds timeout) const {
    return run_command(impl_->with_conf("ceph", args), timeout);
}
ProcResult CephCluster::rbd(const std::vector<std::string>& args, std::chrono::seconds timeout) const {
    return run_command(impl_->with_conf("rbd", args), timeout);
}
ProcResult CephCluster::rados(const std::vector<std::string>& args, std::chrono::seconds timeout) const {
    return run_command(impl_->with_conf("rados", args), timeout);
}

void CephCluster::create_pool(const std::string& name, int pgs) { impl_->create_pool(name, pgs); }

void CephCluster::stop_mon() { impl_->mon->stop(std::chrono::seconds(10)); }

void CephCluster::start_mon() {
    impl_->mon->spawn();
    impl_->wait_for("the monitor", [&] { return impl_->answers({"mon", "stat"}); });
}

void CephCluster::wait_health_ok(std::chrono::seconds timeout) const {
    impl_->wait_for("HEALTH_OK", [&] { return impl_->answers({"health"}, "HEALTH_OK"); }, timeout);
}

}  // namespace pvc::test
