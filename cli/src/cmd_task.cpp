// Node tasks (pvc/tasks.hpp): pvc cluster task [ID], and the commands that
// queue one: pvc vm flush-locks.
#include <iostream>
#include <memory>

#include "commands.hpp"
#include "common.hpp"
#include "model.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "table.hpp"

namespace pvc::cli {
namespace {

using schema::path;
using namespace std::chrono_literals;

bool terminal(const tasks::Progress& p) { return p.state == tasks::success || p.state == tasks::failure; }

// Follows task `id` until it ends, printing each new stage as the reference
// client does, then "<state>: <status>". Fails (exit 1) on FAILURE.
void follow_task(const std::string& id) {
    tasks::Progress p;
    std::string shown;
    bool dotted = false;
    wait_for("task " + id, [&] {
        p = tasks::progress(*session(), id);
        return terminal(p);
    }, 500ms, [&] {
        if (p.state == tasks::pending) {
            std::cout << '.' << std::flush;
            dotted = true;
            return;
        }
        if (p.state != tasks::running) return;
        std::string line = "  " + std::to_string(p.current) + "/" + std::to_string(p.total) + " " + p.status;
        if (line == shown) return;
        if (dotted) std::cout << '\n';
        dotted = false;
        shown = line;
        std::cout << line << std::endl;
    });
    if (dotted) std::cout << '\n';
    std::cout << p.state << ": " << p.status << std::endl;
    if (p.state == tasks::failure) throw Failure("task " + id + " failed", exit_failed);
}

tasks::Queued submit(const std::string& name, const std::string& node, const nlohmann::json& kwargs) {
    try {
        return tasks::submit(*session(), name, node, kwargs);
    } catch (const tasks::SubmitError& e) {
        throw Failure(e.what());
    }
}

// Queues `name`, then waits for it (`wait`) or prints its id.
void run_task(const std::string& name, const std::string& node, const nlohmann::json& kwargs, bool wait) {
    auto q = submit(name, node, kwargs);
    if (!wait) {
        std::cout << "Task ID: " << q.id << " assigned to node " << q.run_on << std::endl;
        return;
    }
    std::cout << "Task ID: " << q.id << " (" << q.name << ") assigned to node " << q.run_on << std::endl;
    follow_task(q.id);
}

void list_tasks(bool json) {
    nlohmann::json w = tasks::workers(*session());
    if (json) {
        print_json(w);
        return;
    }
    Table t({"ID", "NAME", "STATE", "NODE", "ARGUMENTS"});
    for (const auto& [kind, state] : {std::pair{"active", "RUNNING"}, std::pair{"reserved", "PENDING"}}) {
        if (!w[kind].is_object()) continue;
        for (const auto& [worker, list] : w[kind].items())
            for (const auto& d : list) {
                std::string args;
                for (const auto& [k, v] : d["kwargs"].items())
                    if (k != "run_on") args += (args.empty() ? "" : " ") + k + "=" + (v.is_string() ? v.get<std::string>() : v.dump());
                t.add({d.value("id", ""), d.value("name", ""), state, d["kwargs"].value("run_on", ""), args});
            }
    }
    if (t.empty()) {
        std::cout << (w["active"].is_null() ? "No node runs a task runner." : "No tasks are queued or running.")
                  << std::endl;
        return;
    }
    t.print(std::cout);
}

}  // namespace

void add_task_commands(CLI::App& app) {
    auto* cluster = app.get_subcommand("cluster");
    auto* task = cluster->add_subcommand("task", "Show queued and running node tasks, or follow one");
    struct Args {
        std::string id, format = "table";
        bool wait = true;
    };
    auto a = std::make_shared<Args>();
    task->add_option("id", a->id, "A task ID (8 hex digits); without one, every queued and running task");
    task->add_flag("--wait,!--no-wait", a->wait, "Follow the task until it ends (default), or print its state once");
    add_format_option(task, a->format);
    task->footer("A task runs on one node (its OSD's, its VM's, or the primary). Exit 1 when the followed task fails.\n\n"
                 "Examples:\n  pvc cluster task\n  pvc cluster task 3f2a9c01\n  pvc cluster task 3f2a9c01 --no-wait");
    task->callback([a] {
        if (a->id.empty()) return list_tasks(a->format == "json");
        if (!tasks::valid_id(a->id)) throw Failure("'" + a->id + "' is not a task ID (8 hexadecimal digits)", exit_usage);
        if (!session()->exists(path("task.id", {a->id}))) throw Failure("No task with ID " + a->id + " found.");
        if (a->wait) return follow_task(a->id);
        auto p = tasks::progress(*session(), a->id);
        if (a->format == "json") return print_json(tasks::progress_body(p));
        std::cout << "Job state: " << p.state << "\nStage: " << p.current << "/" << p.total << "\nStatus: " << p.status
                  << std::endl;
    });

    auto* vm = app.get_subcommand("vm");
    auto* flush = vm->add_subcommand("flush-locks", "Free the RBD locks of a stopped, disabled or failed VM");
    struct FlushArgs {
        std::string vm;
        bool wait = true;
    };
    auto f = std::make_shared<FlushArgs>();
    flush->add_option("vm", f->vm, "VM name or UUID")->required();
    flush->add_flag("--wait,!--no-wait", f->wait, "Wait for the task to end (default)");
    flush->footer("Runs as a task on the VM's node (pvc cluster task shows it).\n\n"
                  "Examples:\n  pvc vm flush-locks web1\n  pvc vm flush-locks web1 --no-wait");
    flush->callback([f] {
        std::string uuid = find_vm(f->vm);
        std::string node = read(path("domain.node", {uuid}));
        if (node.empty()) throw Failure("VM " + f->vm + " has no node");
        run_task("vm.flush_locks", node, {{"domain", f->vm}, {"force_unlock", false}}, f->wait);
    });
}

}  // namespace pvc::cli
