// The node task routes in-process against a real ZooKeeper and a real task
// runner for hv1 (handlers standing in for the storage and hypervisor
// modules'): the 202 answers, GET /tasks/<id> and GET /tasks read back as
// the 0.9.82 client reads them (its polling loop, in Python), a node
// without a runner, bad input.
#include <condition_variable>
#include <mutex>

#include "api_fixture.hpp"
#include "pvc/tasks.hpp"

namespace pvc::api::test {
namespace {

using namespace std::chrono_literals;
const std::string U1 = "7a5c0000-0000-4000-8000-000000000001";
const std::string U2 = "7a5c0000-0000-4000-8000-000000000002";
const std::string kDisk = "<disk type='network' device='disk'><source protocol='rbd' name='vms/x'/>"
                          "<target dev='sdb' bus='scsi'/></disk>";

// The 0.9.82 client's wait on a task (its task status loop, reduced to what
// it reads): every 0.5 s GET /tasks/<id> until the state is neither PENDING
// nor RUNNING; `current`/`total` must be integers, `status` a string. Prints
// "<state>: <status>" and each RUNNING stage seen.
const char* const kReferenceWait = R"PY(
import json, sys, time, urllib.request
base, key, task = sys.argv[1], sys.argv[2], sys.argv[3]
def get():
    req = urllib.request.Request(base + "/tasks/" + task, headers={"X-Api-Key": key})
    with urllib.request.urlopen(req, timeout=10) as r:
        assert r.status == 200, r.status
        return json.loads(r.read())
deadline = time.time() + 60
body = get()
while body["state"] == "PENDING" and time.time() < deadline:
    time.sleep(0.5); body = get()
total = body["total"]
assert isinstance(total, int) and isinstance(body["current"], int) and isinstance(body["status"], str), body
while body["state"] == "RUNNING" and time.time() < deadline:
    print("stage %d/%d %s" % (body["current"], total, body["status"]))
    time.sleep(0.5); body = get()
assert list(body.keys())[:4] == ["state", "current", "total", "status"], body
print("%s: %s" % (body["state"], body["status"]))
)PY";

class ApiTasks : public ApiFixture {
protected:
    static std::string key_path(std::string_view k, const std::string& id) { return schema::path(k, {id}); }
    void SetUp() override {
        ApiFixture::SetUp();
        runner = std::make_shared<tasks::Runner>(zk::Session::connect({.hosts = zk_->hosts()}), "hv1", logger);
        flush = runner->handle("vm.flush_locks", [this](services::TaskRun& run) {
            run.progress(0, 3, "Flushing RBD locks for VM " + run.kwargs().value("domain", "") + " [forced=False]");
            std::unique_lock l(m);
            cv.wait_for(l, 60s, [&] { return released; });
            run.progress(2, 3, "Freeing RBD locks for VM " + run.kwargs().value("domain", ""));
            return "Successfully flushed RBD locks for VM " + run.kwargs().value("domain", "");
        });
        attach = runner->handle("vm.device_attach", [](services::TaskRun& run) -> std::string {
            throw services::TaskFailure("VM " + run.kwargs().value("domain", "") +
                                        " not in start state; hot-attach unnecessary or impossible");
        });
        runner->start();
    }
    void TearDown() override {
        release();
        runner->stop();
        ApiFixture::TearDown();
    }
    void release() {
        {
            std::lock_guard g(m);
            released = true;
        }
        cv.notify_all();
    }
    pvc::test::ProcResult reference_wait(const std::string& id) {
        return pvc::test::run_python(kReferenceWait,
                                     {"http://127.0.0.1:" + std::to_string(port) + "/api/v1", token, id});
    }

    std::shared_ptr<tasks::Runner> runner;
    std::shared_ptr<void> flush, attach;
    std::mutex m;
    std::condition_variable cv;
    bool released = false;
};

TEST_F(ApiTasks, FlushLocksAnswers202AndTheReferenceClientFollowsTheTaskToItsEnd) {
    ASSERT_EQ(define("web1", U1, "hv1").status, 200u);
    // The 202 and its Location, as the route handler answers them.
    HttpRequest req{"POST", "/api/v1/vm/web1/locks", "", nullptr, "", token, "127.0.0.1"};
    HttpResponse r = api->handle(req, {});
    ASSERT_EQ(r.status, 202u) << r.body;
    auto body = nlohmann::ordered_json::parse(r.body);
    std::vector<std::string> keys;
    for (const auto& [k, v] : body.items()) keys.push_back(k);
    EXPECT_EQ(keys, (std::vector<std::string>{"task_id", "task_name", "run_on"}));
    std::string id = body["task_id"];
    EXPECT_TRUE(tasks::valid_id(id)) << id;
    EXPECT_EQ(body["task_name"], "vm.flush_locks");
    EXPECT_EQ(body["run_on"], "hv1");
    ASSERT_EQ(r.headers.size(), 1u);
    EXPECT_EQ(r.headers[0], (std::pair<std::string, std::string>{"Location", "/api/v1/tasks/" + id}));

    // Running: GET /tasks lists it under hv1's worker with its kwargs.
    ASSERT_TRUE(pvc::test::eventually([&] { return get("/tasks/" + id).json()["state"] == "RUNNING"; }, 30s));
    auto w = get("/tasks").json();
    auto& active = w["active"]["pvcworkerd@hv1"];
    ASSERT_EQ(active.size(), 1u) << w.dump();
    EXPECT_EQ(active[0]["id"], id);
    EXPECT_EQ(active[0]["name"], "vm.flush_locks");
    EXPECT_EQ(active[0]["kwargs"]["domain"], "web1");
    EXPECT_EQ(active[0]["kwargs"]["force_unlock"], false);
    EXPECT_EQ(active[0]["kwargs"]["run_on"], "hv1");

    release();
    auto waited = reference_wait(id);
    ASSERT_EQ(waited.status, 0) << waited.err << waited.out;
    EXPECT_NE(waited.out.find("SUCCESS: Successfully flushed RBD locks for VM web1"), std::string::npos)
        << waited.out;
    auto done = get("/tasks/" + id).json();
    EXPECT_EQ(done["current"], 3);
    EXPECT_EQ(done["total"], 3);
    // An unknown id reads PENDING, as the reference's result store answered.
    EXPECT_EQ(get("/tasks/0badf00d").body,
              R"({"state":"PENDING","current":0,"total":1,"status":"Pending job start"})"
              "\n");
}

TEST_F(ApiTasks, DeviceRoutesCheckTheXmlAndTheVmAndATaskForANodeWithoutRunnerFailsAtOnce) {
    ASSERT_EQ(define("web1", U1, "hv1").status, 200u);
    ASSERT_EQ(define("web2", U2, "hv2").status, 200u);
    auto missing = post("/vm/web1/device");
    EXPECT_EQ(missing.status, 400u);
    EXPECT_EQ(missing.json()["message"]["xml"], "A Libvirt XML device document must be specified");
    auto bad = post("/vm/web1/device", form({{"xml", "<disk><target"}}));
    EXPECT_EQ(bad.status, 400u);
    EXPECT_EQ(bad.json()["message"], "Specified XML document is not valid");
    auto doctype = post("/vm/web1/device", form({{"xml", "<!DOCTYPE d [<!ENTITY e 'x'>]><disk>&e;</disk>"}}));
    EXPECT_EQ(doctype.status, 400u);
    auto nobody = post("/vm/nobody/device", form({{"xml", kDisk}}));
    EXPECT_EQ(nobody.status, 404u);
    EXPECT_EQ(nobody.json()["message"], "VM not found.");
    EXPECT_EQ(post("/vm/nobody/locks").json()["message"], "VM not found.");

    // hv1 runs the attach handler: the task's own failure, as the client sees it.
    auto a = post("/vm/web1/device", form({{"xml", kDisk}}));
    ASSERT_EQ(a.status, 202u) << a.body;
    EXPECT_EQ(a.json()["task_name"], "vm.device_attach");
    auto waited = reference_wait(a.json()["task_id"]);
    ASSERT_EQ(waited.status, 0) << waited.err;
    EXPECT_NE(waited.out.find("FAILURE: TaskFailure: VM web1 not in start state; hot-attach unnecessary or impossible"),
              std::string::npos) << waited.out;
    // DELETE on the same route queues the detach: hv1 has no handler for it.
    auto d = call("DELETE", "/vm/web1/device", form({{"xml", kDisk}}));
    ASSERT_EQ(d.status, 202u) << d.body;
    EXPECT_EQ(d.json()["task_name"], "vm.device_detach");
    auto p = get("/tasks/" + d.json()["task_id"].get<std::string>()).json();
    EXPECT_EQ(p["state"], "FAILURE");
    EXPECT_EQ(p["status"], "TaskFailure: node hv1 has no handler for task vm.device_detach");
    // hv2 runs no task runner: failed at once, naming it.
    auto n = post("/vm/web2/locks");
    ASSERT_EQ(n.status, 202u) << n.body;
    EXPECT_EQ(n.json()["run_on"], "hv2");
    auto q = get("/tasks/" + n.json()["task_id"].get<std::string>()).json();
    EXPECT_EQ(q["state"], "FAILURE");
    EXPECT_NE(q["status"].get<std::string>().find("node hv2 runs no task runner"), std::string::npos) << q.dump();
}

// POST /vm/<vm>/rename (not a task: answered in the request).
TEST_F(ApiTasks, RenameChangesTheNameAndTheXmlsNameOnlyOfAStoppedVm) {
    ASSERT_EQ(define("web1", U1, "hv1").status, 200u);
    ASSERT_EQ(define("db", U2, "hv1").status, 200u);
    auto none = post("/vm/web1/rename");
    EXPECT_EQ(none.status, 400u);
    EXPECT_EQ(none.json()["message"], "A new VM name must be specified");
    EXPECT_EQ(post("/vm/web1/rename?new_name=db").json()["message"], "A VM named 'db' is already present in the cluster");
    EXPECT_EQ(post("/vm/nobody/rename?new_name=x").json()["message"], "ERROR: Could not find VM 'nobody' in the cluster!");
    EXPECT_EQ(post("/vm/web1/rename?new_name=a%3Cb").status, 400u);
    session->write(key_path("domain.state", U1), "start");
    auto running = post("/vm/web1/rename?new_name=web2");
    EXPECT_EQ(running.status, 400u);
    EXPECT_EQ(running.json()["message"], "ERROR: VM 'web1' is not in stopped state; VMs cannot be renamed while running.");
    session->write(key_path("domain.state", U1), "disable");
    std::string before = key("domain.xml", {U1});
    auto r = post("/vm/web1/rename?new_name=w");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json()["message"], "Successfully renamed VM 'web1' to 'w'.");
    EXPECT_EQ(key("domain.name", {U1}), "w");
    EXPECT_EQ(key("domain.state", {U1}), "disable");
    std::string after = key("domain.xml", {U1});
    EXPECT_NE(after.find("<name>w</name>"), std::string::npos) << after;
    // Only the name element: the volume name vms/web1_disk0 is left as it was.
    EXPECT_NE(after.find("name='vms/web1_disk0'"), std::string::npos) << after;
    EXPECT_EQ(after.size() + 3, before.size());
    EXPECT_EQ(key("domain.storage.volumes", {U1}), "vms/web1_disk0");
    EXPECT_EQ(get("/vm/w").status, 200u);
}

}  // namespace
}  // namespace pvc::api::test
