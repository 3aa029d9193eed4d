// The modules' part of a primary/secondary transition (node-lifecycle.md §7):
// the core publishes `primary` / `secondary` only after this returns.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "pvc/module.hpp"

namespace pvc {

// Calls every module's transition hook on `core` (the core strand) and waits,
// on the calling thread (never the strand), until each has called its `done`
// or `deadline` has passed. Returns the names of the modules that overran
// (logged); a late `done` is harmless.
std::vector<std::string> run_transition(const std::vector<Module*>& modules, Transition transition, Executor& ex,
                                        const Strand& core, std::chrono::milliseconds deadline, const Logger& log);

}  // namespace pvc
