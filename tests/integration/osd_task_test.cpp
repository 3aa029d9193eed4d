// The OSD node tasks and the storage benchmark (osd_tasks.hpp) on real block
// devices: loop devices over sparse files, real LVM metadata, the real
// `ceph-volume lvm` against a private mini Ceph, bluestore OSDs that come up
// and take data. Run through a real task runner, as the daemon runs them.
//
// This machine's kernel has no device-mapper, so an LV cannot be activated.
// The test makes up for it, and for the absent systemd, with three things
// confined to this process and its children:
//   - LVM runs with `global/activation = 0` (LVM_SYSTEM_DIR: a configuration
//     that also sees only this test's loop devices), and stand-ins for
//     `lvcreate`/`lvremove`/`vgremove` first on PATH expose each LV's bytes as
//     a loop device over its extents on the PV, linked at /dev/<vg>/<lv>;
//   - a `systemctl` stand-in runs ceph-osd@<id> units as plain processes;
//   - a private mount namespace (unshare in main) in which /var/lib/ceph is
//     a directory of the test's own, so the OSD data directories, their tmpfs
//     mounts and the bootstrap keyring never touch the machine's.
// Everything the test makes carries the prefix `pvc-osdtask` (its temporary
// directory, the loop devices' files); a run that died without cleaning up
// is cleaned up by the next one.
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cluster_view.hpp"
#include "osd_tasks.hpp"
#include "routes.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using namespace pvc::storage;
using pvc::schema::path;
namespace fs = std::filesystem;

namespace {

constexpr const char* prefix = "pvc-osdtask";

std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const fs::path& p, const std::string& s, fs::perms mode = fs::perms::owner_read | fs::perms::owner_write) {
    std::ofstream(p) << s;
    fs::permissions(p, mode);
}

pvc::test::ProcResult sh(const std::vector<std::string>& argv, std::chrono::seconds t = 120s) {
    return pvc::test::run_command(argv, t);
}

// ---- the stand-ins (POSIX sh) ----

const char* lvcreate_sh = R"SH(#!/bin/sh
# lvcreate without device-mapper: the metadata through the real one, the
# LV's extents exposed as a loop device linked at /dev/<vg>/<lv>.
set -e
/usr/sbin/lvcreate -Zn -Wn "$@"
name=""; prev=""; last=""
for a in "$@"; do
  if [ "$prev" = "-n" ] || [ "$prev" = "--name" ]; then name="$a"; fi
  prev="$a"; last="$a"
done
vg="${last%%/*}"
set -- $(/usr/sbin/lvs --noheadings --units b --nosuffix -o devices,lv_size "$vg/$name" 2>/dev/null)
dev="${1%%(*}"; start="${1##*(}"; start="${start%)}"; size="$2"
ext=$(/usr/sbin/vgs --noheadings --units b --nosuffix -o vg_extent_size "$vg" 2>/dev/null | tr -d ' ')
pe=$(/usr/sbin/pvs --noheadings --units b --nosuffix -o pe_start "$dev" 2>/dev/null | tr -d ' ')
loop=$(losetup --show -f --offset $((pe + start * ext)) --sizelimit "$size" "$dev")
# A second node of the loop device named like device-mapper's (ceph-volume
# takes an LV path that resolves to anything else for a plain disk).
minor=$(stat -c %T "$loop"); minor=$(printf %d 0x$minor)
node="/dev/pvc-osdtask-dm-$minor"
rm -f "$node"; mknod "$node" b 7 "$minor"
mkdir -p "/dev/$vg"
ln -sfn "$node" "/dev/$vg/$name"
echo "$loop $node" > "$PVC_OSD_LVMAP/$vg@$name"
)SH";

const char* lvremove_sh = R"SH(#!/bin/sh
for a in "$@"; do
  case "$a" in -*) continue;; esac
  p="${a#/dev/}"; vg="${p%%/*}"; lv="${p#*/}"
  f="$PVC_OSD_LVMAP/$vg@$lv"
  if [ -f "$f" ]; then read -r l n < "$f"; losetup -d "$l" 2>/dev/null; rm -f "$n" "$f" "/dev/$vg/$lv"; rmdir "/dev/$vg" 2>/dev/null; fi
done
exec /usr/sbin/lvremove "$@"
)SH";

const char* vgremove_sh = R"SH(#!/bin/sh
for a in "$@"; do
  case "$a" in -*) continue;; esac
  for f in "$PVC_OSD_LVMAP/$a@"*; do
    [ -f "$f" ] || continue
    lv="${f##*@}"; read -r l n < "$f"; losetup -d "$l" 2>/dev/null; rm -f "$n" "$f" "/dev/$a/$lv"
  done
  rmdir "/dev/$a" 2>/dev/null
done
exec /usr/sbin/vgremove "$@"
)SH";

const char* systemctl_sh = R"SH(#!/bin/sh
# systemd's part for ceph-osd@<id> units: plain processes; anything else succeeds.
cmd="$1"; shift
while [ "${1#-}" != "$1" ]; do shift; done
unit="${1%.service}"
case "$unit" in ceph-osd@*) id="${unit#ceph-osd@}";; *) exit 0;; esac
pidf="$PVC_OSD_RUN/ceph-osd@$id.pid"
alive() { [ -f "$pidf" ] && kill -0 "$(cat "$pidf")" 2>/dev/null; }
case "$cmd" in
  start) alive && exit 0
         setsid ceph-osd -f --cluster ceph -i "$id" --osd-data "/var/lib/ceph/osd/ceph-$id" \
           --keyring "/var/lib/ceph/osd/ceph-$id/keyring" >"$PVC_OSD_RUN/ceph-osd@$id.out" 2>&1 </dev/null &
         echo $! > "$pidf" ;;
  stop) if alive; then
          kill "$(cat "$pidf")"; i=0
          while alive && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
          alive && kill -9 "$(cat "$pidf")"
        fi
        rm -f "$pidf" ;;
  status|is-active) alive ;;
  *) exit 0 ;;
esac
)SH";

bool alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

// What one test directory left behind: its OSD processes, LV loops and their
// /dev links, its disk loops. Only what this directory's files name.
void clean_dir(const fs::path& dir) {
    std::error_code ec;
    for (const auto& f : fs::directory_iterator(dir / "run", ec))
        if (f.path().extension() == ".pid") {
            pid_t pid = 0;
            try {
                pid = std::stoi(slurp(f.path()));
            } catch (...) {
            }
            std::string cmd = slurp("/proc/" + std::to_string(pid) + "/cmdline");
            if (alive(pid) && cmd.rfind("ceph-osd", 0) == 0) ::kill(pid, SIGKILL);
        }
    for (const auto& f : fs::directory_iterator(dir / "lvmap", ec)) {
        std::string name = f.path().filename().string();
        auto at = name.find('@');
        auto w = pvc::words(slurp(f.path()));
        if (!w.empty()) sh({"losetup", "-d", w[0]});
        if (w.size() > 1 && w[1].rfind("/dev/pvc-osdtask-dm-", 0) == 0) fs::remove(w[1], ec);
        if (at != std::string::npos) {
            fs::remove(fs::path("/dev") / name.substr(0, at) / name.substr(at + 1), ec);
            fs::remove(fs::path("/dev") / name.substr(0, at), ec);  // only when empty
        }
    }
    for (const auto& f : fs::directory_iterator(dir, ec))
        if (f.path().extension() == ".img")
            for (const auto& line : pvc::split(sh({"losetup", "-j", f.path().string()}).out, '\n'))
                if (auto colon = line.find(':'); colon != std::string::npos) sh({"losetup", "-d", line.substr(0, colon)});
}

void remove_leftovers() {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
        if (e.path().filename().string().rfind(prefix, 0) != 0) continue;
        pid_t owner = 0;
        try {
            owner = std::stoi(slurp(e.path() / "owner"));
        } catch (...) {
        }
        if (alive(owner)) continue;
        clean_dir(e.path());
        fs::remove_all(e.path(), ec);
    }
}

class OsdTasks : public ::testing::Test {
protected:
    static inline pvc::test::TempDir* dir = nullptr;
    static inline pvc::test::ZkServer* zk = nullptr;
    static inline pvc::test::CephCluster* ceph = nullptr;
    static inline std::shared_ptr<pvc::zk::Session> session;
    static inline std::shared_ptr<pvc::tasks::Runner> runner;
    static inline OsdTaskHandles handles;
    static inline std::map<std::string, std::string> disk;  // name -> /dev/loopN
    static inline std::string node;
    static inline pvc::Logger log;
    // The API's routes (routes_osd.cpp) on the same ZooKeeper, called directly.
    static inline std::unique_ptr<pvc::api::ClusterView> view;
    static inline pvc::api::DaemonFigures figures;
    static inline std::unique_ptr<pvc::api::Api> api;

    static fs::path d() { return dir->path(); }

    static std::string make_disk(const std::string& name, const std::string& size) {
        fs::path img = d() / (std::string(prefix) + "-" + name + ".img");
        EXPECT_EQ(sh({"truncate", "-s", size, img.string()}).status, 0);
        auto r = sh({"losetup", "--show", "-f", "-P", img.string()});
        EXPECT_EQ(r.status, 0) << r.err;
        return pvc::trim(r.out);
    }

    static void SetUpTestSuite() {
        remove_leftovers();
        dir = new pvc::test::TempDir(prefix);
        spit(d() / "owner", std::to_string(getpid()));
        fs::permissions(d(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
        for (const char* sub : {"bin", "lvm", "lvmap", "run", "varlib/bootstrap-osd", "varlib/osd", "varlib/tmp", "varlib/crash"})
            fs::create_directories(d() / sub);
        fs::permissions(d() / "run", fs::perms::all | fs::perms::sticky_bit);
        const auto exec = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                          fs::perms::others_exec;
        spit(d() / "bin" / "lvcreate", lvcreate_sh, exec);
        spit(d() / "bin" / "lvremove", lvremove_sh, exec);
        spit(d() / "bin" / "vgremove", vgremove_sh, exec);
        spit(d() / "bin" / "systemctl", systemctl_sh, exec);
        ASSERT_EQ(::mount(d().string().append("/varlib").c_str(), "/var/lib/ceph", nullptr, MS_BIND, nullptr), 0)
            << "bind mount over /var/lib/ceph: " << std::strerror(errno);

        // The disks: two for OSDs (ceph-volume wants 5 GB at least), one
        // for the DB volume group, one holding somebody's filesystem.
        for (const auto& [name, size] : std::vector<std::pair<std::string, std::string>>{
                 {"a", "6G"}, {"c", "6G"}, {"db", "1G"}, {"fs", "64M"}})
            disk[name] = make_disk(name, size);
        std::string accept;
        for (const auto& [_, dev] : disk) accept += "\"a|^" + dev + "(p1)?$|\", ";
        spit(d() / "lvm" / "lvm.conf",
             "global { activation = 0 }\n"
             "devices { filter = [ " + accept + "\"r|.*|\" ] global_filter = [ " + accept +
                 "\"r|.*|\" ] obtain_device_list_from_udev = 0 use_devicesfile = 0 }\n"
                 "activation { udev_sync = 0 udev_rules = 0 }\n");
        std::string path_env = d().string() + "/bin:" + (std::getenv("PATH") ? std::getenv("PATH") : "/usr/sbin:/usr/bin");
        ::setenv("PATH", path_env.c_str(), 1);
        ::setenv("LVM_SYSTEM_DIR", (d() / "lvm").c_str(), 1);
        ::setenv("CEPH_VOLUME_ALLOW_LOOP_DEVICES", "1", 1);
        ::setenv("LVM_SUPPRESS_FD_WARNINGS", "1", 1);
        ::setenv("PVC_OSD_LVMAP", (d() / "lvmap").c_str(), 1);
        ::setenv("PVC_OSD_RUN", (d() / "run").c_str(), 1);

        ceph = new pvc::test::CephCluster(1);
        std::string mon_host;
        for (const auto& line : pvc::split(slurp(ceph->conf()), '\n'))
            if (line.rfind("mon host = ", 0) == 0) mon_host = line.substr(11);
        std::string run = (d() / "run").string();
        spit(d() / "ceph.conf",
             "[global]\nfsid = " + ceph->fsid() + "\nmon host = " + mon_host +
                 "\npublic addr = 127.0.0.1\nms bind ipv6 = false\n"
                 "run dir = " + run + "\nadmin socket = " + run + "/$cluster-$name.asok\nlog file = " + run +
                 "/$name.log\nlog to stderr = false\nerr to stderr = false\n"
                 "[client]\nkeyring = " + ceph->keyring().string() +
                 "\n[osd]\nosd crush update on start = false\nbluestore cache autotune = false\n"
                 "bluestore cache size = 67108864\nbluestore fsck on mkfs = false\nosd memory target = 536870912\n"
                 "osd op num shards = 1\nosd op num threads per shard = 2\n",
             fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
        ::setenv("CEPH_CONF", (d() / "ceph.conf").c_str(), 1);
        auto boot = ceph->ceph({"auth", "get-or-create", "client.bootstrap-osd", "mon", "allow profile bootstrap-osd", "-o",
                                "/var/lib/ceph/bootstrap-osd/ceph.keyring"});
        ASSERT_EQ(boot.status, 0) << boot.err;

        zk = new pvc::test::ZkServer();
        session = pvc::zk::Session::connect({zk->hosts()});
        pvc::init_cluster(*session);
        node = pvc::test::unique_name("hv");
        session->write(path("node.name", {node}), "");
        session->write({{path("pool.name", {"rbd"}), ""}, {path("pool.stats", {"rbd"}), "{}"}, {path("base.volume") + "/rbd", ""},
                        {path("base.snapshot") + "/rbd", ""}});

        OsdTaskOptions o;
        o.node = node;
        o.ceph_config_file = (d() / "ceph.conf").string();
        o.ceph_admin_keyring = ceph->keyring().string();
        o.stats_timeout = 0s;        // no primary's collector here
        o.safe_timeout = 30s;
        o.benchmark_runtime = 1s;
        o.benchmark_size = "64M";
        runner = std::make_shared<pvc::tasks::Runner>(pvc::zk::Session::connect({zk->hosts()}), node, log);
        handles = register_osd_tasks(*runner, session, o, log);
        runner->start();

        view = std::make_unique<pvc::api::ClusterView>(session);
        view->start();
        ASSERT_TRUE(view->wait_ready(std::chrono::seconds(30)));
        pvc::api::ApiSettings as;
        as.node = node;
        as.coordinator = true;
        as.auth_enabled = false;
        api = std::make_unique<pvc::api::Api>(session, *view, as, log, figures);
        ::setenv("PVC_ZOOKEEPER", zk->hosts().c_str(), 1);  // for `pvc`
    }

    static void TearDownTestSuite() {
        api.reset();
        if (view) view->stop();
        view.reset();
        if (runner) runner->stop();
        handles.handles.clear();
        runner.reset();
        session.reset();
        if (dir) clean_dir(d());
        ::umount2("/var/lib/ceph", MNT_DETACH);
        delete zk;
        delete ceph;
        delete dir;
        zk = nullptr;
        ceph = nullptr;
        dir = nullptr;
    }

    // Queues `name` on this node and waits for the end.
    static pvc::tasks::Progress run_task(const std::string& name, const nlohmann::json& kwargs, std::chrono::seconds bound = 300s) {
        auto q = pvc::tasks::submit(*session, name, node, kwargs);
        pvc::tasks::Progress p;
        pvc::test::eventually([&] {
            p = pvc::tasks::progress(*session, q.id);
            return p.state == "SUCCESS" || p.state == "FAILURE";
        }, bound);
        return p;
    }

    static bool ceph_has(const std::string& id) {
        auto r = ceph->ceph({"osd", "ls"});
        for (const auto& l : pvc::split(r.out, '\n'))
            if (pvc::trim(l) == id) return true;
        return false;
    }
    static bool up_in(const std::string& id) {
        auto r = ceph->ceph({"osd", "dump", "--format", "json"});
        auto j = json_in_output(r.out);
        if (!j) return false;
        for (const auto& o : (*j)["osds"])
            if (std::to_string(o.value("osd", -1)) == id) return o.value("up", 0) == 1 && o.value("in", 0) == 1;
        return false;
    }
    static std::string signatures(const std::string& dev) { return pvc::trim(sh({"wipefs", "--no-act", dev}).out); }
    static std::string sha(const std::string& dev) { return sh({"sha256sum", dev}).out; }
    static std::string zkget(const std::string& p) { return session->get(p).value_or("<absent>"); }

    // An API request (no body; parameters in the query string): status and JSON body.
    static std::pair<unsigned, nlohmann::json> http(const std::string& method, const std::string& target) {
        pvc::api::HttpRequest req;
        req.method = method;
        req.target = "/api/v1" + target;
        req.peer = "127.0.0.1";
        std::stop_source stop;
        auto res = api->handle(req, stop.get_token());
        nlohmann::json body;
        try {
            body = nlohmann::json::parse(res.body);
        } catch (const std::exception&) {
            body = res.body;
        }
        return {res.status, body};
    }
    // Follows a task the API queued (its 202 body) to the end.
    static pvc::tasks::Progress follow(const nlohmann::json& accepted, std::chrono::seconds bound = 300s) {
        pvc::tasks::Progress p;
        std::string id = accepted.value("task_id", "");
        pvc::test::eventually([&] {
            p = pvc::tasks::progress(*session, id);
            return p.state == "SUCCESS" || p.state == "FAILURE";
        }, bound);
        return p;
    }
    // `pvc args...` (the CLI against this ZooKeeper): exit status and output.
    static pvc::test::ProcResult pvc_cli(std::vector<std::string> args) {
        const char* build = std::getenv("PVC_BUILD_DIR");
        args.insert(args.begin(), (build ? std::string(build) : std::string(".")) + "/bin/pvc");
        return sh(args, 600s);
    }

    // The single id in "Successfully created 1 new OSD(s) <id> on device <dev>".
    static std::string created_id(const std::string& status) {
        auto w = pvc::words(status);
        return w.size() > 5 ? w[5] : "";
    }
};

// First: the shared `rbd` pool's placement groups are still on the mini
// Ceph's own OSD only.
TEST_F(OsdTasks, BenchmarkKeepsItsResults) {
    EXPECT_EQ(http("GET", "/storage/ceph/benchmark").first, 404u);
    // Queued on the primary: this test's node is it.
    session->write(path("base.config.primary_node"), node);
    auto [code, accepted] = http("POST", "/storage/ceph/benchmark?pool=rbd");
    ASSERT_EQ(code, 202u) << accepted.dump();
    EXPECT_EQ(accepted["task_name"], "storage.benchmark");
    EXPECT_EQ(accepted["run_on"], node);
    auto b = follow(accepted, 600s);
    ASSERT_EQ(b.state, "SUCCESS") << b.status;
    auto jobs = session->children(benchmarks_path).value_or(std::vector<std::string>{});
    ASSERT_EQ(jobs.size(), 1u);
    EXPECT_EQ(b.status, "Storage benchmark " + jobs[0] + " completed successfully");
    auto rec = nlohmann::json::parse(zkget(std::string(benchmarks_path) + "/" + jobs[0]));
    EXPECT_EQ(rec["test_format"], 1);
    EXPECT_EQ(rec["job"], jobs[0]);
    for (const char* t : {"seq_read", "seq_write", "rand_read_4M", "rand_write_4M", "rand_read_4K", "rand_write_4K",
                          "rand_read_4K_lowdepth", "rand_write_4K_lowdepth"}) {
        ASSERT_TRUE(rec["benchmark_result"].contains(t)) << t;
        EXPECT_EQ(rec["benchmark_result"][t]["jobs"][0]["jobname"], t);
    }
    EXPECT_GT(rec["benchmark_result"]["seq_write"]["jobs"][0]["write"]["io_bytes"].get<long>(), 0);
    // The temporary volume is gone, in Ceph and ZooKeeper.
    EXPECT_EQ(ceph->rbd({"info", "rbd/pvcbenchmark"}).status != 0, true);
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", "pvcbenchmark"})));

    // Read back as the reference client reads it.
    auto [gcode, list] = http("GET", "/storage/ceph/benchmark");
    ASSERT_EQ(gcode, 200u);
    ASSERT_EQ(list.size(), 1u);
    EXPECT_EQ(list[0]["job"], jobs[0]);
    EXPECT_EQ(list[0]["test_format"], 1);
    EXPECT_TRUE(list[0]["benchmark_result"]["rand_read_4K"]["jobs"][0]["read"].contains("iops"));
    EXPECT_EQ(http("GET", "/storage/ceph/benchmark?job=" + jobs[0]).first, 200u);
    EXPECT_EQ(http("GET", "/storage/ceph/benchmark?job=nosuchjob").first, 404u);
    auto cli = pvc_cli({"storage", "benchmark", "info", jobs[0]});
    EXPECT_EQ(cli.status, 0) << cli.err;
    EXPECT_NE(cli.out.find("rand_write_4K_lowdepth"), std::string::npos) << cli.out;
    cli = pvc_cli({"storage", "benchmark", "list"});
    EXPECT_NE(cli.out.find(jobs[0]), std::string::npos) << cli.out;

    auto [bcode, bad] = http("POST", "/storage/ceph/benchmark?pool=nosuchpool");
    EXPECT_EQ(bcode, 400u);
    EXPECT_EQ(bad["message"], "Pool \"nosuchpool\" is not valid.");
    auto task_bad = run_task("storage.benchmark", {{"pool", "nosuchpool"}});
    EXPECT_EQ(task_bad.status, "TaskFailure: Pool \"nosuchpool\" is not valid");
}

TEST_F(OsdTasks, RefusalsLeaveEverythingAsItWas) {
    // A node that does not exist: refused at submit, nothing queued.
    EXPECT_THROW(pvc::tasks::submit(*session, "osd.add", "nosuchnode", {{"device", disk["a"]}, {"weight", "1.0"}}),
                 pvc::tasks::SubmitError);

    auto [ncode, nbody] = http("POST", "/storage/ceph/osd?node=nosuchnode&device=/dev/sdb&weight=1");
    EXPECT_EQ(ncode, 400u);
    EXPECT_EQ(nbody["message"], "ERROR: No node named nosuchnode is present in the cluster.");
    auto [ocode, obody] = http("DELETE", "/storage/ceph/osd/99?yes-i-really-mean-it=yes");
    EXPECT_EQ(ocode, 404u);
    EXPECT_EQ(obody["message"], "OSD not found.");
    EXPECT_EQ(http("PUT", "/storage/ceph/osd/99?device=/dev/sdb").first, 404u);

    // An OSD that does not exist.
    auto absent = run_task("osd.remove", {{"osd_id", "99"}, {"force_flag", false}, {"skip_zap_flag", false}});
    EXPECT_EQ(absent.state, "FAILURE");
    EXPECT_EQ(absent.status, "TaskFailure: No OSD 99 in the cluster");

    // A device that does not exist.
    auto missing = run_task("osd.add", {{"device", "/dev/pvc-osdtask-none"}, {"weight", "1.0"}});
    EXPECT_EQ(missing.state, "FAILURE");
    EXPECT_EQ(missing.status, "TaskFailure: Device /dev/pvc-osdtask-none not found on node " + node);
    auto bad = run_task("osd.add", {{"device", "/etc/passwd"}, {"weight", "1.0"}});
    EXPECT_EQ(bad.status, "TaskFailure: Invalid device path '/etc/passwd' (a /dev/ path is needed)");

    // A disk holding a filesystem with a file on it: refused, not one byte changed.
    ASSERT_EQ(sh({"mkfs.ext4", "-q", "-F", disk["fs"]}).status, 0);
    ASSERT_EQ(sh({"debugfs", "-w", "-R", "mkdir precious", disk["fs"]}).status, 0);
    std::string before = sha(disk["fs"]);
    auto fs_add = run_task("osd.add", {{"device", disk["fs"]}, {"weight", "1.0"}});
    EXPECT_EQ(fs_add.state, "FAILURE");
    EXPECT_EQ(fs_add.status, "TaskFailure: Device " + disk["fs"] + " on node " + node +
                                 " holds data (ext4) and is unsuitable for an OSD; it was left untouched (wipe it first if "
                                 "the data is not needed)");
    EXPECT_EQ(sha(disk["fs"]), before);
    auto fs_vg = run_task("osd.add_db_vg", {{"device", disk["fs"]}});
    EXPECT_EQ(fs_vg.state, "FAILURE");
    EXPECT_NE(fs_vg.status.find("holds data (ext4)"), std::string::npos) << fs_vg.status;
    EXPECT_EQ(sha(disk["fs"]), before);
    // A partition table.
    ASSERT_EQ(sh({"sgdisk", "--clear", disk["fs"]}).status, 0);
    auto parted = run_task("osd.add", {{"device", disk["fs"]}, {"weight", "1.0"}});
    EXPECT_EQ(parted.status, "TaskFailure: Device " + disk["fs"] + " on node " + node +
                                 " has a partition table and is unsuitable for an OSD");
    // Both DB options at once.
    auto both = run_task("osd.add", {{"device", disk["a"]}, {"weight", "1.0"}, {"ext_db_ratio", "0.1"}, {"ext_db_size", "1G"}});
    EXPECT_EQ(both.status, "TaskFailure: Invalid configuration: both an ext_db_size and ext_db_ratio were specified");
    EXPECT_TRUE(signatures(disk["a"]).empty()) << signatures(disk["a"]);
}

// One OSD through its whole life, with an external DB: the DB volume group,
// add, refresh, replace onto another disk (the DB LV made again), remove.
// The OSD is added with CRUSH weight 0: no placement group of the shared
// one-copy pool moves onto it, so safe-to-destroy answers at once instead of
// waiting for data to move back (what weight does is Ceph's business).
TEST_F(OsdTasks, LifecycleWithAnExternalDb) {
    // The DB volume group through `pvc` (it waits; a failed task exits 1).
    auto vg = pvc_cli({"storage", "osd", "create-db-vg", node, disk["db"], "--yes"});
    EXPECT_EQ(vg.status, 0) << vg.out << vg.err;
    EXPECT_NE(vg.out.find("SUCCESS: Successfully created new OSD DB volume group on device " + disk["db"]), std::string::npos)
        << vg.out;
    EXPECT_EQ(sh({"vgs", "osd-db"}).status, 0);
    auto twice = pvc_cli({"storage", "osd", "create-db-vg", node, disk["db"], "--yes"});
    EXPECT_EQ(twice.status, 1);
    EXPECT_NE(twice.out.find("FAILURE: TaskFailure: Ceph OSD database VG already exists on node " + node), std::string::npos)
        << twice.out;

    // Add through the API: 202 with the task, run on the node named.
    auto [code, accepted] = http("POST", "/storage/ceph/osd?node=" + node + "&device=" + disk["a"] +
                                             "&weight=0&ext_db_size=256M");
    ASSERT_EQ(code, 202u) << accepted.dump();
    EXPECT_EQ(accepted["task_name"], "osd.add");
    EXPECT_EQ(accepted["run_on"], node);
    auto add = follow(accepted);
    ASSERT_EQ(add.state, "SUCCESS") << add.status;
    std::string id = created_id(add.status);
    EXPECT_EQ(add.status, "Successfully created 1 new OSD(s) " + id + " on device " + disk["a"]);
    EXPECT_EQ(add.current, add.total);
    EXPECT_TRUE(up_in(id));
    // The keys the reference's tools write.
    EXPECT_EQ(zkget(path("osd.node", {id})), node);
    EXPECT_EQ(zkget(path("osd.device", {id})), disk["a"]);
    EXPECT_EQ(zkget(path("osd.db_device", {id})), "/dev/osd-db/osd-" + id);
    EXPECT_EQ(zkget(path("osd.is_split", {id})), "False");
    EXPECT_EQ(zkget(path("osd.stats", {id})), osd_stats_placeholder);
    std::string fsid = zkget(path("osd.ofsid", {id}));
    EXPECT_EQ(fsid.size(), 36u);
    EXPECT_EQ(zkget(path("osd.cfsid", {id})), ceph->fsid());
    EXPECT_EQ(zkget(path("osd.lv", {id})), "osd-block-" + fsid);
    EXPECT_EQ(zkget(path("osd.vg", {id})).rfind("ceph-", 0), 0u);
    auto crush = ceph->ceph({"osd", "crush", "get-device-class", "osd." + id});
    EXPECT_NE(crush.out.find("ssd"), std::string::npos) << crush.out << crush.err;
    auto lvs = sh({"lvs", "--noheadings", "--units", "m", "--nosuffix", "-o", "lv_name,lv_size", "osd-db"});
    EXPECT_NE(lvs.out.find("osd-" + id), std::string::npos) << lvs.out;
    EXPECT_NE(lvs.out.find("256.00"), std::string::npos) << lvs.out;

    // A second add on the same disk is refused: it is this OSD's.
    auto again = run_task("osd.add", {{"device", disk["a"]}, {"weight", "0"}});
    EXPECT_EQ(again.status, "TaskFailure: Device " + disk["a"] + " on node " + node + " is used by OSD(s) " + id);

    // Refresh: re-activated, the keys rewritten.
    session->write(path("osd.lv", {id}), "stale");
    auto refresh = pvc_cli({"storage", "osd", "refresh", id, disk["a"], "--yes"});
    EXPECT_EQ(refresh.status, 0) << refresh.out << refresh.err;
    EXPECT_NE(refresh.out.find("SUCCESS: Successfully reimported OSD(s) " + id + " on device " + disk["a"]), std::string::npos)
        << refresh.out;
    EXPECT_EQ(zkget(path("osd.lv", {id})), "osd-block-" + fsid);
    EXPECT_TRUE(pvc::test::eventually([&] { return up_in(id); }, 60s));

    // Replace onto disk c: same id and fsid, a new DB LV, the old disk zapped.
    EXPECT_EQ(http("POST", "/storage/ceph/osd/" + id + "?new_device=" + disk["c"]).first, 400u)
        << "without yes-i-really-mean-it";
    auto [rcode, raccepted] = http("POST", "/storage/ceph/osd/" + id + "?new_device=" + disk["c"] +
                                               "&weight=0&yes-i-really-mean-it=yes");
    ASSERT_EQ(rcode, 202u) << raccepted.dump();
    EXPECT_EQ(raccepted["task_name"], "osd.replace");
    auto replace = follow(raccepted);
    ASSERT_EQ(replace.state, "SUCCESS") << replace.status;
    EXPECT_EQ(replace.status, "Successfully replaced OSD(s) " + id + " on new disk " + disk["c"]);
    EXPECT_EQ(zkget(path("osd.device", {id})), disk["c"]);
    EXPECT_EQ(zkget(path("osd.ofsid", {id})), fsid);
    EXPECT_EQ(zkget(path("osd.db_device", {id})), "/dev/osd-db/osd-" + id);
    EXPECT_TRUE(up_in(id));
    EXPECT_TRUE(signatures(disk["a"]).empty()) << signatures(disk["a"]);

    // Remove: gone from Ceph and ZooKeeper, the disk zapped, the DB LV removed.
    auto remove = pvc_cli({"storage", "osd", "remove", id, "--yes"});
    EXPECT_EQ(remove.status, 0) << remove.out << remove.err;
    EXPECT_NE(remove.out.find("SUCCESS: Successfully removed OSD " + id), std::string::npos) << remove.out;
    EXPECT_FALSE(ceph_has(id));
    EXPECT_FALSE(session->exists(path("osd.id", {id})));
    EXPECT_TRUE(signatures(disk["c"]).empty()) << signatures(disk["c"]);
    EXPECT_EQ(http("DELETE", "/storage/ceph/osd/" + id + "?yes-i-really-mean-it=yes").first, 404u);
    EXPECT_FALSE(fs::exists(d() / "run" / ("ceph-osd@" + id + ".pid")));
    lvs = sh({"lvs", "--noheadings", "-o", "lv_name", "osd-db"});
    EXPECT_EQ(pvc::trim(lvs.out), "") << "the DB LV is removed with its OSD";
}

#ifdef PVC_OSD_BENCH
// The figure (modules/storage/bench, `osd_add_bench`): an OSD added end to
// end through the API (POST to SUCCESS: zap, ceph-volume lvm batch, CRUSH,
// activate, the keys, up and in), then removed, PVC_OSD_BENCH_ROUNDS times
// (default 3) on the same disk.
TEST_F(OsdTasks, OsdAddEndToEnd) {
    int rounds = std::getenv("PVC_OSD_BENCH_ROUNDS") ? std::atoi(std::getenv("PVC_OSD_BENCH_ROUNDS")) : 3;
    std::vector<double> add_s, claim_s, remove_s;
    using Clock = std::chrono::steady_clock;
    auto secs = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
    for (int i = 0; i < rounds; ++i) {
        auto t0 = Clock::now();
        auto [code, accepted] = http("POST", "/storage/ceph/osd?node=" + node + "&device=" + disk["a"] + "&weight=0");
        ASSERT_EQ(code, 202u) << accepted.dump();
        pvc::tasks::Progress p;
        std::optional<Clock::time_point> claimed;
        pvc::test::eventually([&] {
            p = pvc::tasks::progress(*session, accepted["task_id"]);
            if (!claimed && p.state != "PENDING") claimed = Clock::now();
            return p.state == "SUCCESS" || p.state == "FAILURE";
        }, 300s);
        auto t1 = Clock::now();
        ASSERT_EQ(p.state, "SUCCESS") << p.status;
        add_s.push_back(secs(t1 - t0));
        claim_s.push_back(secs(claimed.value_or(t1) - t0));
        std::string id = created_id(p.status);
        auto t2 = Clock::now();
        auto r = run_task("osd.remove", {{"osd_id", id}, {"force_flag", false}, {"skip_zap_flag", false}});
        ASSERT_EQ(r.state, "SUCCESS") << r.status;
        remove_s.push_back(secs(Clock::now() - t2));
    }
    auto line = [](const char* what, std::vector<double> v) {
        std::sort(v.begin(), v.end());
        std::printf("%-44s min %6.2f s  median %6.2f s  max %6.2f s  (%zu rounds)\n", what, v.front(), v[v.size() / 2],
                    v.back(), v.size());
    };
    line("osd.add, POST to the task's claim", claim_s);
    line("osd.add end to end (POST to SUCCESS)", add_s);
    line("osd.remove end to end (submit to SUCCESS)", remove_s);
}
#endif

}  // namespace

int main(int argc, char** argv) {
    // A mount namespace of this process's own, before any thread exists: the
    // bind mount over /var/lib/ceph and ceph-volume's tmpfs mounts stay here.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        std::fprintf(stderr, "osd_task_test: needs root for a private mount namespace: %s\n", std::strerror(errno));
        return 1;
    }
    ::testing::InitGoogleTest(&argc, argv);
#ifdef PVC_OSD_BENCH
    if (::testing::GTEST_FLAG(filter) == "*") ::testing::GTEST_FLAG(filter) = "*EndToEnd*";
#endif
    return RUN_ALL_TESTS();
}
