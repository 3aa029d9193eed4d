#include "fetch.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace pvc::api {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

std::optional<std::string> http_get(const std::string& host, uint16_t port, const std::string& target,
                                    std::chrono::milliseconds deadline) {
    try {
        net::io_context ioc;
        beast::tcp_stream stream(ioc);
        tcp::resolver resolver(ioc);
        beast::flat_buffer buffer;
        http::request<http::empty_body> req{http::verb::get, target, 11};
        req.set(http::field::host, host);
        req.set(http::field::connection, "close");
        http::response_parser<http::string_body> parser;
        parser.body_limit(64 * 1024 * 1024);
        std::optional<std::string> out;
        stream.expires_after(deadline);
        resolver.async_resolve(host, std::to_string(port), [&](beast::error_code ec, tcp::resolver::results_type r) {
            if (ec) return;
            stream.async_connect(r, [&](beast::error_code ec, const tcp::endpoint&) {
                if (ec) return;
                http::async_write(stream, req, [&](beast::error_code ec, std::size_t) {
                    if (ec) return;
                    http::async_read(stream, buffer, parser, [&](beast::error_code ec, std::size_t) {
                        if (!ec && parser.get().result() == http::status::ok) out = parser.get().body();
                    });
                });
            });
        });
        ioc.run_for(deadline + std::chrono::milliseconds(100));
        return out;
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::optional<std::string> SharedFetch::get(const std::function<std::optional<std::string>()>& fetch) {
    std::unique_lock l(m_);
    if (have_ && Clock::now() - at_ < reuse_) return last_;
    if (fetching_) {
        cv_.wait_for(l, wait_, [&] { return !fetching_; });
        return last_;
    }
    fetching_ = true;
    l.unlock();
    std::optional<std::string> got;
    try {
        got = fetch();
    } catch (const std::exception&) {
        // as unreachable
    }
    l.lock();
    last_ = got;
    have_ = true;
    at_ = Clock::now();
    fetching_ = false;
    cv_.notify_all();
    return got;
}

}  // namespace pvc::api
