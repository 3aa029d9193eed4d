// The server's streamed bodies (ServerOptions::streamed, what a volume
// upload uses), with a handler of its own and no Ceph, so the sanitizer
// builds run it: a body larger than the whole-body limit read piece by piece
// (announced and chunked), a client that stops sending cut off with an
// answer, an answer given before the body's end (the rest dropped, the
// connection kept), and an `Expect: 100-continue` body.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api_fixture.hpp"
#include "pvc/test/timing.hpp"

using namespace pvc;
using namespace pvc::api;
using namespace std::chrono_literals;

namespace {

class Raw {
public:
    explicit Raw(uint16_t port) {
        fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    ~Raw() { ::close(fd_); }
    bool ok() const { return ok_; }
    void send(std::string_view s) {
        while (!s.empty()) {
            ssize_t n = ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL);
            if (n <= 0) return;
            s.remove_prefix(static_cast<std::size_t>(n));
        }
    }
    // Status and body of the next answer ("100 Continue" included); 0 when none in time.
    std::pair<unsigned, std::string> reply(std::chrono::milliseconds within = pvc::test::scaled(30000ms)) {
        auto until = std::chrono::steady_clock::now() + within;
        for (;;) {
            auto head_end = in_.find("\r\n\r\n");
            if (head_end != std::string::npos) {
                std::string head = in_.substr(0, head_end);
                std::size_t want = 0;
                auto cl = head.find("Content-Length: ");
                if (cl != std::string::npos) want = std::stoul(head.substr(cl + 16));
                if (in_.size() >= head_end + 4 + want) {
                    unsigned status = static_cast<unsigned>(std::stoul(in_.substr(9, 3)));
                    std::string body = in_.substr(head_end + 4, want);
                    in_.erase(0, head_end + 4 + want);
                    return {status, body};
                }
            }
            auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
            if (left.count() <= 0) return {0, ""};
            pollfd p{fd_, POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 200))) <= 0) continue;
            char buf[65536];
            ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n <= 0) return {0, ""};
            in_.append(buf, static_cast<std::size_t>(n));
        }
    }

private:
    int fd_ = -1;
    bool ok_ = false;
    std::string in_;
};

std::string header(const std::string& path, const std::string& framing) {
    return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/octet-stream\r\n" + framing + "\r\n\r\n";
}

class ApiStream : public ::testing::Test {
protected:
    void SetUp() override {
        ServerOptions o;
        o.address = "127.0.0.1";
        o.port = 0;
        o.limits.body_bytes = 64 * 1024;
        o.limits.request_timeout = pvc::test::scaled(1000ms);
        o.streamed = [](std::string_view method, std::string_view target) -> std::optional<std::uint64_t> {
            if (method == "POST" && target.rfind("/stream", 0) == 0) return UINT64_MAX;
            return std::nullopt;
        };
        server_ = std::make_unique<HttpServer>(o, [](const HttpRequest& r, std::stop_token) -> HttpResponse {
            if (!r.body_stream) return {200, "text/plain", "whole " + std::to_string(r.body.size()), {}};
            if (r.target == "/stream/refuse") return {400, "text/plain", "refused", {}};
            std::vector<char> buf(100000);
            std::uint64_t total = 0, sum = 0;
            for (;;) {
                auto n = r.body_stream->read(buf.data(), buf.size());
                if (n < 0) return {400, "text/plain", "error after " + std::to_string(total) + ": " + r.body_stream->error(), {}};
                if (n == 0) break;
                for (std::int64_t i = 0; i < n; ++i) sum += static_cast<unsigned char>(buf[static_cast<std::size_t>(i)]);
                total += static_cast<std::uint64_t>(n);
            }
            return {200, "text/plain", std::to_string(total) + " " + std::to_string(sum), {}};
        }, Logger());
        server_->start();
        port_ = server_->port();
    }
    void TearDown() override { server_->stop(); }

    std::unique_ptr<HttpServer> server_;
    uint16_t port_ = 0;
};

std::string data(std::size_t n) {
    std::string s(n, '\0');
    for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i * 7 % 251);
    return s;
}
std::uint64_t sum(const std::string& s) {
    std::uint64_t t = 0;
    for (unsigned char c : s) t += c;
    return t;
}

TEST_F(ApiStream, BodiesLargerThanTheLimitAreStreamed) {
    const std::string d = data(3 * 1024 * 1024 + 11);
    const std::string want = std::to_string(d.size()) + " " + std::to_string(sum(d));
    Raw c(port_);
    ASSERT_TRUE(c.ok());
    c.send(header("/stream", "Content-Length: " + std::to_string(d.size())));
    c.send(d);
    EXPECT_EQ(c.reply(), std::make_pair(200u, want));
    // Chunked, on the same connection.
    c.send(header("/stream", "Transfer-Encoding: chunked"));
    for (std::size_t at = 0; at < d.size(); at += 300000) {
        std::size_t n = std::min<std::size_t>(300000, d.size() - at);
        char line[32];
        std::snprintf(line, sizeof line, "%zx\r\n", n);
        c.send(line);
        c.send(std::string_view(d).substr(at, n));
        c.send("\r\n");
    }
    c.send("0\r\n\r\n");
    EXPECT_EQ(c.reply(), std::make_pair(200u, want));
    // Another route keeps its limit.
    c.send(header("/other", "Content-Length: 70000"));
    EXPECT_EQ(c.reply().first, 413u);
}

TEST_F(ApiStream, AClientThatStopsIsCutOffWithAnAnswer) {
    Raw c(port_);
    c.send(header("/stream", "Content-Length: 5000000"));
    c.send(data(1500000));
    auto [status, body] = c.reply();
    EXPECT_EQ(status, 400u);
    EXPECT_EQ(body.rfind("error after 1500000: the client sent nothing for ", 0), 0u) << body;
}

TEST_F(ApiStream, AnEarlyAnswerDropsTheRestAndKeepsTheConnection) {
    Raw c(port_);
    const std::string d = data(2 * 1024 * 1024);
    c.send(header("/stream/refuse", "Content-Length: " + std::to_string(d.size())));
    c.send(d);
    EXPECT_EQ(c.reply(), std::make_pair(400u, std::string("refused")));
    c.send(header("/other", "Content-Length: 3"));
    c.send("abc");
    EXPECT_EQ(c.reply(), std::make_pair(200u, std::string("whole 3")));
}

TEST_F(ApiStream, ExpectContinueIsAnsweredWhenTheBodyIsRead) {
    Raw c(port_);
    const std::string d = data(200000);
    c.send(header("/stream", "Content-Length: " + std::to_string(d.size()) + "\r\nExpect: 100-continue"));
    EXPECT_EQ(c.reply().first, 100u);
    c.send(d);
    EXPECT_EQ(c.reply(), std::make_pair(200u, std::to_string(d.size()) + " " + std::to_string(sum(d))));
}

}  // namespace
