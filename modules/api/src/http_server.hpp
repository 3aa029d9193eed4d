// The API's HTTP(S) server on Boost.Beast: its own io_context threads for
// the sockets, its own worker pool for the handlers (a `wait=true` request
// may block for minutes), limits so a slow or hostile client cannot exhaust
// the daemon, and one access-log line per request (the node's local log
// only). Nothing here blocks the daemon's event loop, and no exception
// leaves a thread.
//
// What one client can take: `connections_per_client` sockets (an address;
// IPv6: a /64), `workers_per_client` handlers running at once (its other
// requests wait their turn, nobody else's do), a few seconds to send each
// request's header (a socket that sends nothing is closed), and per request
// `cpu_budget` of CPU and `time_budget` of wall time. The last
// `reserved_connections` sockets are kept for clients with a valid key.
//
// A request's stop token (the handler's argument) is requested when its
// client closes the connection, when it runs over a budget, or when the
// server stops; from then on its answer is not sent (over a budget, the
// client gets a 503 naming the budget at once). A handler that never looks
// at the token cannot be killed: stop() waits `stop_bound` for the running
// handlers, then leaves them to end on their own (each keeps what it uses
// alive) and returns.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pvc/log.hpp"

namespace pvc::api {

struct ServerLimits {
    std::size_t body_bytes = 2 * 1024 * 1024;   // a VM's XML as large as ZooKeeper holds, form-encoded
    // Routes whose body (read whole) may be larger ("METHOD /path", the path
    // exact): a cluster backup given to POST /restore holds every key of the
    // cluster (many MiB of values, each within ZooKeeper's limit).
    std::vector<std::pair<std::string, std::size_t>> large_bodies = {{"POST /api/v1/restore", 64 * 1024 * 1024}};
    // The body limit of a request (`path` without its query).
    std::size_t body_limit(std::string_view method, std::string_view path) const {
        for (const auto& [route, bytes] : large_bodies)
            if (route.size() == method.size() + 1 + path.size() && route.compare(0, method.size(), method) == 0 &&
                route[method.size()] == ' ' && route.compare(method.size() + 1, std::string::npos, path) == 0)
                return std::max(bytes, body_bytes);
        return body_bytes;
    }
    std::size_t header_bytes = 16 * 1024;
    unsigned connections = 64;                  // open at once; more are closed at accept
    unsigned connections_per_client = 16;       // open at once from one address (IPv6: one /64)
    unsigned reserved_connections = 16;         // of `connections`, kept for clients with a valid key
    std::chrono::milliseconds header_timeout{5000};    // to send a request's header (from connect or the last answer)
    std::chrono::milliseconds request_timeout{30000};  // to receive one request, and to send one response
    std::chrono::milliseconds cpu_budget{5000};        // CPU time of one handler
    std::chrono::milliseconds time_budget{1800000};    // wall time of one handler (a `wait=true` request's wait)
    std::chrono::milliseconds stop_bound{2000};        // stop() waits at most this long for running handlers
    unsigned workers = 8;                       // handlers running at once
    unsigned workers_per_client = 4;            // of them, for one address at once
};

struct ServerOptions {
    std::string address = "127.0.0.1";
    uint16_t port = 7370;
    bool tls = false;
    std::string cert_file, key_file;
    ServerLimits limits;
    // Whether an X-Api-Key value is valid: a connection that sent one is
    // "authenticated" and may use the reserved connections. Unset: no
    // connection is, and the reserve is open to everyone.
    std::function<bool(std::string_view)> key_valid;
    // Requests whose body the handler reads as it arrives
    // (HttpRequest::body_stream) rather than whole in `body`: the body limit
    // for such a request (UINT64_MAX: none), nullopt for every other
    // request (those are read whole, within `limits.body_bytes`). Unset:
    // no request is streamed.
    std::function<std::optional<std::uint64_t>(std::string_view method, std::string_view target)> streamed;
};

// Thrown by a handler (throw_if_stopped) when its stop token was requested:
// the server then answers as for a stopped request (above).
struct RequestCancelled : std::runtime_error {
    RequestCancelled() : std::runtime_error("request cancelled") {}
};
inline void throw_if_stopped(const std::stop_token& stop) {
    if (stop.stop_requested()) throw RequestCancelled();
}

// A streamed request's body (ServerOptions::streamed), read by the handler
// on its worker thread as the client sends it; at most one 1 MiB piece of
// it is held at a time. The client is given `limits.request_timeout` for
// each piece: one that stops sending is cut off (read() fails, error() says
// so). The request's CPU and time budgets count from the body's end.
class BodyStream {
public:
    virtual ~BodyStream() = default;
    // Fills `buffer` with up to `size` bytes of the body: the count (at
    // least 1), 0 at its end, -1 when it cannot be read (the client left,
    // sent nothing in time, sent a malformed body, or the request was
    // stopped); error() then says which.
    virtual std::int64_t read(char* buffer, std::size_t size) = 0;
    virtual std::string error() const = 0;
    virtual std::optional<std::uint64_t> content_length() const = 0;  // as the client announced it
    virtual std::uint64_t received() const = 0;                         // body bytes read so far
};

struct HttpRequest {
    std::string method;  // "GET"
    std::string target;  // as sent: "/api/v1/vm?limit=x"
    std::string body;    // empty for a streamed request (below)
    std::shared_ptr<BodyStream> body_stream;  // a streamed request's body (ServerOptions::streamed), else null
    std::string content_type;
    std::optional<std::string> api_key;  // X-Api-Key, when sent
    std::string peer;
};

struct HttpResponse {
    unsigned status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;
};

// Runs on a worker thread; the stop token is the request's (above): its
// client left, a budget ran out, or the server stops.
using Handler = std::function<HttpResponse(const HttpRequest&, std::stop_token)>;

class HttpServer {
public:
    HttpServer(ServerOptions options, Handler handler, Logger log);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    // Binds and starts serving; throws std::runtime_error naming the address
    // when it cannot (address in use, no such address, bad certificate).
    void start();
    // Stops accepting, closes every connection, stops the handlers (their
    // stop token), joins every thread but those of handlers still running
    // after `stop_bound` (left to end on their own). Idempotent.
    void stop();
    bool running() const;
    uint16_t port() const;  // the bound port (0 in the options: an ephemeral one)

    struct Counters {
        std::atomic<uint64_t> requests{0}, rejected_connections{0}, errors_4xx{0}, errors_5xx{0};
        std::atomic<uint64_t> client_gone{0};   // requests whose client left while they ran
        std::atomic<uint64_t> over_budget{0};   // requests stopped by their CPU or time budget
        std::atomic<uint64_t> abandoned{0};     // handlers still running when a stop() returned
        std::atomic<uint64_t> total_us{0};
        std::atomic<unsigned> open{0};
        std::atomic<unsigned> running{0}, waiting{0};  // requests in a handler, and waiting for a worker
    };
    const Counters& counters() const;

    struct Impl;  // http_server.cpp (its connections share it)

private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace pvc::api
