// The test time scale (tests/support timing.hpp): exactly 1 in the normal
// build, so promised bounds are checked unchanged there; larger under sanitizers.
#include <chrono>

#include <gtest/gtest.h>

#include "pvc/test/timing.hpp"

using namespace std::chrono_literals;
using pvc::test::build_time_scale;
using pvc::test::time_scale_from;

TEST(TestTiming, NormalBuildScaleIsOneAndSanitizerBuildsScaleUp) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
    EXPECT_GT(build_time_scale(), 1.0);
#else
    EXPECT_EQ(build_time_scale(), 1.0);
    EXPECT_EQ(pvc::test::scaled(1500ms), 1500ms);
#endif
}

TEST(TestTiming, EnvironmentOverridesTheBuildScale) {
    EXPECT_EQ(time_scale_from(nullptr), build_time_scale());
    EXPECT_EQ(time_scale_from(""), build_time_scale());
    EXPECT_EQ(time_scale_from("3"), 3.0);
    EXPECT_EQ(time_scale_from("0.5"), 0.5);
}

TEST(TestTiming, InvalidOverrideFallsBackToTheBuildScale) {
    EXPECT_EQ(time_scale_from("fast"), build_time_scale());
    EXPECT_EQ(time_scale_from("0"), build_time_scale());
    EXPECT_EQ(time_scale_from("-2"), build_time_scale());
}
