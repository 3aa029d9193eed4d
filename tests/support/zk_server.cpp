// Real ZooKeeper servers for tests, plus process and temp-dir helpers.
#include "pvc/test/zk_server.hpp"

#include "pvc/test/ports.hpp"

#include "pvc/test/process_group.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace pvc::test {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------- small helpers

TempDir::TempDir(const std::string& tag) {
    std::string tmpl = (fs::temp_directory_path() / (tag + "-XXXXXX")).string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data())) throw std::runtime_error("mkdtemp failed: " + std::string(std::strerror(errno)));
    path_ = buf.data();
}

TempDir::~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
}

std::string unique_name(const std::string& base) {
    static std::atomic<int> n{0};
    return base + "t" + std::to_string(getpid()) + "x" + std::to_string(++n);
}

namespace {

// Sends a four-letter word, returns the reply ("" if the server does not answer).
std::string four_letter(int port, const std::string& cmd) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return {};
    timeval tv{1, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    std::string out;
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && send(fd, cmd.data(), cmd.size(), 0) > 0) {
        char buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
    }
    ::close(fd);
    return out;
}

std::string mode_of(int port) {
    auto r = four_letter(port, "srvr");
    auto p = r.find("Mode: ");
    if (p == std::string::npos) return {};
    auto e = r.find('\n', p);
    return r.substr(p + 6, e - p - 6);
}

void write_file(const fs::path& p, const std::string& s) {
    std::ofstream f(p);
    f << s;
    if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string tail_of(const fs::path& p, size_t bytes = 3000) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    std::string s = ss.str();
    return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

// One JVM running QuorumPeerMain.
std::unique_ptr<ProcessGroup> java_server(const fs::path& cfg, const fs::path& log) {
    return std::make_unique<ProcessGroup>(
        std::vector<std::string>{"java", "-Xms32m", "-Xmx128m", "-XX:+UseSerialGC", "-XX:MaxMetaspaceSize=64m", "-Xss512k",
                                 "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
                                 "-Dorg.slf4j.simpleLogger.showDateTime=true", "-cp",
                                 "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar",
                                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg.string()},
        log);
}

std::string base_config(const fs::path& data, int client_port, const std::string& client_address = "127.0.0.1") {
    return "tickTime=500\n"
           "initLimit=20\n"
           "syncLimit=4\n"
           "dataDir=" + data.string() + "\n"
           "clientPortAddress=" + client_address + "\n"
           "clientPort=" + std::to_string(client_port) + "\n"
           "maxClientCnxns=0\n"
           "admin.enableServer=false\n"
           "4lw.commands.whitelist=*\n"
           "reconfigEnabled=false\n";
}

}  // namespace

// ---------------------------------------------------------------- standalone

struct ZkServer::Impl {
    TempDir dir{"pvc-zk"};
    int port = reserve_port();
    std::unique_ptr<ProcessGroup> java;

    void wait_ready(std::chrono::milliseconds timeout) {
        auto end = Clock::now() + timeout;
        while (Clock::now() < end) {
            // Ours, not another server on the same port: `conf` names our data directory.
            if (four_letter(port, "ruok") == "imok" && !mode_of(port).empty() &&
                four_letter(port, "conf").find(dir.path().string()) != std::string::npos)
                return;
            if (!java->alive()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(30));
        }
        throw std::runtime_error("ZooKeeper on port " + std::to_string(port) + " did not become ready; log:\n" +
                                 tail_of(java->log()));
    }
};

ZkServer::ZkServer() : ZkServer("127.0.0.1") {}

ZkServer::ZkServer(const std::string& client_address) : impl_(std::make_unique<Impl>()) {
    auto data = impl_->dir.path() / "data";
    fs::create_directories(data);
    auto cfg = impl_->dir.path() / "zoo.cfg";
    write_file(cfg, base_config(data, impl_->port, client_address));
    impl_->java = java_server(cfg, impl_->dir.path() / "zookeeper.log");
    start();
}

ZkServer::~ZkServer() { impl_->java->kill_now(); }

std::string ZkServer::hosts() const { return "127.0.0.1:" + std::to_string(impl_->port); }
int ZkServer::port() const { return impl_->port; }

void ZkServer::stop() { impl_->java->stop(SIGTERM, std::chrono::seconds(10)); }

void ZkServer::start() {
    impl_->java->spawn();
    impl_->wait_ready(std::chrono::seconds(60));
}

// ---------------------------------------------------------------- ensemble

struct ZkEnsemble::Impl {
    TempDir dir{"pvc-zkens"};
    struct Member {
        int client, quorum, election;
        std::unique_ptr<ProcessGroup> java;
    };
    std::vector<Member> members;
};

ZkEnsemble::ZkEnsemble(int n) : impl_(std::make_unique<Impl>()) {
    for (int i = 0; i < n; ++i) impl_->members.push_back({reserve_port(), reserve_port(), reserve_port(), nullptr});
    std::string servers;
    for (int i = 0; i < n; ++i) {
        const auto& m = impl_->members[static_cast<size_t>(i)];
        servers += "server." + std::to_string(i + 1) + "=127.0.0.1:" + std::to_string(m.quorum) + ":" +
                   std::to_string(m.election) + "\n";
    }
    for (int i = 0; i < n; ++i) {
        auto& m = impl_->members[static_cast<size_t>(i)];
        auto d = impl_->dir.path() / ("m" + std::to_string(i + 1));
        fs::create_directories(d / "data");
        write_file(d / "data" / "myid", std::to_string(i + 1) + "\n");
        write_file(d / "zoo.cfg", base_config(d / "data", m.client) + servers);
        m.java = java_server(d / "zoo.cfg", d / "zookeeper.log");
    }
    for (auto& m : impl_->members) m.java->spawn();
    wait_quorum();
}

ZkEnsemble::~ZkEnsemble() {
    for (auto& m : impl_->members) m.java->kill_now();
}

std::string ZkEnsemble::hosts() const {
    std::string out;
    for (size_t i = 0; i < impl_->members.size(); ++i) out += (i ? "," : "") + host(static_cast<int>(i));
    return out;
}

std::string ZkEnsemble::host(int i) const {
    return "127.0.0.1:" + std::to_string(impl_->members.at(static_cast<size_t>(i)).client);
}

void ZkEnsemble::kill(int i) { impl_->members.at(static_cast<size_t>(i)).java->kill_now(); }

void ZkEnsemble::start(int i) { impl_->members.at(static_cast<size_t>(i)).java->spawn(); }

int ZkEnsemble::leader() const {
    for (size_t i = 0; i < impl_->members.size(); ++i)
        if (impl_->members[i].java->alive() && mode_of(impl_->members[i].client) == "leader") return static_cast<int>(i);
    return -1;
}

void ZkEnsemble::wait_quorum(std::chrono::milliseconds timeout) {
    auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
        int leaders = 0, serving = 0, alive = 0;
        for (auto& m : impl_->members) {
            if (!m.java->alive()) continue;
            ++alive;
            auto mode = mode_of(m.client);
            if (mode == "leader") ++leaders;
            if (mode == "leader" || mode == "follower") ++serving;
        }
        // Every running member serves, and there is exactly one leader.
        if (leaders == 1 && serving == alive && serving * 2 > static_cast<int>(impl_->members.size())) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::string logs;
    for (auto& m : impl_->members) logs += tail_of(m.java->log(), 1500) + "\n----\n";
    throw std::runtime_error("ZooKeeper ensemble has no quorum; logs:\n" + logs);
}

// ---------------------------------------------------------------- processes

ProcResult run_command(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
    if (argv.empty()) throw std::invalid_argument("run_command: empty argv");
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(out[1], 1);
        dup2(err[1], 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        std::vector<char*> args;
        for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    setpgid(pid, pid);
    ::close(out[1]);
    ::close(err[1]);
    ProcResult r{-1, {}, {}};
    auto end = Clock::now() + timeout;
    pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
    int open_fds = 2;
    bool timed_out = false;
    while (open_fds > 0) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        if (poll(fds, 2, static_cast<int>(std::min<long>(left, 200))) < 0 && errno != EINTR) break;
        for (int i = 0; i < 2; ++i) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            char buf[4096];
            ssize_t n = read(fds[i].fd, buf, sizeof buf);
            if (n > 0) (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
            else {
                ::close(fds[i].fd);
                fds[i].fd = -1;
                --open_fds;
            }
        }
    }
    if (timed_out) ::kill(-pid, SIGKILL);
    for (auto& f : fds)
        if (f.fd >= 0) ::close(f.fd);
    int st = 0;
    waitpid(pid, &st, 0);
    if (timed_out) r.status = -1;
    else if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
    else r.status = 128 + WTERMSIG(st);
    if (timed_out) r.err += "\n[timed out]";
    return r;
}

namespace {

std::string hex(const std::string& bytes) {
    static const char* d = "0123456789abcdef";
    std::string out;
    for (unsigned char c : bytes) {
        out += d[c >> 4];
        out += d[c & 15];
    }
    return out;
}

// Connects with an existing session's id and password, then sends closeSession.
const char* const close_session_script = R"PY(
import socket, struct, sys, time
port, sid, passwd = int(sys.argv[1]), int(sys.argv[2]), bytes.fromhex(sys.argv[3])
class Closed(Exception): pass
def attempt():
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    def send(payload): s.sendall(struct.pack(">i", len(payload)) + payload)
    def exact(n):
        b = b""
        while len(b) < n:
            c = s.recv(n - len(b))
            if not c: raise Closed()
            b += c
        return b
    def recv(): return exact(struct.unpack(">i", exact(4))[0])
    send(struct.pack(">iqiqi", 0, 0, 2000, sid, len(passwd)) + passwd + b"\x00")
    _, timeout, got = struct.unpack(">iiq", recv()[:16])
    if timeout <= 0: return  # the session is gone: done
    if got != sid: raise SystemExit("session not taken over: %r" % got)
    send(struct.pack(">ii", 1, -11))  # xid 1, closeSession
    recv()  # the reply confirms the close
# Our own client reconnects at once and may win the session back before the
# close is processed: try again until the server confirms or reports it expired.
for i in range(50):
    try:
        attempt()
        sys.exit(0)
    except (Closed, ConnectionError):
        time.sleep(0.05)
sys.exit("could not take the session over")
)PY";

}  // namespace

ProcResult close_session(int port, const zk::Session& session) {
    return run_python(close_session_script,
                      {std::to_string(port), std::to_string(session.session_id()), hex(session.session_password())});
}

ProcResult run_python(const std::string& script, const std::vector<std::string>& args, std::chrono::seconds timeout) {
    std::vector<std::string> argv{"/usr/bin/python3", "-c", script};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_command(argv, timeout);
}

}  // namespace pvc::test
