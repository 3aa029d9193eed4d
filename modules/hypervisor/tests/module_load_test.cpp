// Tier 2: the built module .so loads through Boost.DLL with the right ABI.
#include <gtest/gtest.h>

#include <boost/dll/import.hpp>
#include <boost/dll/shared_library.hpp>

#include "pvc/module.hpp"

TEST(HypervisorModuleSo, LoadsWithTheCoreAbiAndNamesItself) {
    std::filesystem::path so = std::filesystem::path(PVC_TEST_BUILD_DIR) / "modules" / "libpvc-module-hypervisor.so";
    ASSERT_TRUE(std::filesystem::exists(so)) << so;
    boost::dll::shared_library lib(so.string());
    EXPECT_EQ(lib.get<const int>("pvc_module_abi"), pvc::module_abi);
    auto create = boost::dll::import_alias<pvc::ModuleFactory>(so.string(), "pvc_module_create");
    auto module = create();
    ASSERT_TRUE(module);
    EXPECT_EQ(module->name(), "hypervisor");
}
