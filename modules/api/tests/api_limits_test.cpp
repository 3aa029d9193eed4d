// The server's limits and TLS (issue 13, "Server"): a client that holds
// connections open or sends slowly cannot exhaust the daemon; HTTPS with the
// configured certificate.
#include "api_fixture.hpp"

#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

using namespace pvc;
using namespace pvc::api;
using namespace pvc::api::test;
using namespace std::chrono_literals;
using pvc::test::eventually;
namespace net = boost::asio;

class ApiLimits : public ApiFixture {
protected:
    void customize(ApiSettings& s) override {
        s.server.limits.connections = 3;
        s.server.limits.request_timeout = 1s;
    }
    std::unique_ptr<net::ip::tcp::socket> open_raw() {
        auto s = std::make_unique<net::ip::tcp::socket>(ioc);
        s->connect(net::ip::tcp::endpoint(net::ip::make_address("127.0.0.1"), port));
        return s;
    }
    net::io_context ioc;
};

TEST_F(ApiLimits, ConnectionsOverTheLimitAreClosedAndServiceResumesWhenTheyGo) {
    std::vector<std::unique_ptr<net::ip::tcp::socket>> idle;
    for (int i = 0; i < 3; ++i) idle.push_back(open_raw());
    ASSERT_TRUE(eventually([&] { return server->counters().open.load() == 3; }, 2s));
    EXPECT_EQ(get("/node").status, 0u) << "a fourth connection is closed at once";
    EXPECT_GE(server->counters().rejected_connections.load(), 1u);
    idle.clear();
    EXPECT_TRUE(eventually([&] { return get("/node").status == 200; }, 3s));
}

TEST_F(ApiLimits, ASlowClientIsCutOffAfterTheRequestTimeout) {
    auto s = open_raw();
    net::write(*s, net::buffer(std::string("GET /api/v1/node HTTP/1.1\r\nHost: x\r\n")));  // never finishes
    auto t0 = std::chrono::steady_clock::now();
    char buf[256];
    boost::system::error_code ec;
    s->read_some(net::buffer(buf), ec);  // the server closes it
    auto took = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(ec == net::error::eof || ec == net::error::connection_reset) << ec.message();
    EXPECT_LT(took, pvc::test::scaled(3s));
    EXPECT_GE(took, 900ms);
}

TEST_F(ApiLimits, StopClosesOpenConnectionsAndStopsListening) {
    auto s = open_raw();
    ASSERT_TRUE(eventually([&] { return server->counters().open.load() >= 1; }, 2s));
    server->stop();
    char buf[16];
    boost::system::error_code ec;
    s->read_some(net::buffer(buf), ec);
    EXPECT_TRUE(ec) << "the connection was closed";
    EXPECT_FALSE(listening("127.0.0.1", port));
    server->start();  // TearDown stops it again
}

class ApiTls : public ApiFixture {
protected:
    void customize(ApiSettings& s) override {
        auto cert = dir.path() / "cert.pem", key = dir.path() / "key.pem";
        auto r = pvc::test::run_command({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                                         "-days", "1", "-keyout", key.string(), "-out", cert.string()});
        ASSERT_EQ(r.status, 0) << r.err;
        s.server.tls = true;
        s.server.cert_file = cert.string();
        s.server.key_file = key.string();
    }
};

TEST_F(ApiTls, ServesHttpsWithTheConfiguredCertificate) {
    Call c;
    c.target = "/api/v1/node";
    c.api_key = token;
    auto r = request("127.0.0.1", port, c, true);
    EXPECT_EQ(r.status, 200u);
    EXPECT_EQ(r.json().size(), 2u);
    EXPECT_EQ(request("127.0.0.1", port, c, false).status, 0u) << "plain HTTP is not served on an HTTPS listener";
}

TEST(ApiServer, AMissingCertificateIsAClearError) {
    ServerOptions o;
    o.port = 0;
    o.tls = true;
    o.cert_file = "/nonexistent/cert.pem";
    o.key_file = "/nonexistent/key.pem";
    HttpServer s(o, [](const HttpRequest&, std::stop_token) { return HttpResponse{}; }, Logger());
    try {
        s.start();
        FAIL() << "started without a certificate";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/cert.pem"), std::string::npos) << e.what();
    }
}

TEST_F(ApiLimits, StopEndsARequestWaitingOnTheClusterAtOnce) {
    const std::string u = "5a0e1d2c-0000-4000-8000-0000000000d1";
    ASSERT_EQ(define("web1", u).status, 200u);
    session->write(schema::path("domain.state", {u}), "start");
    std::thread waiting([&] { post("/vm/web1/state?state=shutdown&wait=true"); });  // nobody ever stops it
    ASSERT_TRUE(eventually([&] { return session->get(schema::path("domain.state", {u})).value_or("") == "shutdown"; }, 5s));
    auto t0 = std::chrono::steady_clock::now();
    server->stop();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, pvc::test::scaled(3s));
    waiting.join();
    server->start();
}
