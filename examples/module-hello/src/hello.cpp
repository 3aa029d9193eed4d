// module-hello: the smallest useful pvcnoded module, and the template to copy.
//
// It shows the four things every module does with the SDK:
//   - metadata: PVC_MODULE at the end names the module, its version, the
//     pvc.functions flag that turns it on (enable_hello) and its ABI
//     fingerprint, which the daemon checks before loading it;
//   - its own configuration: configure() reads pvc.hello.greeting from the
//     document and reports a bad value, with its YAML path and line, into
//     the problem list the core prints (`pvcnoded --check-config` included);
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

    // pvc:
    //   hello:
    //     greeting: "good morning"   # optional, 1 to 64 characters
    void configure(const pvc::Config& config, pvc::ConfigProblems& problems) override {
        pvc::ConfigNode section = config.document.at("pvc").child("hello", problems);
        if (!section.section(problems)) return;
        pvc::ConfigNode greeting = section.child("greeting", problems);
        if (!greeting.exists()) return;
        auto value = greeting.string(problems);
        if (!value) return;  // not a string: already reported
        if (value->empty() || value->size() > 64) {
            problems.add(greeting, "expected a greeting of 1 to 64 characters");
            return;
        }
        greeting_ = *value;
    }

    void start(pvc::NodeContext& ctx) override {
        node_ = ctx.config.node;
        key_ = pvc::schema::path("node.name", {node_}) + "/hello";
        // The keepalive only sets keys: create ours once, here.
        ctx.zk->write(key_, greeting_ + " from " + node_);
        // Delivered on the core strand; the slot must not block: it only
        // counts. The subscription ends in stop() (or when the module goes).
        tick_ = ctx.events.keepalive_tick.subscribe([this] { ticks_.fetch_add(1); });
        ctx.logger.info("hello module started on {}", node_);
    }

    void stop() override { tick_.reset(); }

    // Called on the keepalive's thread: cached state only, never blocking.
    void contribute(pvc::KeepaliveReport& report) override {
        if (key_.empty()) return;
        report.write(key_, greeting_ + " from " + node_ + " after " + std::to_string(ticks_.load()) + " keepalives");
    }

private:
    std::string greeting_ = "hello";
    std::string node_;
    std::string key_;
    std::atomic<long> ticks_{0};
    pvc::Subscription tick_;  // declared last: ends before the counter goes
};

}  // namespace hello

PVC_MODULE(hello::HelloModule,
           PVC_MODULE_NAME("hello")
           PVC_MODULE_VERSION(HELLO_VERSION)
           PVC_MODULE_SERVES("enable_hello")  // pvc.functions.enable_hello: true loads it
           PVC_MODULE_REQUIRED                // the daemon will not start without it when enabled
           PVC_MODULE_START_ORDER("60"))      // after the bundled modules
