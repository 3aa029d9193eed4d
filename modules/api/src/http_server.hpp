// The API's HTTP(S) server on Boost.Beast: its own io_context threads for
// the sockets, its own worker pool for the handlers (a `wait=true` request
// may block for minutes), limits so a slow or hostile client cannot exhaust
// the daemon, and one access-log line per request. Nothing here blocks the
// daemon's event loop, and no exception leaves a thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "pvc/log.hpp"

namespace pvc::api {

struct ServerLimits {
    std::size_t body_bytes = 2 * 1024 * 1024;   // a VM's XML as large as ZooKeeper holds, form-encoded
    std::size_t header_bytes = 16 * 1024;
    unsigned connections = 64;                  // open at once; more are answered 503 and closed
    std::chrono::milliseconds request_timeout{30000};  // to receive one request, and to send one response
    unsigned workers = 8;                       // handlers running at once
};

struct ServerOptions {
    std::string address = "127.0.0.1";
    uint16_t port = 7370;
    bool tls = false;
    std::string cert_file, key_file;
    ServerLimits limits;
};

struct HttpRequest {
    std::string method;  // "GET"
    std::string target;  // as sent: "/api/v1/vm?limit=x"
    std::string body;
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

// Runs on a worker thread; the stop token is set when the server stops.
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
    // stop token), joins every thread. Idempotent.
    void stop();
    bool running() const;
    uint16_t port() const;  // the bound port (0 in the options: an ephemeral one)

    struct Counters {
        std::atomic<uint64_t> requests{0}, rejected_connections{0}, errors_4xx{0}, errors_5xx{0};
        std::atomic<uint64_t> total_us{0};
        std::atomic<unsigned> open{0};
    };
    const Counters& counters() const;

    struct Impl;  // http_server.cpp (its connections share it)

private:
    std::shared_ptr<Impl> impl_;
};

}  // namespace pvc::api
