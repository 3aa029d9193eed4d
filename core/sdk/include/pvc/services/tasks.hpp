// Node tasks (docs/sdk-guide.md §8): work queued in ZooKeeper for one node,
// claimed and run there by the daemon's task runner (pvc/tasks.hpp). A
// module registers a handler per task name through this service, provided
// by the core on every node of ours; the core itself names no task.
//
//   auto tasks = ctx.services.get<pvc::services::TaskHandlers>();
//   if (tasks) handle_ = tasks->handle("vm.flush_locks", [this](pvc::services::TaskRun& run) {
//       run.progress(0, 3, "Flushing RBD locks for VM web1 [forced=False]");
//       ...
//       return std::string("Successfully flushed RBD locks for VM web1");   // SUCCESS
//   });                                                 // throw TaskFailure("...") → FAILURE
//
// A handler runs on one of the runner's own threads (never an event thread),
// may block, and must end soon once run.stop_token() says so (the daemon
// stops, or the task was taken from this node because its ZooKeeper session
// ended). It is called at most once per task, on the node the task names.
#pragma once

#include <functional>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "pvc/export.hpp"

namespace pvc::services {

// A handled failure: the task ends FAILURE with status "TaskFailure: <what>"
// (the reference's form). Any other exception ends it FAILURE with its bare
// text, as the reference shows an unexpected error.
class PVC_SDK_API TaskFailure : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
    ~TaskFailure() override;  // defined in libpvc-sdk: one type for every module
};

// One claimed task, as its handler sees it.
class PVC_SDK_API TaskRun {
public:
    virtual ~TaskRun() = default;
    virtual const std::string& id() const = 0;
    virtual const std::string& name() const = 0;
    // The task's keyword arguments, as submitted (a JSON object; `run_on` included).
    virtual const nlohmann::json& kwargs() const = 0;
    // Publishes RUNNING with `current` of `total` stages and `status`
    // (what GET /tasks/<id> and `pvc cluster task` show). Best effort: a
    // write ZooKeeper refuses is logged, never thrown.
    virtual void progress(long current, long total, const std::string& status) = 0;
    virtual std::stop_token stop_token() const = 0;
};

// Returns the success text (status of SUCCESS); throws for FAILURE.
using TaskHandler = std::function<std::string(TaskRun&)>;

class PVC_SDK_API TaskHandlers {
public:
    static constexpr std::string_view service_name = "pvc.tasks.v1";
    virtual ~TaskHandlers() = default;
    // Registers `handler` for tasks named `name` ("vm.flush_locks") on this
    // node; the runner advertises the name, so a task submitted for a node
    // without it fails at once. Keep the returned handle: releasing it
    // withdraws the handler (a call in progress goes on). Throws
    // std::invalid_argument for an empty name or one already handled.
    virtual std::shared_ptr<void> handle(const std::string& name, TaskHandler handler) = 0;
};

}  // namespace pvc::services
