// Reaction latency of the hypervisor module: a client writes state=start and
// the VM runs and is acknowledged in ZooKeeper (the node's runningdomains);
// the same for state=stop. libvirt's own create/destroy time is measured
// alone on the same URI, so what remains is the daemon's overhead (ZooKeeper
// watch delivery, dispatch, the acknowledging write, its watch back).
//
//   hv_latency_bench [runs]        default 200 runs against test:///default
//   PVC_BENCH_LIBVIRT_URI=qemu+tcp://10.123.0.1/system hv_latency_bench 20
//                                  a real libvirtd (e.g. a lab node), smaller sample
//
// The module is the built .so, loaded through Boost.DLL as pvcnoded does, with
// a real ZooKeeper (test support). Writes are plain (no client state lock), so
// the client's 0.5 s lock hold is not part of the figures. Prints figures only.
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/dll/import.hpp>
#include <boost/dll/shared_library.hpp>

#include "daemon/module_info.hpp"
#include "config_reader.hpp"
#include "pvc/log.hpp"
#include "pvc/module.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Series {
    explicit Series(std::string n) : name(std::move(n)) {}
    std::string name;
    std::vector<double> v;
    void print() const {
        if (v.empty()) {
            std::printf("  %-44s no samples\n", name.c_str());
            return;
        }
        auto s = v;
        std::sort(s.begin(), s.end());
        auto pct = [&](double p) { return s[std::min(s.size() - 1, static_cast<size_t>(p * s.size()))]; };
        std::printf("  %-44s n=%-4zu median %8.3f ms   p99 %8.3f ms   max %8.3f ms\n", name.c_str(), s.size(),
                    pct(0.5), pct(0.99), s.back());
    }
    double median() const {
        auto s = v;
        std::sort(s.begin(), s.end());
        return s.empty() ? 0 : s[s.size() / 2];
    }
};

std::string uuid_n(int i) {
    char b[40];
    std::snprintf(b, sizeof b, "6b656e63-6800-4000-8000-%012d", i);
    return b;
}

std::string domain_xml(const std::string& type, const std::string& name, const std::string& uuid,
                       const fs::path& console) {
    return "<domain type='" + type + "'><name>" + name + "</name><uuid>" + uuid +
           "</uuid><memory unit='MiB'>64</memory><vcpu>1</vcpu>"
           "<os><type arch='x86_64' machine='pc'>hvm</type></os><features><acpi/></features>"
           "<on_poweroff>destroy</on_poweroff><on_reboot>restart</on_reboot><on_crash>restart</on_crash>"
           "<devices><emulator>/usr/bin/qemu-system-x86_64</emulator>"
           "<serial type='pty'><log file='" + (console / (name + ".log")).string() +
           "' append='on'/><target port='0'/></serial><memballoon model='none'/></devices></domain>";
}

bool libvirt_running(virConnectPtr c, const std::string& uuid) {
    virDomainPtr d = virDomainLookupByUUIDString(c, uuid.c_str());
    if (!d) return false;
    int st = 0, r = 0;
    bool running = virDomainGetState(d, &st, &r, 0) == 0 && st == VIR_DOMAIN_RUNNING;
    virDomainFree(d);
    return running;
}

// Signalled from a ZooKeeper data watch; waits for a predicate over the value.
class Watched {
public:
    Watched(const std::shared_ptr<pvc::zk::Session>& zk, const std::string& path) {
        watch_ = zk->watch_data(path, [this](const std::optional<std::string>& v, const pvc::zk::Stat&) {
            std::lock_guard g(m_);
            value_ = v.value_or("");
            cv_.notify_all();
        });
    }
    bool wait(const std::function<bool(const std::string&)>& pred, std::chrono::milliseconds timeout) {
        std::unique_lock g(m_);
        return cv_.wait_for(g, timeout, [&] { return pred(value_); });
    }

private:
    std::mutex m_;
    std::condition_variable cv_;
    std::string value_;
    std::shared_ptr<pvc::zk::Watch> watch_;
};

bool has_word(const std::string& list, const std::string& w) {
    return (" " + list + " ").find(" " + w + " ") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
    int runs = argc > 1 ? std::atoi(argv[1]) : 200;
    const char* uri_env = std::getenv("PVC_BENCH_LIBVIRT_URI");
    std::string uri = uri_env && *uri_env ? uri_env : "test:///default";
    bool test_driver = uri.rfind("test:", 0) == 0;
    std::string type = test_driver ? "kvm" : (std::getenv("PVC_BENCH_DOMAIN_TYPE") ? std::getenv("PVC_BENCH_DOMAIN_TYPE") : "kvm");
    const char* build = std::getenv("PVC_BUILD_DIR");
    fs::path module_file = fs::path(build ? build : PVC_BENCH_BUILD_DIR) / "modules" / "libpvc-module-hypervisor.so";
    if (!fs::exists(module_file)) {
        std::cerr << "hv_latency_bench: module not built: " << module_file << "\n";
        return 1;
    }
    virSetErrorFunc(nullptr, [](void*, virErrorPtr) {});

    pvc::test::TempDir tmp("hvbench");
    fs::path console = tmp.path() / "console";
    fs::create_directories(console);
    pvc::test::ZkServer server;
    pvc::zk::SessionOptions so;
    so.hosts = server.hosts();
    auto zk = pvc::zk::Session::connect(so);

    const std::string me = "bench1";
    for (auto cls : {pvc::schema::Class::base, pvc::schema::Class::node}) {
        for (const auto& key : pvc::schema::keys_of(cls)) {
            std::string p = cls == pvc::schema::Class::node ? pvc::schema::path(key.name, {me}) : pvc::schema::path(key.name);
            if (p != "/" && !zk->exists(p)) zk->create(p, std::string(key.apply_default));
        }
    }
    zk->write({{pvc::schema::path("base.schema.version"), std::to_string(pvc::schema::version)},
               {pvc::schema::path("node.running_domains", {me}), ""},
               {pvc::schema::path("node.state.domain", {me}), "ready"}});

    pvc::Config cfg;
    cfg.node = me;
    cfg.host = pvc::host_identity(me);
    cfg.daemon_mode = "hypervisor";
    cfg.enable_hypervisor = true;
    cfg.coordinators = {server.hosts()};
    cfg.zookeeper_hosts = server.hosts();
    // The module reads its own keys from the document (Module::configure).
    cfg.document = pvc::parse_config_tree("pvc:\n"
                                          "  cluster:\n    networks:\n      cluster:\n        domain: pvc.local\n"
                                          "  system:\n"
                                          "    hypervisor:\n      libvirt_uri: \"" + uri + "\"\n"
                                          "    configuration:\n"
                                          "      directories:\n        console_log_directory: \"" + console.string() + "\"\n"
                                          "      logging:\n        console_log_lines: 100\n",
                                          "bench.yaml");
    cfg.vm_shutdown_timeout = 3;
    cfg.keepalive_interval = 5;
    cfg.dynamic_directory = tmp.path() / "run";
    cfg.log_directory = tmp.path() / "log";

    auto sink = pvc::make_log_sink(&cfg);
    pvc::Executor executor(4);
    pvc::CoreEvents events;
    auto guard = boost::asio::make_work_guard(executor.io());
    std::vector<std::thread> io_threads;
    for (int i = 0; i < 2; ++i) io_threads.emplace_back([&] { executor.io().run(); });
    pvc::ServiceRegistry services;
    pvc::NodeContext ctx{cfg, pvc::Logger(sink, "hypervisor"), zk, executor, events, services};

    boost::dll::shared_library lib(module_file, boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local);
    if (pvc::read_module_info(module_file).abi != pvc::abi_fingerprint()) {
        std::cerr << "hv_latency_bench: module ABI mismatch\n";
        return 1;
    }
    auto create = boost::dll::import_alias<pvc::ModuleFactory>(lib, "pvc_module_create");
    std::unique_ptr<pvc::Module> module = create();
    pvc::ConfigProblems problems;
    module->configure(cfg, problems);
    if (!problems.empty()) {
        std::cerr << "hv_latency_bench: " << problems.list().front().to_string("bench.yaml") << "\n";
        return 1;
    }
    module->start(ctx);

    virConnectPtr conn = virConnectOpen(uri.c_str());
    if (!conn) {
        std::cerr << "hv_latency_bench: cannot open " << uri << "\n";
        return 1;
    }

    Series lv_create{"libvirt createXML alone"}, lv_destroy{"libvirt destroy alone"};
    Series start_run{"state=start -> running (libvirt)"}, start_ack{"state=start -> acknowledged (runningdomains)"};
    Series stop_gone{"state=stop -> not running (libvirt)"}, stop_ack{"state=stop -> acknowledged (runningdomains)"};
    int failures = 0;

    // 1. libvirt alone, on the same URI.
    for (int i = 0; i < runs; ++i) {
        std::string uuid = uuid_n(100000 + i);
        std::string xml = domain_xml(type, "lv-" + std::to_string(i), uuid, console);
        auto t0 = Clock::now();
        virDomainPtr d = virDomainCreateXML(conn, xml.c_str(), 0);
        auto t1 = Clock::now();
        if (!d) { ++failures; continue; }
        virDomainDestroy(d);
        auto t2 = Clock::now();
        virDomainFree(d);
        lv_create.v.push_back(ms(t1 - t0));
        lv_destroy.v.push_back(ms(t2 - t1));
    }

    // 2. Through the module: one VM, started and stopped `runs` times.
    std::string uuid = uuid_n(1);
    std::string name = "bench-vm";
    auto k = [&](const char* key) { return pvc::schema::path(key, {uuid}); };
    zk->write({{k("domain.name"), name}, {k("domain.xml"), domain_xml(type, name, uuid, console)},
               {k("domain.state"), "stop"}, {k("domain.profile"), "None"}, {k("domain.stats"), ""},
               {k("domain.node"), me}, {k("domain.last_node"), ""}, {k("domain.failed_reason"), ""},
               {k("domain.storage.volumes"), ""}, {k("domain.console.log"), ""}, {k("domain.console.vnc"), ""},
               {k("domain.meta.autostart"), "False"}, {k("domain.meta.migrate_method"), "none"},
               {k("domain.meta.node_limit"), ""}, {k("domain.meta.node_selector"), "none"},
               {k("domain.meta.tags"), ""}, {k("domain.migrate.sync_lock"), ""}});
    Watched running_list(zk, pvc::schema::path("node.running_domains", {me}));
    std::this_thread::sleep_for(500ms);  // the module has seen the new VM

    // Polls libvirt on a side thread for the moment the state flips.
    auto time_until = [&](bool want_running, Clock::time_point t0, std::atomic<bool>& stop) {
        double at = -1;
        while (!stop) {
            if (libvirt_running(conn, uuid) == want_running) { at = ms(Clock::now() - t0); break; }
            // Never a busy loop: on a small machine it takes a core (and the
            // test driver's lock) from the daemon being measured.
            std::this_thread::sleep_for(test_driver ? std::chrono::microseconds(100) : std::chrono::microseconds(1000));
        }
        return at;
    };
    for (int i = 0; i < runs; ++i) {
        for (bool starting : {true, false}) {
            std::atomic<bool> stop{false};
            double flip = -1;
            auto t0 = Clock::now();
            std::thread poller([&] { flip = time_until(starting, t0, stop); });
            // The daemon rewrites `stop` itself after a hard stop: a write racing
            // with it fails the reference's version check and is simply retried.
            bool written = false;
            for (int attempt = 0; attempt < 20 && !written; ++attempt)
                written = zk->write(k("domain.state"), starting ? "start" : "stop");
            bool acked = written &&
                running_list.wait([&](const std::string& v) { return has_word(v, uuid) == starting; }, 10s);
            auto t_ack = Clock::now();
            // the libvirt flip always precedes the acknowledgement; give the poller a moment
            for (int w = 0; w < 200 && flip < 0; ++w) std::this_thread::sleep_for(1ms);
            stop = true;
            poller.join();
            if (!acked || flip < 0) { ++failures; continue; }
            (starting ? start_ack : stop_ack).v.push_back(ms(t_ack - t0));
            (starting ? start_run : stop_gone).v.push_back(flip);
        }
    }

    std::printf("hv_latency_bench: %d runs, libvirt %s (domain type %s)%s\n", runs, uri.c_str(), type.c_str(),
                test_driver ? ", test driver: libvirt's own time is near zero" : "");
    for (auto* s : {&lv_create, &start_run, &start_ack, &lv_destroy, &stop_gone, &stop_ack}) s->print();
    std::printf("  daemon overhead, start (median ack - median create): %8.3f ms\n", start_ack.median() - lv_create.median());
    std::printf("  daemon overhead, stop  (median ack - median destroy): %8.3f ms\n", stop_ack.median() - lv_destroy.median());
    if (failures) std::printf("  failed runs: %d\n", failures);

    zk->write(k("domain.state"), "stop");
    std::this_thread::sleep_for(300ms);
    module->stop();
    module.reset();
    virConnectClose(conn);
    guard.reset();
    executor.io().stop();
    for (auto& t : io_threads) t.join();
    executor.stop_pool();
    zk->close();
    return failures ? 2 : 0;
}
