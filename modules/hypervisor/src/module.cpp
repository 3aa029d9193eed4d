// The hypervisor module: pvc::Module over hv::Hypervisor.
#include "hypervisor.hpp"
#include "settings.hpp"

namespace pvc::hv {

class HypervisorModule final : public Module {
public:
    std::string_view name() const override { return "hypervisor"; }
    void configure(const Config& config, ConfigProblems& problems) override {
        settings_ = Settings::read(config, problems);
    }
    void flat_keys(nlohmann::json& j) const override { settings_.flat_keys(j); }
    void start(NodeContext& ctx) override {
        Hypervisor::Options options;
        options.settings = settings_;
        hv_ = std::make_unique<Hypervisor>(ctx, std::move(options));
        hv_->start();
    }
    void stop() override {
        if (hv_) hv_->stop();
    }
    void contribute(KeepaliveReport& report) override {
        if (hv_) hv_->contribute(report);
    }
    // A flush or unflush of this node in progress ends before the node lets go.
    void drain_before_shutdown() override {
        if (hv_) hv_->drain_before_shutdown();
    }

private:
    Settings settings_;
    std::unique_ptr<Hypervisor> hv_;
};

}  // namespace pvc::hv

PVC_MODULE(pvc::hv::HypervisorModule,
           PVC_MODULE_NAME("hypervisor")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES("enable_hypervisor")
           PVC_MODULE_REQUIRED
           PVC_MODULE_START_ORDER("30"))  // after network (10) and storage (20): bridges and RBD before VMs
