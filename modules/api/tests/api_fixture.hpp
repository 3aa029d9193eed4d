// The API in-process against a real ZooKeeper: the cluster view, the routes
// and the HTTP server on an ephemeral port, a log file to read, and helpers
// that write the node and VM keys a real cluster has.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "api.hpp"
#include "http_client.hpp"
#include "pvc/cluster.hpp"
#include "config_reader.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

namespace pvc::api::test {

inline const std::string token = "s3cr3t-t0ken-4f1c";

inline std::string vm_xml(const std::string& name, const std::string& uuid, int memory_mib = 512, int vcpus = 1,
                          const std::string& extra_devices = "") {
    return "<domain type='kvm'>\n  <name>" + name + "</name>\n  <uuid>" + uuid +
           "</uuid>\n  <description>test VM</description>\n  <memory unit='MiB'>" + std::to_string(memory_mib) +
           "</memory>\n  <vcpu>" + std::to_string(vcpus) +
           "</vcpu>\n  <os><type arch='x86_64' machine='pc'>hvm</type></os>\n  <features><acpi/><apic/></features>\n"
           "  <cpu><topology sockets='1' cores='" + std::to_string(vcpus) + "' threads='1'/></cpu>\n"
           "  <devices>\n    <emulator>/usr/bin/qemu-system-x86_64</emulator>\n"
           "    <disk type='network' device='disk'><source protocol='rbd' name='vms/" + name +
           "_disk0'/><target dev='sda' bus='scsi'/></disk>\n"
           "    <interface type='bridge'><mac address='52:54:00:00:00:01'/><source bridge='vmbr100'/><model type='virtio'/></interface>\n"
           "    <controller type='scsi' model='virtio-scsi'/>\n    <console type='pty'/>\n" + extra_devices +
           "  </devices>\n</domain>\n";
}

class ApiFixture : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        zk_ = new pvc::test::ZkServer();
        auto s = zk::Session::connect({.hosts = zk_->hosts()});
        init_cluster(*s);
        s->close();
    }
    static void TearDownTestSuite() {
        delete zk_;
        zk_ = nullptr;
    }

    void SetUp() override {
        zk::SessionOptions so;
        so.hosts = zk_->hosts();
        session_options(so);
        session = zk::Session::connect(so);
        for (const auto& n : {"hv1", "hv2"}) write_node(n);
        pvc::test::NodeConfigOptions o;
        o.node = "hv1";
        o.base_dir = dir.path();
        o.stdout_logging = false;
        o.zookeeper_logging = false;
        config = std::make_unique<Config>(
            parse_config(pvc::test::node_config_yaml(o), "test.yaml", host_identity("hv1")));
        logger = Logger(make_log_sink(config.get()), "api");
        settings.node = "hv1";
        settings.coordinator = true;
        settings.server.address = "127.0.0.1";
        settings.server.port = 0;
        settings.tokens = {{"tests", token}};
        customize(settings);
        view = std::make_unique<ClusterView>(session);
        view->start();
        ASSERT_TRUE(view->wait_ready(std::chrono::seconds(10)));
        api = std::make_unique<Api>(session, *view, settings, logger, figures, &services);
        ServerOptions server_options = settings.server;
        server_options.streamed = &Api::streamed_body;  // as the module serves it
        server = std::make_unique<HttpServer>(server_options, [this](const HttpRequest& r, std::stop_token st) {
            return api->handle(r, st);
        }, logger);
        server->start();
        port = server->port();
    }
    void TearDown() override {
        server->stop();
        server.reset();
        api.reset();
        view->stop();
        view.reset();
        for (const auto& u : session->children(schema::path("base.domain")).value_or(std::vector<std::string>{}))
            session->remove_recursive(schema::path("domain.name", {u}));
        session->close();
    }
    virtual void customize(ApiSettings&) {}
    virtual void session_options(zk::SessionOptions&) {}

    void write_node(const std::string& n, const std::string& daemon = "run", const std::string& domain = "ready") {
        auto k = [&](std::string_view key) { return schema::path(key, {n}); };
        ASSERT_TRUE(session->write({{k("node.name"), "coordinator"},
                                    {k("node.mode"), "coordinator"},
                                    {k("node.state.daemon"), daemon},
                                    {k("node.state.router"), n == "hv1" ? "primary" : "secondary"},
                                    {k("node.state.domain"), domain},
                                    {k("node.data.static"), "16 6.1.0-13-amd64 GNU/Linux x86_64"},
                                    {k("node.data.pvc_version"), "0.9.82"},
                                    {k("node.cpu.load"), "0.5"},
                                    {k("node.vcpu.allocated"), "2"},
                                    {k("node.memory.total"), "32000"},
                                    {k("node.memory.used"), "1000"},
                                    {k("node.memory.free"), n == "hv1" ? "31000" : "30000"},
                                    {k("node.memory.allocated"), "0"},
                                    {k("node.memory.provisioned"), "0"},
                                    {k("node.running_domains"), ""},
                                    {k("node.count.provisioned_domains"), "0"},
                                    {k("node.monitoring.plugins"), ""},
                                    {k("node.monitoring.health"), "100"},
                                    {k("node.keepalive"), "1700000000"}}));
    }

    Reply call(const std::string& method, const std::string& target, const std::string& body = "",
               std::optional<std::string> key = token) {
        Call c;
        c.method = method;
        c.target = "/api/v1" + target;
        c.body = body;
        if (!body.empty()) c.content_type = "application/x-www-form-urlencoded";
        c.api_key = std::move(key);
        return request("127.0.0.1", port, c);
    }
    Reply get(const std::string& target) { return call("GET", target); }
    Reply post(const std::string& target, const std::string& body = "") { return call("POST", target, body); }
    std::string key(std::string_view k, std::initializer_list<std::string_view> ids) {
        return session->get(schema::path(k, ids)).value_or("<absent>");
    }
    std::string logged() { return pvc::test::slurp(dir.path() / "log" / "pvc.log"); }
    // Defines a VM through the API and returns the reply.
    Reply define(const std::string& name, const std::string& uuid, const std::string& node = "hv1",
                 std::vector<std::pair<std::string, std::string>> extra = {}) {
        std::vector<std::pair<std::string, std::string>> kv = {{"xml", vm_xml(name, uuid)}};
        for (auto& e : extra) kv.push_back(e);
        std::string q = node.empty() ? "" : "?node=" + node;
        return post("/vm" + q, form(kv));
    }

    static inline pvc::test::ZkServer* zk_ = nullptr;
    pvc::test::TempDir dir{"pvc-api"};
    std::shared_ptr<zk::Session> session;
    std::unique_ptr<Config> config;
    Logger logger;
    ApiSettings settings;
    DaemonFigures figures;
    ServiceRegistry services;  // tests provide fakes (pvc.rbd_volumes.v1) here
    std::unique_ptr<ClusterView> view;
    std::unique_ptr<Api> api;
    std::unique_ptr<HttpServer> server;
    uint16_t port = 0;
};

}  // namespace pvc::api::test
