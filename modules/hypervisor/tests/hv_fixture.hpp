// Test harness: real ZooKeeper, libvirt's test driver, and Hypervisor
// instances built on a NodeContext made by hand (one per node name).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>

#include "hypervisor.hpp"
#include "config_reader.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

namespace pvc::hv::test {

using namespace std::chrono_literals;
using pvc::test::eventually;

// A node: its config, executor (io_context on a thread), events and Hypervisor.
struct TestNode {
    TestNode(const std::string& name, const std::string& zk_hosts, const std::filesystem::path& dir,
             const std::string& libvirt_uri, int max_parallel = 1,
             std::chrono::milliseconds op_timeout = zk::SessionOptions{}.op_timeout)
        : config(make_config(name, zk_hosts, dir, libvirt_uri, max_parallel)), executor(4),
          guard(boost::asio::make_work_guard(executor.io())),
          io_thread([this] { executor.io().run(); }) {
        session = zk::Session::connect({.hosts = zk_hosts, .op_timeout = op_timeout});
        ctx = std::make_unique<NodeContext>(NodeContext{config, Logger(make_log_sink(nullptr), "hypervisor-" + name),
                                                        session, executor, events, services});
    }
    ~TestNode() {
        stop();
        guard.reset();
        executor.io().stop();
        io_thread.join();
        executor.stop_pool();
        session->close();
    }
    void start() {
        hv = std::make_unique<Hypervisor>(*ctx);
        hv->start();
    }
    void stop() {
        if (hv) hv->stop();
        hv.reset();
    }
    static Config make_config(const std::string& name, const std::string& zk_hosts, const std::filesystem::path& dir,
                              const std::string& uri, int max_parallel) {
        pvc::test::NodeConfigOptions o;
        o.node = name;
        o.coordinators = "[" + zk_hosts + "]";
        o.base_dir = dir / name;
        o.enable_hypervisor = true;
        o.stdout_logging = false;
        o.zookeeper_logging = false;
        // Live migration fails at once: nothing listens on port 1 of the
        // loopback. Not a test:/// URI that fails to open: libvirt's test
        // driver frees its driver object with the mutex still locked when an
        // open fails, and ThreadSanitizer's deadlock detector, which keeps
        // that mutex as held, aborts the whole binary with an internal CHECK
        // once the memory is reused (seen in CI, about one run in a few).
        o.extra_system_yaml = "    hypervisor:\n      libvirt_uri: \"" + uri +
                              "\"\n      migration_uri: \"qemu+tcp://127.0.0.1:1/system\"\n"
                              "      max_parallel_migrations: " + std::to_string(max_parallel) + "\n";
        std::filesystem::create_directories(o.base_dir / "console");
        return parse_config(pvc::test::node_config_yaml(o), "test.yaml", host_identity(name));
    }

    // The hypervisor's console log directory (its key, read as the module does).
    std::filesystem::path console_log_directory() const {
        ConfigProblems ignored;
        return Settings::read(config, ignored).console_log_directory;
    }

    Config config;
    Executor executor;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard;
    std::thread io_thread;
    CoreEvents events;
    ServiceRegistry services;
    std::shared_ptr<zk::Session> session;
    std::unique_ptr<NodeContext> ctx;
    std::unique_ptr<Hypervisor> hv;
};

// Guests that power off `delay` after the ACPI request, as real guests take
// seconds to (libvirt's test driver powers off at once); nullopt: never (a
// guest that ignores ACPI). The domain is destroyed then, through the
// module's own connection, so its lifecycle event reaches the module. With
// `counted`, the ZooKeeper reads that session makes while guests take their
// time are summed (meaningful with one guest at a time).
class SlowGuests {
public:
    using Clock = std::chrono::steady_clock;
    SlowGuests(Connection& lv, std::optional<std::chrono::milliseconds> delay,
               std::shared_ptr<zk::Session> counted = nullptr)
        : lv_(lv), delay_(delay), counted_(std::move(counted)) {
        lv_.set_guest_shutdown([this](virDomainPtr d) {
            std::lock_guard g(m_);
            requests_++;
            if (delay_) due_.push_back({Clock::now() + *delay_, uuid_of(d), reads()});
            cv_.notify_all();
            return 0;
        });
        thread_ = std::thread([this] { run(); });
    }
    ~SlowGuests() {
        lv_.set_guest_shutdown({});
        {
            std::lock_guard g(m_);
            stop_ = true;
            cv_.notify_all();
        }
        thread_.join();
    }
    // ACPI requests received.
    int requests() const {
        std::lock_guard g(m_);
        return requests_;
    }
    uint64_t reads_while_waiting() const {
        std::lock_guard g(m_);
        return reads_while_waiting_;
    }

private:
    struct Due {
        Clock::time_point at;
        std::string uuid;
        uint64_t reads_at_request;
    };
    uint64_t reads() const { return counted_ ? counted_->stats().reads : 0; }
    void run() {
        std::unique_lock l(m_);
        while (!stop_) {
            auto next = std::min_element(due_.begin(), due_.end(), [](auto& a, auto& b) { return a.at < b.at; });
            if (next == due_.end()) {
                cv_.wait(l);
                continue;
            }
            if (Clock::now() < next->at) {
                cv_.wait_until(l, next->at);
                continue;
            }
            auto due = *next;
            due_.erase(next);
            reads_while_waiting_ += reads() - due.reads_at_request;
            l.unlock();
            if (auto d = lv_.lookup(due.uuid)) virDomainDestroy(d.get());
            l.lock();
        }
    }

    Connection& lv_;
    std::optional<std::chrono::milliseconds> delay_;
    std::shared_ptr<zk::Session> counted_;
    mutable std::mutex m_;
    std::condition_variable cv_;
    std::vector<Due> due_;
    int requests_ = 0;
    uint64_t reads_while_waiting_ = 0;
    bool stop_ = false;
    std::thread thread_;
};

inline std::string vm_xml(const std::string& name, const std::string& uuid, int mem_mib = 64, bool vnc = false) {
    return "<domain type='kvm'><name>" + name + "</name><uuid>" + uuid + "</uuid><memory unit='MiB'>" +
           std::to_string(mem_mib) +
           "</memory><vcpu>2</vcpu><os><type arch='x86_64'>hvm</type></os><on_poweroff>destroy</on_poweroff>"
           "<devices>" + (vnc ? "<graphics type='vnc' port='5901' autoport='no' listen='127.0.0.1'/>" : "") +
           "</devices></domain>";
}

inline std::string uuid_n(int n) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%08x-aaaa-4bbb-8ccc-%012d", ::getpid(), n);
    return buf;
}

class HvTest : public ::testing::Test {
protected:
    void SetUp() override {
        admin = zk::Session::connect({.hosts = server.hosts()});
        admin->ensure_path(schema::path("base.domain"));
        admin->ensure_path(schema::path("base.node"));
        admin->write({{schema::path("base.config"), ""}});
        admin->write({{schema::path("base.config.migration_target_selector"), "mem"}});
        // A private test-driver node definition (state private to each connection).
        node_xml = dir.path() / "node.xml";
        std::ofstream(node_xml) << "<node><cpu><mhz>2000</mhz><model>x86_64</model><nodes>1</nodes><sockets>1</sockets>"
                                   "<cores>4</cores><threads>1</threads><active>4</active></cpu>"
                                   "<memory>16777216</memory></node>";
    }
    std::string private_uri() const { return "test://" + node_xml.string(); }

    void register_node(const std::string& name, const std::string& domainstate = "ready", long memfree = 8000) {
        auto k = [&](std::string_view key) { return schema::path(key, {name}); };
        admin->write({{k("node.name"), ""}});
        admin->write({{k("node.state.daemon"), "run"}, {k("node.state.domain"), domainstate},
                      {k("node.memory.free"), std::to_string(memfree)}, {k("node.memory.used"), "0"},
                      {k("node.memory.provisioned"), "0"}, {k("node.vcpu.allocated"), "0"},
                      {k("node.count.provisioned_domains"), "0"}, {k("node.cpu.load"), "0.0"},
                      {k("node.running_domains"), ""}});
    }
    // The client's define: every key in one transaction.
    void define(const std::string& uuid, const std::string& name, const std::string& node, const std::string& state,
                const std::string& method = "none", const std::string& xml = "") {
        auto k = [&](std::string_view key) { return schema::path(key, {uuid}); };
        ASSERT_TRUE(admin->write({{k("domain.name"), name}, {k("domain.xml"), xml.empty() ? vm_xml(name, uuid) : xml},
                                  {k("domain.state"), state}, {k("domain.profile"), "None"}, {k("domain.stats"), ""},
                                  {k("domain.node"), node}, {k("domain.last_node"), ""}, {k("domain.failed_reason"), ""},
                                  {k("domain.storage.volumes"), ""}, {k("domain.console.log"), ""},
                                  {k("domain.console.vnc"), ""}, {k("domain.meta.autostart"), "False"},
                                  {k("domain.meta.migrate_method"), method}, {k("domain.meta.node_selector"), "none"},
                                  {k("domain.meta.node_limit"), ""}, {k("domain.meta.tags"), ""},
                                  {k("domain.migrate.sync_lock"), ""}}));
    }
    std::string get(std::string_view key, const std::string& id) { return admin->get(schema::path(key, {id})).value_or("<absent>"); }
    // The reference's write checks the version it read, so it loses a race with
    // the module's own write of the same key: a client then writes again.
    void set(std::string_view key, const std::string& id, const std::string& v) {
        bool written = false;
        for (int attempt = 0; attempt < 5 && !written; attempt++) written = admin->write({{schema::path(key, {id}), v}});
        ASSERT_TRUE(written) << "cannot write " << key << " of " << id;
    }
    bool state_is(const std::string& uuid, const std::string& s, std::chrono::milliseconds t = 15s) {
        return eventually([&] { return get("domain.state", uuid) == s; }, t);
    }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"hvtest"};
    std::filesystem::path node_xml;
    std::shared_ptr<zk::Session> admin;
};

}  // namespace pvc::hv::test
