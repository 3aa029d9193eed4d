#include "postgres.hpp"

#include <pwd.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <stdexcept>

#include "netns.hpp"

namespace pvc::network::test {

namespace {
const char* superuser_password = "postgres-test";
}

std::filesystem::path PrivatePostgres::bin_dir() {
    // Debian installs each major version under /usr/lib/postgresql/<n>/bin.
    std::filesystem::path best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec))
        if (std::filesystem::exists(e.path() / "bin" / "pg_ctl") && (best.empty() || e.path() / "bin" > best))
            best = e.path() / "bin";
    return best;
}

std::string PrivatePostgres::as_nobody(const std::vector<std::string>& argv) const {
    std::vector<std::string> a = {"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"};
    a.insert(a.end(), argv.begin(), argv.end());
    return must(a);
}

PrivatePostgres::PrivatePostgres(std::filesystem::path dir, std::string listen, int port)
    : dir_(std::move(dir)), listen_(std::move(listen)), port_(port) {
    if (bin_dir().empty()) throw std::runtime_error("PostgreSQL is not installed (Debian package postgresql)");
    std::filesystem::create_directories(dir_);
    struct passwd* pw = ::getpwnam("nobody");
    if (!pw) throw std::runtime_error("no user nobody");
    std::ofstream(dir_ / "pw") << superuser_password << "\n";
    for (const auto& p : {dir_, dir_ / "pw"})
        if (::chown(p.c_str(), pw->pw_uid, pw->pw_gid) != 0) throw std::runtime_error("chown " + p.string());
    as_nobody({(bin_dir() / "initdb").string(), "-D", (dir_ / "data").string(), "-U", "postgres", "-A",
               "scram-sha-256", "--pwfile=" + (dir_ / "pw").string(), "--no-sync"});
    std::ofstream(dir_ / "data" / "pg_hba.conf", std::ios::app) << "host all all 0.0.0.0/0 scram-sha-256\n";
    start();
}

PrivatePostgres::~PrivatePostgres() {
    if (running_)
        run({"setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", (bin_dir() / "pg_ctl").string(),
             "-D", (dir_ / "data").string(), "-m", "immediate", "-w", "stop"});
}

void PrivatePostgres::start() {
    as_nobody({(bin_dir() / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-w", "-t", "60", "-l",
               (dir_ / "postgres.log").string(), "-o",
               "-c listen_addresses=" + listen_ + " -c port=" + std::to_string(port_) +
                   " -c unix_socket_directories=" + dir_.string() + " -c fsync=off -c max_connections=50",
               "start"});
    running_ = true;
}

void PrivatePostgres::stop() {
    as_nobody({(bin_dir() / "pg_ctl").string(), "-D", (dir_ / "data").string(), "-m", "fast", "-w", "stop"});
    running_ = false;
}

void PrivatePostgres::signal_all(int sig) const {
    std::ifstream pidfile(dir_ / "data" / "postmaster.pid");
    int postmaster = 0;
    if (!(pidfile >> postmaster) || postmaster <= 0) throw std::runtime_error("PostgreSQL is not running");
    std::vector<int> pids = {postmaster};
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        std::string name = e.path().filename().string();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        std::ifstream status(e.path() / "status");
        std::string line;
        while (std::getline(status, line))
            if (line.rfind("PPid:", 0) == 0) {
                if (std::atoi(line.c_str() + 5) == postmaster) pids.push_back(std::stoi(name));
                break;
            }
    }
    for (int pid : pids) ::kill(pid, sig);
}

std::string PrivatePostgres::sql(const std::string& sql, const std::string& db) const {
    return must({"env", std::string("PGPASSWORD=") + superuser_password, "psql", "-X", "-q", "-At", "-v",
                 "ON_ERROR_STOP=1", "-h", listen_, "-p", std::to_string(port_), "-U", "postgres", "-d", db, "-c", sql});
}

void PrivatePostgres::create_database(const std::string& name, const std::string& user,
                                      const std::string& password) const {
    sql("CREATE ROLE " + user + " LOGIN PASSWORD '" + password + "'");
    sql("CREATE DATABASE " + name + " OWNER " + user);
}

void PrivatePostgres::sql_file(const std::filesystem::path& file, const std::string& db, const std::string& user,
                               const std::string& password) const {
    must({"env", "PGPASSWORD=" + password, "psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", listen_, "-p",
          std::to_string(port_), "-U", user, "-d", db, "-f", file.string()});
}

}  // namespace pvc::network::test
