// backup_bench: a VM backup's throughput (pvc/backup.hpp: snapshot, the
// image through librbd in `rbd export --export-format 2` format,
// pvcbackup.json) beside `rbd export --export-format 2` of the same
// snapshot and the library's image stream alone, and a restore beside `rbd
// import`, in the same run, against a private mini Ceph (one memstore OSD)
// and ZooKeeper. MiB/s = the volume's size over the wall time (median of
// the rounds). Figures only: nothing here passes or fails on time.
//
//   backup_bench [volume MiB=256] [rounds=3]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include <rados/librados.h>
#include <rbd/librbd.h>

#include "connection.hpp"
#include "pvc/backup.hpp"
#include "pvc/client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/zk_server.hpp"
#include "rbd_stream.hpp"

using namespace pvc;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

double seconds(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

void check(bool ok, const std::string& what) {
    if (!ok) {
        std::fprintf(stderr, "backup_bench: %s\n", what.c_str());
        std::exit(1);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const std::uint64_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
    const std::uint64_t bytes = mib << 20;
    pvc::test::ZkServer zk;
    pvc::test::CephCluster ceph(1);
    auto session = zk::Session::connect({.hosts = zk.hosts()});
    init_cluster(*session);
    session->write({{schema::path("pool.name", {"rbd"}), ""},
                    {schema::path("pool.pgs", {"rbd"}), "8"},
                    {schema::path("pool.tier", {"rbd"}), "default"},
                    {schema::path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 68719476736})"},
                    {"/ceph/volumes/rbd", ""},
                    {"/ceph/snapshots/rbd", ""},
                    {schema::path("node.name", {"hv1"}), "coordinator"}});
    ceph::Settings settings;
    settings.config_file = ceph.conf().string();
    settings.keyring = ceph.keyring().string();
    settings.timeout = std::chrono::seconds(10);
    ceph::Client client(session, settings);
    check(client.add_volume("rbd", "bench_disk0", std::to_string(mib) + "M").ok(), "volume add failed");

    // The volume filled with data that does not compress to zeros.
    {
        ceph::Connector conn(settings);
        auto c = conn.get();
        ceph::Io io(*c, "rbd");
        ceph::Image img(io, "bench_disk0", false);
        std::vector<char> buf(4 << 20);
        for (std::uint64_t off = 0; off < bytes; off += buf.size()) {
            for (size_t i = 0; i < buf.size(); i += 8) buf[i] = static_cast<char>((off + i) * 2654435761u >> 24);
            check(rbd_write(img.get(), off, buf.size(), buf.data()) == static_cast<ssize_t>(buf.size()), "write failed");
        }
    }
    client::VmDefinition def;
    def.uuid = client::new_uuid();
    def.name = "bench";
    def.node = "hv1";
    def.rbd_list = {"rbd/bench_disk0"};
    def.xml = "<domain type='kvm'><name>bench</name><uuid>" + def.uuid +
              "</uuid><memory unit='MiB'>512</memory><vcpu>1</vcpu><devices><disk type='network' device='disk'>"
              "<source protocol='rbd' name='rbd/bench_disk0'/><target dev='sda' bus='scsi'/></disk></devices></domain>";
    check(client::define_vm(*session, def), "define failed");

    fs::path dir = fs::temp_directory_path() / ("pvc-backup-bench-" + std::to_string(getpid()));
    fs::create_directories(dir);
    backup::Context ctx;
    ctx.zk = session;
    ctx.ceph = &client;
    ctx.settings = settings;
    ctx.vm_detail = [&](const std::string&) -> std::optional<backup::Json> {
        return backup::Json{{"name", "bench"}, {"xml", def.xml}, {"node", "hv1"}};
    };

    std::vector<double> ours, rbd_cmd, stream, restore, rbd_import;
    std::uint64_t file_bytes = 0;
    for (int round = 0; round < rounds; ++round) {
        // pvc vm backup create (full): snapshot, export, pvcbackup.json, snapshot removed.
        auto t0 = Clock::now();
        auto a = backup::create(ctx, "bench", dir.string(), std::nullopt, true);
        ours.push_back(seconds(t0));
        check(a.ok(), a.message);
        std::string ds;
        for (size_t i = 0; i + 14 <= a.message.size() && ds.empty(); ++i)
            if (std::all_of(a.message.begin() + i, a.message.begin() + i + 14, ::isdigit)) ds = a.message.substr(i, 14);
        fs::path img = dir / "bench" / ds / "pvcdisks" / "rbd.bench_disk0.rbdimg";
        file_bytes = fs::file_size(img);

        // rbd export --export-format 2 of the same snapshot.
        fs::path out = dir / ("rbd-" + std::to_string(round) + ".img");
        t0 = Clock::now();
        auto r = ceph.rbd({"export", "--no-progress", "--export-format", "2", "rbd/bench_disk0@backup_" + ds, out.string()});
        rbd_cmd.push_back(seconds(t0));
        check(r.status == 0, "rbd export: " + r.err);

        // The library's stream alone (no snapshot, no ZooKeeper).
        {
            ceph::Connector conn(settings);
            auto c = conn.get();
            ceph::Io io(*c, "rbd");
            fs::path f = dir / ("stream-" + std::to_string(round) + ".img");
            int fd = ::open(f.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
            t0 = Clock::now();
            ceph::export_image(io, "bench_disk0", "backup_" + ds, fd);
            ::fsync(fd);
            stream.push_back(seconds(t0));
            ::close(fd);
            fs::remove(f);
        }

        // rbd import of the command's file, beside a restore (VM define, volume, import).
        t0 = Clock::now();
        r = ceph.rbd({"import", "--no-progress", "--export-format", "2", out.string(), "rbd/bench_rbdimport"});
        rbd_import.push_back(seconds(t0));
        check(r.status == 0, "rbd import: " + r.err);
        ceph.rbd({"snap", "purge", "rbd/bench_rbdimport"});
        ceph.rbd({"rm", "--no-progress", "rbd/bench_rbdimport"});
        fs::remove(out);

        // The restore needs the VM and its volume gone: both kept aside by renaming.
        session->remove_recursive(schema::path("domain.name", {def.uuid}));
        check(client.rename_volume("rbd", "bench_disk0", "bench_keep").ok(), "rename failed");
        t0 = Clock::now();
        auto b = backup::restore(ctx, "bench", dir.string(), ds, false);
        restore.push_back(seconds(t0));
        check(b.ok(), b.message);
        session->remove_recursive(schema::path("domain.name", {def.uuid}));
        check(client.remove_volume("rbd", "bench_disk0").ok(), "remove failed");
        check(client.rename_volume("rbd", "bench_keep", "bench_disk0").ok(), "rename back failed");
        check(client::define_vm(*session, def), "define again failed");
        check(backup::remove(ctx, "bench", dir.string(), ds).ok(), "backup remove failed");
    }
    auto rate = [&](double s) { return s > 0 ? static_cast<double>(mib) / s : 0; };
    std::printf("volume %llu MiB (memstore OSD), %d rounds, medians; backup file %.1f MiB\n",
                static_cast<unsigned long long>(mib), rounds, static_cast<double>(file_bytes) / (1 << 20));
    std::printf("%-52s %8.2f s  %8.1f MiB/s\n", "pvc vm backup create (full: snapshot, export, json)", median(ours), rate(median(ours)));
    std::printf("%-52s %8.2f s  %8.1f MiB/s\n", "  its image stream alone (librbd, export format 2)", median(stream), rate(median(stream)));
    std::printf("%-52s %8.2f s  %8.1f MiB/s\n", "rbd export --export-format 2 (same snapshot)", median(rbd_cmd), rate(median(rbd_cmd)));
    std::printf("%-52s %8.2f s  %8.1f MiB/s\n", "pvc vm backup restore (define, volume, import)", median(restore), rate(median(restore)));
    std::printf("%-52s %8.2f s  %8.1f MiB/s\n", "rbd import --export-format 2", median(rbd_import), rate(median(rbd_import)));
    std::error_code ec;
    fs::remove_all(dir, ec);
    return 0;
}
