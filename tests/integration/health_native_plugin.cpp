// A native health plugin for the host's tests (not installed). Built twice:
// nativetest.so with the right ABI, and badabi.so exporting another ABI.
// Its behaviour is steered by files next to the config's plugin directory:
//   <plugin_directory>/../nativetest.mode: "ok" (default), "throw", "hang"
#include <chrono>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "pvc/health_plugin.hpp"

namespace {

class NativeTest final : public pvc::HealthPlugin {
public:
    explicit NativeTest(const pvc::HealthPluginContext& ctx)
        : mode_file_(ctx.config.plugin_directory.parent_path() / "nativetest.mode"), log_(ctx.logger) {}
    std::string name() const override { return "nativetest"; }
    void setup() override { log_.info("nativetest setup"); }

    pvc::HealthResult run(const std::string& coordinator_state) override {
        std::string mode = "ok";
        std::ifstream(mode_file_) >> mode;
        if (mode == "throw") throw std::runtime_error("native boom");
        if (mode == "hang") std::this_thread::sleep_for(std::chrono::hours(1));
        pvc::HealthResult r;
        r.health_delta = 3;
        r.message = "native ok in " + coordinator_state;
        r.data = {{"answer", 42}};
        return r;
    }
    void cleanup() override { log_.info("nativetest cleanup"); }

private:
    std::filesystem::path mode_file_;
    pvc::Logger log_;
};

}  // namespace

#ifdef PVC_TEST_BAD_ABI
namespace pvc_plugin_exports {
extern "C" BOOST_SYMBOL_EXPORT const char pvc_health_plugin_abi[] = "sdk-0.0.0+0000000000000000 boost-0_0 gcc-0.0.0";
std::unique_ptr<::pvc::HealthPlugin> create_plugin(const ::pvc::HealthPluginContext& ctx) {
    return std::make_unique<NativeTest>(ctx);
}
BOOST_DLL_ALIAS(pvc_plugin_exports::create_plugin, pvc_health_plugin_create)
}  // namespace pvc_plugin_exports
#else
PVC_HEALTH_PLUGIN(NativeTest)
#endif
