// The primary's DNS aggregator and metadata API, timed (modules/network/
// README.md, "Benchmark"), in the lab of network_dns_test (tests/dns_lab.hpp:
// two pvcnoded in namespaces, a private ZooKeeper and PostgreSQL, the
// primary's pdns_server):
//   - lease -> DNS answer: a guest takes a DHCP lease under a new name; from
//     the moment its client has the lease, PowerDNS on the cluster floating
//     address is asked every 2 ms (UDP, from this process) until it answers
//     with that address;
//   - metadata requests: from a guest's namespace, one HTTP request per
//     connection (as cloud-init makes them) to 169.254.169.254:
//     meta-data/instance-id (ZooKeeper lookups) and user-data (plus the
//     provisioner database).
// Usage: dns_bench [leases] [requests]   (default 20 300; root)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "dns_lab.hpp"

using namespace pvc::network::test;
using namespace pvc::network::test::dns;
using Clock = std::chrono::steady_clock;

namespace {

// One UDP query for `name` A to `server`:53; the first A record's address ("" if none within `wait`).
std::string query_a(const std::string& server, const std::string& name, std::chrono::milliseconds wait) {
    int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return "";
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(53);
    inet_pton(AF_INET, server.c_str(), &to.sin_addr);
    static std::mt19937 rng{std::random_device{}()};
    auto id = static_cast<uint16_t>(rng());
    std::string q;
    q += static_cast<char>(id >> 8);
    q += static_cast<char>(id & 0xFF);
    q += std::string("\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 10);  // RD, one question
    size_t start = 0;
    while (start <= name.size()) {
        size_t dot = name.find('.', start);
        if (dot == std::string::npos) dot = name.size();
        q += static_cast<char>(dot - start);
        q += name.substr(start, dot - start);
        start = dot + 1;
    }
    q += std::string("\x00\x00\x01\x00\x01", 5);
    ::sendto(fd, q.data(), q.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    pollfd p{fd, POLLIN, 0};
    std::string out;
    if (::poll(&p, 1, static_cast<int>(wait.count())) > 0) {
        unsigned char buf[512];
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        // Header, the question echoed, then the answers: the first A's last 4 bytes.
        if (n > 12 && buf[0] == (id >> 8) && buf[1] == (id & 0xFF) && (buf[3] & 0x0F) == 0 && buf[7] > 0) {
            size_t at = 12;
            while (at < static_cast<size_t>(n) && buf[at]) at += buf[at] + 1;
            at += 5;
            for (int i = 0; i < buf[7] && at + 12 <= static_cast<size_t>(n); ++i) {
                at += (buf[at] & 0xC0) == 0xC0 ? 2 : 0;
                uint16_t type = static_cast<uint16_t>(buf[at] << 8 | buf[at + 1]);
                uint16_t len = static_cast<uint16_t>(buf[at + 8] << 8 | buf[at + 9]);
                at += 10;
                if (type == 1 && len == 4 && at + 4 <= static_cast<size_t>(n)) {
                    char text[INET_ADDRSTRLEN];
                    inet_ntop(AF_INET, buf + at, text, sizeof text);
                    out = text;
                    break;
                }
                at += len;
            }
        }
    }
    ::close(fd);
    return out;
}

// One HTTP GET on a new connection; the status code (0 on failure).
int http_get(const std::string& path) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return 0;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(80);
    inet_pton(AF_INET, "169.254.169.254", &to.sin_addr);
    int status = 0;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
        std::string req = "GET " + path + " HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n";
        ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
        std::string resp;
        char buf[4096];
        for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) resp.append(buf, static_cast<size_t>(n));
        if (resp.rfind("HTTP/1.1 ", 0) == 0) status = std::atoi(resp.c_str() + 9);
    }
    ::close(fd);
    return status;
}

void print(const char* what, std::vector<double> ms) {
    if (ms.empty()) {
        std::printf("%-44s no samples\n", what);
        return;
    }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))]; };
    std::printf("%-44s n=%zu  median %.1f ms  p99 %.1f ms  max %.1f ms\n", what, ms.size(), at(0.5), at(0.99),
                ms.back());
}

}  // namespace

int run(Lab& lab, int leases, int requests);

int main(int argc, char** argv) {
    int leases = argc > 1 ? std::atoi(argv[1]) : 20;
    int requests = argc > 2 ? std::atoi(argv[2]) : 300;
    Lab lab;
    int rc = 1;
    try {
        rc = run(lab, leases, requests);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "dns_bench: %s\n", e.what());
    }
    for (int i = 0; i < leases; ++i) pvc::network::test::run({"ip", "netns", "del", ns_prefix() + "b" + std::to_string(i)});
    return rc;
}

int run(Lab& lab, int leases, int requests) {
    if (!lab.ok()) {
        std::fprintf(stderr, "the lab did not come up\n%s\n%s\n", lab.node1_->log().c_str(), lab.node2_->log().c_str());
        return 1;
    }
    Node* p = lab.primary();
    std::printf("primary %s; %d leases, %d requests per route\n", p->name().c_str(), leases, requests);
    // PowerDNS answering for the zone first (the domain row made, pdns up).
    lab.guest(*p, "g1", "52:54:00:bb:00:00", "warmup", true);
    if (!eventually([&] { return !query_a(cluster_floating, "warmup.net1100.local", std::chrono::milliseconds(200)).empty(); },
                    std::chrono::seconds(60))) {
        std::fprintf(stderr, "no answer for the warm-up lease\n%s\n", p->log().c_str());
        return 1;
    }
    std::vector<double> delay;
    for (int i = 0; i < leases; ++i) {
        char mac[32], name[32];
        std::snprintf(mac, sizeof mac, "52:54:00:bb:01:%02x", i);
        std::snprintf(name, sizeof name, "bench%d", i);
        // A guest of its own each (a namespace's links go asynchronously).
        std::string ip = lab.guest(*p, "b" + std::to_string(i), mac, name, false);
        auto t0 = Clock::now();
        if (ip.empty()) continue;
        auto end = t0 + std::chrono::seconds(30);
        while (Clock::now() < end) {
            if (query_a(cluster_floating, std::string(name) + ".net1100.local", std::chrono::milliseconds(100)) == ip) {
                delay.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
    }
    print("lease -> DNS answer", delay);

    // The metadata API, from the warm-up guest (its VM written as the reference does).
    pvc::test::run_python(add_vm_py, {lab.zk_->hosts(), "bbbbbbbb-2222-3333-4444-555555555555", "warmup",
                                      "52:54:00:bb:00:00", "prof1"});
    if (!eventually([&] { return lab.listening_on_80(*p); }, std::chrono::seconds(30))) return 1;
    std::vector<double> meta, user;
    int failed = 0;
    std::thread t([&] {
        InNetns in(ns_prefix() + "g1");
        for (int i = 0; i < requests; ++i) {
            auto t0 = Clock::now();
            if (http_get("/latest/meta-data/instance-id") == 200)
                meta.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            else ++failed;
            t0 = Clock::now();
            if (http_get("/latest/user-data") == 200)
                user.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
            else ++failed;
        }
    });
    t.join();
    print("metadata GET meta-data/instance-id", meta);
    print("metadata GET user-data (+ PostgreSQL)", user);
    if (failed) std::printf("failed requests: %d\n", failed);
    return 0;
}
