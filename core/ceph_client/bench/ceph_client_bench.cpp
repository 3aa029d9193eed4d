// ceph_client_bench: volume add, snapshot add and volume remove through the
// API's storage routes (HTTP, in-process API with its cluster view, the
// Ceph client library keeping one librados connection), beside the `rbd`
// command doing the same in the same run, against a private mini Ceph (one
// memstore OSD) and ZooKeeper. Prints p50/p99/max per operation. Figures
// only: nothing here passes or fails on time.
//
//   ceph_client_bench [rounds=40]
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "api.hpp"
#include "config_reader.hpp"
#include "http_client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc;
using namespace pvc::api;
using namespace pvc::api::test;
using Clock = std::chrono::steady_clock;

namespace {

const std::string token = "bench-token";

struct Series {
    std::vector<double> ms;
    void add(Clock::time_point t0) { ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count()); }
    double at(double q) {
        std::sort(ms.begin(), ms.end());
        return ms.empty() ? 0 : ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))];
    }
};

void print(const char* what, Series& api, Series& rbd) {
    std::printf("%-14s  API p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms   |  rbd p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms\n",
                what, api.at(0.5), api.at(0.99), api.at(1.0), rbd.at(0.5), rbd.at(0.99), rbd.at(1.0));
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = argc > 1 ? std::atoi(argv[1]) : 40;
    pvc::test::ZkServer zk;
    pvc::test::CephCluster ceph(1);
    auto session = zk::Session::connect({.hosts = zk.hosts()});
    init_cluster(*session);
    // The fixture's pool, recorded as a pool add records one, with a free-space figure.
    session->write({{schema::path("pool.name", {"rbd"}), ""},
                    {schema::path("pool.pgs", {"rbd"}), "8"},
                    {schema::path("pool.tier", {"rbd"}), "default"},
                    {schema::path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 1073741824})"},
                    {"/ceph/volumes/rbd", ""},
                    {"/ceph/snapshots/rbd", ""}});
    pvc::test::TempDir dir("pvc-ceph-bench");
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.base_dir = dir.path();
    o.stdout_logging = false;
    o.zookeeper_logging = false;
    auto config = std::make_unique<Config>(parse_config(pvc::test::node_config_yaml(o), "bench.yaml", host_identity("hv1")));
    Logger logger(make_log_sink(config.get()), "api");
    ApiSettings settings;
    settings.node = "hv1";
    settings.coordinator = true;
    settings.server.address = "127.0.0.1";
    settings.server.port = 0;
    settings.tokens = {{"bench", token}};
    ceph::Settings cs;
    cs.config_file = ceph.conf().string();
    cs.keyring = ceph.keyring().string();
    settings.ceph = cs;
    DaemonFigures figures;
    ClusterView view(session);
    view.start();
    view.wait_ready(std::chrono::seconds(10));
    Api api(session, view, settings, logger, figures, nullptr);
    HttpServer server(settings.server, [&](const HttpRequest& r, std::stop_token st) { return api.handle(r, st); },
                      logger);
    server.start();
    Connection conn("127.0.0.1", server.port());
    auto send = [&](const std::string& method, const std::string& target, const std::string& body = "") {
        Call c;
        c.method = method;
        c.target = "/api/v1" + target;
        c.body = body;
        if (!body.empty()) c.content_type = "application/x-www-form-urlencoded";
        c.api_key = token;
        auto r = conn.send(c);
        if (r.status != 200) std::fprintf(stderr, "%s %s: %u %s\n", method.c_str(), target.c_str(), r.status, r.body.c_str());
    };
    auto rbd = [&](const std::vector<std::string>& args) {
        auto r = ceph.rbd(args);
        if (r.status != 0) std::fprintf(stderr, "rbd: %s\n", r.err.c_str());
    };
    // Warm both paths (the API's first call connects to Ceph; the pool's PGs peer).
    send("POST", "/storage/ceph/volume", form({{"volume", "warm"}, {"pool", "rbd"}, {"size", "4M"}}));
    send("DELETE", "/storage/ceph/volume/rbd/warm");
    rbd({"create", "--size", "4M", "rbd/warm"});
    rbd({"rm", "rbd/warm"});

    Series api_add, api_snap, api_rm, rbd_add, rbd_snap, rbd_rm;
    for (int i = 0; i < rounds; ++i) {
        std::string v = "a" + std::to_string(i), w = "r" + std::to_string(i);
        auto t0 = Clock::now();
        send("POST", "/storage/ceph/volume", form({{"volume", v}, {"pool", "rbd"}, {"size", "4M"}}));
        api_add.add(t0);
        t0 = Clock::now();
        send("POST", "/storage/ceph/snapshot/rbd/" + v + "/s");
        api_snap.add(t0);
        t0 = Clock::now();
        send("DELETE", "/storage/ceph/volume/rbd/" + v);
        api_rm.add(t0);

        t0 = Clock::now();
        rbd({"create", "--size", "4M", "rbd/" + w});
        rbd_add.add(t0);
        t0 = Clock::now();
        rbd({"snap", "create", "rbd/" + w + "@s"});
        rbd_snap.add(t0);
        t0 = Clock::now();
        rbd({"snap", "purge", "rbd/" + w});
        rbd({"rm", "rbd/" + w});
        rbd_rm.add(t0);
    }
    std::printf("%d rounds, 4 MiB volumes, one memstore OSD; API: HTTP + ZooKeeper mirrors; rbd: the command "
                "(process start included; remove = snap purge + rm)\n",
                rounds);
    print("volume add", api_add, rbd_add);
    print("snapshot add", api_snap, rbd_snap);
    print("volume remove", api_rm, rbd_rm);
    server.stop();
    view.stop();
    session->close();
    return 0;
}
