// A node's task runner killed mid-task: a real pvcnoded (loading the test
// module whose task test.block records each run and blocks until stopped)
// is SIGKILLed while it runs a task. The task ends FAILURE with a status
// saying the node stopped while running it, is never run again, also once
// the daemon is back; and the daemon that is back takes tasks again.
// (task_queue_test covers runners in one process whose session is ended.)
#include <csignal>
#include <sstream>

#include <gtest/gtest.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::DaemonProcess;
using pvc::test::eventually;
using pvc::test::slurp;
using Json = nlohmann::json;
namespace tasks = pvc::tasks;

namespace {

class TaskRunnerKill : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
        o.node = "hv1";
        o.coordinators = "[hv1:" + std::to_string(server.port()) + "]";
        o.base_dir = dir.path() / "hv1";
        o.module_dir = pvc::test::build_dir() + "/test-modules/tasks";
        cfg = pvc::test::write_node_config(o);
    }

    std::unique_ptr<DaemonProcess> start(const std::string& log) {
        logs.push_back(o.base_dir / log);
        auto d = std::make_unique<DaemonProcess>("hv1", cfg, logs.back());
        EXPECT_TRUE(eventually([&] { return runner_handles("test.block"); }, 30s)) << all_logs();
        return d;
    }
    bool runner_handles(const std::string& name) {
        auto ad = zk->get(path("task.runner", {"hv1"}));
        if (!ad) return false;
        Json j = Json::parse(*ad, nullptr, false);
        return j.is_object() && j.contains("handlers") && j["handlers"].dump().find('"' + name + '"') != std::string::npos;
    }
    std::string all_logs() {
        std::string out;
        for (const auto& l : logs) out += "----- " + l.filename().string() + "\n" + slurp(l);
        return out;
    }
    // The ids test.block was run for, one line each, in order.
    std::vector<std::string> runs() {
        std::istringstream in(slurp(o.base_dir / "run" / "task-runs"));
        std::vector<std::string> ids;
        for (std::string l; std::getline(in, l);) ids.push_back(l);
        return ids;
    }
    Json stored(const std::string& id) {
        return Json::parse(zk->get(path("task.state", {id})).value_or("{}"), nullptr, false);
    }
    // Submits a blocking test.block and waits until its handler blocks.
    std::string blocking_task() {
        auto q = tasks::submit(*zk, "test.block", "hv1", {{"block", true}});
        EXPECT_TRUE(eventually([&] { return tasks::progress(*zk, q.id).status == "Blocking until stopped"; }, 30s))
            << all_logs();
        EXPECT_EQ(tasks::progress(*zk, q.id).state, tasks::running);
        return q.id;
    }
    static void kill(DaemonProcess& d) {
        d.signal(SIGKILL);
        EXPECT_NE(d.wait(10s), -1);
    }
    std::string failed_text() { return "TaskFailure: node hv1 stopped while running the task"; }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"taskkill"};
    std::shared_ptr<pvc::zk::Session> zk;
    pvc::test::NodeConfigOptions o;
    std::filesystem::path cfg;
    std::vector<std::filesystem::path> logs;
};

// Killed, and started again at once (the node guard lets it run before the
// old session has expired): the old session's runner advertisement and the
// task's `active` key live on until the session timeout (10 s); then the task
// is FAILURE, written by the new daemon's runner, which did not run it again
// and advertises itself (before the fix it stayed unadvertised, so every task
// for the node failed with "runs no task runner" until its next restart).
TEST_F(TaskRunnerKill, RestartedAtOnceTheTaskFailsIsNotRunAgainAndTheNodeTakesTasks) {
    auto first = start("first.log");
    std::string id = blocking_task();
    kill(*first);
    auto again = start("again.log");  // the old advertisement still names test.block
    ASSERT_TRUE(eventually([&] { return stored(id).value("state", "") == tasks::failure; }, 40s)) << all_logs();
    auto p = tasks::progress(*zk, id);
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_EQ(p.status.rfind(failed_text(), 0), 0u) << p.status;
    EXPECT_NE(p.status.find("not run again"), std::string::npos) << p.status;
    EXPECT_EQ(zk->get(path("task.claim", {id})).value_or(""), "hv1");

    // The node's runner is advertised again (its own session's key) and runs a new task.
    ASSERT_TRUE(eventually([&] { return runner_handles("test.block"); }, 30s)) << all_logs();
    auto q = tasks::submit(*zk, "test.block", "hv1", {{"block", false}});
    tasks::Progress done;
    ASSERT_TRUE(eventually([&] {
        done = tasks::progress(*zk, q.id);
        return done.state == tasks::success || done.state == tasks::failure;
    }, 30s)) << all_logs();
    EXPECT_EQ(done.state, tasks::success) << done.status << "\n" << all_logs();
    EXPECT_EQ(done.status, "Done without blocking");
    EXPECT_EQ(runs(), (std::vector<std::string>{id, q.id}));  // the killed task ran once
    again->signal(SIGTERM);
    EXPECT_EQ(again->wait(30s), 0) << all_logs();
    EXPECT_EQ(tasks::progress(*zk, id).state, tasks::failure);
    EXPECT_EQ(runs().size(), 2u);
}

// Killed and left down: readers see FAILURE once its session has ended
// (nobody else writes it: no other runner); the daemon started afterwards
// writes it FAILURE and does not run it.
TEST_F(TaskRunnerKill, LeftDownTheTaskReadsFailedAndTheRestartedDaemonDoesNotRunIt) {
    auto first = start("first.log");
    std::string id = blocking_task();
    kill(*first);
    tasks::Progress p;
    ASSERT_TRUE(eventually([&] {
        p = tasks::progress(*zk, id);
        return p.state == tasks::failure;
    }, 40s)) << all_logs();
    EXPECT_EQ(p.status.rfind(failed_text(), 0), 0u) << p.status;
    EXPECT_EQ(stored(id).value("state", ""), tasks::running);  // read so, not yet written so
    EXPECT_FALSE(zk->exists(path("task.runner", {"hv1"})));
    // A task queued for the node meanwhile fails at once, naming it.
    auto none = tasks::submit(*zk, "test.block", "hv1", {{"block", false}});
    EXPECT_EQ(tasks::progress(*zk, none.id).state, tasks::failure);
    EXPECT_NE(tasks::progress(*zk, none.id).status.find("node hv1 runs no task runner"), std::string::npos);

    auto again = start("again.log");
    ASSERT_TRUE(eventually([&] { return stored(id).value("state", "") == tasks::failure; }, 30s)) << all_logs();
    EXPECT_EQ(stored(id).value("status", "").rfind(failed_text(), 0), 0u) << stored(id).dump();
    EXPECT_EQ(stored(id).value("node", ""), "hv1");
    // Nothing else to run: the next task is the proof the runner looked at the queue and passed it over.
    auto q = tasks::submit(*zk, "test.block", "hv1", {{"block", false}});
    ASSERT_TRUE(eventually([&] { return tasks::progress(*zk, q.id).state == tasks::success; }, 30s)) << all_logs();
    EXPECT_EQ(runs(), (std::vector<std::string>{id, q.id}));
    again->signal(SIGTERM);
    EXPECT_EQ(again->wait(30s), 0) << all_logs();
}

}  // namespace
