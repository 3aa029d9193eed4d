// `pvc vm flush-locks` and `pvc cluster task` against a real ZooKeeper and a
// real task runner for hv1 in this process (a handler standing in for the
// storage module's): queue, follow, list, state once, a failure's exit.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include <nlohmann/json.hpp>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/zk_server.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;

namespace {

TEST(PvcTask, FlushLocksFollowsItsTaskAndClusterTaskListsAndReadsTasks) {
    pvc::test::ZkServer server;
    auto zk = pvc::zk::Session::connect({server.hosts()});
    pvc::init_cluster(*zk);
    zk->ensure_path(path("node.name", {"hv1"}));
    const std::string uuid = "c1100000-0000-4000-8000-000000000001";
    zk->write({{path("domain.name", {uuid}), "web1"},
               {path("domain.state", {uuid}), "stop"},
               {path("domain.node", {uuid}), "hv1"}});
    auto pvc = [&](std::vector<std::string> args) {
        std::vector<std::string> argv = {PVC_CLI_BINARY, "--zookeeper", server.hosts()};
        argv.insert(argv.end(), args.begin(), args.end());
        return pvc::test::run_command(argv, 60s);
    };
    // No runner anywhere yet.
    auto none = pvc({"cluster", "task"});
    EXPECT_EQ(none.status, 0) << none.err;
    EXPECT_EQ(none.out, "No node runs a task runner.\n");

    std::mutex m;
    std::condition_variable cv;
    bool hold = false;
    auto runner = std::make_shared<pvc::tasks::Runner>(pvc::zk::Session::connect({server.hosts()}), "hv1",
                                                       pvc::Logger());
    auto h = runner->handle("vm.flush_locks", [&](pvc::services::TaskRun& run) {
        std::string vm = run.kwargs().value("domain", "");
        run.progress(0, 3, "Flushing RBD locks for VM " + vm + " [forced=False]");
        std::unique_lock l(m);
        cv.wait_for(l, 60s, [&] { return !hold; });
        if (vm == "bad") throw pvc::services::TaskFailure("VM state start not in [stop, disable, fail] and not forcing");
        return "Successfully flushed RBD locks for VM " + vm;
    });
    runner->start();

    auto r = pvc({"vm", "flush-locks", "web1"});
    ASSERT_EQ(r.status, 0) << r.err << r.out;
    EXPECT_NE(r.out.find("(vm.flush_locks) assigned to node hv1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("SUCCESS: Successfully flushed RBD locks for VM web1\n"), std::string::npos) << r.out;

    // A held task: listed while running, read once, then followed to its failure (exit 1).
    {
        std::lock_guard g(m);
        hold = true;
    }
    zk->write({{path("domain.name", {"c1100000-0000-4000-8000-000000000002"}), "bad"},
               {path("domain.state", {"c1100000-0000-4000-8000-000000000002"}), "start"},
               {path("domain.node", {"c1100000-0000-4000-8000-000000000002"}), "hv1"}});
    auto q = pvc({"vm", "flush-locks", "bad", "--no-wait"});
    ASSERT_EQ(q.status, 0) << q.err;
    ASSERT_EQ(q.out.rfind("Task ID: ", 0), 0u) << q.out;
    std::string id = q.out.substr(9, 8);
    EXPECT_EQ(q.out, "Task ID: " + id + " assigned to node hv1\n");
    ASSERT_TRUE(pvc::test::eventually([&] { return pvc::tasks::progress(*zk, id).state == "RUNNING"; }, 30s));
    auto list = pvc({"cluster", "task"});
    EXPECT_EQ(list.status, 0) << list.err;
    EXPECT_NE(list.out.find(id), std::string::npos) << list.out;
    EXPECT_NE(list.out.find("domain=bad force_unlock=false"), std::string::npos) << list.out;
    auto once = pvc({"cluster", "task", id, "--no-wait"});
    EXPECT_EQ(once.out, "Job state: RUNNING\nStage: 0/3\nStatus: Flushing RBD locks for VM bad [forced=False]\n");
    {
        std::lock_guard g(m);
        hold = false;
    }
    cv.notify_all();
    auto followed = pvc({"cluster", "task", id});
    EXPECT_EQ(followed.status, 1) << followed.out;
    EXPECT_NE(followed.out.find("FAILURE: TaskFailure: VM state start not in [stop, disable, fail] and not forcing"),
              std::string::npos) << followed.out;

    auto unknown = pvc({"cluster", "task", "0badf00d"});
    EXPECT_EQ(unknown.status, 1);
    EXPECT_NE(unknown.err.find("No task with ID 0badf00d found."), std::string::npos) << unknown.err;
    auto bad_id = pvc({"cluster", "task", "xyz"});
    EXPECT_EQ(bad_id.status, 2);
    auto no_vm = pvc({"vm", "flush-locks", "nope"});
    EXPECT_EQ(no_vm.status, 1);

    // pvc vm rename (not a task): a stopped VM only, its XML's name too.
    zk->write(path("domain.xml", {uuid}), "<domain type='kvm'><name>web1</name><uuid>" + uuid +
                                              "</uuid><devices><disk><source name='vms/web1_disk0'/></disk></devices></domain>");
    zk->write(path("domain.storage.volumes", {uuid}), "vms/web1_disk0");
    auto taken = pvc({"vm", "rename", "web1", "bad"});
    EXPECT_EQ(taken.status, 1);
    EXPECT_NE(taken.err.find("A VM named 'bad' is already present in the cluster"), std::string::npos) << taken.err;
    auto running = pvc({"vm", "rename", "bad", "good"});
    EXPECT_EQ(running.status, 1);
    EXPECT_NE(running.err.find("is not in stopped state"), std::string::npos) << running.err;
    auto renamed = pvc({"vm", "rename", "web1", "web2"});
    ASSERT_EQ(renamed.status, 0) << renamed.err;
    EXPECT_EQ(renamed.out, "Renamed VM web1 to web2.\n");
    EXPECT_EQ(zk->get(path("domain.name", {uuid})).value_or(""), "web2");
    EXPECT_EQ(zk->get(path("domain.xml", {uuid})).value_or(""),
              "<domain type='kvm'><name>web2</name><uuid>" + uuid +
                  "</uuid><devices><disk><source name='vms/web1_disk0'/></disk></devices></domain>");
    EXPECT_EQ(zk->get(path("domain.state", {uuid})).value_or(""), "stop");
    runner->stop();
}

}  // namespace
