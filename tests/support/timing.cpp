// The test time scale: environment override, else the sanitizer the build uses.
#include "pvc/test/timing.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace pvc::test {

double build_time_scale() {
#if defined(__SANITIZE_THREAD__)
    return 4.0;
#elif defined(__SANITIZE_ADDRESS__)
    return 2.0;
#else
    return 1.0;
#endif
}

double time_scale_from(const char* env) {
    if (env && *env) {
        try {
            double v = std::stod(env);
            if (v > 0) return v;
        } catch (const std::exception&) {
            // Not a number: the build's own factor below.
        }
    }
    return build_time_scale();
}

double time_scale() {
    static const double scale = time_scale_from(std::getenv("PVC_TEST_TIME_SCALE"));
    return scale;
}

}  // namespace pvc::test
