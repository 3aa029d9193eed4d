// zkpr — ZooKeeper (health-plugins/README.md): opens a short session (1 s) to
// this node's own ZooKeeper member, reads /schema/version and closes.
// The member is this node's entry in the coordinator list (its port as
// written), else <node>:2181 as in the reference — so a non-coordinator
// reports 50, as upstream.
#include <stdexcept>

#include "pvc/health_plugin.hpp"
#include "pvc/schema.hpp"
#include "pvc/zk.hpp"

namespace {

std::string own_member(const pvc::Config& cfg) {
    for (const auto& c : cfg.coordinators) {
        auto host = c.substr(0, c.find(':'));
        if (host == cfg.node || host == cfg.host.fqdn) return c.find(':') == std::string::npos ? c + ":2181" : c;
    }
    return cfg.node + ":2181";
}

class Zkpr final : public pvc::HealthPlugin {
public:
    explicit Zkpr(const pvc::HealthPluginContext& ctx) : target_(own_member(ctx.config)) {}
    std::string name() const override { return "zkpr"; }

    pvc::HealthResult run(const std::string&) override {
        pvc::HealthResult r;
        try {
            pvc::zk::SessionOptions o;
            o.hosts = target_;
            o.session_timeout = std::chrono::seconds(1);
            o.connect_timeout = std::chrono::seconds(1);
            o.op_timeout = std::chrono::seconds(1);
            auto s = pvc::zk::Session::connect(o);
            auto closer = std::shared_ptr<void>(nullptr, [&](void*) { s->close(); });
            s->get(pvc::schema::path("base.schema.version"));
            r.message = "Successfully connected to Zookeeper on localhost";
        } catch (const std::exception& e) {
            r.health_delta = 50;
            r.message = std::string("Failed to connect to Zookeeper: ") + e.what();
        }
        return r;
    }

private:
    std::string target_;
};

}  // namespace

PVC_HEALTH_PLUGIN(Zkpr)
