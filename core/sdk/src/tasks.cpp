// The node task queue: the client side and the daemon's runner
// (pvc/tasks.hpp; keys and guarantees: docs/wire-contract.md §3.10).
#include "pvc/tasks.hpp"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "pvc/schema.hpp"

namespace pvc::services {
TaskFailure::~TaskFailure() = default;
}  // namespace pvc::services

namespace pvc::tasks {

SubmitError::~SubmitError() = default;

using Json = nlohmann::json;
using schema::path;

namespace {

double now_seconds() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_id() {
    static std::mutex m;
    static std::mt19937_64 gen{std::random_device{}()};
    std::lock_guard g(m);
    return fmt::format("{:08x}", static_cast<uint32_t>(gen()));
}

std::string worker_name(const std::string& node) { return "pvcworkerd@" + node; }

bool terminal(std::string_view state) { return state == success || state == failure; }

// A key's JSON object; an empty object when absent or not an object.
Json parse_object(const std::optional<std::string>& text) {
    if (!text) return Json::object();
    try {
        Json j = Json::parse(*text);
        if (j.is_object()) return j;
    } catch (const Json::exception&) {
    }
    return Json::object();
}

Json state_json(std::string_view state, long current, long total, const std::string& status) {
    return Json{{"state", state}, {"current", current}, {"total", total}, {"status", status}};
}

Progress progress_of(const Json& s) {
    Progress p;
    if (!s.contains("state") || !s["state"].is_string()) return p;
    p.state = s["state"].get<std::string>();
    if (s.contains("current") && s["current"].is_number_integer()) p.current = s["current"].get<long>();
    if (s.contains("total") && s["total"].is_number_integer()) p.total = s["total"].get<long>();
    if (s.contains("status") && s["status"].is_string()) p.status = s["status"].get<std::string>();
    return p;
}

std::string stopped_while_running(const std::string& node) {
    return fmt::format("TaskFailure: node {} stopped while running the task (its ZooKeeper session ended); "
                       "the task is not run again",
                       node.empty() ? "?" : node);
}
std::string stopped_before_running(const std::string& node) {
    return fmt::format("TaskFailure: node {} stopped before it ran the task (its task runner is gone)", node);
}

}  // namespace

bool valid_id(std::string_view id) {
    return id.size() == 8 &&
           std::all_of(id.begin(), id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Queued submit(zk::Session& zk, const std::string& name, const std::string& run_on, const Json& kwargs) {
    std::string node = run_on;
    if (node == "primary") {
        node = zk.get(path("base.config.primary_node")).value_or("");
        if (node.empty() || node == "none")
            throw SubmitError("ERROR: There is no primary coordinator now (a hand-over is in progress); try again.");
    }
    if (node.empty() || node.find('/') != std::string::npos)
        throw SubmitError("ERROR: No node named " + node + " is present in the cluster.");
    // The node and its runner's advertisement in one round trip.
    std::vector<zk::Stat> stats;
    auto got = zk.get_many({path("node.name", {node}), path("task.runner", {node})}, &stats);
    if (!got[0]) throw SubmitError("ERROR: No node named " + node + " is present in the cluster.");

    Json state = state_json(pending, 0, 1, "Pending job start");
    const auto& ad = got[1];
    if (!ad) {
        state = state_json(failure, 1, 1,
                           "TaskFailure: node " + node +
                               " runs no task runner (its daemon is stopped, or it is a node without one)");
    } else {
        Json handlers = parse_object(ad).value("handlers", Json::array());
        if (std::find(handlers.begin(), handlers.end(), Json(name)) == handlers.end())
            state = state_json(failure, 1, 1, "TaskFailure: node " + node + " has no handler for task " + name);
    }
    if (state["state"] == failure) state["finished"] = now_seconds();
    Json args = kwargs.is_object() ? kwargs : Json::object();
    args["run_on"] = node;
    Json record{{"name", name}, {"run_on", node}, {"kwargs", args}, {"created", now_seconds()}};
    for (int attempt = 0; attempt < 8; ++attempt) {
        std::string id = random_id();
        zk::Transaction tx(zk);
        tx.create(path("task.id", {id}), record.dump());
        tx.create(path("task.state", {id}), state.dump());
        zk::Status st = tx.commit();
        if (st == zk::Status::ok) return {id, name, node};
        if (st == zk::Status::no_node) {  // no runner has made the queue yet
            zk.ensure_path(path("task.queue"));
            continue;
        }
        if (st != zk::Status::node_exists) throw zk::Error(st, std::string("queueing task ") + name + " failed: " +
                                                                   zk::to_string(st));
    }
    throw zk::Error(zk::Status::node_exists, "queueing task " + name + " failed: no free task id");
}

Progress progress(zk::Session& zk, const std::string& id) {
    if (!valid_id(id)) return {};
    // The state, the claimant's `active` key and the state again, in one
    // round trip: `active` changes only in the transactions that change the
    // state (the claim, the result), so when both state reads show one
    // version the `active` read belongs to it; otherwise the later state is
    // taken as it is (a claim or a result came in between).
    std::vector<zk::Stat> st;
    std::string state_key = path("task.state", {id});
    auto v = zk.get_many({state_key, path("task.active", {id}), state_key}, &st);
    if (!v[2]) return {};
    Json s = parse_object(v[2]);
    Progress p = progress_of(s);
    if (!v[0] || st[0].version != st[2].version) return p;
    // Final either way: the claim stays, so nobody runs it again. (A
    // PENDING task whose node's runner is gone is not read as failed: the
    // runner may be back before another one writes it failed, and a state
    // a client has seen as final must stay so.)
    if (p.state == running && !v[1]) return {std::string(failure), 1, 1, stopped_while_running(s.value("node", ""))};
    return p;
}

nlohmann::ordered_json progress_body(const Progress& p) {
    nlohmann::ordered_json j = nlohmann::ordered_json::object();
    j["state"] = p.state;
    j["current"] = p.current;
    j["total"] = p.total;
    j["status"] = p.status;
    return j;
}

Json workers(zk::Session& zk) {
    auto runners = zk.children(path("task.runners")).value_or(std::vector<std::string>{});
    if (runners.empty()) return Json{{"scheduled", nullptr}, {"active", nullptr}, {"reserved", nullptr}};
    Json scheduled = Json::object(), active = Json::object(), reserved = Json::object();
    for (const auto& n : runners) {
        scheduled[worker_name(n)] = Json::array();
        active[worker_name(n)] = Json::array();
        reserved[worker_name(n)] = Json::array();
    }
    auto ids = zk.children(path("task.queue")).value_or(std::vector<std::string>{});
    std::vector<std::string> paths;
    for (const auto& id : ids) {
        paths.push_back(path("task.id", {id}));
        paths.push_back(path("task.state", {id}));
    }
    auto v = paths.empty() ? std::vector<std::optional<std::string>>{} : zk.get_many(paths);
    std::vector<std::pair<double, Json>> rows;  // (created, description), oldest first
    for (size_t i = 0; i < ids.size(); ++i) {
        if (!v[2 * i] || !v[2 * i + 1]) continue;
        Json record = parse_object(v[2 * i]);
        Json s = parse_object(v[2 * i + 1]);
        std::string state = s.value("state", "");
        std::string node = record.value("run_on", "");
        if ((state != running && state != pending) || !active.contains(worker_name(node))) continue;
        std::string name = record.value("name", "");
        Json d = Json::object();
        d["id"] = ids[i];
        d["name"] = name;
        d["args"] = Json::array();
        d["kwargs"] = record.value("kwargs", Json::object());
        d["type"] = name;
        d["hostname"] = worker_name(node);
        d["time_start"] = s.contains("started") ? s["started"] : Json(nullptr);
        d["acknowledged"] = state == running;
        d["delivery_info"] = Json{{"exchange", ""}, {"routing_key", node}, {"priority", 0}, {"redelivered", false}};
        d["worker_pid"] = 0;
        rows.emplace_back(record.value("created", 0.0), std::move(d));
    }
    std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& [created, d] : rows) {
        std::string worker = d["hostname"];
        (d["acknowledged"].get<bool>() ? active : reserved)[worker].push_back(std::move(d));
    }
    return Json{{"scheduled", scheduled}, {"active", active}, {"reserved", reserved}};
}

// ------------------------------------------------------------------ runner

struct Runner::Impl : std::enable_shared_from_this<Runner::Impl> {
    std::shared_ptr<zk::Session> zk;
    std::string node;
    Logger log;
    RunnerOptions opt;

    std::mutex m;
    std::condition_variable cv;
    bool dirty = true, stopping = false, started = false;
    bool workers_end = false;  // set once the dispatcher has ended: nothing more is queued
    std::map<std::string, services::TaskHandler, std::less<>> handlers;
    std::map<std::string, std::shared_ptr<std::stop_source>> in_progress;  // id → its handler's stop
    std::deque<std::function<void()>> queue;                             // claimed runs for the workers
    std::vector<std::thread> workers;
    std::thread dispatcher;
    std::vector<std::shared_ptr<zk::Watch>> watches;
    // The children of the queue and of the runners as their watches last
    // delivered them (nullopt: not yet, or the key is absent: read then).
    std::optional<std::vector<std::string>> queue_seen, runners_seen;
    // Tasks this runner has ended (id → finished), for the dispatcher's
    // bookkeeping without reading them back.
    std::map<std::string, double> ended_here;

    // Dispatcher thread only.
    struct Known {
        bool done = false;
        double finished = 0;
        std::string run_on;
    };
    std::map<std::string, Known> known;
    std::chrono::steady_clock::time_point backoff_until{};

    void wake() {
        {
            std::lock_guard g(m);
            dirty = true;
        }
        cv.notify_all();
    }

    std::string advertisement() {
        Json names = Json::array();
        for (const auto& [n, h] : handlers) names.push_back(n);
        return Json{{"handlers", names}, {"slots", opt.slots}}.dump();
    }
    void advertise() {
        std::string data;
        {
            std::lock_guard g(m);
            if (!started || stopping) return;
            data = advertisement();
        }
        std::string p = path("task.runner", {node});
        zk->remove_ephemeral(p);
        if (!zk->create_ephemeral(p, data))
            log.warn("Task runner: {} exists already (another daemon for node {}, or this node's killed daemon whose "
                     "ZooKeeper session has not ended yet); advertised once it is gone",
                     p, node);
    }
    // The advertisement after a restart that found the previous daemon's
    // still there (kill -9, then a restart within the session timeout: the
    // node guard lets the new daemon run at once, the old session's
    // ephemerals live on until it expires): once it is gone, ours is
    // created. Called when the runners' watch shows no advertisement of
    // this node; the key itself is read, so a stale delivery does nothing.
    void advertise_if_missing() {
        std::string data;
        {
            std::lock_guard g(m);
            if (!started || stopping) return;
            data = advertisement();
        }
        std::string p = path("task.runner", {node});
        if (zk->exists(p)) return;
        if (zk->create_ephemeral(p, data)) log.info("Task runner: advertised for node {}", node);
    }

    void dispatch_loop() {
        for (;;) {
            {
                std::unique_lock l(m);
                cv.wait(l, [&] { return dirty || stopping; });
                if (stopping) return;
                if (std::chrono::steady_clock::now() < backoff_until) {
                    cv.wait_until(l, backoff_until, [&] { return stopping; });
                    if (stopping) return;
                }
                dirty = false;
            }
            try {
                scan();
            } catch (const std::exception& e) {
                log.warn("Task runner: reading the task queue failed, retrying: {}", e.what());
                std::lock_guard g(m);
                dirty = true;
                backoff_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            }
        }
    }

    // Writes a terminal FAILURE over state version `version`; false when
    // another writer got there first.
    bool fail(const std::string& id, int32_t version, const std::string& text, const Json& previous) {
        Json s = state_json(failure, 1, 1, text);
        if (previous.contains("node")) s["node"] = previous["node"];
        if (previous.contains("started")) s["started"] = previous["started"];
        s["finished"] = now_seconds();
        zk::Transaction tx(*zk);
        tx.set(path("task.state", {id}), s.dump(), version);
        zk::Status st = tx.commit();
        if (st == zk::Status::ok) {
            log.warn("Task {}: {}", id, text);
            return true;
        }
        return false;
    }

    void scan() {
        std::optional<std::vector<std::string>> q, r;
        {
            std::lock_guard g(m);
            q = queue_seen;
            r = runners_seen;
        }
        std::map<std::string, double> ended;
        {
            std::lock_guard g(m);
            ended.swap(ended_here);
        }
        for (const auto& [id, when] : ended) known[id] = Known{true, when, node};
        auto ids = q ? *q : zk->children(path("task.queue")).value_or(std::vector<std::string>{});
        auto runner_list = r ? *r : zk->children(path("task.runners")).value_or(std::vector<std::string>{});
        std::set<std::string> runners(runner_list.begin(), runner_list.end());
        if (!runners.count(node)) advertise_if_missing();
        std::set<std::string> present(ids.begin(), ids.end());
        for (auto it = known.begin(); it != known.end();)
            it = present.count(it->first) ? std::next(it) : known.erase(it);

        // Unfinished tasks (and those never seen): record, state, active.
        std::vector<std::string> look;
        for (const auto& id : ids)
            if (!valid_id(id)) continue;
            else if (auto k = known.find(id); k == known.end() || !k->second.done) look.push_back(id);
        std::vector<std::string> paths;
        for (const auto& id : look) {
            paths.push_back(path("task.id", {id}));
            paths.push_back(path("task.state", {id}));
            paths.push_back(path("task.active", {id}));
        }
        std::vector<zk::Stat> stats;
        auto v = paths.empty() ? std::vector<std::optional<std::string>>{} : zk->get_many(paths, &stats);

        struct Candidate {
            double created;
            std::string id;
            int32_t version;
            std::string name;
            Json kwargs;
        };
        std::vector<Candidate> mine;
        for (size_t i = 0; i < look.size(); ++i) {
            const std::string& id = look[i];
            if (!v[3 * i] || !v[3 * i + 1]) continue;  // being created or removed
            Json record = parse_object(v[3 * i]);
            Json s = parse_object(v[3 * i + 1]);
            int32_t version = stats[3 * i + 1].version;
            std::string state = s.value("state", "");
            std::string run_on = record.value("run_on", "");
            Known& k = known[id];
            k.run_on = run_on;
            if (terminal(state)) {
                k.done = true;
                k.finished = s.value("finished", 0.0);
                // Ours and still running: it was taken from us (marked failed
                // while our session was gone); its handler is asked to stop.
                std::lock_guard g(m);
                if (auto r = in_progress.find(id); r != in_progress.end()) r->second->request_stop();
                continue;
            }
            if (state == running && !v[3 * i + 2]) {
                // The claimant's session ended (its daemon died, or lost
                // ZooKeeper long enough): the task ends here, never re-run.
                {
                    std::lock_guard g(m);
                    if (auto r = in_progress.find(id); r != in_progress.end()) r->second->request_stop();
                }
                if (fail(id, version, stopped_while_running(s.value("node", run_on)), s)) {
                    k.done = true;
                    k.finished = now_seconds();
                }
                continue;
            }
            if (state != pending) continue;
            if (run_on == node) {
                mine.push_back({record.value("created", 0.0), id, version, record.value("name", ""),
                                record.value("kwargs", Json::object())});
            } else if (!runners.count(run_on)) {
                if (fail(id, version, stopped_before_running(run_on), s)) {
                    k.done = true;
                    k.finished = now_seconds();
                }
            }
        }
        std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.created < b.created; });
        for (auto& c : mine) {
            {
                std::lock_guard g(m);
                if (stopping || in_progress.size() >= opt.slots) break;
            }
            claim(c.id, c.version, c.name, std::move(c.kwargs));
        }
        prune();
    }

    void claim(const std::string& id, int32_t version, const std::string& name, Json kwargs) {
        double started = now_seconds();
        Json s = state_json(running, 0, 1, "Task claimed by node " + node);
        s["node"] = node;
        s["started"] = started;
        zk::Transaction tx(*zk);
        tx.set(path("task.state", {id}), s.dump(), version);
        tx.create(path("task.claim", {id}), node);
        tx.create(path("task.active", {id}), node, true);
        zk::Status st = tx.commit();
        if (st != zk::Status::ok) {
            // Claimed (or failed) by someone else, or ZooKeeper trouble: the
            // next scan sees which.
            log.debug("Task {}: not claimed ({})", id, zk::to_string(st));
            if (st != zk::Status::bad_version && st != zk::Status::node_exists && st != zk::Status::no_node) {
                std::lock_guard g(m);
                dirty = true;
                backoff_until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
            }
            return;
        }
        log.info("Task {}: claimed {} ({})", id, name, kwargs.dump());
        auto stop = std::make_shared<std::stop_source>();
        auto self = shared_from_this();
        {
            std::lock_guard g(m);
            in_progress[id] = stop;
            queue.push_back([self, id, name, kwargs = std::move(kwargs), stop, version, started]() mutable {
                self->run(id, name, std::move(kwargs), stop, version + 1, started);
            });
        }
        cv.notify_all();
    }

    struct RunImpl final : services::TaskRun {
        Impl& impl;
        std::string id_, name_;
        Json kwargs_;
        std::shared_ptr<std::stop_source> stop;
        int32_t version;
        double started;
        long last_total = 1;
        bool lost = false;  // our state was overwritten (marked FAILURE by another runner)

        RunImpl(Impl& i, std::string id, std::string name, Json kwargs, std::shared_ptr<std::stop_source> s,
                int32_t v, double st)
            : impl(i), id_(std::move(id)), name_(std::move(name)), kwargs_(std::move(kwargs)), stop(std::move(s)),
              version(v), started(st) {}
        const std::string& id() const override { return id_; }
        const std::string& name() const override { return name_; }
        const Json& kwargs() const override { return kwargs_; }
        std::stop_token stop_token() const override { return stop->get_token(); }
        Json state(std::string_view st, long current, long total, const std::string& status) const {
            Json s = state_json(st, current, total, status);
            s["node"] = impl.node;
            s["started"] = started;
            return s;
        }
        void progress(long current, long total, const std::string& status) override {
            if (total < 1) total = 1;
            last_total = total;
            impl.log.info("Task {} ({}): {}/{} {}", id_, name_, current, total, status);
            if (lost) return;
            try {
                zk::Transaction tx(*impl.zk);
                tx.set(path("task.state", {id_}), state(running, current, total, status).dump(), version);
                zk::Status st = tx.commit();
                if (st == zk::Status::ok) ++version;
                else if (st == zk::Status::bad_version || st == zk::Status::no_node) taken();
                else impl.log.warn("Task {}: progress not written ({})", id_, zk::to_string(st));
            } catch (const std::exception& e) {
                impl.log.warn("Task {}: progress not written: {}", id_, e.what());
            }
        }
        void taken() {
            lost = true;
            stop->request_stop();
            impl.log.warn("Task {} ({}): taken from this node (marked failed after its ZooKeeper session ended); "
                          "asking it to stop",
                          id_, name_);
        }
        // The terminal write, with the removal of `active`; retried while
        // ZooKeeper is unreachable (bounded).
        // True when the result was written (the task is terminal by our write).
        bool finish(std::string_view st, const std::string& status) {
            long n = st == success ? last_total : 1;
            Json s = state(st, n, st == success ? last_total : 1, status);
            s["finished"] = now_seconds();
            auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
            for (int attempt = 0; !lost; ++attempt) {
                try {
                    zk::Transaction tx(*impl.zk);
                    tx.set(path("task.state", {id_}), s.dump(), version);
                    tx.remove(path("task.active", {id_}));
                    zk::Status r = tx.commit();
                    if (r == zk::Status::ok) {
                        impl.log.info("Task {} ({}): {}: {}", id_, name_, st, status);
                        return true;
                    }
                    if (r == zk::Status::bad_version || r == zk::Status::no_node) {
                        impl.log.warn("Task {} ({}) was marked failed meanwhile; its own result is dropped: {}: {}",
                                      id_, name_, st, status);
                        return false;
                    }
                    if (r == zk::Status::closed) {
                        impl.log.warn("Task {} ({}): result not written (the session is closed): {}: {}", id_, name_,
                                      st, status);
                        return false;
                    }
                    impl.log.warn("Task {}: result not written ({}), retrying", id_, zk::to_string(r));
                } catch (const zk::Error& e) {
                    if (e.status == zk::Status::closed) {
                        impl.log.warn("Task {} ({}): result not written (the session is closed): {}: {}", id_, name_,
                                      st, status);
                        return false;
                    }
                    impl.log.warn("Task {}: result not written ({}), retrying", id_, e.what());
                } catch (const std::exception& e) {
                    impl.log.warn("Task {}: result not written ({}), retrying", id_, e.what());
                }
                if (std::chrono::steady_clock::now() > until) {
                    impl.log.error("Task {} ({}): result not written in 30 s, given up: {}: {}", id_, name_, st, status);
                    return false;
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(std::min(1000, 100 << std::min(attempt, 4))));
            }
            return false;
        }
    };

    void run(const std::string& id, const std::string& name, Json kwargs, std::shared_ptr<std::stop_source> stop,
             int32_t version, double started) {
        RunImpl r(*this, id, name, std::move(kwargs), stop, version, started);
        services::TaskHandler h;
        {
            std::lock_guard g(m);
            if (auto it = handlers.find(name); it != handlers.end()) h = it->second;
        }
        bool written = false;
        try {
            if (!h) throw services::TaskFailure("node " + node + " has no handler for task " + name);
            std::string text = h(r);
            written = r.finish(success, text);
        } catch (const services::TaskFailure& e) {
            written = r.finish(failure, std::string("TaskFailure: ") + e.what());
        } catch (const std::exception& e) {
            written = r.finish(failure, e.what());
        } catch (...) {
            written = r.finish(failure, "unknown exception");
        }
        {
            std::lock_guard g(m);
            in_progress.erase(id);
            if (written) ended_here[id] = now_seconds();
            dirty = true;  // a slot is free; pruning
        }
        cv.notify_all();
    }

    void worker_loop() {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock l(m);
                cv.wait(l, [&] { return !queue.empty() || workers_end; });
                if (queue.empty()) return;
                job = std::move(queue.front());
                queue.pop_front();
            }
            try {
                job();
            } catch (const std::exception& e) {
                log.error("Task runner: a task failed outside its handler: {}", e.what());
            } catch (...) {
                log.error("Task runner: a task failed outside its handler");
            }
        }
    }

    // What handle() returns: withdraws the handler when released.
    struct Registration {
        std::weak_ptr<Impl> impl;
        std::string name;
        Registration(std::weak_ptr<Impl> i, std::string n) : impl(std::move(i)), name(std::move(n)) {}
        ~Registration() {
            auto i = impl.lock();
            if (!i) return;
            {
                std::lock_guard g(i->m);
                i->handlers.erase(name);
            }
            try {
                i->advertise();
            } catch (const std::exception& e) {
                i->log.warn("Task runner: advertisement not updated: {}", e.what());
            }
        }
    };

    // Finished tasks past the retention, or beyond the newest `keep`.
    void prune() {
        std::vector<std::pair<double, std::string>> done;
        for (const auto& [id, k] : known)
            if (k.done) done.emplace_back(k.finished, id);
        std::sort(done.begin(), done.end(), std::greater<>());
        double oldest = now_seconds() - static_cast<double>(opt.retention.count());
        for (size_t i = 0; i < done.size(); ++i) {
            if (i < opt.keep && done[i].first >= oldest) continue;
            try {
                zk->remove_recursive(path("task.id", {done[i].second}));
            } catch (const std::exception& e) {
                log.debug("Task {}: not pruned: {}", done[i].second, e.what());
            }
            known.erase(done[i].second);
        }
    }
};

Runner::Runner(std::shared_ptr<zk::Session> zk, std::string node, Logger log, RunnerOptions options)
    : impl_(std::make_shared<Impl>()) {
    impl_->zk = std::move(zk);
    impl_->node = std::move(node);
    impl_->log = std::move(log);
    impl_->opt = options;
    if (impl_->opt.slots == 0) impl_->opt.slots = 1;
}

Runner::~Runner() { stop(); }

std::shared_ptr<void> Runner::handle(const std::string& name, services::TaskHandler handler) {
    if (name.empty() || !handler) throw std::invalid_argument("a task handler needs a name and a function");
    {
        std::lock_guard g(impl_->m);
        if (!impl_->handlers.emplace(name, std::move(handler)).second)
            throw std::invalid_argument("task " + name + " has a handler already");
    }
    impl_->advertise();
    return std::make_shared<Impl::Registration>(impl_, name);
}

void Runner::start() {
    auto& i = *impl_;
    {
        std::lock_guard g(i.m);
        if (i.started) return;
        i.started = true;
    }
    i.zk->ensure_path(path("task.queue"));
    i.zk->ensure_path(path("task.runners"));
    i.advertise();
    std::weak_ptr<Impl> weak = impl_;
    // Watch callbacks only store what they deliver and wake the dispatcher.
    auto seen = [weak](std::optional<std::vector<std::string>> Impl::*into) {
        return [weak, into](const std::optional<std::vector<std::string>>& children) {
            auto s = weak.lock();
            if (!s) return;
            {
                std::lock_guard g(s->m);
                (*s).*into = children;
                s->dirty = true;
            }
            s->cv.notify_all();
        };
    };
    i.watches.push_back(i.zk->watch_children(path("task.queue"), seen(&Impl::queue_seen)));
    i.watches.push_back(i.zk->watch_children(path("task.runners"), seen(&Impl::runners_seen)));
    i.watches.push_back(i.zk->on_session_event([weak](zk::SessionEvent e) {
        if (e == zk::SessionEvent::expired_recovered || e == zk::SessionEvent::reconnected)
            if (auto s = weak.lock()) s->wake();
    }));
    for (unsigned n = 0; n < i.opt.slots; ++n) i.workers.emplace_back([&i] { i.worker_loop(); });
    i.dispatcher = std::thread([&i] { i.dispatch_loop(); });
    i.log.info("Task runner started for node {} ({} at once)", i.node, i.opt.slots);
}

void Runner::stop() {
    auto& i = *impl_;
    {
        std::lock_guard g(i.m);
        if (!i.started || i.stopping) return;
        i.stopping = true;
        for (auto& [id, stop] : i.in_progress) stop->request_stop();
    }
    i.cv.notify_all();
    for (auto& w : i.watches) w->cancel();
    if (i.dispatcher.joinable()) i.dispatcher.join();
    {
        std::lock_guard g(i.m);
        i.workers_end = true;
    }
    i.cv.notify_all();
    for (auto& t : i.workers)
        if (t.joinable()) t.join();
    i.watches.clear();
    try {
        i.zk->remove_ephemeral(path("task.runner", {i.node}));
    } catch (const std::exception& e) {
        i.log.warn("Task runner: advertisement not removed: {}", e.what());
    }
    i.log.info("Task runner stopped");
}

}  // namespace pvc::tasks
