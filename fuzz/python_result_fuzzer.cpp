// A legacy Python plugin's result turned into the health result
// (core/daemon/src/health/python_host.cpp and the `_pvc_health` bridge in
// python_compat.hpp): the embedded interpreter is started once and one
// plugin loaded through the daemon's own loader; each input is decoded by
// the plugin into the values its run() leaves in its result object
// (health_delta, message, data; any Python type, huge integers, NaN,
// unencodable strings, objects whose str() fails, cycles) or an exception
// it raises. The host must turn each into a result or a failed run, never
// crash or leak, and a result's delta must be what the plugin set.
#include <unistd.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <pybind11/embed.h>

#include "health/python_host.hpp"

namespace py = pybind11;

extern "C" const pvc::health::PythonHostApi* pvc_python_host_api_v1();

namespace {

// The plugin: `_pvc_fuzz.data` (bytes) is a program of one-byte operations
// on a stack of values; the last three values become health_delta,
// message and data (fewer: the defaults stay).
const char* const plugin_source = R"PY(
import struct
import _pvc_fuzz
from pvcnoded.objects.MonitoringInstance import MonitoringPlugin, PluginError

PLUGIN_NAME = "fuzz"


class BadStr(object):
    def __str__(self):
        raise ValueError("no str")


class NotStr(object):
    def __str__(self):
        return 42


class Deep(object):
    def __init__(self, n):
        self.n = n

    def __str__(self):
        return "deep" * self.n


def decode(data):
    stack = []
    i = 0
    raise_at_end = None
    while i < len(data):
        op = data[i] % 24
        arg = data[i + 1] if i + 1 < len(data) else 0
        i += 1
        if op == 0:
            stack.append(int.from_bytes(data[i:i + 8], "little", signed=True)); i += 8
        elif op == 1:
            stack.append(2 ** (arg * 4) * (-1 if arg % 2 else 1)); i += 1
        elif op == 2:
            raw = data[i:i + 8].ljust(8, b"\0"); i += 8
            stack.append(struct.unpack("<d", raw)[0])
        elif op == 3:
            stack.append(bool(arg % 2)); i += 1
        elif op == 4:
            stack.append(None)
        elif op == 5:
            raw = data[i + 1:i + 1 + arg]; i += 1 + arg
            stack.append(raw.decode("utf-8", "surrogateescape"))
        elif op == 6:
            raw = data[i + 1:i + 1 + arg]; i += 1 + arg
            stack.append(raw)
        elif op == 7:
            k = min(arg % 8, len(stack)); i += 1
            items = stack[len(stack) - k:]
            del stack[len(stack) - k:]
            stack.append(items)
        elif op == 8:
            k = min(arg % 8, len(stack) // 2); i += 1
            d = {}
            for _ in range(k):
                v = stack.pop()
                key = stack.pop()
                try:
                    d[key] = v
                except TypeError:
                    d[str(type(key))] = v
            stack.append(d)
        elif op == 9:
            stack.append(BadStr())
        elif op == 10:
            stack.append(NotStr())
        elif op == 11:
            stack.append(float("nan"))
        elif op == 12:
            stack.append(float("inf") if arg % 2 else -float("inf")); i += 1
        elif op == 13:
            if stack:
                stack.append(tuple(stack[-1:]))
        elif op == 14:
            if stack:
                stack.append({stack[-1] if isinstance(stack[-1], (int, str, float)) else 0})
        elif op == 15:
            cyc = []
            cyc.append(cyc)
            stack.append(cyc)
        elif op == 16:
            stack.append("\ud800" * (arg % 4 + 1)); i += 1
        elif op == 17:
            raise_at_end = PluginError("fuzz: " + str(arg)); i += 1
        elif op == 18:
            raise_at_end = ValueError("fuzz: " + str(arg)); i += 1
        elif op == 19:
            stack.append(Deep(arg * 64)); i += 1
        elif op == 20:
            stack.append(1.0 * arg); i += 1
        elif op == 21:
            stack.append(b"\xff\xfe".decode("latin-1") * arg); i += 1
        elif op == 22:
            if stack:
                stack.pop()
        else:
            raise_at_end = SystemExit(arg); i += 1
    return stack, raise_at_end


class MonitoringPluginScript(MonitoringPlugin):
    def setup(self):
        pass

    def run(self, coordinator_state=None):
        stack, fail = decode(_pvc_fuzz.data)
        r = self.plugin_result
        if len(stack) > 0:
            r.set_health_delta(stack[-1])
        if len(stack) > 1:
            r.set_message(stack[-2])
        if len(stack) > 2:
            r.set_data(stack[-3])
        if fail is not None:
            raise fail
        return r
)PY";

std::shared_ptr<pvc::health::LoadedPlugin> plugin;
py::object* feed = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    const auto* api = pvc_python_host_api_v1();
    if (!api->start_python(pvc::Logger())) std::abort();
    {
        py::gil_scoped_acquire gil;
        static py::object m = py::module_::import("types").attr("ModuleType")("_pvc_fuzz");
        m.attr("data") = py::bytes("");
        py::module_::import("sys").attr("modules")["_pvc_fuzz"] = m;
        feed = &m;
    }
    char dir_template[] = "/tmp/pvc-fuzz-python-XXXXXX";
    const char* tmp = std::getenv("TMPDIR");
    std::string base = tmp && *tmp ? std::string(tmp) + "/pvc-fuzz-python-XXXXXX" : std::string(dir_template);
    if (!mkdtemp(base.data())) std::abort();
    std::filesystem::path file = std::filesystem::path(base) / "fuzz_plugin.py";
    std::ofstream(file) << plugin_source;
    auto node = std::make_shared<pvc::health::NodeView>();
    node->name = "hv1";
    auto loaded = api->load_python_plugin(file, nlohmann::json::object(), pvc::Logger(), nullptr, node);
    std::filesystem::remove_all(base);
    if (!loaded.plugin) {
        fprintf(stderr, "fuzz plugin did not load: %s\n%s\n", loaded.error.c_str(), loaded.traceback.c_str());
        std::abort();
    }
    plugin = loaded.plugin;
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size > 4096) return 0;
    {
        py::gil_scoped_acquire gil;
        feed->attr("data") = py::bytes(reinterpret_cast<const char*>(data), size);
    }
    auto out = plugin->run("primary");
    if (out.ok) {
        if (!out.error_type.empty()) __builtin_trap();
        if (out.runtime < 0) __builtin_trap();
    } else if (out.error_type.empty()) {
        __builtin_trap();  // a failed run names its exception
    }
    return 0;
}
