// A module for the module host's tests. PVC_TEST_MODULE_NAME and
// PVC_TEST_MODULE_ABI are set per build (a good one, one with another ABI);
// PVC_TEST_MODULE_START_FAILS makes start() throw, as a module whose
// dependency is unusable does.
#include <stdexcept>

#include <boost/dll/alias.hpp>

#include "pvc/module.hpp"
#include "pvc/schema.hpp"

namespace {

class TestModule : public pvc::Module {
public:
    std::string_view name() const override { return PVC_TEST_MODULE_NAME; }
    void start(pvc::NodeContext& ctx) override {
#ifdef PVC_TEST_MODULE_START_FAILS
        throw std::runtime_error("test module cannot start: its dependency is unusable");
#endif
        // Proves the context works: the module leaves a mark in ZooKeeper.
        ctx_ = &ctx;
        ctx.zk->write(pvc::schema::path("node.count.networks", {ctx.config.host.hostname}), "42");
        ctx.logger.info("test module started");
    }
    void stop() override {
        if (ctx_) ctx_->logger.info("test module stopped");
    }

private:
    pvc::NodeContext* ctx_ = nullptr;
};

}  // namespace

namespace pvc_module_exports {
extern "C" BOOST_SYMBOL_EXPORT const int pvc_module_abi = PVC_TEST_MODULE_ABI;
std::unique_ptr<pvc::Module> create_module() { return std::make_unique<TestModule>(); }
BOOST_DLL_ALIAS(pvc_module_exports::create_module, pvc_module_create)
}  // namespace pvc_module_exports
