// A module for the module host's tests. Its metadata comes from the build
// (tests/CMakeLists.txt): name, the flag it serves, required or optional, its
// start order, and optionally another ABI fingerprint than the SDK's.
// PVC_TEST_MODULE_START_FAILS makes start() throw, as a module whose
// dependency is unusable does. PVC_TEST_MODULE_HEALTH makes it report health
// items (KeepaliveReport::health): one per line of /test/<node>/health, as
// "<name> <delta> <message>", read through a watch (the keepalive reads only
// the cached copy). PVC_TEST_MODULE_RECORDS_PHASES makes it
// record each hand-over phase its transition hook is called in, with the
// wall-clock time, in <dynamic_directory>/handover-phases (one line each:
// "<seconds since the epoch> <takeover|relinquish> <phase>"), written before
// `done`, so a peer that reads the file knows which phases ran.
// PVC_TEST_MODULE_TASKS makes it handle the node task `test.block`: each run
// appends the task's id to <dynamic_directory>/task-runs (flushed before it
// goes on), and then, with kwargs `block` true, reports progress 1/2
// "Blocking until stopped" and waits until the runner asks it to stop (the
// daemon stops; a SIGKILLed daemon never answers); else it succeeds at once.
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "pvc/module.hpp"
#include "pvc/schema.hpp"
#include "pvc/services/tasks.hpp"

namespace {

class TestModule : public pvc::Module {
public:
    std::string_view name() const override { return PVC_TEST_MODULE_NAME; }
    void start(pvc::NodeContext& ctx) override {
#ifdef PVC_TEST_MODULE_START_FAILS
        throw std::runtime_error("test module cannot start: its dependency is unusable");
#endif
        // Proves the context works: the module leaves a mark in ZooKeeper.
        ctx_ = &ctx;
        ctx.zk->write(pvc::schema::path("node.count.networks", {ctx.config.host.hostname}), "42");
        ctx.logger.info("test module started");
#ifdef PVC_TEST_MODULE_TASKS
        if (auto tasks = ctx.services.get<pvc::services::TaskHandlers>())
            task_handle_ = tasks->handle("test.block", [dir = ctx.config.dynamic_directory](
                                                              pvc::services::TaskRun& run) -> std::string {
                std::string file = (dir / "task-runs").string();
                if (FILE* f = std::fopen(file.c_str(), "a")) {
                    std::fprintf(f, "%s\n", run.id().c_str());
                    std::fclose(f);
                }
                if (!run.kwargs().value("block", false)) return "Done without blocking";
                run.progress(1, 2, "Blocking until stopped");
                std::mutex m;
                std::condition_variable_any cv;
                std::unique_lock l(m);
                std::stop_token stop = run.stop_token();
                cv.wait(l, stop, [] { return false; });
                throw pvc::services::TaskFailure("stopped while blocking");
            });
#endif
#ifdef PVC_TEST_MODULE_HEALTH
        health_watch_ = ctx.zk->watch_data("/test/" + ctx.config.host.hostname + "/health",
                                           [this](const std::optional<std::string>& value, const pvc::zk::Stat&) {
                                               std::vector<pvc::KeepaliveReport::HealthItem> items;
                                               std::istringstream in(value.value_or(""));
                                               for (std::string line; std::getline(in, line);) {
                                                   std::istringstream l(line);
                                                   pvc::KeepaliveReport::HealthItem it;
                                                   if (!(l >> it.name >> it.delta)) continue;
                                                   std::getline(l >> std::ws, it.message);
                                                   items.push_back(std::move(it));
                                               }
                                               std::lock_guard g(health_m_);
                                               health_ = std::move(items);
                                           });
#endif
    }
    void stop() override {
        task_handle_.reset();
        if (health_watch_) health_watch_->cancel();
        if (ctx_) ctx_->logger.info("test module stopped");
    }
    void contribute(pvc::KeepaliveReport& report) override {
        std::lock_guard g(health_m_);
        for (const auto& it : health_) report.health_item(it.name, it.delta, it.message);
    }
#ifdef PVC_TEST_MODULE_RECORDS_PHASES
    void transition(pvc::Transition t, pvc::TransitionPhase p, std::function<void()> done) override {
        if (ctx_) {
            auto now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
            std::string file = (ctx_->config.dynamic_directory / "handover-phases").string();
            if (FILE* f = std::fopen(file.c_str(), "a")) {
                std::fprintf(f, "%.6f %s %c\n", now, t == pvc::Transition::takeover ? "takeover" : "relinquish",
                             static_cast<char>(p));
                std::fclose(f);
            }
        }
        done();
    }
#endif

private:
    pvc::NodeContext* ctx_ = nullptr;
    std::shared_ptr<pvc::zk::Watch> health_watch_;
    std::shared_ptr<void> task_handle_;
    std::mutex health_m_;
    std::vector<pvc::KeepaliveReport::HealthItem> health_;
};

}  // namespace

#ifdef PVC_TEST_MODULE_ABI
// What PVC_MODULE writes, with a fingerprint of other headers, Boost or compiler.
namespace pvc_module_exports {
extern "C" BOOST_SYMBOL_EXPORT __attribute__((used, section(".pvc_modinfo"))) const char pvc_module_info[] =
    PVC_MODULE_NAME(PVC_TEST_MODULE_NAME) PVC_MODULE_VERSION("0.0.1") PVC_MODULE_SERVES(PVC_TEST_MODULE_SERVES)
    "need=" PVC_TEST_MODULE_NEED "\0" PVC_MODULE_START_ORDER(PVC_TEST_MODULE_START) "abi=" PVC_TEST_MODULE_ABI "\0";
std::unique_ptr<pvc::Module> create_module() { return std::make_unique<TestModule>(); }
BOOST_DLL_ALIAS(pvc_module_exports::create_module, pvc_module_create)
}  // namespace pvc_module_exports
#else
PVC_MODULE(TestModule,
           PVC_MODULE_NAME(PVC_TEST_MODULE_NAME)
           PVC_MODULE_VERSION("0.0.1")
           PVC_MODULE_SERVES(PVC_TEST_MODULE_SERVES)
           "need=" PVC_TEST_MODULE_NEED "\0"
           PVC_MODULE_START_ORDER(PVC_TEST_MODULE_START))
#endif
