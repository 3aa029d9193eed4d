// The request parser the API server runs (Boost.Beast's, with the server's
// limits), fed as a socket delivers bytes: in pieces, what the parser did
// not take kept and more appended. Regression of a fuzzer finding
// (fuzz/corpus/http_request/crash_last_chunk_trailers_bytewise): a
// chunked body whose first chunk is the last one, followed by a trailer
// field, sent a byte at a time, hit a debug assertion inside Beast 1.74
// (basic_parser.ipp, `n >= 5`) that aborted the process in any build
// without NDEBUG. The module compiles Boost without its assertions
// (CMakeLists.txt), and the parser reads that request correctly.
#include <gtest/gtest.h>

#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "http_server.hpp"

namespace http = boost::beast::http;

namespace {

struct Parsed {
    bool done = false;
    boost::beast::error_code ec;
    std::string target, body;
};

Parsed parse_in_pieces(const std::string& bytes, size_t piece) {
    pvc::api::ServerLimits limits;
    http::request_parser<http::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(limits.header_bytes));
    parser.body_limit(limits.body_bytes);
    Parsed out;
    parser.eager(true);  // as http::async_read, after the header
    std::string buffer;
    size_t pos = 0;
    bool more = true;  // the parser needs more bytes than the buffer holds
    while (!parser.is_done()) {
        if (more || buffer.empty()) {
            if (pos >= bytes.size()) break;
            size_t n = std::min(piece, bytes.size() - pos);
            buffer.append(bytes, pos, n);
            pos += n;
        }
        out.ec = {};
        size_t used = parser.put(boost::asio::buffer(buffer), out.ec);
        buffer.erase(0, used);
        more = out.ec == http::error::need_more || used == 0;
        if (out.ec && out.ec != http::error::need_more) return out;
    }
    out.done = parser.is_done();
    if (out.done) {
        out.target = std::string(parser.get().target());
        out.body = parser.get().body();
    }
    return out;
}

}  // namespace

TEST(BeastParser, LastChunkWithTrailersArrivingAByteAtATime) {
    const std::string request =
        "POST /api/v1/vm/web1/state?state=stop HTTP/1.1\r\n"
        "Host: pvc\r\n"
        "Content-Type: application/x-www-form-urlencoded\r\n"
        "Transfer-Encoding: chunked\r\n"
        "\r\n"
        "0\r\n"
        "X-Trailer: 1\r\n"
        "\r\n";
    for (size_t piece : {size_t{1}, size_t{2}, size_t{3}, request.size()}) {
        auto p = parse_in_pieces(request, piece);
        EXPECT_TRUE(p.done) << "pieces of " << piece << ": " << p.ec.message();
        EXPECT_FALSE(p.ec) << "pieces of " << piece << ": " << p.ec.message();
        EXPECT_EQ(p.target, "/api/v1/vm/web1/state?state=stop");
        EXPECT_EQ(p.body, "");
    }
}

TEST(BeastParser, ChunkedBodyThenLastChunkWithTrailersAByteAtATime) {
    const std::string request =
        "PUT /api/v1/vm/web1/meta HTTP/1.1\r\n"
        "Host: pvc\r\n"
        "Transfer-Encoding: chunked\r\n"
        "\r\n"
        "9\r\nlimit=hv1\r\n"
        "0\r\n"
        "X-Trailer: 1\r\n"
        "\r\n";
    auto p = parse_in_pieces(request, 1);
    EXPECT_TRUE(p.done) << p.ec.message();
    EXPECT_EQ(p.body, "limit=hv1");
}
