// VM and cluster backups (pvc/backup.hpp) against a private mini Ceph
// (tests/support CephCluster) and a real ZooKeeper: through the API's
// routes (POST/DELETE /vm/<vm>/backup, POST /vm/<vm>/restore, GET /backup,
// POST /restore), the library's image streams beside the `rbd` command
// (the same bytes), and `pvc vm backup|autobackup`, `pvc cluster
// backup|restore`. One mini Ceph for the binary.
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include <fcntl.h>
#include <unistd.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include "api_fixture.hpp"
#include "pvc/backup.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/client.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/timing.hpp"
#include "rbd_stream.hpp"

namespace pvc::api::test {
namespace {

using nlohmann::json;
using schema::path;
namespace fs = std::filesystem;

constexpr std::uint64_t kMiB = 1024 * 1024;

class BackupTest : public ApiFixture {
protected:
    static void SetUpTestSuite() {
        ApiFixture::SetUpTestSuite();
        ceph_ = new pvc::test::CephCluster(1);
        ASSERT_EQ(rados_create(&rados_, nullptr), 0);
        ASSERT_EQ(rados_conf_read_file(rados_, ceph_->conf().c_str()), 0);
        ASSERT_EQ(rados_conf_set(rados_, "keyring", ceph_->keyring().c_str()), 0);
        ASSERT_EQ(rados_connect(rados_), 0);
        ASSERT_EQ(rados_ioctx_create(rados_, "rbd", &io_), 0);
        auto s = zk::Session::connect({.hosts = zk_->hosts()});
        ASSERT_TRUE(s->write({{path("pool.name", {"rbd"}), ""},
                              {path("pool.pgs", {"rbd"}), "8"},
                              {path("pool.tier", {"rbd"}), "default"},
                              {path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 1073741824})"},
                              {"/ceph/volumes/rbd", ""},
                              {"/ceph/snapshots/rbd", ""}}));
        s->close();
    }
    static void TearDownTestSuite() {
        if (io_) rados_ioctx_destroy(io_);
        if (rados_) rados_shutdown(rados_);
        io_ = nullptr;
        rados_ = nullptr;
        delete ceph_;
        ceph_ = nullptr;
        ApiFixture::TearDownTestSuite();
    }
    void customize(ApiSettings& s) override { s.ceph = ceph_settings(); }
    void SetUp() override {
        ApiFixture::SetUp();
        client = std::make_unique<ceph::Client>(session, ceph_settings());
        store = dir.path() / "backups";
        fs::create_directories(store);
    }
    void TearDown() override {
        client.reset();
        ApiFixture::TearDown();
    }
    static ceph::Settings ceph_settings() {
        ceph::Settings s;
        s.config_file = ceph_->conf().string();
        s.keyring = ceph_->keyring().string();
        s.timeout = std::chrono::seconds(5);
        return s;
    }

    // A VM on hv1 with two RBD volumes <name>_disk0 (`size0`) and <name>_disk1 (4M).
    std::string make_vm(const std::string& name, const std::string& size0 = "64M", bool with_disks = true,
                        bool second_disk = true) {
        std::string uuid = pvc::client::new_uuid();
        std::string xml = vm_xml(name, uuid);
        std::string disk = "vms/" + name + "_disk0";
        if (with_disks) {
            xml.replace(xml.find(disk), disk.size(), "rbd/" + name + "_disk0");
            if (second_disk)
                xml.replace(xml.find("  </devices>"), 0,
                            "    <disk type='network' device='disk'><source protocol='rbd' name='rbd/" + name +
                                "_disk1'/><target dev='sdb' bus='scsi'/></disk>\n");
            EXPECT_EQ(client->add_volume("rbd", name + "_disk0", size0).status, 200);
            if (second_disk) {
                EXPECT_EQ(client->add_volume("rbd", name + "_disk1", "4M").status, 200);
            }
        } else {
            xml.erase(xml.find("    <disk"), xml.find("</disk>\n") + 8 - xml.find("    <disk"));
        }
        auto r = post("/vm?node=hv1", form({{"xml", xml}}));
        EXPECT_EQ(r.status, 200) << r.body;
        return uuid;
    }
    // The VM's keys and volumes gone (as `pvc vm remove` and volume removal).
    void drop_vm(const std::string& name, const std::string& uuid) {
        session->remove_recursive(path("domain.name", {uuid}));
        for (const auto& v : {name + "_disk0", name + "_disk1"}) {
            auto r = client->remove_volume("rbd", v);
            EXPECT_TRUE(r.status == 200 || r.status == 400) << r.message;
        }
    }
    static void write_pattern(const std::string& image, std::uint64_t off, std::uint64_t len, unsigned seed) {
        rbd_image_t img;
        ASSERT_EQ(rbd_open(io_, image.c_str(), &img, nullptr), 0);
        std::string buf(len, '\0');
        for (std::uint64_t i = 0; i < len; ++i) buf[i] = static_cast<char>((i * 31 + seed * 7 + i / 4096) & 0xff);
        ASSERT_EQ(rbd_write(img, off, len, buf.data()), static_cast<ssize_t>(len));
        rbd_close(img);
    }
    static std::string read_image(const std::string& image, const char* snap = nullptr) {
        rbd_image_t img;
        EXPECT_EQ(rbd_open_read_only(io_, image.c_str(), &img, snap), 0);
        std::uint64_t size = 0;
        rbd_get_size(img, &size);
        std::string buf(size, '\0');
        EXPECT_EQ(rbd_read(img, 0, size, buf.data()), static_cast<ssize_t>(size));
        rbd_close(img);
        return buf;
    }
    static bool has_snap(const std::string& image, const std::string& snap) {
        rbd_image_t img;
        if (rbd_open_read_only(io_, image.c_str(), &img, nullptr) < 0) return false;
        bool exists = false;
        rbd_snap_exists(img, snap.c_str(), &exists);
        rbd_close(img);
        return exists;
    }
    static std::string datestring_of(const std::string& message) {
        for (size_t i = 0; i + 14 <= message.size(); ++i)
            if (std::all_of(message.begin() + i, message.begin() + i + 14, ::isdigit)) return message.substr(i, 14);
        return "";
    }
    // Backups are named by the second: the next one waits for the clock's next second.
    static void next_second(const std::string& after) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (backup::datestring_now() <= after && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::string message_of(const Reply& r) {
        auto j = r.json();
        return j.is_object() && j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : r.body;
    }
    pvc::test::ProcResult pvc_cli(std::vector<std::string> args) {
        auto yaml = dir.path() / "pvcnoded.yaml";
        if (!fs::exists(yaml))
            std::ofstream(yaml) << "pvc:\n  system:\n    configuration:\n      storage:\n        ceph_config_file: \""
                                << ceph_->conf().string() << "\"\n        ceph_admin_keyring: \""
                                << ceph_->keyring().string() << "\"\n        ceph_timeout: 5\n";
        std::vector<std::string> argv = {PVC_CLI_BINARY, "-z", zk_->hosts(), "--config", yaml.string()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, std::chrono::seconds(120));
    }
    static std::string slurp(const fs::path& p) {
        std::ifstream in(p, std::ios::binary);
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }

    static inline pvc::test::CephCluster* ceph_ = nullptr;
    static inline rados_t rados_ = nullptr;
    static inline rados_ioctx_t io_ = nullptr;
    std::unique_ptr<ceph::Client> client;
    fs::path store;
};

// The library's streams are the `rbd` command's formats, byte for byte, and each reads the other's.
TEST_F(BackupTest, StreamsMatchTheRbdCommand) {
    ASSERT_EQ(client->add_volume("rbd", "fmt", "16M").status, 200);
    write_pattern("fmt", 0, 3 * kMiB, 1);
    write_pattern("fmt", 9 * kMiB + 512, 100000, 2);
    ASSERT_EQ(client->add_snapshot("rbd", "fmt", "s1").status, 200);
    write_pattern("fmt", 2 * kMiB, kMiB, 3);
    std::string zeros(kMiB, '\0');
    {
        rbd_image_t img;
        ASSERT_EQ(rbd_open(io_, "fmt", &img, nullptr), 0);
        ASSERT_EQ(rbd_write(img, 9 * kMiB, zeros.size(), zeros.data()), static_cast<ssize_t>(zeros.size()));
        rbd_close(img);
    }
    ASSERT_EQ(client->add_snapshot("rbd", "fmt", "s2").status, 200);
    auto ours = [&](const std::string& name, const std::function<void(ceph::Io&, int)>& fn) {
        ceph::Connector conn(ceph_settings());
        auto c = conn.get();
        ceph::Io io(*c, "rbd");
        fs::path f = dir.path() / name;
        int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        fn(io, fd);
        ::close(fd);
        return slurp(f);
    };
    std::string image = ours("ours.img", [](ceph::Io& io, int fd) { ceph::export_image(io, "fmt", "s2", fd); });
    std::string diff = ours("ours.diff", [](ceph::Io& io, int fd) { ceph::export_diff(io, "fmt", "s1", "s2", fd); });
    auto r = ceph_->rbd({"export", "--no-progress", "--export-format", "2", "rbd/fmt@s2", (dir.path() / "rbd.img").string()});
    ASSERT_EQ(r.status, 0) << r.err;
    r = ceph_->rbd({"export-diff", "--no-progress", "--from-snap", "s1", "rbd/fmt@s2", (dir.path() / "rbd.diff").string()});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_GT(image.size(), 3 * kMiB);
    EXPECT_TRUE(image == slurp(dir.path() / "rbd.img")) << "export --export-format 2 differs";
    EXPECT_TRUE(diff == slurp(dir.path() / "rbd.diff")) << "export-diff differs";

    // The command imports our file; we import the command's: the same bytes as the snapshot.
    const std::string want = read_image("fmt", "s2");
    r = ceph_->rbd({"import", "--no-progress", "--export-format", "2", (dir.path() / "ours.img").string(), "rbd/fmt_rbd"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(read_image("fmt_rbd") == want);
    EXPECT_TRUE(has_snap("fmt_rbd", "s1") && has_snap("fmt_rbd", "s2"));
    {
        ceph::Connector conn(ceph_settings());
        auto c = conn.get();
        ceph::Io io(*c, "rbd");
        int fd = ::open((dir.path() / "rbd.img").c_str(), O_RDONLY);
        auto st = ceph::import_image(io, "fmt_ours", fd);
        ::close(fd);
        EXPECT_GT(st.data_bytes, 0u);
        // A diff onto an image that lacks its start snapshot is refused, naming it.
        fd = ::open((dir.path() / "rbd.diff").c_str(), O_RDONLY);
        int order = 0;
        ASSERT_EQ(rbd_create(io.get(), "fmt_empty", 16 * kMiB, &order), 0);
        try {
            ceph::import_diff(io, "fmt_empty", fd);
            ADD_FAILURE() << "import_diff without its start snapshot";
        } catch (const ceph::CephFailure& e) {
            EXPECT_NE(std::string(e.what()).find("start snapshot 's1' does not exist"), std::string::npos) << e.what();
        }
        ::close(fd);
        rbd_remove(io.get(), "fmt_empty");
    }
    EXPECT_TRUE(read_image("fmt_ours") == want);
    for (auto img : {"fmt_rbd", "fmt_ours"}) {
        rbd_image_t h;
        ASSERT_EQ(rbd_open(io_, img, &h, nullptr), 0);
        rbd_snap_remove(h, "s1");
        rbd_snap_remove(h, "s2");
        rbd_close(h);
        rbd_remove(io_, img);
    }
}

// Full backup, change, incremental backup, overwrite, restore of the chain
// and of the full, removal: through the API, the bytes compared each time.
TEST_F(BackupTest, FullAndIncrementalRoundTripThroughTheApi) {
    const std::string vm = "bk1";
    std::string uuid = make_vm(vm, "32M");
    write_pattern(vm + "_disk0", 0, 2 * kMiB, 11);
    write_pattern(vm + "_disk0", 20 * kMiB, 3 * kMiB + 17, 12);
    write_pattern(vm + "_disk1", 4096, 8192, 13);
    const std::string full0 = read_image(vm + "_disk0"), full1 = read_image(vm + "_disk1");

    const std::string base = "/vm/" + vm + "/backup";
    auto r = post(base, form({{"backup_path", store.string()}, {"retain_snapshot", "true"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string ds = datestring_of(message_of(r));
    EXPECT_NE(message_of(r).find("Successfully backed up VM 'bk1' (full@" + ds + ", snapshots retained) to '"),
              std::string::npos)
        << r.body;
    const fs::path full_dir = store / vm / ds;
    ASSERT_TRUE(fs::is_regular_file(full_dir / "pvcbackup.json"));
    EXPECT_TRUE(fs::is_regular_file(full_dir / "pvcdisks" / ("rbd." + vm + "_disk0.rbdimg")));
    EXPECT_EQ(std::distance(fs::directory_iterator(store / vm), fs::directory_iterator()), 1);  // no partial directory
    // pvcbackup.json: the reference's members in its order, Python's separators.
    std::string text = slurp(full_dir / "pvcbackup.json");
    EXPECT_EQ(text.rfind("{\"type\": \"full\", \"datestring\": \"" + ds +
                             "\", \"incremental_parent\": null, \"retained_snapshot\": true, \"vm_detail\": {",
                         0),
              0u)
        << text.substr(0, 200);
    auto details = json::parse(text);
    EXPECT_EQ(details["backup_files"],
              json::parse("[[\"pvcdisks/rbd.bk1_disk0.rbdimg\", \"32M\"], [\"pvcdisks/rbd.bk1_disk1.rbdimg\", \"4096K\"]]"));
    EXPECT_EQ(details["vm_detail"]["name"], vm);
    EXPECT_TRUE(session->exists(path("snapshot.name", {"rbd", vm + "_disk0", "backup_" + ds})));
    EXPECT_TRUE(has_snap(vm + "_disk0", "backup_" + ds));

    // Change, then an incremental backup from the full one.
    write_pattern(vm + "_disk0", kMiB, 5 * kMiB, 21);
    const std::string incr0 = read_image(vm + "_disk0");
    next_second(ds);
    r = post(base, form({{"backup_path", store.string()}, {"incremental_parent", ds}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string ds2 = datestring_of(message_of(r));
    EXPECT_NE(message_of(r).find("(incremental@" + ds2 + ")"), std::string::npos) << r.body;
    EXPECT_TRUE(fs::is_regular_file(store / vm / ds2 / "pvcdisks" / ("rbd." + vm + "_disk0.rbddiff")));
    EXPECT_FALSE(has_snap(vm + "_disk0", "backup_" + ds2));  // not retained
    EXPECT_LT(fs::file_size(store / vm / ds2 / "pvcdisks" / ("rbd." + vm + "_disk0.rbddiff")), 6 * kMiB);

    // A restore over an existing VM is refused.
    write_pattern(vm + "_disk0", 0, 8 * kMiB, 99);
    r = post("/vm/" + vm + "/restore", form({{"backup_path", store.string()}, {"backup_datestring", ds2}}));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(message_of(r), "ERROR: VM 'bk1' already exists in the cluster! Remove or rename it before restoring a backup.");

    // The chain: the full image, then the diff.
    drop_vm(vm, uuid);
    r = post("/vm/" + vm + "/restore", form({{"backup_path", store.string()}, {"backup_datestring", ds2}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(message_of(r).find("Successfully restored VM backup " + ds2 + " for 'bk1' from '"), std::string::npos);
    EXPECT_TRUE(read_image(vm + "_disk0") == incr0);
    EXPECT_TRUE(read_image(vm + "_disk1") == full1);
    EXPECT_EQ(key("domain.state", {uuid}), "start");
    EXPECT_TRUE(has_snap(vm + "_disk0", "backup_" + ds));  // the parent's, retained (the default)
    EXPECT_FALSE(has_snap(vm + "_disk0", "backup_" + ds2));
    EXPECT_TRUE(session->exists(path("snapshot.name", {"rbd", vm + "_disk0", "backup_" + ds})));
    auto stats = json::parse(session->get(path("volume.stats", {"rbd", vm + "_disk0"})).value_or("{}"));
    EXPECT_EQ(stats.value("size", 0ull), 32 * kMiB);

    // The full backup alone, its snapshot removed this time.
    drop_vm(vm, uuid);
    r = post("/vm/" + vm + "/restore",
             form({{"backup_path", store.string()}, {"backup_datestring", ds}, {"retain_snapshot", "false"}}));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(read_image(vm + "_disk0") == full0);
    EXPECT_TRUE(read_image(vm + "_disk1") == full1);
    EXPECT_FALSE(has_snap(vm + "_disk0", "backup_" + ds));

    // Removal: the directory goes; a retained snapshot too.
    r = call("DELETE", base + "?backup_path=" + store.string() + "&backup_datestring=" + ds2);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_NE(message_of(r).find("Removed VM backup " + ds2 + " for 'bk1' from '"), std::string::npos);
    EXPECT_FALSE(fs::exists(store / vm / ds2));
    r = call("DELETE", base + "?backup_path=" + store.string() + "&backup_datestring=" + ds);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_FALSE(fs::exists(full_dir));
    drop_vm(vm, uuid);
}

TEST_F(BackupTest, BadInputIsRefusedAndLeavesNothing) {
    const std::string vm = "bk2";
    std::string uuid = make_vm(vm, "8M", true, false);
    const std::string base = "/vm/" + vm + "/backup";
    auto snapshots = [&] { return session->children("/ceph/snapshots/rbd/" + vm + "_disk0").value_or(std::vector<std::string>{}); };
    auto expect = [&](const Reply& r, const std::string& text) {
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_NE(message_of(r).find(text), std::string::npos) << message_of(r);
        EXPECT_TRUE(snapshots().empty());
    };
    expect(post(base, form({{"backup_path", "relative/dir"}})),
           "ERROR: Target path relative/dir is not a valid absolute path on the primary coordinator!");
    expect(post(base, form({{"backup_path", (store / "nowhere").string()}})), "does not exist!");
    // A directory nobody can write into (root included).
    expect(post(base, form({{"backup_path", "/proc"}})), "ERROR: Failed to create backup directory: ");
    expect(post("/vm/nosuchvm/backup", form({{"backup_path", store.string()}})),
           "ERROR: Could not find VM 'nosuchvm' in the cluster!");
    expect(post(base, form({{"backup_path", store.string()}, {"incremental_parent", "20000101000000"}})),
           "ERROR: Incremental parent 20000101000000 given, but no snapshots were found");
    expect(post(base, form({{"backup_path", store.string()}, {"incremental_parent", "20000101000000"}, {"retain_snapshot", "true"}})),
           "ERROR: Retaining snapshots of incremental backups is not supported!");
    expect(post(base, form({})), "A local filesystem path on the primary coordinator must be specified");
    make_vm("bk2none", "", false);
    expect(post("/vm/bk2none/backup", form({{"backup_path", store.string()}})), "ERROR: VM 'bk2none' has no RBD volumes");
    EXPECT_FALSE(fs::exists(store / vm));
    EXPECT_FALSE(fs::exists(store / "bk2none"));

    // A corrupt pvcbackup.json: restore and removal refuse it; nothing is defined.
    auto r = post(base, form({{"backup_path", store.string()}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string ds = datestring_of(message_of(r));
    EXPECT_TRUE(snapshots().empty());  // not retained
    std::ofstream(store / vm / ds / "pvcbackup.json", std::ios::trunc) << "{\"type\": \"full\", \"datestr";
    r = call("DELETE", base + "?backup_path=" + store.string() + "&backup_datestring=" + ds);
    expect(r, "ERROR: Failed to read source backup details: ");
    drop_vm(vm, uuid);
    r = post("/vm/" + vm + "/restore", form({{"backup_path", store.string()}, {"backup_datestring", ds}}));
    expect(r, "ERROR: Failed to read source backup details: ");
    EXPECT_FALSE(pvc::client::vm_by_name(*session, vm));
    EXPECT_FALSE(session->exists(path("volume.name", {"rbd", vm + "_disk0"})));
    r = post("/vm/" + vm + "/restore", form({{"backup_path", store.string()}, {"backup_datestring", "20000101000000"}}));
    expect(r, "ERROR: The specified source backup files do not exist!");
    r = post("/vm/" + vm + "/restore", form({{"backup_path", store.string()}, {"backup_datestring", "../.."}}));
    EXPECT_EQ(r.status, 400);

    // A restore whose volume exists already defines nothing.
    std::string u3 = make_vm("bk3", "8M", true, false);
    r = post("/vm/bk3/backup", form({{"backup_path", store.string()}}));
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string ds3 = datestring_of(message_of(r));
    session->remove_recursive(path("domain.name", {u3}));
    r = post("/vm/bk3/restore", form({{"backup_path", store.string()}, {"backup_datestring", ds3}}));
    EXPECT_EQ(r.status, 400);
    EXPECT_NE(message_of(r).find("already exists in pool 'rbd'"), std::string::npos) << r.body;
    EXPECT_FALSE(pvc::client::vm_by_name(*session, "bk3"));
    drop_vm("bk3", u3);
    session->remove_recursive(path("domain.name", {*pvc::client::vm_by_name(*session, "bk2none")}));
}

// `pvc vm backup` and `pvc vm autobackup`: the schedule and the retention.
TEST_F(BackupTest, CliBackupAndAutobackupRetention) {
    const std::string vm = "bk4";
    std::string uuid = make_vm(vm, "8M", true, false);
    write_pattern(vm + "_disk0", 0, kMiB, 41);
    auto r = pvc_cli({"vm", "backup", "create", vm, store.string(), "-r"});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("Backing up VM 'bk4'... done."), std::string::npos) << r.out;
    const std::string ds = datestring_of(r.out);
    r = pvc_cli({"vm", "backup", "remove", vm, ds, store.string()});
    ASSERT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_FALSE(has_snap(vm + "_disk0", "backup_" + ds));
    r = pvc_cli({"vm", "backup", "restore", vm, ds, store.string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("already exists in the cluster"), std::string::npos) << r.err;

    // Autobackup: tag, configuration, this host the primary.
    ASSERT_EQ(post("/vm/" + vm + "/tags", form({{"action", "add"}, {"tag", "backup"}})).status, 200);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    std::string me = std::string(host).substr(0, std::string(host).find('.'));
    ASSERT_TRUE(session->write({{path("base.config.primary_node"), me}}));
    auto cfg = dir.path() / "autobackup.yaml";
    std::ofstream(cfg) << "---\nautobackup:\n  backup_root_path: \"" << store.string()
                       << "\"\n  backup_root_suffix: \"/auto\"\n  backup_tags:\n    - \"backup\"\n"
                       << "  backup_schedule:\n    full_interval: 2\n    full_retention: 1\n"
                       << "  auto_mount:\n    enabled: no\n    mount_cmds: []\n    unmount_cmds: []\n";
    std::vector<std::string> made;
    std::string last = ds;
    for (int run = 0; run < 3; ++run) {
        next_second(last);
        r = pvc_cli({"vm", "autobackup", "-f", cfg.string()});
        ASSERT_EQ(r.status, 0) << r.out << r.err;
        size_t at = r.out.find("Backup '");
        ASSERT_NE(at, std::string::npos) << r.out;
        last = r.out.substr(at + 8, 14);
        made.push_back(last);
    }
    // full, incremental of it, full: the first two removed (retention 1).
    const fs::path auto_dir = store / "auto" / vm;
    EXPECT_FALSE(fs::exists(auto_dir / made[0]));
    EXPECT_FALSE(fs::exists(auto_dir / made[1]));
    EXPECT_TRUE(fs::exists(auto_dir / made[2] / "pvcbackup.json"));
    EXPECT_NE(r.out.find("Removing old VM 'bk4' backup '" + made[0] + "' (full)... done."), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Removing old VM 'bk4' backup '" + made[1] + "' (incremental)... done."), std::string::npos);
    auto state = json::parse(slurp(auto_dir / ".autobackup.json"));
    ASSERT_EQ(state["tracked_backups"].size(), 1u) << state.dump();
    EXPECT_EQ(state["tracked_backups"][0]["datestring"], made[2]);
    EXPECT_EQ(state["tracked_backups"][0]["type"], "full");
    EXPECT_FALSE(has_snap(vm + "_disk0", "backup_" + made[0]));
    EXPECT_TRUE(has_snap(vm + "_disk0", "backup_" + made[2]));
    r = pvc_cli({"vm", "autobackup", "-f", (dir.path() / "missing.yaml").string()});
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("ERROR: Specified backup configuration does not exist!"), std::string::npos) << r.err;
    ASSERT_TRUE(session->write({{path("base.config.primary_node"), "hv1"}}));
    r = pvc_cli({"vm", "autobackup", "--cron", "-f", cfg.string()});
    EXPECT_EQ(r.status, 0);
    EXPECT_NE(r.out.find("Exiting cleanly"), std::string::npos);
    drop_vm(vm, uuid);
}

// A whole-cluster backup over 1 MiB of many small values comes back through
// POST /restore and through `pvc cluster restore`; one value over
// ZooKeeper's limit is refused.
TEST_F(BackupTest, ClusterBackupOverOneMebibyteRestores) {
    std::vector<zk::KeyValue> kvs = {{"/bkptest", ""}};
    auto value = [](int i) { return std::string(700, static_cast<char>('a' + i % 26)); };
    for (int i = 0; i < 4000; ++i) kvs.emplace_back("/bkptest/k" + std::to_string(i), value(i));
    for (size_t i = 0; i < kvs.size(); i += 500)
        ASSERT_TRUE(session->write(std::vector<zk::KeyValue>(kvs.begin() + i, kvs.begin() + std::min(kvs.size(), i + 500))));
    auto r = get("/backup");
    ASSERT_EQ(r.status, 200);
    std::string inner = json::parse(r.body).get<std::string>();
    EXPECT_GT(inner.size(), 5 * kMiB / 2);  // over the other routes' body limit (2 MiB) too
    EXPECT_EQ(post("/vm", form({{"xml", inner}})).status, 413);
    // Keys changed and removed since come back; the others stay as they are.
    auto disturb = [&](int from) {
        for (int i = from; i < from + 3; ++i) {
            ASSERT_TRUE(session->write({{"/bkptest/k" + std::to_string(i), "changed"}}));
            session->remove_recursive("/bkptest/k" + std::to_string(i + 100));
        }
    };
    auto restored = [&](int from) {
        for (int i = from; i < from + 3; ++i) {
            EXPECT_EQ(session->get("/bkptest/k" + std::to_string(i)).value_or(""), value(i));
            EXPECT_EQ(session->get("/bkptest/k" + std::to_string(i + 100)).value_or(""), value(i + 100));
        }
    };
    disturb(10);
    r = post("/restore", form({{"yes-i-really-mean-it", "yes"}, {"cluster_data", inner}}));
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 300);
    EXPECT_EQ(message_of(r), "Restore completed successfully.");
    restored(10);

    // The command line, through a file.
    auto file = dir.path() / "cluster.json";
    auto c = pvc_cli({"cluster", "backup", "-f", file.string()});
    ASSERT_EQ(c.status, 0) << c.err;
    disturb(20);
    c = pvc_cli({"cluster", "restore", "-f", file.string(), "--yes"});
    ASSERT_EQ(c.status, 0) << c.out << c.err;
    restored(20);

    // One value ZooKeeper cannot hold: refused, naming it.
    auto data = json::parse(inner, nullptr, false);
    backup::Json big = backup::Json::object();
    big["/schema/version"] = data["/schema/version"];
    big["/bkpbig"] = std::string(zk::max_value_bytes + 10, 'x');
    auto a = backup::cluster_restore(*session, big);
    EXPECT_EQ(a.status, 400);
    EXPECT_NE(a.message.find("/bkpbig"), std::string::npos) << a.message;
    // Another schema version: refused, nothing written.
    big["/schema/version"] = "9";
    big["/bkpbig"] = "small";
    a = backup::cluster_restore(*session, big);
    EXPECT_EQ(a.status, 400);
    EXPECT_NE(a.message.find("Schema version of backup (9) does not match"), std::string::npos) << a.message;
    EXPECT_FALSE(session->exists("/bkpbig"));
}

}  // namespace
}  // namespace pvc::api::test
