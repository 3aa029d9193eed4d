// Node tasks (pvc/tasks.hpp): from a client's submit to the handler running
// on the node (claimed through ZooKeeper), and to SUCCESS seen by a client's
// watch, on a private ZooKeeper. One runner (the node), one client session.
//
//   task_bench [tasks]     (default 200, submitted one after the other)
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/tasks.hpp"
#include "pvc/test/zk_server.hpp"

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void report(const char* what, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    auto at = [&](double q) { return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))]; };
    std::printf("%-40s p50 %7.2f ms   p99 %7.2f ms   max %7.2f ms   (n=%zu)\n", what, at(0.50), at(0.99), v.back(),
                v.size());
}

}  // namespace

int main(int argc, char** argv) {
    int n = argc > 1 ? std::atoi(argv[1]) : 200;
    if (n < 1) n = 200;
    pvc::test::ZkServer zk;
    auto client = pvc::zk::Session::connect({zk.hosts()});
    pvc::init_cluster(*client);
    client->ensure_path(pvc::schema::path("node.name", {"hv1"}));

    std::mutex m;
    std::condition_variable cv;
    std::map<std::string, Clock::time_point> started;  // id → handler entered
    auto runner_session = pvc::zk::Session::connect({zk.hosts()});
    auto runner = std::make_shared<pvc::tasks::Runner>(runner_session, "hv1",
                                                       pvc::Logger(pvc::make_log_sink(nullptr), "bench"));
    auto h = runner->handle("bench.noop", [&](pvc::services::TaskRun& run) {
        {
            std::lock_guard g(m);
            started[run.id()] = Clock::now();
        }
        cv.notify_all();
        return std::string("done");
    });
    runner->start();

    std::vector<double> submit, to_handler, to_success;
    uint64_t submit_requests = 0;
    auto runner_before = runner_session->stats();
    for (int i = 0; i < n; ++i) {
        auto c0 = client->stats().requests;
        auto t0 = Clock::now();
        auto q = pvc::tasks::submit(*client, "bench.noop", "hv1", nlohmann::json::object());
        auto t1 = Clock::now();
        submit_requests += client->stats().requests - c0;
        // SUCCESS as a client waiting on the state key's watch sees it.
        std::mutex wm;
        std::condition_variable wcv;
        std::optional<Clock::time_point> success_at;
        auto w = client->watch_data(pvc::schema::path("task.state", {q.id}),
                                    [&](const std::optional<std::string>& v, const pvc::zk::Stat&) {
            if (!v || v->find("\"SUCCESS\"") == std::string::npos) return;
            std::lock_guard g(wm);
            if (!success_at) success_at = Clock::now();
            wcv.notify_all();
        });
        {
            std::unique_lock l(m);
            if (!cv.wait_for(l, 30s, [&] { return started.count(q.id) > 0; })) {
                std::fprintf(stderr, "task %s not run within 30 s\n", q.id.c_str());
                return 1;
            }
            to_handler.push_back(ms(started[q.id] - t0));
        }
        {
            std::unique_lock l(wm);
            if (!wcv.wait_for(l, 30s, [&] { return success_at.has_value(); })) {
                std::fprintf(stderr, "task %s not SUCCESS within 30 s\n", q.id.c_str());
                return 1;
            }
            to_success.push_back(ms(*success_at - t0));
        }
        w->cancel();
        submit.push_back(ms(t1 - t0));
    }
    auto runner_after = runner_session->stats();
    runner->stop();
    std::printf("%d tasks, one after the other, one runner (3 slots), private ZooKeeper on loopback\n", n);
    report("submit (record + state, one multi)", submit);
    report("submit -> handler running on the node", to_handler);
    report("submit -> SUCCESS seen by a watch", to_success);
    std::printf("ZooKeeper requests per task: submit %.2f, runner %.2f (%.2f of them reads)\n",
                static_cast<double>(submit_requests) / n,
                static_cast<double>(runner_after.requests - runner_before.requests) / n,
                static_cast<double>(runner_after.reads - runner_before.reads) / n);
    return 0;
}
