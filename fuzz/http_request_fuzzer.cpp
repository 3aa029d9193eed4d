// The API's request handling below the socket, as the server does it
// (modules/api/src/http_server.cpp): Boost.Beast's request parser with the
// server's header and body limits, fed the bytes in pieces as a socket
// delivers them; then, for a complete request, what the routes take from
// it (modules/api/src/request.cpp): the target split into decoded
// segments, the query string and an urlencoded form body as parameters.
// The first input byte chooses the piece size (a slow client sends one byte
// at a time).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http_server.hpp"
#include "request.hpp"

namespace http = boost::beast::http;

namespace {

void check(bool ok) {
    if (!ok) __builtin_trap();
}

void routes_view(const std::string& target, const std::string& content_type, const std::string& body) {
    auto t = pvc::api::parse_target(target);
    if (!t.under_api) check(t.segments.empty());
    pvc::api::Params params;
    params.parse(t.query);
    std::string lower;
    for (char c : content_type) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    if (lower.rfind("application/x-www-form-urlencoded", 0) == 0) params.parse(body);
    for (const auto& [k, v] : params.pairs()) {
        auto first = params.get(k);
        check(first.has_value());
        auto all = params.all(k);
        check(!all.empty() && all.front() == *first);
        (void)pvc::api::truthy(first);
    }
    // Decoding never grows a text.
    check(pvc::api::percent_decode(target, true).size() <= target.size());
    check(pvc::api::percent_decode(target, false).size() <= target.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 1) return 0;
    size_t piece = data[0] % 16 == 0 ? size : data[0] % 16;
    std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);

    pvc::api::ServerLimits limits;
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
    parser.body_limit(limits.body_bytes);
    parser.eager(true);

    // As a socket read loop does: what the parser did not take stays in the
    // buffer and more bytes are appended.
    std::string buffer;
    size_t pos = 0;
    boost::beast::error_code ec;
    while (!parser.is_done()) {
        if (pos < bytes.size()) {
            size_t n = std::min(piece, bytes.size() - pos);
            buffer.append(bytes.substr(pos, n));
            pos += n;
        } else if (buffer.empty()) {
            if (parser.got_some()) parser.put_eof(ec);  // the client closed its side
            break;
        }
        size_t used = parser.put(boost::asio::buffer(buffer), ec);
        buffer.erase(0, used);
        if (ec == http::error::need_more) {
            ec = {};
            if (pos >= bytes.size()) {
                if (parser.got_some()) parser.put_eof(ec);
                break;
            }
            continue;
        }
        if (ec) break;
        if (used == 0 && pos >= bytes.size()) break;
    }
    if (ec || !parser.is_done()) return 0;

    auto& req = parser.get();
    unsigned hosts = 0, keys = 0;
    for (const auto& f : req) {
        if (boost::beast::iequals(f.name_string(), "host")) ++hosts;
        if (boost::beast::iequals(f.name_string(), "x-api-key")) ++keys;
    }
    if (req.version() >= 11 && hosts == 0) return 0;
    if (hosts > 1 || keys > 1) return 0;
    check(req.body().size() <= limits.body_bytes);
    routes_view(std::string(req.target()), std::string(req[http::field::content_type]), req.body());
    return 0;
}
