#include "daemon/transition.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

namespace pvc {

namespace {
const char* name_of(Transition t) { return t == Transition::takeover ? "takeover" : "relinquish"; }
}  // namespace

std::vector<std::string> run_transition(const std::vector<Module*>& modules, Transition transition, Executor& ex,
                                        const Strand& core, std::chrono::milliseconds deadline, const Logger& log) {
    struct Pending {
        std::mutex m;
        std::condition_variable cv;
        std::map<Module*, std::string> waiting;  // module -> name
    };
    auto pending = std::make_shared<Pending>();
    for (Module* m : modules) pending->waiting.emplace(m, std::string(m->name()));
    const auto until = std::chrono::steady_clock::now() + deadline;
    for (Module* m : modules) {
        auto done = [pending, m] {
            {
                std::lock_guard g(pending->m);
                pending->waiting.erase(m);
            }
            pending->cv.notify_all();
        };
        ex.post(core, fmt::format("module {} {}", m->name(), name_of(transition)), [m, transition, done] {
            try {
                m->transition(transition, done);
            } catch (...) {
                done();  // its part failed: nothing more to wait for (the executor logs it)
                throw;
            }
        });
    }
    std::unique_lock lk(pending->m);
    pending->cv.wait_until(lk, until, [&] { return pending->waiting.empty(); });
    std::vector<std::string> overran;
    for (const auto& [m, name] : pending->waiting) {
        overran.push_back(name);
        log.warn("Module {} did not finish its {} part within {} ms; going on without it", name,
                 name_of(transition), deadline.count());
    }
    return overran;
}

}  // namespace pvc
