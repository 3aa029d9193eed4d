#include "http_client.hpp"

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

struct Connection::Impl {
    std::string host;
    uint16_t port;
    bool tls;
    net::io_context ioc;
    ssl::context ctx{ssl::context::tls_client};
    std::unique_ptr<beast::tcp_stream> plain;
    std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> secure;
    beast::flat_buffer buffer;

    void connect() {
        tcp::resolver resolver(ioc);
        auto results = resolver.resolve(host, std::to_string(port));
        if (tls) {
            ctx.set_verify_mode(ssl::verify_none);
            secure = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(ioc, ctx);
            beast::get_lowest_layer(*secure).connect(results);
            secure->handshake(ssl::stream_base::client);
        } else {
            plain = std::make_unique<beast::tcp_stream>(ioc);
            plain->connect(results);
        }
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
        http::write(s, req);
        http::response_parser<http::string_body> parser;
        parser.body_limit(1024ULL * 1024 * 1024);
        http::read(s, buffer, parser);
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
        for (int attempt = 0; attempt < 2; ++attempt) {
            try {
                if (!plain && !secure) connect();
                return tls ? exchange(*secure, c) : exchange(*plain, c);
            } catch (const std::exception&) {
                plain.reset();
                secure.reset();
                if (attempt == 1) throw;
            }
        }
        return {};
    }
};

Connection::Connection(std::string host, uint16_t port, bool tls) : impl_(std::make_unique<Impl>()) {
    impl_->host = std::move(host);
    impl_->port = port;
    impl_->tls = tls;
}
Connection::~Connection() = default;
Reply Connection::send(const Call& call) { return impl_->send(call); }

Reply request(const std::string& host, uint16_t port, const Call& call, bool tls) {
    try {
        Connection c(host, port, tls);
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
