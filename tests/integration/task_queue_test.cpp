// The node task queue (pvc/tasks.hpp) against a real ZooKeeper: runners in
// this process, each with a session of its own, as daemons on several nodes
// would be. Claims, progress, results, a runner whose session ends mid-task,
// nodes without a runner, pruning, and the bodies GET /tasks/<id> and GET
// /tasks are built from.
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::eventually;
using Json = nlohmann::json;
namespace tasks = pvc::tasks;

namespace {

class TaskQueue : public ::testing::Test {
protected:
    static inline pvc::test::ZkServer* zk = nullptr;
    static void SetUpTestSuite() {
        zk = new pvc::test::ZkServer();
        auto s = pvc::zk::Session::connect({zk->hosts()});
        pvc::init_cluster(*s);
    }
    static void TearDownTestSuite() {
        delete zk;
        zk = nullptr;
    }

    std::shared_ptr<pvc::zk::Session> client = pvc::zk::Session::connect({zk->hosts()});

    std::string add_node() {
        std::string n = pvc::test::unique_name("hv");
        client->ensure_path(path("node.name", {n}));
        return n;
    }
    std::shared_ptr<tasks::Runner> runner(const std::string& node, tasks::RunnerOptions o = {},
                                          std::shared_ptr<pvc::zk::Session> s = nullptr) {
        if (!s) s = pvc::zk::Session::connect({zk->hosts()});
        return std::make_shared<tasks::Runner>(s, node, pvc::Logger(), o);
    }
    tasks::Progress wait_done(const std::string& id, std::chrono::milliseconds timeout = 30s) {
        tasks::Progress p;
        eventually([&] {
            p = tasks::progress(*client, id);
            return p.state == tasks::success || p.state == tasks::failure;
        }, timeout);
        return p;
    }
};

TEST_F(TaskQueue, UnknownNodeIsRefusedAndANodeWithoutRunnerFailsAtOnceNamingIt) {
    EXPECT_THROW(tasks::submit(*client, "test.echo", "no-such-node", Json::object()), tasks::SubmitError);
    std::string node = add_node();
    auto q = tasks::submit(*client, "test.echo", node, Json::object());
    EXPECT_TRUE(tasks::valid_id(q.id)) << q.id;
    EXPECT_EQ(q.run_on, node);
    auto p = tasks::progress(*client, q.id);
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_NE(p.status.find("TaskFailure: node " + node + " runs no task runner"), std::string::npos) << p.status;
}

TEST_F(TaskQueue, RunnerRunsAClaimedTaskWithProgressAndItsResult) {
    std::string node = add_node();
    auto r = runner(node);
    std::mutex m;
    std::condition_variable cv;
    bool release = false;
    auto h = r->handle("test.echo", [&](pvc::services::TaskRun& run) {
        run.progress(1, 2, "Echoing " + run.kwargs().value("text", ""));
        std::unique_lock l(m);
        cv.wait_for(l, 60s, [&] { return release; });
        return "Echoed " + run.kwargs().value("text", "") + " on " + run.kwargs().value("run_on", "");
    });
    r->start();
    auto q = tasks::submit(*client, "test.echo", node, Json{{"text", "hello"}});
    tasks::Progress p;
    ASSERT_TRUE(eventually([&] {
        p = tasks::progress(*client, q.id);
        return p.state == tasks::running && p.current == 1;
    }, 30s)) << p.state << " " << p.status;
    EXPECT_EQ(p.total, 2);
    EXPECT_EQ(p.status, "Echoing hello");
    // GET /tasks: the running task under its worker, with its kwargs.
    Json w = tasks::workers(*client);
    ASSERT_TRUE(w["active"].is_object()) << w.dump();
    auto& list = w["active"]["pvcworkerd@" + node];
    ASSERT_EQ(list.size(), 1u) << w.dump();
    EXPECT_EQ(list[0]["id"], q.id);
    EXPECT_EQ(list[0]["name"], "test.echo");
    EXPECT_EQ(list[0]["kwargs"]["text"], "hello");
    EXPECT_EQ(list[0]["kwargs"]["run_on"], node);
    EXPECT_TRUE(w["reserved"]["pvcworkerd@" + node].empty());
    {
        std::lock_guard g(m);
        release = true;
    }
    cv.notify_all();
    p = wait_done(q.id);
    EXPECT_EQ(p.state, tasks::success) << p.status;
    EXPECT_EQ(p.status, "Echoed hello on " + node);
    EXPECT_EQ(p.current, 2);
    EXPECT_EQ(p.total, 2);
    // The body's members in the reference's order.
    EXPECT_EQ(tasks::progress_body(p).dump(),
              R"({"state":"SUCCESS","current":2,"total":2,"status":"Echoed hello on )" + node + R"("})");
    // An unknown id reads PENDING, as the reference's result store answered.
    EXPECT_EQ(tasks::progress_body(tasks::progress(*client, "0badf00d")).dump(),
              R"({"state":"PENDING","current":0,"total":1,"status":"Pending job start"})");
    r->stop();
}

TEST_F(TaskQueue, FailuresCarryTheReferenceFormAndAMissingHandlerFailsAtSubmit) {
    std::string node = add_node();
    auto r = runner(node);
    auto h1 = r->handle("test.fail", [](pvc::services::TaskRun&) -> std::string {
        throw pvc::services::TaskFailure("OSD 7 not found in Ceph");
    });
    auto h2 = r->handle("test.crash", [](pvc::services::TaskRun&) -> std::string {
        throw std::runtime_error("unexpected keyword argument");
    });
    r->start();
    auto f = wait_done(tasks::submit(*client, "test.fail", node, Json::object()).id);
    EXPECT_EQ(f.state, tasks::failure);
    EXPECT_EQ(f.status, "TaskFailure: OSD 7 not found in Ceph");
    EXPECT_EQ(f.current, 1);
    EXPECT_EQ(f.total, 1);
    auto c = wait_done(tasks::submit(*client, "test.crash", node, Json::object()).id);
    EXPECT_EQ(c.status, "unexpected keyword argument");
    auto none = tasks::progress(*client, tasks::submit(*client, "test.other", node, Json::object()).id);
    EXPECT_EQ(none.state, tasks::failure);
    EXPECT_EQ(none.status, "TaskFailure: node " + node + " has no handler for task test.other");
    // A handler withdrawn is no longer advertised.
    h1.reset();
    auto gone = tasks::progress(*client, tasks::submit(*client, "test.fail", node, Json::object()).id);
    EXPECT_EQ(gone.state, tasks::failure);
    EXPECT_NE(gone.status.find("has no handler for task test.fail"), std::string::npos) << gone.status;
    r->stop();
}

TEST_F(TaskQueue, TwoRunnersOfOneNodeRunEveryTaskExactlyOnce) {
    std::string node = add_node();
    std::mutex m;
    std::map<std::string, int> runs;
    auto count = [&](pvc::services::TaskRun& run) {
        std::lock_guard g(m);
        ++runs[run.id()];
        return std::string("counted");
    };
    auto a = runner(node);
    auto b = runner(node);
    auto ha = a->handle("test.count", count);
    auto hb = b->handle("test.count", count);
    a->start();
    b->start();
    std::vector<std::string> ids;
    for (int i = 0; i < 24; ++i) ids.push_back(tasks::submit(*client, "test.count", node, Json::object()).id);
    for (const auto& id : ids) EXPECT_EQ(wait_done(id).state, tasks::success) << id;
    a->stop();
    b->stop();
    std::lock_guard g(m);
    EXPECT_EQ(runs.size(), ids.size());
    for (const auto& id : ids) EXPECT_EQ(runs[id], 1) << id;
    // Each task carries exactly one claim, never removed.
    for (const auto& id : ids) EXPECT_EQ(client->get(path("task.claim", {id})).value_or(""), node);
}

TEST_F(TaskQueue, ATaskWhoseRunnerLostItsSessionEndsFailedAndIsNeverRunAgain) {
    std::string victim = add_node();
    std::string peer = add_node();
    auto victim_session = pvc::zk::Session::connect({zk->hosts()});
    auto a = runner(victim, {}, victim_session);
    auto b = runner(peer);  // another node's runner: it notices
    std::atomic<int> calls{0};
    std::atomic<bool> saw_stop{false};
    auto h = a->handle("test.block", [&](pvc::services::TaskRun& run) {
        ++calls;
        run.progress(1, 3, "Blocking");
        std::mutex m;
        std::condition_variable_any cv;
        std::unique_lock l(m);
        cv.wait_for(l, run.stop_token(), 120s, [] { return false; });
        saw_stop = run.stop_token().stop_requested();
        return std::string("finished late");
    });
    a->start();
    b->start();
    auto q = tasks::submit(*client, "test.block", victim, Json::object());
    ASSERT_TRUE(eventually([&] { return tasks::progress(*client, q.id).current == 1; }, 30s));
    // The victim's session ends as ZooKeeper expires one (its daemon killed,
    // or cut off past the session timeout).
    ASSERT_EQ(pvc::test::close_session(zk->port(), *victim_session).status, 0);
    auto p = wait_done(q.id, 60s);
    EXPECT_EQ(p.state, tasks::failure);
    EXPECT_NE(p.status.find("node " + victim + " stopped while running the task"), std::string::npos) << p.status;
    // The victim's session recovers, its runner sees the task taken and
    // stops the handler; its late result is dropped; nothing re-runs it.
    EXPECT_TRUE(eventually([&] { return saw_stop.load(); }, 60s));
    a->stop();
    b->stop();
    EXPECT_EQ(calls.load(), 1);
    auto after = tasks::progress(*client, q.id);
    EXPECT_EQ(after.state, tasks::failure);
    EXPECT_EQ(after.status, p.status);
}

TEST_F(TaskQueue, APendingTaskOfANodeWhoseRunnerWentFailsAndFinishedTasksArePruned) {
    std::string node = add_node();
    std::string other = add_node();
    auto gone = runner(node);
    gone->start();
    auto q = tasks::submit(*client, "test.none", node, Json::object());  // no such handler: failed at once
    EXPECT_EQ(tasks::progress(*client, q.id).state, tasks::failure);
    auto h = gone->handle("test.later", [](pvc::services::TaskRun&) { return std::string("ok"); });
    gone->stop();
    // Queued while its advertisement was still there (written by hand here).
    client->create(path("task.runner", {node}), R"({"handlers": ["test.later"]})", true);
    auto pending = tasks::submit(*client, "test.later", node, Json::object());
    client->remove_recursive(path("task.runner", {node}));
    // Read as PENDING until a runner writes it failed (its own could come back).
    EXPECT_EQ(tasks::progress(*client, pending.id).state, tasks::pending);
    tasks::RunnerOptions keep_two;
    keep_two.keep = 2;
    auto r = runner(other, keep_two);
    auto ho = r->handle("test.ok", [](pvc::services::TaskRun&) { return std::string("ok"); });
    r->start();
    // Written FAILURE by the other node's runner.
    EXPECT_TRUE(eventually([&] {
        auto s = client->get(path("task.state", {pending.id}));
        return s && Json::parse(*s).value("state", "") == "FAILURE";
    }, 30s));
    std::vector<std::string> ids;
    for (int i = 0; i < 4; ++i) {
        ids.push_back(tasks::submit(*client, "test.ok", other, Json::object()).id);
        EXPECT_EQ(wait_done(ids.back()).state, tasks::success);
    }
    // Only the newest two finished tasks stay.
    EXPECT_TRUE(eventually([&] {
        auto all = client->children(path("task.queue")).value_or(std::vector<std::string>{});
        return all.size() == 2;
    }, 30s)) << client->children(path("task.queue")).value_or(std::vector<std::string>{}).size();
    EXPECT_TRUE(client->exists(path("task.id", {ids[3]})));
    r->stop();
}

}  // namespace
