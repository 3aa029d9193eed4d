// lbvt — libvirt daemon (health-plugins/README.md): a read-only connection to
// qemu+tcp://<node>/system (the TCP listener migrations use), getHostname(),
// close.
#include <memory>

#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

#include "pvc/health_plugin.hpp"

namespace {

struct ConnectClose {
    void operator()(virConnectPtr c) const { virConnectClose(c); }
};
using Connection = std::unique_ptr<virConnect, ConnectClose>;

class Lbvt final : public pvc::HealthPlugin {
public:
    explicit Lbvt(const pvc::HealthPluginContext& ctx) : uri_("qemu+tcp://" + ctx.config.node + "/system") {}
    std::string name() const override { return "lbvt"; }

    pvc::HealthResult run(const std::string&) override {
        pvc::HealthResult r;
        Connection conn(virConnectOpenReadOnly(uri_.c_str()));
        char* host = conn ? virConnectGetHostname(conn.get()) : nullptr;
        if (!host) {
            const char* err = virGetLastErrorMessage();
            r.health_delta = 50;
            r.message = std::string("Failed to connect to Libvirtd: ") + (err ? err : "unknown error");
            return r;
        }
        free(host);
        r.message = "Successfully connected to Libvirtd on localhost";
        return r;
    }

private:
    std::string uri_;
};

}  // namespace

PVC_HEALTH_PLUGIN(Lbvt)
