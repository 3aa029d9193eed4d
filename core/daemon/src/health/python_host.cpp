// The embedded interpreter for legacy health plugins. Every entry into Python
// takes the GIL with exactly one guard (never nested); calls back into C++
// (logging, ZooKeeper) release it while they block. Built as its own library
// (pvcnoded-python.so, the only one linked with libpython), opened by
// python_host_loader.cpp on the first Python plugin.
#include "health/python_host.hpp"

#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include "health/python_compat.hpp"
#include "pvc/schema.hpp"

namespace py = pybind11;

namespace pvc::health {
namespace {

#ifndef PVC_PYTHON_EXECUTABLE
// The system interpreter whose library we link (python3-psutil & co. live there).
#define PVC_PYTHON_EXECUTABLE "/usr/bin/python3"
#endif

std::mutex start_mutex;
std::atomic<bool> started{false};
bool start_failed = false;
std::string start_error;

LogState state_of(const std::string& s) {
    if (s == "o") return LogState::ok;
    if (s == "e") return LogState::error;
    if (s == "w") return LogState::warning;
    if (s == "t") return LogState::tick;
    if (s == "i") return LogState::info;
    if (s == "s") return LogState::system;
    if (s == "d") return LogState::debug;
    return LogState::none;
}

struct PyFailure {
    std::string type, text, traceback;
};

// Must be called with the GIL held, inside the catch of `e`.
PyFailure describe(py::error_already_set& e) {
    PyFailure f;
    try {
        auto t = py::module_::import("_pvc_health").attr("describe")(e.type(), e.value(), e.trace());
        auto tup = t.cast<py::tuple>();
        f.type = tup[0].cast<std::string>();
        f.text = tup[1].cast<std::string>();
        f.traceback = tup[2].cast<std::string>();
    } catch (...) {
        f.type = "Exception";
        f.text = e.what();
    }
    return f;
}

std::string resolve(const std::string& key, const std::vector<std::string>& ids) {
    if (key.empty()) return ids.at(0);
    return schema::path(key, ids);
}

// Plugins' zkhandler: schema keys resolved through pvc::schema, blocking calls without the GIL.
py::dict zk_ops(std::shared_ptr<zk::Session> zk) {
    py::dict ops;
    ops["read"] = py::cpp_function([zk](const std::string& key, const std::vector<std::string>& ids) -> py::object {
        std::optional<std::string> v;
        {
            py::gil_scoped_release nogil;
            try {
                v = zk->get(resolve(key, ids));
            } catch (const std::exception&) {
                v.reset();
            }
        }
        if (!v) return py::none();
        return py::str(*v);
    });
    ops["exists"] = py::cpp_function([zk](const std::string& key, const std::vector<std::string>& ids) {
        py::gil_scoped_release nogil;
        try {
            return zk->exists(resolve(key, ids));
        } catch (const std::exception&) {
            return false;
        }
    });
    ops["children"] = py::cpp_function([zk](const std::string& key, const std::vector<std::string>& ids) -> py::object {
        std::optional<std::vector<std::string>> c;
        {
            py::gil_scoped_release nogil;
            try {
                c = zk->children(resolve(key, ids));
            } catch (const std::exception&) {
                c.reset();
            }
        }
        if (!c) return py::none();
        return py::cast(*c);
    });
    using Item = std::tuple<std::string, std::vector<std::string>, std::string>;
    ops["write"] = py::cpp_function([zk](const std::vector<Item>& items) {
        py::gil_scoped_release nogil;
        try {
            std::vector<zk::KeyValue> kvs;
            for (auto& [key, ids, value] : items) kvs.emplace_back(resolve(key, ids), value);
            return zk->write(kvs);
        } catch (const std::exception&) {
            return false;
        }
    });
    using Ref = std::tuple<std::string, std::vector<std::string>>;
    ops["delete"] = py::cpp_function([zk](const std::vector<Ref>& refs) {
        py::gil_scoped_release nogil;
        try {
            for (auto& [key, ids] : refs) zk->remove_recursive(resolve(key, ids));
            return true;
        } catch (const std::exception&) {
            return false;
        }
    });
    return ops;
}

class PythonPlugin final : public LoadedPlugin {
public:
    PythonPlugin(std::string name, py::object instance) : name_(std::move(name)), instance_(std::move(instance)) {}
    ~PythonPlugin() override {
        py::gil_scoped_acquire gil;
        instance_ = py::object();
    }
    const std::string& name() const override { return name_; }
    const char* kind() const override { return "python"; }

    RunOutcome run(const std::string& coordinator_state) override {
        RunOutcome out;
        py::gil_scoped_acquire gil;
        try {
            auto r = py::module_::import("_pvc_health").attr("run_plugin")(instance_, coordinator_state).cast<py::tuple>();
            auto delta = r[0].cast<long long>();
            out.health_delta = static_cast<int>(std::clamp<long long>(delta, INT_MIN, INT_MAX));
            out.message = r[1].cast<std::string>();
            out.data = r[2].cast<std::string>();
            out.runtime = r[3].cast<double>();
            out.ok = true;
        } catch (py::error_already_set& e) {
            auto f = describe(e);
            out.error_type = f.type;
            out.error_text = f.text;
            out.traceback = f.traceback;
            out.partial_delta = partial();
        } catch (const std::exception& e) {
            out.error_type = "RuntimeError";
            out.error_text = e.what();
            out.partial_delta = partial();
        }
        return out;
    }

    void cleanup() noexcept override {
        try {
            py::gil_scoped_acquire gil;
            try {
                instance_.attr("cleanup")();
            } catch (py::error_already_set&) {
                // upstream ignores exceptions from cleanup()
            }
        } catch (...) {
        }
    }

private:
    // GIL held.
    std::optional<int> partial() {
        try {
            auto v = py::module_::import("_pvc_health").attr("partial_delta")(instance_);
            if (v.is_none()) return std::nullopt;
            return static_cast<int>(std::clamp<long long>(v.cast<long long>(), INT_MIN, INT_MAX));
        } catch (py::error_already_set&) {
            return std::nullopt;
        } catch (const std::exception&) {
            return std::nullopt;
        }
    }

    std::string name_;
    py::object instance_;
};


bool start_embedded(const Logger& log) {
    std::lock_guard g(start_mutex);
    if (started) return true;
    if (start_failed) return false;
    try {
        PyConfig config;
        PyConfig_InitPythonConfig(&config);
        config.install_signal_handlers = 0;  // the daemon owns signals
        config.parse_argv = 0;
        config.use_environment = 0;          // no PYTHONPATH/PYTHONHOME surprises in a daemon
        config.user_site_directory = 0;
        // The prefix (stdlib, dist-packages) is derived from the program name:
        // name the system interpreter so another python3 on PATH is never used.
        PyConfig_SetBytesString(&config, &config.program_name, PVC_PYTHON_EXECUTABLE);
        py::initialize_interpreter(&config, 0, nullptr, false);
        // Create pybind11's internals now, with the GIL held: created lazily
        // they would race between the first worker threads.
        py::detail::get_internals();
        {
            py::dict scope;
            scope["monitoring_instance"] = compat::monitoring_instance;
            scope["daemon_lib_common"] = compat::daemon_lib_common;
            scope["host_bridge"] = compat::host_bridge;
            scope["__builtins__"] = py::module_::import("builtins");
            py::exec(compat::bootstrap, scope);
        }
        // Never finalized: a hung plugin thread may stay inside the interpreter
        // until the process exits. Release the GIL for the worker threads.
        PyEval_SaveThread();
        started = true;
        return true;
    } catch (const std::exception& e) {
        start_failed = true;
        start_error = e.what();
        log.error("Failed to start the Python plugin interpreter: {}", start_error);
        return false;
    }
}

bool embedded_started() { return started; }

PythonLoad load_embedded(const std::filesystem::path& file, const nlohmann::json& flat_config, Logger log,
                         std::shared_ptr<zk::Session> zk, std::shared_ptr<const NodeView> node) {
    PythonLoad out;
    if (!start_embedded(log)) {
        out.error = "Python interpreter unavailable: " + start_error;
        return out;
    }
    std::string config_text = flat_config.dump();
    py::gil_scoped_acquire gil;
    try {
        auto bridge = py::module_::import("_pvc_health");
        auto config = py::module_::import("json").attr("loads")(config_text);
        Logger base = log;
        auto sink = py::cpp_function([base](const std::string& message, const std::string& state, const std::string& prefix) {
            py::gil_scoped_release nogil;
            auto st = state_of(state);
            if (st == LogState::debug && !base.debug_enabled()) return;
            base.child(prefix).log(st, message);
        });
        auto logger = bridge.attr("Logger")(sink);
        auto state = py::cpp_function([node]() {
            py::dict d;
            std::string cs;
            std::optional<int> h;
            {
                py::gil_scoped_release nogil;
                cs = node->coordinator_state ? node->coordinator_state() : "client";
                h = node->health ? node->health() : std::nullopt;
            }
            d["coordinator_state"] = cs;
            d["health"] = h ? py::object(py::int_(*h)) : py::object(py::none());
            return d;
        });
        auto zkhandler = bridge.attr("ZKHandler")(zk_ops(zk));
        auto this_node = bridge.attr("ThisNode")(node->name, state, zkhandler, config);
        auto r = bridge.attr("load_plugin")(file.string(), zkhandler, config, logger, this_node).cast<py::tuple>();
        out.plugin = std::make_shared<PythonPlugin>(r[0].cast<std::string>(), py::reinterpret_borrow<py::object>(r[1]));
    } catch (py::error_already_set& e) {
        auto f = describe(e);
        out.error = f.text;
        out.traceback = f.traceback;
    } catch (const std::exception& e) {
        out.error = e.what();
    }
    return out;
}

}  // namespace
}  // namespace pvc::health

extern "C" __attribute__((visibility("default"))) const pvc::health::PythonHostApi* pvc_python_host_api_v1() {
    static const pvc::health::PythonHostApi api{&pvc::health::load_embedded, &pvc::health::start_embedded,
                                                &pvc::health::embedded_started};
    return &api;
}
