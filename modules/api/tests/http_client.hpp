// A small HTTP/1.1 client for the API's tests and benchmark (Boost.Beast,
// blocking, one connection per call unless a Connection is kept).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pvc::api::test {

struct Reply {
    unsigned status = 0;
    std::string body;
    std::string content_type;
    nlohmann::json json() const;  // null when the body is not JSON
};

struct Call {
    std::string method = "GET";
    std::string target;
    std::string body;
    std::string content_type;
    std::optional<std::string> api_key;
    std::string source_address;  // bound before connecting ("127.0.0.2": another client on loopback); "" = any
    std::chrono::milliseconds step_deadline{0};  // for each step (connect, send, reply); 0 = 120 s
};

// Form encoding of (key, value) pairs.
std::string form(const std::vector<std::pair<std::string, std::string>>& kv);

// One kept-alive connection (reconnects when the server closed it).
class Connection {
public:
    // `source_address`: as Call's (the first call's, for a request() call).
    Connection(std::string host, uint16_t port, bool tls = false, std::string source_address = "");
    ~Connection();
    Reply send(const Call& call);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// One request on a fresh connection; status 0 when the server could not be reached.
Reply request(const std::string& host, uint16_t port, const Call& call, bool tls = false);
// True when something accepts TCP connections there.
bool listening(const std::string& host, uint16_t port);

}  // namespace pvc::api::test
