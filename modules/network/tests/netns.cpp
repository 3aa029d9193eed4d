#include "netns.hpp"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <boost/process.hpp>

namespace bp = boost::process;

namespace pvc::network::test {

Result run(const std::vector<std::string>& argv) {
    bp::ipstream out;
    bp::child c(bp::search_path(argv.at(0)), std::vector<std::string>(argv.begin() + 1, argv.end()),
                (bp::std_out & bp::std_err) > out, bp::std_in < bp::null);
    Result r;
    std::string line;
    while (std::getline(out, line)) r.out += line + "\n";
    c.wait();
    r.status = c.exit_code();
    return r;
}

std::string must(const std::vector<std::string>& argv) {
    Result r = run(argv);
    if (r.status != 0) {
        std::string cmd;
        for (const auto& a : argv) cmd += a + " ";
        throw std::runtime_error(cmd + "failed (" + std::to_string(r.status) + "): " + r.out);
    }
    return r.out;
}

Netns::Netns(std::string name) : name_(std::move(name)) {
    run({"ip", "netns", "del", name_});  // a leftover of a killed run
    must({"ip", "netns", "add", name_});
    must({"ip", "-n", name_, "link", "set", "lo", "up"});
}

Netns::~Netns() {
    // Whatever the test started in it and left running (a daemon's dnsmasq
    // after a SIGKILL, a guest's client) would outlive the namespace's name.
    std::istringstream pids(run({"ip", "netns", "pids", name_}).out);
    for (int pid; pids >> pid;)
        if (pid != ::getpid()) ::kill(pid, SIGKILL);
    run({"ip", "netns", "del", name_});
}

Result Netns::exec(const std::vector<std::string>& argv) const {
    std::vector<std::string> full{"ip", "netns", "exec", name_};
    full.insert(full.end(), argv.begin(), argv.end());
    return run(full);
}

std::string Netns::must_exec(const std::vector<std::string>& argv) const {
    std::vector<std::string> full{"ip", "netns", "exec", name_};
    full.insert(full.end(), argv.begin(), argv.end());
    return must(full);
}

InNetns::InNetns(const std::string& ns) {
    home_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    int fd = ::open(("/run/netns/" + ns).c_str(), O_RDONLY | O_CLOEXEC);
    if (home_ < 0 || fd < 0) throw std::runtime_error("cannot open namespace " + ns + ": " + std::strerror(errno));
    int rc = ::setns(fd, CLONE_NEWNET);
    int err = errno;
    ::close(fd);
    if (rc != 0) throw std::runtime_error("setns " + ns + ": " + std::strerror(err));
}

InNetns::~InNetns() {
    if (home_ >= 0) {
        (void)::setns(home_, CLONE_NEWNET);
        ::close(home_);
    }
}

std::string ns_prefix() { return "pn" + std::to_string(::getpid() % 100000); }

}  // namespace pvc::network::test
