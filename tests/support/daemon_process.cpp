#include "pvc/test/daemon_process.hpp"

#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/process.hpp>
#include <gtest/gtest.h>

namespace bp = boost::process;

namespace pvc::test {

std::string build_dir() { return PVC_TEST_BUILD_DIR; }
std::string pvcnoded_binary() { return build_dir() + "/bin/pvcnoded"; }

std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

namespace {
std::string hosts_file(const std::filesystem::path& dir) {
    auto p = dir / "hosts";
    std::ofstream out(p);
    out << "127.0.0.1 localhost";
    for (int i = 1; i <= 9; ++i) out << " hv" << i << " pvchv" << i;
    out << "\n";
    return p.string();
}
}  // namespace

struct DaemonProcess::Impl {
    bp::child child;
    std::filesystem::path err;
};

namespace {
// A sanitizer report in the daemon's stderr fails the test that ran it: the
// daemon is often ended by SIGKILL, so its exit status cannot say so.
void check_sanitizer_reports(const std::filesystem::path& err) {
    std::string text = slurp(err);
    for (const char* marker : {"WARNING: ThreadSanitizer", "ERROR: AddressSanitizer", "runtime error:"}) {
        if (text.find(marker) != std::string::npos) {
            ADD_FAILURE() << "pvcnoded reported \"" << marker << "\" (" << err.string() << "):\n" << text;
            return;
        }
    }
}
}  // namespace

DaemonProcess::DaemonProcess(const std::string& node, const std::filesystem::path& config,
                             const std::filesystem::path& log)
    : impl_(new Impl{bp::child(bp::search_path("unshare"), "-u", "-m", "--propagation", "private", "--", "sh", "-c",
                               "mount --bind \"$3\" /etc/hosts && hostname \"$0\" && exec \"$1\" --config \"$2\"", node,
                               pvcnoded_binary(), config.string(), hosts_file(config.parent_path()),
                               bp::std_out > log.string(), bp::std_err > log.string() + ".err",
                               bp::std_in < bp::null),
                         log.string() + ".err"}) {}

DaemonProcess::~DaemonProcess() {
    if (impl_->child.running()) {
        ::kill(impl_->child.id(), SIGKILL);
        impl_->child.wait();
    }
    check_sanitizer_reports(impl_->err);
}

void DaemonProcess::signal(int sig) { ::kill(impl_->child.id(), sig); }

// Polled: boost::process's wait_for waits for SIGCHLD and can miss this
// child's exit when several children end at once (a bench stopping ten
// daemons together waited minutes for daemons gone in 0.3 s).
int DaemonProcess::wait(std::chrono::milliseconds timeout) {
    const auto until = std::chrono::steady_clock::now() + timeout;
    while (impl_->child.running()) {
        if (std::chrono::steady_clock::now() >= until) return -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return impl_->child.exit_code();
}

bool DaemonProcess::running() { return impl_->child.running(); }
int DaemonProcess::pid() const { return impl_->child.id(); }

}  // namespace pvc::test
