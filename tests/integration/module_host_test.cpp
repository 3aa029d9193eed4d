// ModuleHost: discovery from each module's own metadata, the ABI fingerprint
// check, missing, duplicate, optional and disabled modules, and a module
// started with a NodeContext against a real ZooKeeper.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "daemon/module_host.hpp"
#include "pvc/cluster.hpp"
#include "config_reader.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"

namespace {

std::filesystem::path modules(const std::string& which) {
    return std::filesystem::path(PVC_TEST_BUILD_DIR) / "test-modules" / which;
}

std::filesystem::path module_so(const std::string& which, const std::string& name) {
    return modules(which) / ("libpvc-module-" + name + ".so");
}

pvc::Config config(bool hypervisor, const std::string& zk_hosts = "127.0.0.1:1", const std::string& more_functions = "") {
    pvc::test::TempDir dir("modcfg");
    pvc::test::NodeConfigOptions o;
    o.node = "hv1";
    o.coordinators = "[\"" + zk_hosts + "\"]";
    o.base_dir = dir.path();
    o.enable_hypervisor = hypervisor;
    o.zookeeper_logging = false;
    o.extra_functions_yaml = more_functions;
    return pvc::parse_config(pvc::test::node_config_yaml(o), "test.yaml", pvc::host_identity("hv1"));
}

pvc::Logger quiet() { return pvc::Logger(pvc::make_log_sink(nullptr), "test"); }

// True if `file` is mapped into this process (dlopen()ed and not yet closed).
bool mapped(const std::filesystem::path& file) {
    std::ifstream maps("/proc/self/maps");
    std::stringstream all;
    all << maps.rdbuf();
    return all.str().find(std::filesystem::canonical(file).string()) != std::string::npos;
}

std::vector<std::string> names(const pvc::ModuleHost& host) {
    std::vector<std::string> out;
    for (auto* m : host.modules()) out.emplace_back(m->name());
    return out;
}

TEST(ModuleHost, ReadsAModulesMetadataWithoutLoadingIt) {
    pvc::test::TempDir dir("infomods");
    auto so = dir.path() / "libpvc-module-hypervisor.so";
    std::filesystem::copy_file(module_so("good", "hypervisor"), so);
    auto info = pvc::read_module_info(so);
    EXPECT_EQ(info.name, "hypervisor");
    EXPECT_EQ(info.version, "0.0.1");
    EXPECT_EQ(info.serves, "enable_hypervisor");
    EXPECT_TRUE(info.required);
    EXPECT_EQ(info.start_order, 30);
    EXPECT_EQ(info.abi, pvc::abi_fingerprint());
    EXPECT_FALSE(mapped(so));

    auto fencing = pvc::read_module_info(module_so("good", "fencing"));
    EXPECT_TRUE(fencing.always());
    EXPECT_FALSE(fencing.required);
}

TEST(ModuleHost, FingerprintNamesTheSdkBoostAndCompiler) {
    std::string fp = pvc::abi_fingerprint();
    EXPECT_EQ(fp.rfind("sdk-" PVC_PROJECT_VERSION "+", 0), 0u) << fp;
    EXPECT_NE(fp.find(" boost-" BOOST_LIB_VERSION " "), std::string::npos) << fp;
    EXPECT_NE(fp.find(PVC_ABI_COMPILER), std::string::npos) << fp;
}

TEST(ModuleHost, LoadsAGoodModule) {
    pvc::ModuleHost host(modules("good"), quiet());
    auto& m = host.load_file(module_so("good", "hypervisor"));
    EXPECT_EQ(m.name(), "hypervisor");
    EXPECT_EQ(host.modules().size(), 1u);
}

TEST(ModuleHost, RefusesAModuleWithAnotherAbiNamingBothFingerprints) {
    pvc::ModuleHost host(modules("badabi"), quiet());
    try {
        host.load(config(true));
        FAIL() << "a module with another ABI was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("ABI fingerprint 'sdk-0.0.0+0000000000000000 boost-0_0 gcc-0.0.0'"), std::string::npos)
            << what;
        EXPECT_NE(what.find(std::string("requires '") + pvc::abi_fingerprint() + "'"), std::string::npos) << what;
    }
    EXPECT_TRUE(host.modules().empty());
    // Refused from its metadata: its code never ran in this process.
    EXPECT_FALSE(mapped(module_so("badabi", "hypervisor")));
}

TEST(ModuleHost, MissingEnabledModuleIsAnErrorNamingItsFlagAndTheDirectory) {
    pvc::test::TempDir empty("nomods");
    pvc::ModuleHost host(empty.path(), quiet());
    try {
        host.load(config(true));
        FAIL() << "a missing enabled module was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("pvc.functions.enable_hypervisor"), std::string::npos) << what;
        EXPECT_NE(what.find(empty.path().string()), std::string::npos) << what;
    }
}

TEST(ModuleHost, AnyEnabledFlagNeedsAModule) {
    // The core knows no flag names: enable_hello is only known to its module.
    pvc::ModuleHost host(modules("badfence"), quiet());
    try {
        host.load(config(false, "127.0.0.1:1", "    enable_hello: true\n"));
        FAIL() << "enable_hello without a module was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        EXPECT_NE(std::string(e.what()).find("enable_hello"), std::string::npos) << e.what();
    }
}

TEST(ModuleHost, AModuleTheCoreNeverHeardOfIsLoadedByItsFlag) {
    pvc::ModuleHost off(modules("good"), quiet());
    off.load(config(false));
    EXPECT_EQ(names(off), std::vector<std::string>{"fencing"});

    pvc::ModuleHost on(modules("good"), quiet());
    on.load(config(true, "127.0.0.1:1", "    enable_hello: true\n"));
    // In start order: hypervisor (30), fencing (40), hello (50).
    EXPECT_EQ(names(on), (std::vector<std::string>{"hypervisor", "fencing", "hello"}));
}

TEST(ModuleHost, UnreadableFilesAreNamedWhenAFlagHasNoModule) {
    pvc::test::TempDir dir("junkmods");
    std::ofstream(dir.path() / "libpvc-module-hypervisor.so") << "not an ELF file";
    pvc::ModuleHost host(dir.path(), quiet());
    try {
        host.load(config(true));
        FAIL() << "a junk module file was accepted";
    } catch (const pvc::ModuleLoadError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("enable_hypervisor"), std::string::npos) << what;
        EXPECT_NE(what.find("libpvc-module-hypervisor.so: not an ELF file"), std::string::npos) << what;
    }
}

TEST(ModuleHost, TwoModulesServingOneFlagAreRefused) {
    pvc::ModuleHost host(modules("dupflag"), quiet());
    try {
        host.load(config(true));
        FAIL() << "two modules for one flag were accepted";
    } catch (const pvc::ModuleLoadError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("served by two modules"), std::string::npos) << what;
    }
    EXPECT_TRUE(host.modules().empty());
}

TEST(ModuleHost, AnOptionalModuleThatCannotLoadIsSkipped) {
    pvc::ModuleHost host(modules("badfence"), quiet());
    EXPECT_NO_THROW(host.load(config(true)));
    EXPECT_EQ(names(host), std::vector<std::string>{"hypervisor"});
}

TEST(ModuleHost, DisabledModuleIsNeverOpened) {
    // The badabi dir holds a hypervisor module that would be refused if considered.
    pvc::ModuleHost host(modules("badabi"), quiet());
    EXPECT_NO_THROW(host.load(config(false)));
    EXPECT_TRUE(host.modules().empty());

    // A fresh copy: a library another test loaded may stay mapped after dlclose().
    pvc::test::TempDir dir("offmods");
    auto hello = dir.path() / "libpvc-module-hello.so";
    std::filesystem::copy_file(module_so("good", "hello"), hello);
    pvc::ModuleHost off(dir.path(), quiet());
    off.load(config(false));
    EXPECT_TRUE(off.modules().empty());
    EXPECT_FALSE(mapped(hello));
}

TEST(ModuleHost, FencingIsLoadedWheneverInstalled) {
    pvc::ModuleHost host(modules("good"), quiet());
    host.load(config(false));
    ASSERT_EQ(host.modules().size(), 1u);
    EXPECT_EQ(host.modules()[0]->name(), "fencing");
}

// The build's bundled "always" modules come from the modules' CMakeLists
// (pvc_add_module ... IF_ABSENT), not from the core's sources.
TEST(ModuleHost, TheBuildListsFencingAsBundledWithItsWarning) {
    const auto& bundled = pvc::bundled_always_modules();
    auto it = std::find_if(bundled.begin(), bundled.end(), [](const auto& b) { return b.name == "fencing"; });
    ASSERT_NE(it, bundled.end());
    EXPECT_EQ(it->if_absent, "THIS NODE WILL NOT FENCE DEAD NODES");
}

// A bundled "always" module missing from the directory is named, with its
// text, in a warning; the node still starts. One that is installed is not.
TEST(ModuleHost, ABundledModuleNotInstalledIsALoudWarningWithItsText) {
    pvc::test::TempDir dir("absentmods");
    pvc::test::NodeConfigOptions o;
    o.coordinators = "[\"127.0.0.1:1\"]";
    o.base_dir = dir.path() / "node";
    o.zookeeper_logging = false;
    o.stdout_logging = false;
    auto cfg = pvc::parse_config(pvc::test::node_config_yaml(o), "test.yaml", pvc::host_identity("hv1"));
    std::filesystem::create_directories(dir.path() / "empty");
    std::vector<pvc::BundledModule> bundled{{"watchdog", "THIS NODE WILL NOT WATCH ITSELF"},
                                            {"fencing", "THIS NODE WILL NOT FENCE DEAD NODES"}};
    auto sink = pvc::make_log_sink(&cfg);
    {
        pvc::ModuleHost empty(dir.path() / "empty", pvc::Logger(sink, "modules"), bundled);
        EXPECT_NO_THROW(empty.load(cfg));
        EXPECT_TRUE(empty.modules().empty());
        pvc::ModuleHost good(modules("good"), pvc::Logger(sink, "modules"), bundled);
        EXPECT_NO_THROW(good.load(cfg));
    }
    pvc::shutdown_log_sink(sink);
    std::string log = pvc::test::slurp(o.base_dir / "log" / "pvc.log");
    std::string empty_dir = (dir.path() / "empty").string();
    EXPECT_NE(log.find("Module watchdog is not installed in " + empty_dir + ": THIS NODE WILL NOT WATCH ITSELF"),
              std::string::npos) << log;
    EXPECT_NE(log.find("Module fencing is not installed in " + empty_dir + ": THIS NODE WILL NOT FENCE DEAD NODES"),
              std::string::npos) << log;
    EXPECT_EQ(log.find("Module fencing is not installed in " + modules("good").string()), std::string::npos) << log;
    EXPECT_NE(log.find("Module watchdog is not installed in " + modules("good").string()), std::string::npos) << log;
}

TEST(ModuleHost, FingerprintFollowsTheHeaders) {
    // The generator run by the build, on a copy of the SDK headers: any edit
    // to any header gives another fingerprint, an unchanged tree the same one.
    pvc::test::TempDir dir("abi");
    auto headers = dir.path() / "include";
    std::filesystem::copy(std::filesystem::path(PVC_TEST_SOURCE_DIR) / "core/sdk/include", headers,
                          std::filesystem::copy_options::recursive);
    auto fingerprint = [&](const char* out) {
        auto file = dir.path() / out;
        std::string cmd = "cmake -DHEADER_DIR=" + headers.string() + " -DOUTPUT=" + file.string() +
                          " -DSDK_VERSION=1.2.3 -P " + PVC_TEST_SOURCE_DIR "/cmake/PvcAbiFingerprint.cmake";
        EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
        std::stringstream s;
        s << std::ifstream(file).rdbuf();
        return s.str();
    };
    std::string a = fingerprint("a.hpp");
    EXPECT_NE(a.find("#define PVC_SDK_VERSION \"1.2.3\""), std::string::npos) << a;
    EXPECT_EQ(fingerprint("b.hpp"), a);
    std::ofstream(headers / "pvc/zk.hpp", std::ios::app) << "\n// one more line\n";
    EXPECT_NE(fingerprint("c.hpp"), a);
}

TEST(ModuleHost, StartedModuleGetsAWorkingContext) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({server.hosts()});
    pvc::init_cluster(*zk);
    zk->create(pvc::schema::path("node.name", {"hv1"}), "hypervisor");
    zk->create(pvc::schema::path("node.count.networks", {"hv1"}), "0");

    auto cfg = config(true, server.hosts());
    pvc::ModuleHost host(modules("good"), quiet());
    host.load(cfg);
    ASSERT_EQ(host.modules().size(), 2u);
    pvc::Executor ex(1);
    pvc::CoreEvents events;
    pvc::ServiceRegistry services;
    host.start_all(cfg, pvc::make_log_sink(nullptr), zk, ex, events, services);
    EXPECT_EQ(zk->get(pvc::schema::path("node.count.networks", {"hv1"})).value_or(""), "42");
    host.stop_all();
    ex.stop_pool();
}

TEST(ModuleHost, StartThatThrowsNamesTheModuleAndItsReason) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({server.hosts()});
    auto cfg = config(true, server.hosts());
    pvc::ModuleHost host(modules("startfails"), quiet());
    host.load(cfg);
    ASSERT_EQ(host.modules().size(), 1u);
    pvc::Executor ex(1);
    pvc::CoreEvents events;
    pvc::ServiceRegistry services;
    try {
        host.start_all(cfg, pvc::make_log_sink(nullptr), zk, ex, events, services);
        FAIL() << "a module whose start() throws was reported started";
    } catch (const pvc::ModuleStartError& e) {
        std::string what = e.what();
        EXPECT_NE(what.find("module hypervisor failed to start"), std::string::npos) << what;
        EXPECT_NE(what.find("its dependency is unusable"), std::string::npos) << what;
    }
    EXPECT_NO_THROW(host.stop_all());
    ex.stop_pool();
}

}  // namespace
