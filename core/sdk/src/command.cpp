#include "pvc/command.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace pvc {
namespace {

// One owned file descriptor.
class Fd {
public:
    explicit Fd(int fd = -1) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
};

// posix_spawn attributes and file actions, destroyed with the scope.
struct SpawnSetup {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    SpawnSetup() {
        posix_spawn_file_actions_init(&actions);
        posix_spawnattr_init(&attr);
    }
    ~SpawnSetup() {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
    }
};

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv,
                          const std::vector<std::pair<std::string, std::string>>& env,
                          std::chrono::milliseconds timeout) {
    CommandResult result;
    if (argv.empty()) return result;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) {
        result.output = std::string("pipe: ") + std::strerror(errno);
        return result;
    }
    Fd read_end(fds[0]), write_end(fds[1]);

    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e) {
        std::string_view entry(*e);
        bool replaced = false;
        for (const auto& [k, v] : env)
            if (entry.size() > k.size() && entry.substr(0, k.size()) == k && entry[k.size()] == '=') replaced = true;
        if (!replaced) env_strings.emplace_back(entry);
    }
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_copy = argv;
    for (auto& s : argv_copy) args.push_back(s.data());
    args.push_back(nullptr);

    SpawnSetup setup;
    posix_spawn_file_actions_addopen(&setup.actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&setup.actions, write_end.get(), 1);
    posix_spawn_file_actions_adddup2(&setup.actions, write_end.get(), 2);
    posix_spawnattr_setpgroup(&setup.attr, 0);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&setup.attr, &defaults);
    posix_spawnattr_setsigmask(&setup.attr, &none);
    posix_spawnattr_setflags(&setup.attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, args[0], &setup.actions, &setup.attr, args.data(), envp.data());
    if (rc != 0) {
        result.output = "cannot run " + argv[0] + ": " + std::strerror(rc);
        return result;
    }
    write_end.reset();

    const auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[4096];
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            result.timed_out = true;
            break;
        }
        pollfd p{read_end.get(), POLLIN, 0};
        int n = ::poll(&p, 1, static_cast<int>(left.count()));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) continue;  // timeout is handled at the loop's top
        ssize_t r = ::read(read_end.get(), buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;  // EOF: every writer (the command and its children) is gone
        result.output.append(buf, static_cast<std::size_t>(r));
    }
    if (result.timed_out) ::kill(-pid, SIGKILL);
    int status = 0;
    for (;;) {
        // Output closed early by the command (or it left a child holding it):
        // the wait itself is bounded by the same deadline.
        pid_t w = ::waitpid(pid, &status, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) return result;
        if (std::chrono::steady_clock::now() >= deadline && !result.timed_out) {
            result.timed_out = true;
            ::kill(-pid, SIGKILL);
        }
        ::usleep(5000);
    }
    if (!result.timed_out && WIFEXITED(status)) result.exit_status = WEXITSTATUS(status);
    return result;
}

}  // namespace pvc
