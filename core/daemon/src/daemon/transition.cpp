#include "daemon/transition.hpp"

#include <condition_variable>
#include <map>
#include <mutex>

namespace pvc {

namespace {
const char* name_of(Transition t) { return t == Transition::takeover ? "takeover" : "relinquish"; }
}  // namespace

void TransitionRun::phase(TransitionPhase p) {
    struct Pending {
        std::mutex m;
        std::condition_variable cv;
        std::map<Module*, std::string> waiting;  // module -> name
    };
    auto pending = std::make_shared<Pending>();
    for (Module* m : modules_)
        if (!late_.contains(m)) pending->waiting.emplace(m, std::string(m->name()));
    const auto start = std::chrono::steady_clock::now();
    const Transition transition = transition_;
    for (Module* m : modules_) {
        auto done = [pending, m] {
            {
                std::lock_guard g(pending->m);
                pending->waiting.erase(m);
            }
            pending->cv.notify_all();
        };
        ex_.post(core_, fmt::format("module {} {} phase {}", m->name(), name_of(transition), static_cast<char>(p)),
                 [m, transition, p, done] {
                     try {
                         m->transition(transition, p, done);
                     } catch (...) {
                         done();  // its part failed: nothing more to wait for (the executor logs it)
                         throw;
                     }
                 });
    }
    std::unique_lock lk(pending->m);
    pending->cv.wait_until(lk, start + deadline_, [&] { return pending->waiting.empty(); });
    for (const auto& [m, name] : pending->waiting) {
        late_.insert(m);
        overran_.push_back(name);
        log_.warn("Module {} did not finish its {} part within {} ms (phase {}); going on without it", name,
                  name_of(transition_), deadline_.count(), static_cast<char>(p));
    }
}

std::vector<std::string> run_transition(const std::vector<Module*>& modules, Transition transition, Executor& ex,
                                        const Strand& core, std::chrono::milliseconds deadline, const Logger& log) {
    TransitionRun run(modules, transition, ex, core, deadline, log);
    if (transition == Transition::takeover)
        for (TransitionPhase p : takeover_phases) run.phase(p);
    else
        for (TransitionPhase p : relinquish_phases) run.phase(p);
    return run.overran();
}

}  // namespace pvc
