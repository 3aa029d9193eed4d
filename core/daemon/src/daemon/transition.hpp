// The modules' part of a primary/secondary transition (docs/architecture.md §7.3):
// one call of every module's hook per hand-over phase; the core goes on to
// the next phase, and publishes `primary` / `secondary`, only after it.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "pvc/module.hpp"

namespace pvc {

// One transition's modules: phase(p) calls every module's hook for `p` on
// `core` (the core strand) and waits, on the calling thread (never the
// strand), until each has called its `done` or `deadline` has passed. A
// module that overran is logged once and not waited for in later phases (its
// hook is still called), so one stuck module delays a hand-over by one
// deadline at most; a late `done` is harmless.
class TransitionRun {
public:
    TransitionRun(std::vector<Module*> modules, Transition transition, Executor& ex, const Strand& core,
                  std::chrono::milliseconds deadline, const Logger& log)
        : modules_(std::move(modules)), transition_(transition), ex_(ex), core_(core), deadline_(deadline), log_(log) {}
    void phase(TransitionPhase p);
    // Names of the modules that overran, in the order they did.
    const std::vector<std::string>& overran() const { return overran_; }

private:
    std::vector<Module*> modules_;
    Transition transition_;
    Executor& ex_;
    Strand core_;
    std::chrono::milliseconds deadline_;
    const Logger& log_;
    std::set<Module*> late_;
    std::vector<std::string> overran_;
};

// Every phase of `transition` in order (takeover_phases / relinquish_phases),
// without locks; returns the modules that overran.
std::vector<std::string> run_transition(const std::vector<Module*>& modules, Transition transition, Executor& ex,
                                        const Strand& core, std::chrono::milliseconds deadline, const Logger& log);

}  // namespace pvc
