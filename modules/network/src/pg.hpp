// A PostgreSQL connection through libpq whose every call ends by a deadline
// (the asynchronous API, polled): a database that is down, slow or stopped
// outright (SIGSTOP: the kernel still acknowledges, nothing answers) costs
// the caller at most the deadline, never a hang. Not thread-safe: one
// owner thread per connection.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct pg_conn;

namespace pvc::network {

struct PgParams {
    std::string host, dbname, user, password;
    int port = 5432;
};

class PgError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// One result: rows of text values (NULL as nullopt).
struct PgRows {
    std::vector<std::vector<std::optional<std::string>>> rows;
    long affected = 0;  // INSERT/UPDATE/DELETE
};

class Pg {
public:
    // Connects within `deadline`; throws PgError with libpq's first line.
    Pg(const PgParams& p, std::chrono::milliseconds deadline);
    ~Pg();
    Pg(const Pg&) = delete;
    Pg& operator=(const Pg&) = delete;

    // One statement with $1.. text parameters, within `deadline`. A failure
    // or a timeout throws PgError; after a timeout or a lost connection
    // `broken()` is true (the caller drops the connection).
    PgRows exec(const std::string& sql, const std::vector<std::string>& params = {},
                std::chrono::milliseconds deadline = std::chrono::seconds(5));
    bool broken() const { return broken_; }

private:
    pg_conn* conn_ = nullptr;
    bool broken_ = false;
};

}  // namespace pvc::network
