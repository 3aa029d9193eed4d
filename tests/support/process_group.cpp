#include "pvc/test/process_group.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <thread>

namespace pvc::test {

ProcessGroup::ProcessGroup(std::vector<std::string> argv, std::filesystem::path log)
    : argv_(std::move(argv)), log_(std::move(log)) {}

ProcessGroup::~ProcessGroup() { kill_now(); }

void ProcessGroup::spawn() {
    if (pid_ > 0) return;
    std::vector<char*> args;
    for (auto& a : argv_) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            ::close(fd);
        }
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        execvp(args[0], args.data());
        _exit(127);
    }
    setpgid(pid, pid);
    pid_ = pid;
}

bool ProcessGroup::alive() {
    if (pid_ <= 0) return false;
    int st;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return false;
    }
    return true;
}

void ProcessGroup::stop(int sig, std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    ::kill(-pid_, sig);
    auto end = std::chrono::steady_clock::now() + grace;
    int st;
    while (std::chrono::steady_clock::now() < end) {
        if (waitpid(pid_, &st, WNOHANG) == pid_) {
            ::kill(-pid_, SIGKILL);  // any straggler in the group
            pid_ = -1;
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill_now();
}

void ProcessGroup::kill_now() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    int st;
    waitpid(pid_, &st, 0);
    pid_ = -1;
}

}  // namespace pvc::test
