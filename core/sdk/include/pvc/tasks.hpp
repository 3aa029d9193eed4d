// The node task queue in ZooKeeper (keys and states: docs/wire-contract.md
// §3.10; the handler rules: docs/sdk-guide.md §8).
//
// Client side (the API module, `pvc`): submit() queues a task for a node,
// progress() and workers() read it back in the shapes the reference's
// Celery-based API answered (GET /tasks/<id>, GET /tasks).
//
// Node side: Runner is the daemon's task runner. It advertises the node's
// handlers, watches the queue (no polling), claims the node's PENDING tasks
// with a version-checked transaction that also creates a persistent claim
// key (so a task is run at most once, ever), runs each on a thread of its
// own pool, writes progress and the result, marks FAILURE the tasks of a
// runner whose ZooKeeper session ended (the claimant's ephemeral `active`
// key is gone) and prunes finished tasks past their retention.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pvc/export.hpp"
#include "pvc/log.hpp"
#include "pvc/services/tasks.hpp"
#include "pvc/zk.hpp"

namespace pvc::tasks {

// Celery's state names, as the reference's API showed them.
inline constexpr std::string_view pending = "PENDING", running = "RUNNING", success = "SUCCESS",
                                  failure = "FAILURE";

// A task as GET /tasks/<id> shows it.
struct Progress {
    std::string state{pending};
    long current = 0;
    long total = 1;
    std::string status = "Pending job start";
};

struct Queued {
    std::string id, name, run_on;
};

// Refused before anything was queued; the text is for people (API: 400).
class PVC_SDK_API SubmitError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    ~SubmitError() override;
};

// A task id: 8 lowercase hexadecimal digits (the reference's form).
PVC_SDK_API bool valid_id(std::string_view id);

// Queues task `name` for node `run_on` ("primary": the primary coordinator
// now) with `kwargs` (a JSON object; `run_on` is added). A node that runs no
// task runner, or none with a handler for `name`, gets the task already
// FAILURE, its status naming the node. Throws SubmitError for an unknown
// node or no primary, zk::Error when ZooKeeper fails.
PVC_SDK_API Queued submit(zk::Session& zk, const std::string& name, const std::string& run_on,
                          const nlohmann::json& kwargs);

// What GET /tasks/<id> answers: an unknown or pruned id reads PENDING (as
// the reference's result store). A RUNNING task whose runner's session has
// ended reads FAILURE before any runner has written it so. Throws zk::Error.
PVC_SDK_API Progress progress(zk::Session& zk, const std::string& id);
// {"state", "current", "total", "status"} in that order.
PVC_SDK_API nlohmann::ordered_json progress_body(const Progress& p);

// GET /tasks: {"scheduled", "active", "reserved"}, each an object of
// "pvcworkerd@<node>" → task descriptions ({"id", "name", "args", "kwargs",
// "type", "hostname", "time_start", "acknowledged", "delivery_info",
// "worker_pid"}), one entry per node whose runner is up; each null when no
// runner is up. `active`: RUNNING, `reserved`: PENDING. Throws zk::Error.
PVC_SDK_API nlohmann::json workers(zk::Session& zk);

struct RunnerOptions {
    unsigned slots = 3;                     // tasks run at once (the reference's worker concurrency)
    std::chrono::seconds retention{86400};  // finished tasks kept (the reference's result expiry: a day)
    std::size_t keep = 1000;                // and at most this many, the newest
};

class PVC_SDK_API Runner final : public services::TaskHandlers {
public:
    Runner(std::shared_ptr<zk::Session> zk, std::string node, Logger log, RunnerOptions options = {});
    ~Runner() override;
    Runner(const Runner&) = delete;
    Runner& operator=(const Runner&) = delete;

    std::shared_ptr<void> handle(const std::string& name, services::TaskHandler handler) override;
    // Advertises the node's handlers and starts claiming (after the modules
    // registered theirs). Throws zk::Error when ZooKeeper fails.
    void start();
    // Stops claiming, asks running handlers to stop and waits for them, and
    // withdraws the advertisement. Idempotent.
    void stop();

private:
    struct Impl;
    std::shared_ptr<Impl> impl_;
};

}  // namespace pvc::tasks
