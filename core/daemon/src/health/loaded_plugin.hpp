// One loaded health plugin as the host sees it, whatever its kind (native .so
// or legacy Python file). Internal to the core.
#pragma once

#include <optional>
#include <string>

namespace pvc::health {

// What one run() produced. `ok == false` is a failed run (it threw or timed out):
// nothing is written and the previous result keeps counting.
struct RunOutcome {
    bool ok = false;
    int health_delta = 0;
    std::string message = "N/A";
    std::string data = "{}";  // JSON text
    double runtime = 0;       // seconds spent in run()
    // failure
    std::string error_type;   // "ValueError", "std::runtime_error", ...
    std::string error_text;
    std::string traceback;    // Python only, may be empty
    // On failure, the delta the plugin's result object holds now (legacy
    // semantics: whatever the failed run had set already), if readable.
    std::optional<int> partial_delta;
};

class LoadedPlugin {
public:
    virtual ~LoadedPlugin() = default;
    virtual const std::string& name() const = 0;
    virtual const char* kind() const = 0;  // "native" | "python"
    // May block for a long time; called from a worker thread.
    // Measures its runtime; a Python plugin's result object gets set_runtime().
    virtual RunOutcome run(const std::string& coordinator_state) = 0;
    // Never throws.
    virtual void cleanup() noexcept = 0;
};

}  // namespace pvc::health
