// A private PostgreSQL cluster for a test binary (Debian's postgresql):
// initdb and pg_ctl in a directory of the test's, run as the unprivileged
// user `nobody` (PostgreSQL refuses to run as root), listening on one TCP
// address of the calling thread's network namespace. Stopped and removed by
// the destructor. Root only.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace pvc::network::test {

class PrivatePostgres {
public:
    // `dir` must be traversable by nobody (0755 parents). initdb + start.
    PrivatePostgres(std::filesystem::path dir, std::string listen, int port);
    ~PrivatePostgres();
    PrivatePostgres(const PrivatePostgres&) = delete;
    PrivatePostgres& operator=(const PrivatePostgres&) = delete;

    void start();  // pg_ctl start -w
    void stop();   // pg_ctl stop -m fast
    // `sig` to the postmaster and every process it started (SIGSTOP: a
    // database that accepts connections and answers nothing).
    void signal_all(int sig) const;
    const std::string& host() const { return listen_; }
    int port() const { return port_; }

    // psql -At over TCP as the superuser `postgres` (database `db`); throws
    // with psql's output on failure. The output, one row per line.
    std::string sql(const std::string& sql, const std::string& db = "postgres") const;
    // A role with a password and a database it owns.
    void create_database(const std::string& name, const std::string& user, const std::string& password) const;
    // A file of SQL run in `db` as `user` (e.g. PowerDNS's schema).
    void sql_file(const std::filesystem::path& file, const std::string& db, const std::string& user,
                  const std::string& password) const;
    // The directory holding initdb, pg_ctl and postgres ("" if none).
    static std::filesystem::path bin_dir();

private:
    std::string as_nobody(const std::vector<std::string>& argv) const;
    std::filesystem::path dir_;
    std::string listen_;
    int port_;
    bool running_ = false;
};

}  // namespace pvc::network::test
