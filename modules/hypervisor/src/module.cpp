// The hypervisor module: pvc::Module over hv::Hypervisor.
#include "hypervisor.hpp"

namespace pvc::hv {

class HypervisorModule final : public Module {
public:
    std::string_view name() const override { return "hypervisor"; }
    void start(NodeContext& ctx) override {
        hv_ = std::make_unique<Hypervisor>(ctx);
        hv_->start();
    }
    void stop() override {
        if (hv_) hv_->stop();
    }
    void contribute(KeepaliveReport& report) override {
        if (hv_) hv_->contribute(report);
    }

private:
    std::unique_ptr<Hypervisor> hv_;
};

}  // namespace pvc::hv

PVC_MODULE(pvc::hv::HypervisorModule,
           PVC_MODULE_NAME("hypervisor")
           PVC_MODULE_VERSION(PVC_VERSION)
           PVC_MODULE_SERVES("enable_hypervisor")
           PVC_MODULE_REQUIRED
           PVC_MODULE_START_ORDER("30"))  // after network (10) and storage (20): bridges and RBD before VMs
