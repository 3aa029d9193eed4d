// module-hello: the smallest useful pvcnoded module, and the template to copy.
//
// It shows the three things every module does with the SDK:
//   - metadata: PVC_MODULE at the end names the module, its version, the
//     pvc.functions flag that turns it on (enable_hello) and its ABI
//     fingerprint, which the daemon checks before loading it;
//   - an event: it subscribes to the core's keepalive tick and counts them;
//   - the keepalive: each keepalive it contributes one key, written in the
//     core's keepalive transaction: /nodes/<node>/hello = "<greeting> from
//     <node> after <n> keepalives".
#include <atomic>
#include <memory>
#include <string>

#include "pvc/module.hpp"
#include "pvc/schema.hpp"

namespace hello {

class HelloModule final : public pvc::Module {
public:
    std::string_view name() const override { return "hello"; }

    void start(pvc::NodeContext& ctx) override {
        node_ = ctx.config.node;
        key_ = pvc::schema::path("node.name", {node_}) + "/hello";
        // The keepalive only sets keys: create ours once, here.
        ctx.zk->write(key_, greeting_ + " from " + node_);
        // The subscriber runs on the core's thread and must not block: it
        // only counts. The counter is shared so a late event after stop()
        // never touches a destroyed module.
        auto ticks = ticks_;
        ctx.events.keepalive_tick.subscribe([ticks] { ticks->fetch_add(1); });
        ctx.logger.info("hello module started on {}", node_);
    }

    void stop() override {}

    // Called on the keepalive's thread: cached state only, never blocking.
    void contribute(pvc::KeepaliveReport& report) override {
        if (key_.empty()) return;
        report.extra_writes.emplace_back(
            key_, greeting_ + " from " + node_ + " after " + std::to_string(ticks_->load()) + " keepalives");
    }

private:
    std::string greeting_ = "hello";
    std::string node_;
    std::string key_;
    std::shared_ptr<std::atomic<long>> ticks_ = std::make_shared<std::atomic<long>>(0);
};

}  // namespace hello

PVC_MODULE(hello::HelloModule,
           PVC_MODULE_NAME("hello")
           PVC_MODULE_VERSION(HELLO_VERSION)
           PVC_MODULE_SERVES("enable_hello")  // pvc.functions.enable_hello: true loads it
           PVC_MODULE_REQUIRED                // the daemon will not start without it when enabled
           PVC_MODULE_START_ORDER("60"))      // after the bundled modules
