#include "lab.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <libvirt/virterror.h>

#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

namespace pvc::e2e {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// The e2e lab has its own name and /24 so it runs beside a developer's lab.
constexpr const char* lab_name = "pvce2e";
constexpr const char* lab_net = "10.123.1";

std::string env_or(const char* name, const std::string& fallback) {
    const char* v = std::getenv(name);
    return v && *v ? v : fallback;
}

void quiet_libvirt_errors() {
    static bool once = [] {
        virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});
        return true;
    }();
    (void)once;
}

}  // namespace

CommandResult run(const std::vector<std::string>& argv) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork failed");
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        std::vector<char*> args;
        for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        execvp(args[0], args.data());
        _exit(127);
    }
    close(fds[1]);
    CommandResult r;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.output.append(buf, n);
    close(fds[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return r;
}

// ---------------------------------------------------------------- Lab

Lab::Lab(LabOptions options) : options_(std::move(options)) {
    if (geteuid() != 0)
        throw std::runtime_error("the e2e lab needs root (network and mount namespaces, libvirtd)");
    // ctest sets both; a binary run by hand falls back to the tree it was built from.
    std::string src = env_or("PVC_SOURCE_DIR", PVC_TEST_SOURCE_DIR);
    std::string build = env_or("PVC_BUILD_DIR", PVC_TEST_BUILD_DIR);
    tools_ = fs::path(src) / "tools" / "lab";
    if (!fs::exists(tools_ / "lab.sh")) throw std::runtime_error("lab harness missing: " + (tools_ / "lab.sh").string());
    fs::path pvcnoded = fs::path(build) / "bin" / "pvcnoded";
    fs::path module = fs::path(build) / "modules" / "libpvc-module-hypervisor.so";
    if (!fs::exists(pvcnoded)) throw std::runtime_error("daemon not built: " + pvcnoded.string());
    if (!fs::exists(module)) throw std::runtime_error("hypervisor module not built: " + module.string());
    fs::path fencing_module = fs::path(build) / "modules" / "libpvc-module-fencing.so";
    if (options_.fencing && !fs::exists(fencing_module))
        throw std::runtime_error("fencing module not built: " + fencing_module.string());
    std::vector<std::string> tools{"libvirtd", "virsh", "qemu-system-x86_64", "java"};
    if (options_.fencing) tools.insert(tools.end(), {"ipmi_sim", "ipmitool", "iptables"});
    for (const auto& tool : tools)
        if (run({"sh", "-c", "command -v " + tool}).status != 0)
            throw std::runtime_error("required tool not installed: " + tool);

    // A fixed directory: a crashed earlier run is cleaned up by the first `down`.
    dir_ = fs::path(env_or("TMPDIR", "/tmp")) / (std::string(lab_name) + "-lab");
    console_dir_ = dir_ / "console";
    // The hypervisor module, and the fencing module only for the fencing tests:
    // the others are about the hypervisor and must not see a fence.
    fs::path modules = dir_ / "modules";

    setenv("PVC_LAB_NAME", lab_name, 1);
    setenv("PVC_LAB_NET", lab_net, 1);
    setenv("PVC_LAB_DIR", dir_.c_str(), 1);
    setenv("PVC_LAB_PVCNODED", pvcnoded.c_str(), 1);
    setenv("PVC_LAB_MODULE_DIR", modules.c_str(), 1);
    setenv("PVC_LAB_CONSOLE_DIR", console_dir_.c_str(), 1);
    setenv("PVC_LAB_VM_SHUTDOWN_TIMEOUT", std::to_string(options_.vm_shutdown_timeout).c_str(), 1);
    setenv("PVC_LAB_KEEPALIVE_INTERVAL", std::to_string(options_.keepalive_interval).c_str(), 1);
    setenv("PVC_LAB_CONSOLE_LOG_LINES", "100", 1);
    setenv("PVC_LAB_DEBUG", "true", 1);
    setenv("PVC_LAB_HOST_LINK", "1", 1);
    std::string coordinators;
    for (int n : options_.coordinators) coordinators += (coordinators.empty() ? "" : " ") + node_name(n);
    setenv("PVC_LAB_COORDINATORS", coordinators.c_str(), 1);
    setenv("PVC_LAB_FENCE_INTERVALS", std::to_string(options_.fence_intervals).c_str(), 1);
    setenv("PVC_LAB_SAVING_THROWS", std::to_string(options_.saving_throws).c_str(), 1);
    setenv("PVC_LAB_SUCCESSFUL_FENCE", options_.successful_fence.c_str(), 1);

    script("lab.sh", {"down"});
    fs::remove_all(dir_);
    fs::create_directories(modules);
    fs::create_directories(console_dir_);
    fs::create_symlink(module, modules / module.filename());
    if (options_.fencing) fs::create_symlink(fencing_module, modules / fencing_module.filename());
    owns_dir_ = true;

    try {
        std::vector<std::string> nodes;
        for (int n : options_.nodes) nodes.push_back(std::to_string(n));
        must("netns.sh", [&] { auto a = std::vector<std::string>{"up"}; a.insert(a.end(), nodes.begin(), nodes.end()); return a; }());
        must("zookeeper.sh", {"start"});
        zk_hosts_ = trim(script("zookeeper.sh", {"hosts"}).output);
        for (auto& n : nodes) must("libvirtd.sh", {"start", n});
        domain_type_ = trim(script("libvirtd.sh", {"accel"}).output);
        if (domain_type_ != "kvm" && domain_type_ != "qemu")
            throw std::runtime_error("cannot tell KVM from TCG: '" + domain_type_ + "'");

        zk::SessionOptions o;
        o.hosts = zk_hosts_;
        zk_ = zk::Session::connect(o);
        // Cluster initialisation, as `pvc cluster init` leaves it (schema apply defaults).
        for (const auto& key : schema::keys_of(schema::Class::base)) {
            std::string p = schema::path(key.name);
            if (p == "/" || zk_->exists(p)) continue;
            zk_->create(p, std::string(key.apply_default));
        }
        zk_->write(schema::path("base.schema.version"), std::to_string(schema::version));

        // BMCs before the daemons: bmc.sh freezes the settings power on needs.
        if (options_.fencing)
            for (auto& n : nodes) must("bmc.sh", {"start", n});
        for (int n : options_.nodes) start_daemon(n);
    } catch (...) {
        teardown();
        throw;
    }
}

Lab::~Lab() { teardown(); }

void Lab::teardown() noexcept {
    try {
        if (zk_) zk_->close();
        zk_.reset();
        if (std::getenv("PVC_E2E_KEEP_LOGS")) setenv("PVC_LAB_KEEP_LOGS", "1", 1);
        script("lab.sh", {"down"});
        if (owns_dir_ && !std::getenv("PVC_E2E_KEEP_LOGS")) fs::remove_all(dir_);
    } catch (...) {
    }
}

CommandResult Lab::script(const std::string& name, const std::vector<std::string>& args) const {
    std::vector<std::string> argv{(tools_ / name).string()};
    argv.insert(argv.end(), args.begin(), args.end());
    return run(argv);
}

void Lab::must(const std::string& name, const std::vector<std::string>& args) const {
    auto r = script(name, args);
    if (r.status != 0) {
        std::string cmd = name;
        for (auto& a : args) cmd += " " + a;
        throw std::runtime_error("lab: `" + cmd + "` failed (" + std::to_string(r.status) + "):\n" + r.output);
    }
}

std::string Lab::libvirt_uri(int n) const {
    return "qemu+tcp://" + std::string(lab_net) + "." + std::to_string(n) + "/system";
}

CommandResult Lab::in_node(int n, const std::vector<std::string>& argv) const {
    std::vector<std::string> args{"exec", std::to_string(n)};
    args.insert(args.end(), argv.begin(), argv.end());
    return script("netns.sh", args);
}

void Lab::start_daemon(int n) {
    must("node.sh", {"start", std::to_string(n)});
    // Registered and running: the first keepalive writes daemonstate=run.
    if (!wait_daemon_run(n, 30s))
        throw std::runtime_error("pvcnoded " + node_name(n) + " did not reach daemonstate=run:\n" + daemon_log(n));
}

bool Lab::daemon_running(int n) const { return script("node.sh", {"status", std::to_string(n)}).status == 0; }

bool Lab::wait_daemon_run(int n, std::chrono::milliseconds timeout) const {
    std::string key = schema::path("node.state.daemon", {node_name(n)});
    auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
        if (zk_->get(key).value_or("") == "run" && daemon_running(n)) return true;
        std::this_thread::sleep_for(50ms);
    }
    return false;
}

std::string Lab::bmc_addr(int n) const { return trim(script("bmc.sh", {"addr", std::to_string(n)}).output); }

CommandResult Lab::chassis_power(int n, const std::string& op) const {
    // As a client of the BMC would; -C 3 spares ipmi_sim's cipher-suite probing.
    return run({"ipmitool", "-I", "lanplus", "-C", "3", "-H", bmc_addr(n), "-U", "admin", "-P", "pass", "chassis",
                "power", op});
}

std::string Lab::chassis_log(int n) const {
    std::ifstream in(dir_ / node_name(n) / "bmc" / "chassis.log");
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

int Lab::libvirtd_pid(int n) const {
    // "libvirtd <node> running pid=<pid> <uri>"
    auto out = script("libvirtd.sh", {"status", std::to_string(n)}).output;
    auto at = out.find("pid=");
    if (at == std::string::npos) return -1;
    return std::atoi(out.c_str() + at + 4);
}

void Lab::stop_daemon(int n) { script("node.sh", {"stop", std::to_string(n)}); }

std::string Lab::daemon_log(int n) const { return script("node.sh", {"log", std::to_string(n)}).output; }

std::string Lab::all_daemon_logs() const {
    std::string out;
    for (int n : options_.nodes) {
        std::string log = daemon_log(n);
        if (log.size() > 6000) log = "...\n" + log.substr(log.size() - 6000);
        out += "----- pvcnoded " + node_name(n) + " (tail) -----\n" + log;
    }
    return out;
}

// ---------------------------------------------------------------- NodeView

NodeView::NodeView(const std::string& uri) : uri_(uri) {
    quiet_libvirt_errors();
    conn_ = virConnectOpen(uri.c_str());
    if (!conn_) {
        virErrorPtr e = virGetLastError();
        throw std::runtime_error("cannot open " + uri + ": " + (e && e->message ? e->message : "?"));
    }
}

NodeView::~NodeView() {
    if (conn_) virConnectClose(conn_);
}

std::optional<int> NodeView::state(const std::string& uuid) {
    virDomainPtr d = virDomainLookupByUUIDString(conn_, uuid.c_str());
    if (!d) return std::nullopt;
    int st = 0, reason = 0;
    int rc = virDomainGetState(d, &st, &reason, 0);
    virDomainFree(d);
    if (rc < 0) return std::nullopt;
    return st;
}

int NodeView::id(const std::string& uuid) {
    virDomainPtr d = virDomainLookupByUUIDString(conn_, uuid.c_str());
    if (!d) return -1;
    unsigned int id = virDomainGetID(d);
    virDomainFree(d);
    return id == static_cast<unsigned int>(-1) ? -1 : static_cast<int>(id);
}

bool NodeView::destroy(const std::string& uuid) {
    virDomainPtr d = virDomainLookupByUUIDString(conn_, uuid.c_str());
    if (!d) return false;
    int rc = virDomainDestroy(d);
    virDomainFree(d);
    return rc == 0;
}

bool NodeView::pause_and_resume(const std::string& uuid) {
    virDomainPtr d = virDomainLookupByUUIDString(conn_, uuid.c_str());
    if (!d) return false;
    bool ok = virDomainSuspend(d) == 0 && virDomainResume(d) == 0;
    virDomainFree(d);
    return ok;
}

bool NodeView::connected() const { return conn_ && virConnectIsAlive(conn_) == 1; }

// ---------------------------------------------------------------- Client

void Client::define(const std::string& uuid, const std::string& name, const std::string& xml,
                    const std::string& node, const std::string& state, const std::string& migration_method) {
    auto k = [&](const char* key) { return schema::path(key, {uuid}); };
    bool ok = zk_->write({
        {k("domain.name"), name},
        {k("domain.xml"), xml},
        {k("domain.state"), state},
        {k("domain.profile"), "None"},
        {k("domain.stats"), ""},
        {k("domain.node"), node},
        {k("domain.last_node"), ""},
        {k("domain.failed_reason"), ""},
        {k("domain.storage.volumes"), ""},
        {k("domain.console.log"), ""},
        {k("domain.console.vnc"), ""},
        {k("domain.meta.autostart"), "False"},
        {k("domain.meta.migrate_method"), migration_method},
        {k("domain.meta.node_limit"), ""},
        {k("domain.meta.node_selector"), "none"},
        {k("domain.meta.tags"), ""},
        {k("domain.migrate.sync_lock"), ""},
    });
    if (!ok) throw std::runtime_error("define of " + uuid + " failed");
}

void Client::change_state(const std::string& uuid, const std::string& state) {
    zk::Lock lock(zk_, schema::path("domain.state", {uuid}), zk::LockKind::exclusive);
    if (!lock.acquire(30s)) throw std::runtime_error("state lock of " + uuid + " not acquired");
    if (!zk_->write(schema::path("domain.state", {uuid}), state))
        throw std::runtime_error("write state=" + state + " failed");
    std::this_thread::sleep_for(500ms);
    lock.release();
}

void Client::migrate(const std::string& uuid, const std::string& target, const std::string& lastnode, bool live) {
    std::string state_key = schema::path("domain.state", {uuid});
    zk::Lock lock(zk_, state_key, zk::LockKind::exclusive);
    if (!lock.acquire(30s)) throw std::runtime_error("state lock of " + uuid + " not acquired");
    std::string current = zk_->get(state_key).value_or("");
    std::string state = current == "start" ? (live ? "migrate-live" : "migrate") : current;
    if (!zk_->write({{state_key, state},
                     {schema::path("domain.node", {uuid}), target},
                     {schema::path("domain.last_node", {uuid}), lastnode}}))
        throw std::runtime_error("migrate write failed");
    std::this_thread::sleep_for(500ms);
    lock.release();
}

std::string Client::get(const std::string& key, const std::string& uuid) const {
    return zk_->get(schema::path(key, {uuid})).value_or("<absent>");
}

std::string Client::node_key(const std::string& key, const std::string& node) const {
    return zk_->get(schema::path(key, {node})).value_or("<absent>");
}

// ---------------------------------------------------------------- helpers

std::string tiny_domain_xml(const std::string& type, const std::string& name, const std::string& uuid,
                            const fs::path& console_dir) {
    std::ostringstream x;
    x << "<domain type='" << type << "'>\n"
      << "  <name>" << name << "</name>\n"
      << "  <uuid>" << uuid << "</uuid>\n"
      << "  <memory unit='MiB'>64</memory>\n"
      << "  <vcpu>1</vcpu>\n"
      << "  <os><type arch='x86_64' machine='pc'>hvm</type></os>\n"
      << "  <features><acpi/></features>\n"
      << "  <on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>restart</on_crash>\n"
      << "  <devices>\n"
      << "    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
      << "    <serial type='pty'><log file='" << (console_dir / (name + ".log")).string()
      << "' append='on'/><target port='0'/></serial>\n"
      << "    <console type='pty'><target type='serial' port='0'/></console>\n"
      << "    <memballoon model='none'/>\n"
      << "  </devices>\n"
      << "</domain>\n";
    return x.str();
}

std::string random_uuid() {
    std::random_device rd;
    std::mt19937_64 g(rd());
    const char* hex = "0123456789abcdef";
    std::string s;
    for (int i = 0; i < 32; ++i) {
        if (i == 8 || i == 12 || i == 16 || i == 20) s += '-';
        int v = static_cast<int>(g() & 15);
        if (i == 12) v = 4;
        if (i == 16) v = 8 | (v & 3);
        s += hex[v];
    }
    return s;
}

}  // namespace pvc::e2e
