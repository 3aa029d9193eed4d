// The health plugin host against a real ZooKeeper, with test plugins in the
// legacy Python format and a native test plugin (docs/sdk-guide.md §7).
#include "health_support.hpp"

#include <ctime>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

using namespace std::chrono_literals;
using pvc::test::HealthOptions;
using pvc::test::eventually;

namespace {

using Clock = std::chrono::steady_clock;

class HealthHostTest : public pvc::test::HealthTest {};

const char* good_run = R"(        self.plugin_result.set_health_delta(7)
        self.plugin_result.set_message("all good")
        self.plugin_result.set_data({"k": [1, 2], "s": "x"})
        return self.plugin_result
)";

TEST_F(HealthHostTest, NormalPluginResultsAppearUnderMonitoringKeysAndHealthIs100MinusSum) {
    python_plugin("good", "good", good_run);
    python_plugin("other", "other", "        self.plugin_result.set_health_delta(10)\n        return self.plugin_result\n");
    auto h = host(config());
    h->load();
    EXPECT_EQ(h->plugin_names(), (std::vector<std::string>{"good", "other"}));
    EXPECT_EQ(key("node.monitoring.plugins"), "good other");
    // Initial keys at load.
    EXPECT_EQ(pkey("monitoring_plugin.message", "good"), "Initializing");
    EXPECT_EQ(pkey("monitoring_plugin.last_run", "good"), "0");
    EXPECT_EQ(pkey("monitoring_plugin.data", "good"), "{}");
    EXPECT_EQ(pkey("monitoring_plugin.runtime", "good"), "0.00");
    EXPECT_FALSE(h->health());

    pass(*h);
    EXPECT_EQ(pkey("monitoring_plugin.name", "good"), "good");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "good"), "7");
    EXPECT_EQ(pkey("monitoring_plugin.message", "good"), "all good");
    EXPECT_EQ(pkey("monitoring_plugin.data", "good"), R"({"k": [1, 2], "s": "x"})");
    auto runtime = pkey("monitoring_plugin.runtime", "good").value_or("");
    EXPECT_TRUE(std::regex_match(runtime, std::regex("[0-9]+\\.[0-9]{2}"))) << runtime;
    EXPECT_EQ(pkey("monitoring_plugin.message", "other"), "N/A");  // never set: N/A, as PluginResult's default
    EXPECT_EQ(key("node.monitoring.health"), "83");
    EXPECT_EQ(h->health(), 83);
    EXPECT_TRUE(log_has("tick: good (" ));
    EXPECT_TRUE(log_has("all good [-7]"));
    EXPECT_TRUE(log_has("healthcheck @"));
    h->shutdown(5s);
    EXPECT_EQ(key("node.monitoring.health"), "None");
}

TEST_F(HealthHostTest, NodeHealthIsFlooredAtZero) {
    python_plugin("a", "a", "        self.plugin_result.set_health_delta(60)\n        return self.plugin_result\n");
    python_plugin("b", "b", "        self.plugin_result.set_health_delta(50)\n        return self.plugin_result\n");
    auto h = host(config());
    h->load();
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "0");
    EXPECT_EQ(h->health(), 0);
}

TEST_F(HealthHostTest, LastRunAdvancesWithEveryRun) {
    python_plugin("good", "good", good_run);
    auto h = host(config());
    h->load();
    auto t0 = std::time(nullptr);
    pass(*h);
    auto first = std::stoll(pkey("monitoring_plugin.last_run", "good").value_or("0"));
    EXPECT_GE(first, t0 - 1);
    std::this_thread::sleep_for(1100ms);
    pass(*h);
    auto second = std::stoll(pkey("monitoring_plugin.last_run", "good").value_or("0"));
    EXPECT_GT(second, first);
}

TEST_F(HealthHostTest, RaisingPluginIsLoggedAndKeepsItsPreviousResult) {
    python_plugin("good", "good", good_run);
    // Succeeds once (delta 20), then raises.
    python_plugin("raiser", "raiser", R"(        self.calls = getattr(self, "calls", 0) + 1
        if self.calls > 1:
            raise ValueError("boom")
        self.plugin_result.set_health_delta(20)
        self.plugin_result.set_message("first run")
        return self.plugin_result
)");
    auto h = host(config(HealthOptions().with_keepalive_interval(1)));
    h->load();
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "73");
    std::this_thread::sleep_for(50ms);
    pass(*h);
    EXPECT_TRUE(log_has("Monitoring plugin raiser failed: ValueError: boom"));
    EXPECT_TRUE(log_has("Traceback (most recent call last)"));
    // ZooKeeper keeps the previous result; the previous delta still counts.
    EXPECT_EQ(pkey("monitoring_plugin.message", "raiser"), "first run");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "raiser"), "20");
    EXPECT_EQ(key("node.monitoring.health"), "73");
}

TEST_F(HealthHostTest, HangingPluginNeverBlocksKeepaliveThePassCompletesAndShutdownIsBounded) {
    python_plugin("good", "good", good_run);
    python_plugin("sleeper", "sleeper", "        import time\n        time.sleep(1e9)\n        return self.plugin_result\n");
    auto h = host(config(HealthOptions().with_keepalive_interval(1).with_plugin_timeout(2)));
    h->load();

    auto t0 = Clock::now();
    h->on_keepalive("primary");
    auto call = Clock::now() - t0;
    EXPECT_LT(call, 100ms) << "on_keepalive blocked";  // < 10% of the 1 s interval
    // Further keepalives while the pass waits for the deadline: immediate too.
    for (int i = 0; i < 5; ++i) {
        auto t = Clock::now();
        h->on_keepalive("primary");
        EXPECT_LT(Clock::now() - t, 100ms);
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(eventually([&] { return h->stats().passes >= 1; }, 5s));
    auto pass_time = h->stats().last_wall;
    EXPECT_GE(pass_time, 1900ms);
    EXPECT_LT(pass_time, 4s);
    EXPECT_TRUE(log_has("Monitoring plugin sleeper failed: Timeout: no result after 2 seconds"));
    // The other plugin's result is written; its delta and the sleeper's (0) count.
    EXPECT_EQ(pkey("monitoring_plugin.message", "good"), "all good");
    EXPECT_EQ(pkey("monitoring_plugin.message", "sleeper"), "Initializing");
    EXPECT_EQ(key("node.monitoring.health"), "93");

    // Next pass: the sleeper is skipped while its old call is still running.
    pass(*h, "primary");
    EXPECT_TRUE(log_has("Monitoring plugin sleeper skipped"));
    EXPECT_LT(h->stats().last_wall, 1s);

    auto s0 = Clock::now();
    h->shutdown(2s);
    EXPECT_LT(Clock::now() - s0, 3s);
    EXPECT_EQ(key("node.monitoring.health"), "None");
    // Keepalives after shutdown start nothing.
    auto passes = h->stats().passes;
    h->on_keepalive("primary");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(h->stats().passes, passes);
}

TEST_F(HealthHostTest, GarbageResultsCountAsFailedRuns) {
    python_plugin("notaresult", "notaresult", "        return 42\n");
    python_plugin("baddelta", "baddelta", "        self.plugin_result.set_health_delta(\"lots\")\n        return self.plugin_result\n");
    python_plugin("baddata", "baddata", "        self.plugin_result.set_data({1, 2})\n        return self.plugin_result\n");
    python_plugin("oldrun", "oldrun", "        return self.plugin_result\n");
    {
        // a run() without the coordinator_state parameter (pre-0.9.74 plugins): fails every pass
        std::ifstream in(plugins_ / "oldrun");
        std::string text((std::istreambuf_iterator<char>(in)), {});
        text.replace(text.find("def run(self, coordinator_state=None)"), 37, "def run(self)");
        std::ofstream(plugins_ / "oldrun") << text;
    }
    python_plugin("floatdelta", "floatdelta", "        self.plugin_result.set_health_delta(4.0)\n        return self.plugin_result\n");
    auto h = host(config());
    h->load();
    pass(*h);
    EXPECT_TRUE(log_has("Monitoring plugin notaresult failed: AttributeError:"));
    EXPECT_TRUE(log_has("Monitoring plugin baddelta failed: TypeError: health_delta must be an integer, not str"));
    EXPECT_TRUE(log_has("Monitoring plugin baddata failed: TypeError:"));
    EXPECT_TRUE(log_has("Monitoring plugin oldrun failed: TypeError: MonitoringPluginScript.run() got an unexpected "
                        "keyword argument 'coordinator_state'"));
    EXPECT_EQ(pkey("monitoring_plugin.message", "notaresult"), "Initializing");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "baddelta"), "0");
    EXPECT_EQ(pkey("monitoring_plugin.data", "baddata"), "{}");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "floatdelta"), "4");  // integral float accepted
    EXPECT_EQ(key("node.monitoring.health"), "96");
}

TEST_F(HealthHostTest, PrintingAndLoggingPluginsWork) {
    python_plugin("printer", "printer", R"(        print("hello from a plugin")
        self.log("via log at info", state="i")
        self.log("debug is off, never shown")
        self.logger.out("raw logger", state="w", prefix="custom")
        self.plugin_result.set_message(self.logger.fmt_bold + "x" + self.logger.fmt_end)
        return self.plugin_result
)");
    auto h = host(config());
    h->load();
    pass(*h);
    EXPECT_TRUE(log_has("info: printer - via log at info"));
    EXPECT_TRUE(log_has("warning: custom - raw logger"));
    EXPECT_EQ(log_text().find("never shown"), std::string::npos);
    EXPECT_EQ(pkey("monitoring_plugin.message", "printer"), "\033[1mx\033[0m");
}

TEST_F(HealthHostTest, PluginSeesConfigThisNodeAndCoordinatorState) {
    python_plugin("introspect", "introspect", R"(        import json
        self.plugin_result.set_data({
            "node": self.config["node"], "ka": self.config["keepalive_interval"],
            "debug": self.config["debug"], "name": self.this_node.name,
            "cs": coordinator_state, "str": str(self), "module": __name__,
            "node_cs": self.this_node.coordinator_state, "daemon_state": self.this_node.daemon_state,
            "maintenance": self.this_node.maintenance,
        })
        return self.plugin_result
)");
    zk_->ensure_path(pvc::schema::path("node.state.daemon", {node_}));
    zk_->write(pvc::schema::path("node.state.daemon", {node_}), "run");
    auto h = host(config());
    h->load();
    pass(*h, "secondary");
    auto data = nlohmann::json::parse(pkey("monitoring_plugin.data", "introspect").value_or("null"));
    EXPECT_EQ(data["node"], node_);
    EXPECT_EQ(data["ka"], 1);
    EXPECT_EQ(data["debug"], false);
    EXPECT_EQ(data["name"], node_);
    EXPECT_EQ(data["cs"], "secondary");
    EXPECT_EQ(data["str"], "introspect");
    EXPECT_EQ(data["module"], "plugin_script");
    EXPECT_EQ(data["node_cs"], "secondary");
    EXPECT_EQ(data["daemon_state"], "run");
    EXPECT_EQ(data["maintenance"], false);
}

TEST_F(HealthHostTest, PluginZkhandlerReadsAndWritesSchemaKeysAndRawPaths) {
    python_plugin("zkh", "zkh", R"(        zk = self.zkhandler
        node = self.this_node.name
        r = {}
        r["write"] = zk.write([(("node.monitoring.data", node), "x"), ("/pvc-health-zkh/" + node, 5)])
        r["read_raw"] = zk.read("/pvc-health-zkh/" + node)
        r["read_schema"] = zk.read(("node.monitoring.plugins", node))
        r["read_4"] = zk.read(("node", node, "monitoring_plugin.message", "zkh"))
        r["exists"] = zk.exists("/pvc-health-zkh/" + node)
        r["children"] = zk.children("/pvc-health-zkh")
        r["delete"] = zk.delete("/pvc-health-zkh/" + node)
        r["gone"] = zk.exists("/pvc-health-zkh/" + node)
        r["missing"] = zk.read("/pvc-health-zkh/none")
        r["health"] = self.this_node.health
        self.plugin_result.set_data(r)
        return self.plugin_result
)");
    zk_->ensure_path("/pvc-health-zkh");  // a create does not make parents (reference write)
    auto h = host(config());
    h->load();
    pass(*h);
    pass(*h);  // second pass: this_node.health is the first pass's result
    auto d = nlohmann::json::parse(pkey("monitoring_plugin.data", "zkh").value_or("null"));
    EXPECT_EQ(d["write"], true);
    EXPECT_EQ(d["read_raw"], "5");
    EXPECT_EQ(d["read_schema"], "zkh");
    EXPECT_EQ(d["read_4"], "N/A");  // first pass's own result, written before the second run
    EXPECT_EQ(d["exists"], true);
    EXPECT_TRUE(d["children"].is_array());
    EXPECT_EQ(d["delete"], true);
    EXPECT_EQ(d["gone"], false);
    EXPECT_TRUE(d["missing"].is_null());
    EXPECT_EQ(d["health"], 100);
    EXPECT_EQ(zk_->get(pvc::schema::path("node.monitoring.data", {node_})), "x");
}

TEST_F(HealthHostTest, RunOsCommandHasTheReferenceSemantics) {
    python_plugin("cmd", "cmd", R"(        from daemon_lib.common import run_os_command
        r = {}
        r["echo"] = run_os_command("echo 'a b'  \"c\"")
        r["list"] = run_os_command(["printf", "%s", "x y"])
        r["exit"] = run_os_command("sh -c 'echo out; echo err >&2; exit 3'")
        r["timeout"] = run_os_command("sleep 5", timeout=0.2)
        r["missing"] = run_os_command("/nonexistent/binary")
        r["nonascii"] = run_os_command(["printf", "caf\xc3\xa9"])
        r["glob"] = run_os_command("echo *.none")
        r["bg"] = run_os_command("true", background=True)
        r["env"] = run_os_command("sh -c 'echo $FOO'", environment={"FOO": "bar", "PATH": "/usr/bin:/bin"})
        self.plugin_result.set_data(r)
        return self.plugin_result
)");
    auto h = host(config());
    h->load();
    pass(*h);
    auto d = nlohmann::json::parse(pkey("monitoring_plugin.data", "cmd").value_or("null"));
    EXPECT_EQ(d["echo"], nlohmann::json::parse(R"([0, "a b c\n", ""])"));
    EXPECT_EQ(d["list"], nlohmann::json::parse(R"([0, "x y", ""])"));
    EXPECT_EQ(d["exit"], nlohmann::json::parse(R"([3, "out\n", "err\n"])"));
    EXPECT_EQ(d["timeout"], nlohmann::json::parse(R"([128, "", ""])"));
    EXPECT_EQ(d["missing"], nlohmann::json::parse(R"([255, "", ""])"));
    EXPECT_EQ(d["nonascii"], nlohmann::json::parse(R"([0, "", ""])"));
    EXPECT_EQ(d["glob"], nlohmann::json::parse(R"([0, "*.none\n", ""])"));
    EXPECT_EQ(d["bg"], nlohmann::json::parse(R"([0, null, null])"));
    EXPECT_EQ(d["env"], nlohmann::json::parse(R"([0, "bar\n", ""])"));
}

TEST_F(HealthHostTest, LoadFailuresAreLoggedAndLoadingContinues) {
    std::ofstream(plugins_ / "a_syntax") << "this is not python(\n";
    python_plugin("b_refuses", "b_refuses", "        return self.plugin_result\n", "        return 'no hardware here'\n");
    std::ofstream(plugins_ / "c_noname") << "x = 1\n";
    python_plugin("d_good", "good", good_run);
    python_plugin("e_dup", "good", good_run);
    python_plugin("f_slash", "a/b", good_run);
    std::filesystem::create_directories(plugins_ / "subdir");
    python_plugin("subdir/ignored", "ignored", good_run);
    auto h = host(config());
    h->load();
    EXPECT_EQ(h->plugin_names(), std::vector<std::string>{"good"});
    EXPECT_EQ(key("node.monitoring.plugins"), "good");
    auto log = log_text();
    EXPECT_NE(log.find("info: Loading monitoring plugin from " + plugins_.string() + "/a_syntax"), std::string::npos);
    EXPECT_NE(log.find("warning: Failed to load monitoring plugin: '(' was never closed (a_syntax, line 1)"), std::string::npos) << log;
    EXPECT_NE(log.find("warning: Failed to load monitoring plugin: no hardware here"), std::string::npos);
    EXPECT_NE(log.find("Failed to load monitoring plugin: module 'plugin_script' has no attribute 'PLUGIN_NAME'"),
              std::string::npos);
    EXPECT_NE(log.find("ok: Successfully loaded monitoring plugin 'good'"), std::string::npos);
    EXPECT_NE(log.find("a plugin named 'good' is already loaded"), std::string::npos);
    EXPECT_NE(log.find("Failed to load monitoring plugin: invalid plugin name 'a/b'"), std::string::npos);
    EXPECT_EQ(log.find("ignored"), std::string::npos);
    // Load order = plain code-point order of the file names.
    EXPECT_LT(log.find("/a_syntax"), log.find("/b_refuses"));
    EXPECT_LT(log.find("/d_good"), log.find("/e_dup"));
}

TEST_F(HealthHostTest, StaleMonitoringDataIsDeletedOnlyWhenAPluginLoaded) {
    auto stale = pvc::schema::path("monitoring_plugin.message", {node_, "gone"});
    zk_->ensure_path(stale);
    {
        auto h = host(config());  // empty plugin directory
        h->load();
        EXPECT_TRUE(h->plugin_names().empty());
        EXPECT_EQ(key("node.monitoring.plugins"), "");
        EXPECT_TRUE(zk_->exists(stale));
        h->on_keepalive("client");
        std::this_thread::sleep_for(200ms);
        EXPECT_EQ(h->stats().passes, 0u);  // no plugin: no pass
    }
    python_plugin("good", "good", good_run);
    auto h = host(config());
    h->load();
    EXPECT_FALSE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "gone"})));
    EXPECT_TRUE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "good"})));
}

TEST_F(HealthHostTest, FailingPluginBacksOffWithDoublingIntervalLoggedOncePerChange) {
    auto counter = dir_.path() / "calls";
    python_plugin("flaky", "flaky", fmt::format(R"(        with open("{}", "a") as f:
            f.write("x")
        raise RuntimeError("still broken")
)", counter.string()));
    auto h = host(config(HealthOptions().with_keepalive_interval(1)));
    h->load();
    // Keepalives every 50 ms for 3.3 s: without back-off ~60 runs. With it:
    // t=0 (fail, next in 2 s), t~2 (fail, next in 4 s) -> 2 runs.
    auto end = Clock::now() + 3300ms;
    while (Clock::now() < end) {
        h->on_keepalive("client");
        std::this_thread::sleep_for(50ms);
    }
    auto calls = [&] {
        std::ifstream f(counter);
        std::string s;
        f >> s;
        return s.size();
    };
    EXPECT_EQ(calls(), 2u);
    EXPECT_TRUE(log_has("Monitoring plugin flaky failed 1 time(s) in a row: next attempt in 2 seconds"));
    EXPECT_TRUE(log_has("Monitoring plugin flaky failed 2 time(s) in a row: next attempt in 4 seconds"));
    // Passes still complete (and write health) while the plugin is suspended.
    EXPECT_GT(h->stats().passes, 10u);
    EXPECT_EQ(key("node.monitoring.health"), "100");
}

TEST_F(HealthHostTest, MonitoringIntervalSpacesPasses) {
    python_plugin("good", "good", good_run);
    auto h = host(config(HealthOptions().with_keepalive_interval(1).with_monitoring_interval(2)));
    h->load();
    auto end = Clock::now() + 2500ms;
    while (Clock::now() < end) {
        h->on_keepalive("client");
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_EQ(h->stats().passes, 2u);  // t=0 and t~2
}

TEST_F(HealthHostTest, NativePluginLoadsRunsAndFailsLikeAPythonOne) {
    auto so = build_dir() / "test-plugins" / "nativetest.so";
    ASSERT_TRUE(std::filesystem::exists(so)) << so << " missing: build target pvc-health-plugins";
    std::filesystem::copy_file(so, plugins_ / "nativetest.so");
    std::filesystem::copy_file(build_dir() / "test-plugins" / "badabi.so", plugins_ / "badabi.so");
    python_plugin("good", "good", good_run);
    auto h = host(config(HealthOptions().with_keepalive_interval(1).with_plugin_timeout(2)));
    h->load();
    EXPECT_EQ(h->plugin_names(), (std::vector<std::string>{"good", "nativetest"}));
    // Both fingerprints named: the plugin's and the daemon's own.
    EXPECT_TRUE(log_has("has ABI fingerprint 'sdk-0.0.0+0000000000000000 boost-0_0 gcc-0.0.0', this daemon requires '" +
                        std::string(pvc::abi_fingerprint()) + "'"));
    EXPECT_TRUE(log_has("info: nativetest - nativetest setup"));
    pass(*h, "primary");
    EXPECT_EQ(pkey("monitoring_plugin.message", "nativetest"), "native ok in primary");
    EXPECT_EQ(pkey("monitoring_plugin.data", "nativetest"), R"({"answer":42})");
    EXPECT_EQ(key("node.monitoring.health"), "90");

    std::ofstream(dir_.path() / "nativetest.mode") << "throw";
    std::this_thread::sleep_for(50ms);
    pass(*h);
    EXPECT_TRUE(log_has("Monitoring plugin nativetest failed: std::runtime_error: native boom"));
    EXPECT_EQ(key("node.monitoring.health"), "90");

    // Let the back-off (2 s after a failure) pass, then hang.
    std::ofstream(dir_.path() / "nativetest.mode") << "hang";
    std::this_thread::sleep_for(2100ms);
    pass(*h);
    EXPECT_TRUE(log_has("Monitoring plugin nativetest failed: Timeout: no result after 2 seconds"));
    auto s0 = Clock::now();
    h->shutdown(1s);
    EXPECT_LT(Clock::now() - s0, 2s);
    EXPECT_TRUE(log_has("nativetest cleanup"));
}

// Module health (core/README.md, "Module health"): a module's items are one
// plugin-like entry, module-<module>, beside the real plugins.
using Items = std::map<std::string, std::vector<pvc::KeepaliveReport::HealthItem>>;

TEST_F(HealthHostTest, ModuleItemsAreAPluginLikeEntryCountedWithThePluginsAndClearedWhenGone) {
    python_plugin("good", "good", good_run);  // delta 7
    // A real plugin named like the module: its keys are never the module's.
    python_plugin("network", "network", "        self.plugin_result.set_health_delta(3)\n"
                                        "        self.plugin_result.set_message('plugin ok')\n"
                                        "        return self.plugin_result\n");
    auto h = host(config());
    h->load();
    h->set_module_health(Items{{"network", {{"network 1001", 10, "Network 1001: bad subnet"},
                                            {"firewall 1000", 10, "Network 1000: firewall rules refused: ACL 'x'"}}},
                               {"quiet", {}}});
    auto t0 = std::time(nullptr);
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "70");  // 100 - 7 - 3 - 20
    EXPECT_EQ(h->health(), 70);
    EXPECT_EQ(key("node.monitoring.plugins"), "good network module-network");
    EXPECT_EQ(pkey("monitoring_plugin.name", "module-network"), "module-network");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "module-network"), "20");
    // Item-name order: "firewall 1000" before "network 1001".
    EXPECT_EQ(pkey("monitoring_plugin.message", "module-network"),
              "Network 1000: firewall rules refused: ACL 'x'; Network 1001: bad subnet");
    EXPECT_EQ(nlohmann::json::parse(pkey("monitoring_plugin.data", "module-network").value_or("null")),
              nlohmann::json::parse(R"({"firewall 1000": {"health_delta": 10,
                                          "message": "Network 1000: firewall rules refused: ACL 'x'"},
                                        "network 1001": {"health_delta": 10, "message": "Network 1001: bad subnet"}})"));
    EXPECT_GE(std::stoll(pkey("monitoring_plugin.last_run", "module-network").value_or("0")), t0 - 1);
    EXPECT_EQ(pkey("monitoring_plugin.runtime", "module-network"), "0.00");
    EXPECT_FALSE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "module-quiet"})));
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "network"), "3");
    EXPECT_EQ(pkey("monitoring_plugin.message", "network"), "plugin ok");
    EXPECT_TRUE(log_has("tick: module-network (0.00s) - Network 1000"));

    // Unchanged items: the entry is not written again.
    pvc::zk::Stat before, after;
    zk_->get(pvc::schema::path("monitoring_plugin.message", {node_, "module-network"}), &before);
    h->set_module_health(Items{{"network", {{"network 1001", 10, "Network 1001: bad subnet"},
                                            {"firewall 1000", 10, "Network 1000: firewall rules refused: ACL 'x'"}}}});
    pass(*h);
    zk_->get(pvc::schema::path("monitoring_plugin.message", {node_, "module-network"}), &after);
    EXPECT_EQ(after.mzxid, before.mzxid);
    EXPECT_EQ(key("node.monitoring.health"), "70");

    // One item fixed: the next pass counts the other only.
    h->set_module_health(Items{{"network", {{"network 1001", 10, "Network 1001: bad subnet"}}}});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "80");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "module-network"), "10");
    EXPECT_EQ(pkey("monitoring_plugin.message", "module-network"), "Network 1001: bad subnet");

    // A module absent from a tick (its contribute() threw) keeps its items.
    h->set_module_health(Items{});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "80");

    // None left: the entry goes, the real plugins stay.
    h->set_module_health(Items{{"network", {}}});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "90");
    EXPECT_EQ(key("node.monitoring.plugins"), "good network");
    EXPECT_FALSE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "module-network"})));
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "network"), "3");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "good"), "7");
    h->shutdown(5s);
}

TEST_F(HealthHostTest, ModuleDeltasFloorTheHealthAtZeroWithThePlugins) {
    python_plugin("a", "a", "        self.plugin_result.set_health_delta(60)\n        return self.plugin_result\n");
    auto h = host(config());
    h->load();
    h->set_module_health(Items{{"network", {{"network 1", 50, "Network 1: refused"}}}});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "0");
}

TEST_F(HealthHostTest, WithoutPluginsAPassRunsOnlyWhenAModulesItemsChange) {
    auto h = host(config());  // empty plugin directory
    h->load();
    h->on_keepalive("client");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(h->stats().passes, 0u);  // nothing to report: no pass, nothing written
    h->set_module_health(Items{{"network", {}}});
    h->on_keepalive("client");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(h->stats().passes, 0u);

    h->set_module_health(Items{{"network", {{"network 1001", 10, "Network 1001: bad subnet"}}}});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "90");
    EXPECT_EQ(key("node.monitoring.plugins"), "module-network");
    EXPECT_EQ(pkey("monitoring_plugin.health_delta", "module-network"), "10");
    h->set_module_health(Items{{"network", {{"network 1001", 10, "Network 1001: bad subnet"}}}});
    h->on_keepalive("client");
    std::this_thread::sleep_for(200ms);
    EXPECT_EQ(h->stats().passes, 1u);  // unchanged: no pass

    h->set_module_health(Items{{"network", {}}});
    pass(*h);
    EXPECT_EQ(key("node.monitoring.health"), "100");
    EXPECT_EQ(h->health(), 100);
    EXPECT_EQ(key("node.monitoring.plugins"), "");
    EXPECT_FALSE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "module-network"})));
    h->shutdown(5s);
    EXPECT_EQ(key("node.monitoring.health"), "None");
}

TEST_F(HealthHostTest, NoPluginMayTakeAModuleEntryNameAndOldModuleEntriesGoAtLoad) {
    // Left by a daemon that stopped while its module reported.
    zk_->ensure_path(pvc::schema::path("monitoring_plugin.message", {node_, "module-network"}));
    zk_->ensure_path(pvc::schema::path("monitoring_plugin.message", {node_, "other"}));
    {
        auto h = host(config());  // no plugin: only the module entry goes
        h->load();
        EXPECT_FALSE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "module-network"})));
        EXPECT_TRUE(zk_->exists(pvc::schema::path("monitoring_plugin.name", {node_, "other"})));
    }
    python_plugin("impostor", "module-network", good_run);
    python_plugin("good", "good", good_run);
    auto h = host(config());
    h->load();
    EXPECT_EQ(h->plugin_names(), (std::vector<std::string>{"good"}));
    EXPECT_TRUE(log_has("Failed to load monitoring plugin: the name 'module-network' is reserved for module health "
                        "entries (module-*)"));
}

}  // namespace
