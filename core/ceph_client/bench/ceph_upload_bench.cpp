// ceph_upload_bench: a raw image uploaded through the API's upload route
// (POST /storage/ceph/volume/<pool>/<volume>/upload, multipart as the
// reference's client sends it) into a volume of a private mini Ceph (one
// memstore OSD), the body sent from a plain socket in 1 MiB pieces; prints
// the throughput and this process's resident memory (the API in-process,
// the client's buffer is 1 MiB) before and at its peak during the upload.
// Twice: with the body streamed to the route (as the module serves it) and
// read whole first (the server's former way, its body limit raised to fit).
// Figures only: nothing here passes or fails.
//
//   ceph_upload_bench [MiB=256]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "api.hpp"
#include "config_reader.hpp"
#include "http_client.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/ceph_cluster.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

using namespace pvc;
using namespace pvc::api;
using Clock = std::chrono::steady_clock;

namespace {

const std::string token = "bench-token";

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    return 0;
}

// Sends the upload; returns the answer's status line and body.
std::string upload(uint16_t port, const std::string& volume, std::size_t bytes) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "connect failed";
    const std::string b = "benchBoundary";
    const std::string head = "--" + b + "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"filename\"\r\n"
                             "Content-Type: application/octet-stream\r\n\r\n";
    const std::string tail = "\r\n--" + b + "--\r\n";
    std::string req = "POST /api/v1/storage/ceph/volume/rbd/" + volume + "/upload?image_format=raw HTTP/1.1\r\n"
                      "Host: 127.0.0.1\r\nX-Api-Key: " + token + "\r\nContent-Type: multipart/form-data; boundary=" + b +
                      "\r\nContent-Length: " + std::to_string(head.size() + bytes + tail.size()) + "\r\n\r\n" + head;
    auto send_all = [&](const char* p, std::size_t n) {
        while (n > 0) {
            ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
            if (w <= 0) return false;
            p += w;
            n -= static_cast<std::size_t>(w);
        }
        return true;
    };
    send_all(req.data(), req.size());
    std::vector<char> piece(1 << 20);
    for (std::size_t at = 0; at < bytes; at += piece.size()) {
        for (std::size_t i = 0; i < piece.size(); ++i) piece[i] = static_cast<char>((at + i) * 131 % 251);
        if (!send_all(piece.data(), std::min(piece.size(), bytes - at))) break;
    }
    send_all(tail.data(), tail.size());
    std::string in;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        in.append(buf, static_cast<std::size_t>(n));
        if (in.find("\r\n\r\n") != std::string::npos && in.back() == '\n') break;
    }
    ::close(fd);
    auto eol = in.find("\r\n");
    auto body = in.find("\r\n\r\n");
    return in.substr(0, eol) + " " + (body == std::string::npos ? "" : in.substr(body + 4));
}

}  // namespace

int main(int argc, char** argv) {
    const std::size_t mib = argc > 1 ? std::stoul(argv[1]) : 256;
    const std::size_t bytes = mib << 20;
    pvc::test::ZkServer zk;
    pvc::test::CephCluster ceph(1);
    auto session = zk::Session::connect({.hosts = zk.hosts()});
    init_cluster(*session);
    session->write({{schema::path("pool.name", {"rbd"}), ""},
                    {schema::path("pool.pgs", {"rbd"}), "8"},
                    {schema::path("pool.tier", {"rbd"}), "default"},
                    {schema::path("pool.stats", {"rbd"}), R"({"id": 1, "free_bytes": 68719476736})"},
                    {"/ceph/volumes/rbd", ""},
                    {"/ceph/snapshots/rbd", ""}});
    pvc::test::TempDir dir("pvc-upload-bench");
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
    ceph::Client client(session, cs);
    auto made = client.add_volume("rbd", "big", std::to_string(mib + 16) + "M");
    if (!made.ok()) std::fprintf(stderr, "volume add: %s\n", made.message.c_str());

    std::printf("%zu MiB raw image, multipart, into a %zu MiB volume of one memstore OSD; RSS of this process "
                "(API in-process; the sender's buffer 1 MiB)\n",
                mib, mib + 16);
    for (bool streamed : {true, false}) {
        ServerOptions so = settings.server;
        if (streamed)
            so.streamed = &Api::streamed_body;
        else
            so.limits.body_bytes = bytes + (1 << 20);
        HttpServer server(so, [&](const HttpRequest& r, std::stop_token st) { return api.handle(r, st); }, logger);
        server.start();
        // Warm: the route's first call connects to Ceph.
        upload(server.port(), "big", 1 << 20);
        std::atomic<bool> done{false};
        long before = rss_kib(), peak = before;
        std::thread sampler([&] {
            while (!done) {
                peak = std::max(peak, rss_kib());
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        });
        auto t0 = Clock::now();
        std::string answer = upload(server.port(), "big", bytes);
        double s = std::chrono::duration<double>(Clock::now() - t0).count();
        done = true;
        sampler.join();
        while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r')) answer.pop_back();
        std::printf("%-10s %7.1f MiB/s (%5.2f s)  RSS before %6.1f MiB  peak %6.1f MiB  (+%.1f MiB)   %s\n",
                    streamed ? "streamed" : "whole body", static_cast<double>(mib) / s, s, before / 1024.0,
                    peak / 1024.0, (peak - before) / 1024.0, answer.c_str());
        server.stop();
    }
    view.stop();
    session->close();
    return 0;
}
