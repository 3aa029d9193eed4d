// load — CPU load (health-plugins/README.md): the 1-minute load average,
// rounded to 2 decimals, against the logical CPU count. Delta 50 when the
// load exceeds the CPU count.
#include <cmath>
#include <cstdlib>
#include <stdexcept>

#include <unistd.h>

#include "pvc/health_plugin.hpp"
#include "pvc/zk.hpp"

namespace {

class Load final : public pvc::HealthPlugin {
public:
    explicit Load(const pvc::HealthPluginContext&) {}
    std::string name() const override { return "load"; }

    pvc::HealthResult run(const std::string&) override {
        double avg[1];
        if (getloadavg(avg, 1) != 1) throw std::runtime_error("getloadavg() failed");
        double load = std::round(avg[0] * 100.0) / 100.0;
        long cores = sysconf(_SC_NPROCESSORS_ONLN);  // psutil.cpu_count(): logical CPUs
        pvc::HealthResult r;
        r.health_delta = load > static_cast<double>(cores) ? 50 : 0;
        r.message = "Current load is " + pvc::zk::py_float(load) + " out of " + std::to_string(cores) + " CPU cores";
        return r;
    }
};

}  // namespace

PVC_HEALTH_PLUGIN(Load)
