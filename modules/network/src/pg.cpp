#include "pg.hpp"

#include <poll.h>

#include <libpq-fe.h>

#include <fmt/format.h>

namespace pvc::network {

namespace {

using Clock = std::chrono::steady_clock;

std::string first_line(const char* text) {
    std::string s = text ? text : "";
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (auto nl = s.find('\n'); nl != std::string::npos) s.resize(nl);
    return s.empty() ? "unknown error" : s;
}

// Waits until the connection's socket is ready for `events` or the deadline
// passes (false).
bool wait_socket(PGconn* c, short events, Clock::time_point end) {
    int fd = PQsocket(c);
    if (fd < 0) return false;
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0) return false;
        pollfd p{fd, events, 0};
        int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left, 1000)));
        if (r > 0) return true;
        if (r < 0 && errno != EINTR) return false;
    }
}

void no_notices(void*, const char*) {}

}  // namespace

Pg::Pg(const PgParams& p, std::chrono::milliseconds deadline) {
    auto end = Clock::now() + deadline;
    std::string port = std::to_string(p.port);
    std::string timeout = std::to_string(std::max<long long>(1, std::chrono::ceil<std::chrono::seconds>(deadline).count()));
    const char* keys[] = {"host", "port", "dbname", "user", "password", "sslmode", "connect_timeout",
                          "application_name", nullptr};
    const char* values[] = {p.host.c_str(), port.c_str(), p.dbname.c_str(), p.user.c_str(), p.password.c_str(),
                            "disable", timeout.c_str(), "pvcnoded", nullptr};
    conn_ = PQconnectStartParams(keys, values, 0);
    if (!conn_) throw PgError("out of memory");
    PQsetNoticeProcessor(conn_, no_notices, nullptr);
    if (PQstatus(conn_) == CONNECTION_BAD) {
        std::string why = first_line(PQerrorMessage(conn_));
        PQfinish(conn_);
        throw PgError(why);
    }
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    for (;;) {
        if (st == PGRES_POLLING_OK) break;
        if (st == PGRES_POLLING_FAILED) {
            std::string why = first_line(PQerrorMessage(conn_));
            PQfinish(conn_);
            throw PgError(why);
        }
        if (!wait_socket(conn_, st == PGRES_POLLING_READING ? POLLIN : POLLOUT, end)) {
            PQfinish(conn_);
            throw PgError(fmt::format("no answer within {} ms (connecting to {}:{})", deadline.count(), p.host, p.port));
        }
        st = PQconnectPoll(conn_);
    }
    if (PQsetnonblocking(conn_, 1) != 0) {
        std::string why = first_line(PQerrorMessage(conn_));
        PQfinish(conn_);
        throw PgError(why);
    }
}

Pg::~Pg() {
    if (conn_) PQfinish(conn_);
}

PgRows Pg::exec(const std::string& sql, const std::vector<std::string>& params, std::chrono::milliseconds deadline) {
    if (broken_) throw PgError("the connection was lost");
    auto end = Clock::now() + deadline;
    auto timeout = [&] {
        broken_ = true;
        return PgError(fmt::format("no answer within {} ms", deadline.count()));
    };
    std::vector<const char*> values;
    for (const auto& v : params) values.push_back(v.c_str());
    if (!PQsendQueryParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                           nullptr, 0)) {
        broken_ = PQstatus(conn_) != CONNECTION_OK;
        throw PgError(first_line(PQerrorMessage(conn_)));
    }
    for (;;) {
        int f = PQflush(conn_);
        if (f == 0) break;
        if (f < 0 || !wait_socket(conn_, POLLOUT | POLLIN, end)) {
            if (f < 0) {
                broken_ = true;
                throw PgError(first_line(PQerrorMessage(conn_)));
            }
            throw timeout();
        }
        if (!PQconsumeInput(conn_)) {
            broken_ = true;
            throw PgError(first_line(PQerrorMessage(conn_)));
        }
    }
    PgRows out;
    std::string error;
    for (;;) {
        while (PQisBusy(conn_)) {
            if (!wait_socket(conn_, POLLIN, end)) throw timeout();
            if (!PQconsumeInput(conn_)) {
                broken_ = true;
                throw PgError(first_line(PQerrorMessage(conn_)));
            }
        }
        PGresult* r = PQgetResult(conn_);
        if (!r) break;
        ExecStatusType s = PQresultStatus(r);
        if (s == PGRES_TUPLES_OK) {
            int n = PQntuples(r), m = PQnfields(r);
            for (int i = 0; i < n; ++i) {
                std::vector<std::optional<std::string>> row;
                for (int j = 0; j < m; ++j)
                    row.push_back(PQgetisnull(r, i, j) ? std::nullopt
                                                       : std::optional<std::string>(PQgetvalue(r, i, j)));
                out.rows.push_back(std::move(row));
            }
        } else if (s == PGRES_COMMAND_OK) {
            const char* t = PQcmdTuples(r);
            out.affected = t && *t ? std::atol(t) : 0;
        } else if (error.empty()) {
            error = first_line(PQresultErrorMessage(r));
        }
        PQclear(r);
    }
    if (PQstatus(conn_) != CONNECTION_OK) {
        broken_ = true;
        throw PgError(error.empty() ? first_line(PQerrorMessage(conn_)) : error);
    }
    if (!error.empty()) throw PgError(error);
    return out;
}

}  // namespace pvc::network
