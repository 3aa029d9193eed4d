// How long a test waits, and how long it allows, on this build.
//
// Sanitizer builds run the same code several times slower (ThreadSanitizer
// 5-15x on memory-heavy paths), so a wait or an upper bound that a normal build
// meets with room to spare can fail there without any bug. Tests scale such
// figures with scaled(); in the normal build the factor is exactly 1, so a
// bound the project promises is checked unchanged there.
#pragma once

#include <chrono>

namespace pvc::test {

// PVC_TEST_TIME_SCALE from the environment if set (a positive number), else
// the build's own factor: 1 normally, larger under a sanitizer.
double time_scale();
// The factor a PVC_TEST_TIME_SCALE value (null: unset) gives on this build.
double time_scale_from(const char* env);
// 1 in the normal build, larger under a sanitizer.
double build_time_scale();

template <class Rep, class Period>
std::chrono::milliseconds scaled(std::chrono::duration<Rep, Period> d) {
    auto ms = std::chrono::duration<double, std::milli>(d).count() * time_scale();
    return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(ms));
}

}  // namespace pvc::test
