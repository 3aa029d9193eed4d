// Opens pvcnoded-python.so (the embedded interpreter, linked with libpython)
// on the first call that needs it, so a daemon without Python plugins never
// maps libpython. The library sits beside libpvc-sdk (build tree: lib/;
// installed: the SDK's library directory); it is never closed (plugin objects
// and the interpreter's threads live in it until the process exits).
#include <dlfcn.h>
#include <link.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "health/python_host.hpp"

#ifndef PVC_PYTHON_HOST_INSTALL_PATH
#define PVC_PYTHON_HOST_INSTALL_PATH ""
#endif

namespace pvc::health {
namespace {

// The directory of the libpvc-sdk this process mapped, else "".
std::string sdk_directory() {
    std::string dir;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* out) {
            const char* name = info->dlpi_name;
            if (!name || !*name) return 0;
            const char* base = std::strrchr(name, '/');
            if (!base || std::strncmp(base + 1, "libpvc-sdk.so", 13) != 0) return 0;
            *static_cast<std::string*>(out) = std::string(name, static_cast<size_t>(base - name));
            return 1;
        },
        &dir);
    return dir;
}

std::once_flag opened;
std::atomic<const PythonHostApi*> api{nullptr};
std::string open_error;  // written once, before `opened` completes
std::atomic<bool> failure_logged{false};

const PythonHostApi* host() {
    std::call_once(opened, [] {
        std::vector<std::string> candidates;
        if (auto dir = sdk_directory(); !dir.empty()) candidates.push_back(dir + "/" + python_host_library);
        if (*PVC_PYTHON_HOST_INSTALL_PATH) candidates.emplace_back(PVC_PYTHON_HOST_INSTALL_PATH);
        std::string errors;
        for (const auto& path : candidates) {
            // RTLD_GLOBAL: Python's extension modules (lib-dynload) resolve
            // libpython's symbols from the global scope.
            void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
            if (!h) {
                const char* e = ::dlerror();
                errors += (errors.empty() ? "" : "; ") + std::string(e ? e : path.c_str());
                continue;
            }
            using Entry = const PythonHostApi* (*)();
            auto entry = reinterpret_cast<Entry>(::dlsym(h, python_host_entry));
            if (!entry) {
                errors += (errors.empty() ? "" : "; ") + path + ": no " + python_host_entry;
                continue;
            }
            api.store(entry());
            return;
        }
        open_error = "cannot open " + std::string(python_host_library) +
                     (errors.empty() ? std::string(" (libpvc-sdk's directory not found)") : ": " + errors);
    });
    return api.load();
}

void log_failure_once(const Logger& log) {
    if (!failure_logged.exchange(true)) log.error("Failed to start the Python plugin interpreter: {}", open_error);
}

}  // namespace

PythonLoad load_python_plugin(const std::filesystem::path& file, const nlohmann::json& flat_config, Logger log,
                              std::shared_ptr<zk::Session> zk, std::shared_ptr<const NodeView> node) {
    if (const auto* h = host()) return h->load_python_plugin(file, flat_config, std::move(log), std::move(zk), std::move(node));
    log_failure_once(log);
    PythonLoad out;
    out.error = "Python interpreter unavailable: " + open_error;
    return out;
}

bool start_python(const Logger& log) {
    if (const auto* h = host()) return h->start_python(log);
    log_failure_once(log);
    return false;
}

bool python_started() {
    // Not opened yet means not started; opening it here would map libpython.
    const auto* h = api.load();
    return h && h->python_started();
}

}  // namespace pvc::health
