#include "dnsmasq.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>
#include <thread>

#include <fmt/format.h>

namespace pvc::network {

namespace {

bool unset(const std::string& s) { return s.empty() || s == "None"; }

bool ipv4(const std::string& s) {
    unsigned char b[4];
    return inet_pton(AF_INET, s.c_str(), b) == 1;
}

std::string read_file(const std::filesystem::path& p) {
    std::ifstream f(p);
    return std::string((std::istreambuf_iterator<char>(f)), {});
}

std::string status_text(int status) {
    if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
    if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
    return fmt::format("status {}", status);
}

}  // namespace

bool wants_dnsmasq(const DhcpNetwork& n) { return n.gw4.has_value() || n.gw6.has_value(); }

std::vector<std::string> dnsmasq_arguments(const DhcpNetwork& n, const DnsmasqPaths& p, std::string* why_not) {
    const std::string br = "vmbr" + std::to_string(n.vni);
    std::vector<std::string> a = {"--domain-needed", "--bogus-priv", "--no-hosts", "--dhcp-authoritative",
                                  "--filterwin2k", "--expand-hosts", "--domain-needed"};
    const bool domain = !unset(n.domain);
    if (domain) {
        a.push_back("--domain=" + n.domain);
        a.push_back("--local=/" + n.domain + "/");
    }
    for (const char* x : {"--log-facility=-", "--log-dhcp", "--keep-in-foreground", "--leasefile-ro"}) a.push_back(x);
    a.push_back("--dhcp-script=" + p.lease_helper.string());
    a.push_back("--dhcp-hostsdir=" + p.hosts_dir.string());
    a.push_back("--bind-interfaces");
    auto listen_block = [&](const std::string& gw) {
        a.push_back("--listen-address=" + gw);
        if (domain) a.push_back("--auth-zone=" + n.domain);
        a.push_back("--auth-peer=" + gw);
        a.push_back("--auth-server=" + gw);
        a.push_back("--auth-sec-servers=" + gw);
    };
    if (n.ipv6 && n.gw6) {
        listen_block(*n.gw6);
        a.push_back("--dhcp-option=option6:dns-server,[" + *n.gw6 + "]");
        a.push_back("--dhcp-option=option6:sntp-server,[" + *n.gw6 + "]");
        a.push_back("--enable-ra");
        if (n.dhcp4) {
            a.push_back("--dhcp-range=net:" + br + ",::,constructor:" + br + ",ra-stateless,ra-names");
        } else {
            a.push_back("--auth-server=" + *n.gw6);
            a.push_back("--dhcp-range=net:" + br + ",::2,::ffff:ffff:ffff:ffff,constructor:" + br + ",64,24h");
        }
        // DNS on the IPv4 gateway too (the guests are told to use it; a
        // deliberate deviation: the reference served DNS only on the IPv6 one).
        if (n.gw4) listen_block(*n.gw4);
    } else if (n.gw4) {
        listen_block(*n.gw4);
    }
    if (n.dhcp4) {
        if (n.gw4 && n.dhcp4_start && n.dhcp4_end) {
            a.push_back("--dhcp-option=option:ntp-server," + *n.gw4);
            a.push_back("--dhcp-range=" + *n.dhcp4_start + "," + *n.dhcp4_end + ",48h");
        } else if (why_not) {
            *why_not = "DHCPv4 is on but the network has no IPv4 gateway, dhcp4_start or dhcp4_end: no DHCPv4";
        }
    }
    return a;
}

std::string reservation_problem(const Reservation& r) {
    bool mac = r.mac.size() == 17;
    for (size_t i = 0; mac && i < r.mac.size(); ++i) {
        char c = r.mac[i];
        mac = i % 3 == 2 ? c == ':' : ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
    }
    if (!mac) return fmt::format("'{}' is not a MAC address (six lowercase hex pairs with ':')", r.mac);
    if (!ipv4(r.ip)) return fmt::format("ipaddr '{}' is not an IPv4 address", r.ip);
    return "";
}

bool sync_host_files(const std::filesystem::path& dir, const std::vector<Reservation>& reservations) {
    // dnsmasq reads it after dropping root (user dnsmasq or nobody).
    std::filesystem::create_directories(dir);
    std::filesystem::permissions(dir, std::filesystem::perms(0755));
    bool hup = false;
    std::set<std::string> wanted;
    for (const auto& r : reservations) {
        wanted.insert(r.mac);
        auto file = dir / r.mac;
        std::string text = r.mac + "," + r.ip;
        bool exists = std::filesystem::exists(file);
        if (exists && read_file(file) == text) continue;
        // Written aside and renamed: dnsmasq (inotify) never reads half a file.
        auto tmp = dir / ("." + r.mac + ".tmp");
        std::ofstream(tmp, std::ios::trunc) << text;
        std::filesystem::rename(tmp, file);
        if (exists) hup = true;  // a changed address: dnsmasq keeps the old one until SIGHUP
    }
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        std::string name = entry.path().filename().string();
        if (wanted.count(name)) continue;
        std::filesystem::remove(entry.path());
        if (name[0] != '.') hup = true;
    }
    return hup;
}

Dnsmasq::Dnsmasq(std::filesystem::path executable, std::vector<std::string> args, std::vector<std::string> env,
                 std::filesystem::path log_file)
    : exe_(std::move(executable)), args_(std::move(args)), env_(std::move(env)), log_(std::move(log_file)) {}

Dnsmasq::~Dnsmasq() { stop(); }

Dnsmasq::Event Dnsmasq::supervise(std::chrono::steady_clock::time_point now) {
    Event ev;
    if (pid_ > 0) {
        int status = 0;
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == 0) return ev;  // running
        pid_ = -1;
        if (now - started_ >= std::chrono::seconds(60)) failures_ = 0;
        auto backoff = std::chrono::seconds(std::min(60u, 1u << std::min(failures_, 6u)));
        ++failures_;
        next_start_ = now + backoff;
        ev.kind = Event::exited;
        ev.what = r < 0 ? std::string("lost (") + std::strerror(errno) + ")" : status_text(status);
        ev.next_try = std::chrono::duration_cast<std::chrono::milliseconds>(backoff);
        return ev;
    }
    if (now < next_start_) return ev;

    std::error_code ec;
    std::filesystem::create_directories(log_.parent_path(), ec);
    std::vector<std::string> argv_s{exe_.string()};
    argv_s.insert(argv_s.end(), args_.begin(), args_.end());
    std::vector<char*> argv, envp;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    for (auto& s : env_) envp.push_back(s.data());
    envp.push_back(nullptr);
    // Opened here: the child only dup2()s (async-signal-safe calls only
    // between fork and exec in a threaded process).
    int log_fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    pid_t pid = ::fork();
    if (pid == 0) {
        // Its own process group (a terminal's ^C is not for it), a clean
        // signal mask and default actions (the daemon's threads block some).
        // (No parent-death signal: the kernel clears it when dnsmasq drops
        // root, so a killed daemon's dnsmasq outlives it; the next start
        // ends it, stop_leftover_dnsmasq.)
        ::setpgid(0, 0);
        struct sigaction dfl {};
        dfl.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &dfl, nullptr);
        sigset_t none;
        sigemptyset(&none);
        ::sigprocmask(SIG_SETMASK, &none, nullptr);
        if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
        if (log_fd >= 0) {
            ::dup2(log_fd, STDOUT_FILENO);
            ::dup2(log_fd, STDERR_FILENO);
        }
        ::execve(argv[0], argv.data(), envp.data());
        ::_exit(127);
    }
    int err = errno;
    if (log_fd >= 0) ::close(log_fd);
    if (null_fd >= 0) ::close(null_fd);
    if (pid < 0) {
        auto backoff = std::chrono::seconds(std::min(60u, 1u << std::min(failures_, 6u)));
        ++failures_;
        next_start_ = now + backoff;
        ev.kind = Event::start_failed;
        ev.what = std::strerror(err);
        ev.next_try = std::chrono::duration_cast<std::chrono::milliseconds>(backoff);
        return ev;
    }
    pid_ = pid;
    started_ = now;
    ev.kind = Event::started;
    ev.what = fmt::format("pid {}", pid);
    return ev;
}

void Dnsmasq::stop(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    auto end = std::chrono::steady_clock::now() + grace;
    int status = 0;
    for (;;) {
        pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_ || r < 0) break;
        if (std::chrono::steady_clock::now() >= end) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    pid_ = -1;
    failures_ = 0;
    next_start_ = {};
}

std::vector<int> stop_leftover_dnsmasq(const std::filesystem::path& executable, const std::filesystem::path& hosts_root) {
    return stop_leftover_processes(executable, "--dhcp-hostsdir=" + hosts_root.string() + "/");
}

std::vector<int> stop_leftover_processes(const std::filesystem::path& executable, const std::string& marker) {
    struct stat own {};
    if (::stat("/proc/self/ns/net", &own) != 0) return {};
    std::vector<int> found;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", std::filesystem::directory_options::skip_permission_denied)) {
        std::string name = entry.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
        int pid = std::stoi(name);
        if (pid == ::getpid()) continue;
        std::string cmdline = read_file(entry.path() / "cmdline");
        std::vector<std::string> argv;
        for (size_t p = 0; p < cmdline.size();) {
            size_t end = cmdline.find('\0', p);
            if (end == std::string::npos) end = cmdline.size();
            argv.push_back(cmdline.substr(p, end - p));
            p = end + 1;
        }
        if (argv.empty() || argv[0] != executable.string()) continue;
        if (std::none_of(argv.begin(), argv.end(), [&](const std::string& a) { return a.rfind(marker, 0) == 0; }))
            continue;
        // Only in this daemon's network namespace (another node's daemon on
        // the same host, as in the tests, has its own).
        struct stat ns {};
        if (::stat((entry.path() / "ns" / "net").c_str(), &ns) != 0 || ns.st_ino != own.st_ino || ns.st_dev != own.st_dev)
            continue;
        found.push_back(pid);
    }
    for (int pid : found) ::kill(pid, SIGTERM);
    auto end = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (int pid : found) {
        while (::kill(pid, 0) == 0 && std::chrono::steady_clock::now() < end)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (::kill(pid, 0) == 0) ::kill(pid, SIGKILL);
    }
    return found;
}

void Dnsmasq::reload() {
    if (pid_ > 0) ::kill(pid_, SIGHUP);
}

}  // namespace pvc::network
