// The reference PVC client's network commands against this API, when a
// checkout of the reference client is at hand: PVC_REFERENCE_CLIENT names its
// client-cli/ directory (the one holding the `pvc.lib` package), and Debian's
// python3-click, python3-requests, python3-colorama, python3-lxml,
// python3-requests-toolbelt and python3-yaml are installed. The reference
// client is not part of this repository and CI has no copy of it: the test
// exists only in a build configured with -DPVC_REFERENCE_CLIENT=<client-cli/>
// (CMakeLists.txt here), which sets the variable. reference_client_network.py (beside this
// file) makes each call the reference's `pvc network ...` commands make and
// formats each answer with the reference's own formatters.
#include "api_fixture.hpp"

#include <cstdlib>

namespace pvc::api::test {
namespace {

class ApiReferenceClient : public ApiFixture {};

TEST_F(ApiReferenceClient, NetworkCommandsRunUnchanged) {
    const char* client = std::getenv("PVC_REFERENCE_CLIENT");
    ASSERT_TRUE(client && *client) << "PVC_REFERENCE_CLIENT is not set (a checkout's client-cli/ of the reference PVC client)";
    ASSERT_TRUE(std::filesystem::is_directory(std::filesystem::path(client) / "pvc" / "lib"))
        << client << " holds no pvc.lib package";
    auto r = pvc::test::run_command({"/usr/bin/env", "PYTHONPATH=" + std::string(client), "/usr/bin/python3",
                                     PVC_API_TEST_SOURCE_DIR "/reference_client_network.py", std::to_string(port), token});
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    std::cout << r.out;
    // What the reference client wrote is what ours reads back.
    EXPECT_FALSE(session->exists(schema::path("network.vni", {"1200"})));
}

}  // namespace
}  // namespace pvc::api::test
