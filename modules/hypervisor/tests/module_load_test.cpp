// Tier 2: the built module .so loads through Boost.DLL with the right ABI fingerprint.
#include <gtest/gtest.h>

#include <boost/dll/import.hpp>
#include <boost/dll/shared_library.hpp>

#include "daemon/module_info.hpp"
#include "pvc/module.hpp"

TEST(HypervisorModuleSo, LoadsWithTheCoreAbiAndNamesItself) {
    std::filesystem::path so = std::filesystem::path(PVC_TEST_BUILD_DIR) / "modules" / "libpvc-module-hypervisor.so";
    ASSERT_TRUE(std::filesystem::exists(so)) << so;
    auto info = pvc::read_module_info(so);
    EXPECT_EQ(info.abi, pvc::abi_fingerprint());
    EXPECT_EQ(info.name, "hypervisor");
    EXPECT_EQ(info.serves, "enable_hypervisor");
    EXPECT_TRUE(info.required);
    auto create = boost::dll::import_alias<pvc::ModuleFactory>(so.string(), "pvc_module_create");
    auto module = create();
    ASSERT_TRUE(module);
    EXPECT_EQ(module->name(), "hypervisor");
}
