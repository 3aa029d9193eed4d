#include "http_client.hpp"

#include <chrono>
#include <stdexcept>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace pvc::api::test {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;

nlohmann::json Reply::json() const {
    try {
        return nlohmann::json::parse(body);
    } catch (...) {
        return nullptr;
    }
}

std::string form(const std::vector<std::pair<std::string, std::string>>& kv) {
    auto enc = [](const std::string& s) {
        std::string out;
        const char* hex = "0123456789ABCDEF";
        for (unsigned char c : s) {
            if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
            else {
                out += '%';
                out += hex[c >> 4];
                out += hex[c & 15];
            }
        }
        return out;
    };
    std::string out;
    for (const auto& [k, v] : kv) out += (out.empty() ? "" : "&") + enc(k) + "=" + enc(v);
    return out;
}

// Every step of an exchange (connect, TLS handshake, write, read) is bounded:
// a server that never answers fails the call with an error naming the step,
// instead of hanging the test until ctest's timeout. Synchronous Asio reads
// ignore socket timeouts, so the steps run asynchronously on the connection's
// own io_context for at most kStepDeadline each.
constexpr std::chrono::seconds kStepDeadline{120};

struct DeadlinePassed : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Connection::Impl {
    std::string host;
    uint16_t port;
    bool tls;
    std::string source;
    std::chrono::milliseconds step{kStepDeadline};
    net::io_context ioc;
    ssl::context ctx{ssl::context::tls_client};
    std::unique_ptr<beast::tcp_stream> plain;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
    beast::flat_buffer buffer;

    beast::tcp_stream& lowest() { return tls ? beast::get_lowest_layer(*secure) : *plain; }

    // Starts an asynchronous step with a completion handler and runs it to its
    // end or the deadline; an error or the deadline throws.
    template <class Start>
    void bounded(const char* what, Start&& start) {
        bool done = false;
        boost::system::error_code result;
        start([&](boost::system::error_code ec, auto&&...) {
            result = ec;
            done = true;
        });
        ioc.restart();
        ioc.run_for(step);
        if (!done) {
            lowest().socket().close();  // the pending step completes with operation_aborted
            ioc.restart();
            ioc.run();
            throw DeadlinePassed(std::string("HTTP client: no ") + what + " within " +
                                 std::to_string(step.count()) + " ms");
        }
        if (result) throw boost::system::system_error(result, std::string("HTTP client: ") + what);
    }

    void connect() {
        tcp::resolver resolver(ioc);
        auto results = resolver.resolve(host, std::to_string(port));
        if (tls) {
            ctx.set_verify_mode(ssl::verify_none);
            secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc, ctx);
        } else {
            plain = std::make_unique<beast::tcp_stream>(ioc);
        }
        if (!source.empty()) {
            lowest().socket().open(tcp::v4());
            lowest().socket().bind(tcp::endpoint(net::ip::make_address(source), 0));
            bounded("connection", [&](auto h) { lowest().socket().async_connect(*results.begin(), h); });
        } else {
            bounded("connection", [&](auto h) { lowest().async_connect(results, h); });
        }
        if (tls) bounded("TLS handshake", [&](auto h) { secure->async_handshake(ssl::stream_base::client, h); });
        buffer.clear();
    }
    template <class S>
    Reply exchange(S& s, const Call& c) {
        http::request<http::string_body> req{http::string_to_verb(c.method), c.target, 11};
        req.set(http::field::host, host);
        if (!c.content_type.empty()) req.set(http::field::content_type, c.content_type);
        if (c.api_key) req.set("X-Api-Key", *c.api_key);
        req.body() = c.body;
        req.prepare_payload();
        bounded("request sent", [&](auto h) { http::async_write(s, req, h); });
        http::response_parser<http::string_body> parser;
        parser.body_limit(1024ULL * 1024 * 1024);
        bounded("reply", [&](auto h) { http::async_read(s, buffer, parser, h); });
        auto& res = parser.get();
        Reply r;
        r.status = res.result_int();
        r.body = res.body();
        r.content_type = std::string(res[http::field::content_type]);
        if (!res.keep_alive()) {
            plain.reset();
            secure.reset();
        }
        return r;
    }
    Reply send(const Call& c) {
        step = c.step_deadline.count() > 0 ? c.step_deadline : std::chrono::milliseconds(kStepDeadline);
        for (int attempt = 0; attempt < 2; ++attempt) {
            try {
                if (!plain && !secure) connect();
                return tls ? exchange(*secure, c) : exchange(*plain, c);
            } catch (const DeadlinePassed&) {
                plain.reset();
                secure.reset();
                throw;  // a server that does not answer is not asked again
            } catch (const std::exception&) {  // a kept connection the server had closed
                plain.reset();
                secure.reset();
                if (attempt == 1) throw;
            }
        }
        return {};
    }
};

Connection::Connection(std::string host, uint16_t port, bool tls, std::string source_address)
    : impl_(std::make_unique<Impl>()) {
    impl_->host = std::move(host);
    impl_->port = port;
    impl_->tls = tls;
    impl_->source = std::move(source_address);
}
Connection::~Connection() = default;
Reply Connection::send(const Call& call) { return impl_->send(call); }

Reply request(const std::string& host, uint16_t port, const Call& call, bool tls) {
    try {
        Connection c(host, port, tls, call.source_address);
        return c.send(call);
    } catch (const std::exception&) {
        return {};
    }
}

bool listening(const std::string& host, uint16_t port) {
    try {
        net::io_context ioc;
        tcp::socket s(ioc);
        s.connect(tcp::endpoint(net::ip::make_address(host), port));
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace pvc::api::test
