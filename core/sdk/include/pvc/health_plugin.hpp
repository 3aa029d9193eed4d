// Native health plugins: a .so exporting (Boost.DLL)
//   pvc_health_plugin_abi    — const char[], the plugin's PVC_ABI_FINGERPRINT
//                              (pvc/abi.hpp); must equal the daemon's
//   pvc_health_plugin_create — std::unique_ptr<pvc::HealthPlugin>(const pvc::HealthPluginContext&)
// Use PVC_HEALTH_PLUGIN(ClassName). Same results and ZooKeeper keys as a
// legacy Python plugin (docs/sdk-guide.md §7.1).
#pragma once

#include <memory>
#include <string>

#include <boost/dll/alias.hpp>
#include <nlohmann/json.hpp>

#include "pvc/abi.hpp"
#include "pvc/config.hpp"
#include "pvc/log.hpp"

namespace pvc {

struct HealthPluginContext {
    const Config& config;
    Logger logger;
    std::string zookeeper_hosts;  // for plugins that check ZooKeeper itself
};

struct HealthResult {
    int health_delta = 0;            // >= 0
    std::string message;             // "" -> "N/A"
    nlohmann::json data = nlohmann::json::object();
};

class HealthPlugin {
public:
    virtual ~HealthPlugin() = default;
    virtual std::string name() const = 0;
    // Called once after loading; throwing disables the plugin (logged).
    virtual void setup() {}
    // One check. May block (it runs off the keepalive with a deadline); throwing
    // is a failed run (nothing written; the previous result keeps counting).
    virtual HealthResult run(const std::string& coordinator_state) = 0;
    virtual void cleanup() {}
};

}  // namespace pvc

#define PVC_HEALTH_PLUGIN(CLASS)                                                                      \
    namespace pvc_plugin_exports {                                                                    \
    extern "C" BOOST_SYMBOL_EXPORT const char pvc_health_plugin_abi[] = PVC_ABI_FINGERPRINT;         \
    std::unique_ptr<::pvc::HealthPlugin> create_plugin(const ::pvc::HealthPluginContext& ctx) {       \
        return std::make_unique<CLASS>(ctx);                                                          \
    }                                                                                                 \
    BOOST_DLL_ALIAS(pvc_plugin_exports::create_plugin, pvc_health_plugin_create)                      \
    }
