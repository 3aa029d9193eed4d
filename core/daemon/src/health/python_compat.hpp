// Python sources of the legacy plugin compatibility modules
// (docs/sdk-guide.md §7.3), installed into the embedded interpreter's
// sys.modules before any plugin is executed. Internal to the core.
#pragma once

namespace pvc::health::compat {

// pvcnoded.objects.MonitoringInstance: PluginError, PluginResult, MonitoringPlugin.
inline constexpr const char* monitoring_instance = R"PY(
# Compatibility module: the legacy PVC health plugin base classes.
import time


class PluginError(Exception):
    """
    An exception that results from a plugin failure (setup, run, or cleanup)
    """

    pass


class PluginResult(object):
    def __init__(self, zkhandler, config, logger, this_node, plugin_name):
        self.zkhandler = zkhandler
        self.config = config
        self.logger = logger
        self.this_node = this_node
        self.plugin_name = plugin_name
        self.current_time = int(time.time())
        self.health_delta = 0
        self.message = "N/A"
        self.data = {}
        self.runtime = "0.00"

    def set_health_delta(self, new_delta):
        self.health_delta = new_delta

    def set_message(self, new_message):
        self.message = new_message

    def set_data(self, new_data):
        self.data = new_data

    def set_runtime(self, new_runtime):
        self.runtime = new_runtime

    def to_zookeeper(self):
        import json

        node = self.this_node.name
        name = self.plugin_name
        self.zkhandler.write(
            [
                (("node", node, "monitoring_plugin.name", name), name),
                (("node", node, "monitoring_plugin.last_run", name), self.current_time),
                (("node", node, "monitoring_plugin.health_delta", name), self.health_delta),
                (("node", node, "monitoring_plugin.message", name), self.message),
                (("node", node, "monitoring_plugin.data", name), json.dumps(self.data)),
                (("node", node, "monitoring_plugin.runtime", name), self.runtime),
            ]
        )


class MonitoringPlugin(object):
    def __init__(self, zkhandler, config, logger, this_node, plugin_name):
        self.zkhandler = zkhandler
        self.config = config
        self.logger = logger
        self.this_node = this_node
        self.plugin_name = plugin_name

        self.plugin_result = PluginResult(
            self.zkhandler,
            self.config,
            self.logger,
            self.this_node,
            self.plugin_name,
        )

    def __str__(self):
        return self.plugin_name

    def log(self, message, state="d"):
        if state == "d" and not self.config.get("debug", False):
            return
        self.logger.out(message, state=state, prefix=self.plugin_name)

    def setup(self):
        return None

    def run(self, coordinator_state=None):
        return self.plugin_result

    def cleanup(self):
        return None
)PY";

// daemon_lib.common: run_os_command with the reference's exact semantics.
inline constexpr const char* daemon_lib_common = R"PY(
# Compatibility module: the part of daemon_lib.common legacy plugins use.
import shlex
import subprocess
import threading


def _ascii(raw):
    if raw is None:
        return ""
    try:
        return raw.decode("ascii")
    except UnicodeDecodeError:
        return ""


def run_os_command(command_string, background=False, environment=None, timeout=None):
    if isinstance(command_string, list):
        command = command_string
    else:
        command = shlex.split(command_string)

    if background:

        def runcmd():
            try:
                subprocess.run(
                    command,
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            except Exception:
                pass

        thread = threading.Thread(target=runcmd, args=())
        thread.daemon = True
        thread.start()
        return 0, None, None

    try:
        command_output = subprocess.run(
            command,
            env=environment,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        retcode = command_output.returncode
    except subprocess.TimeoutExpired:
        return 128, "", ""
    except Exception:
        return 255, "", ""

    return retcode, _ascii(command_output.stdout), _ascii(command_output.stderr)
)PY";

// _pvc_health: the host's own helpers (logger, ZooKeeper handler and node
// objects handed to plugins; loading and running a plugin).
inline constexpr const char* host_bridge = R"PY(
import importlib.machinery
import importlib.util
import json
import time
import traceback

from pvcnoded.objects.MonitoringInstance import PluginError


class Logger(object):
    fmt_red = "\033[91m"
    fmt_green = "\033[92m"
    fmt_yellow = "\033[93m"
    fmt_blue = "\033[94m"
    fmt_purple = "\033[95m"
    fmt_cyan = "\033[96m"
    fmt_white = "\033[97m"
    fmt_bold = "\033[1m"
    fmt_end = "\033[0m"

    def __init__(self, sink):
        self._sink = sink

    def out(self, message, state=None, prefix=""):
        self._sink(str(message), "" if state is None else str(state), str(prefix) if prefix else "")


class ThisNode(object):
    """The daemon's node object as plugins see it: `name`, and read-only live properties."""

    def __init__(self, name, state, zkhandler, config):
        self.name = name
        self._state = state
        self._zk = zkhandler
        self._config = config

    @property
    def coordinator_state(self):
        return self._state()["coordinator_state"]

    @property
    def health(self):
        return self._state()["health"]

    @property
    def daemon_state(self):
        return self._zk.read(("node.state.daemon", self.name))

    @property
    def domain_state(self):
        return self._zk.read(("node.state.domain", self.name))

    @property
    def maintenance(self):
        return str(self._zk.read("base.config.maintenance")).lower() in ("true", "1", "yes", "on")

    @property
    def storage_ipaddr(self):
        ip = self._config.get("storage_dev_ip")
        return ip.split("/")[0] if ip else None


def _resolve(key):
    if isinstance(key, str):
        if key.startswith("/"):
            return ("", [key])
        return (key, [])
    if isinstance(key, tuple) and len(key) == 2:
        return (str(key[0]), [str(key[1])])
    if isinstance(key, tuple) and len(key) == 4:
        return (str(key[2]), [str(key[1]), str(key[3])])
    raise ValueError("unsupported ZooKeeper key: %r" % (key,))


class ZKHandler(object):
    """The subset of the reference's ZKHandler a plugin may use."""

    def __init__(self, ops):
        self._ops = ops

    def read(self, key):
        return self._ops["read"](*_resolve(key))

    def exists(self, key):
        return self._ops["exists"](*_resolve(key))

    def children(self, key):
        return self._ops["children"](*_resolve(key))

    def write(self, kvpairs):
        return self._ops["write"]([_resolve(k) + (str(v),) for k, v in kvpairs])

    def delete(self, keys, recursive=True):
        if not isinstance(keys, list):
            keys = [keys]
        return self._ops["delete"]([_resolve(k) for k in keys])


def load_plugin(path, zkhandler, config, logger, this_node):
    loader = importlib.machinery.SourceFileLoader("plugin_script", path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    plugin_name = module.PLUGIN_NAME
    plugin = module.MonitoringPluginScript(zkhandler, config, logger, this_node, plugin_name)
    ret = plugin.setup()
    if ret is not None:
        raise PluginError("{}".format(ret))
    return str(plugin_name), plugin


def _delta(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("health_delta must be an integer, not {}".format(type(value).__name__))
    if isinstance(value, float):
        if not value.is_integer():
            raise TypeError("health_delta must be an integer, not {!r}".format(value))
        value = int(value)
    return value


def run_plugin(plugin, coordinator_state):
    start = time.monotonic()
    result = plugin.run(coordinator_state=coordinator_state)
    elapsed = time.monotonic() - start
    runtime = "{:0.02f}".format(elapsed)
    result.plugin_name
    delta = _delta(result.health_delta)
    message = "{}".format(result.message)
    data = json.dumps(result.data)
    result.set_runtime(runtime)
    return delta, message, data, elapsed


def partial_delta(plugin):
    try:
        return _delta(plugin.plugin_result.health_delta)
    except Exception:
        return None


def describe(exc_type, exc_value, exc_tb):
    # A PluginError is the plugin's own worded failure (a refusal from setup,
    # a run that cannot check): its message says it all, no traceback. Any
    # other exception is a plugin bug: its traceback is logged too.
    plugin_error = isinstance(exc_type, type) and issubclass(exc_type, PluginError)
    return (
        exc_type.__name__,
        str(exc_value),
        "" if plugin_error else "".join(traceback.format_exception(exc_type, exc_value, exc_tb)).rstrip(),
    )
)PY";

// Registers the packages and modules above in sys.modules.
inline constexpr const char* bootstrap = R"PY(
import sys
import types

if not hasattr(sys, "argv"):
    sys.argv = ["pvcnoded"]


def _install(name, source, package=False):
    module = types.ModuleType(name)
    module.__file__ = "<pvc:" + name + ">"
    if package:
        module.__path__ = []
    sys.modules[name] = module
    if "." in name:
        parent, _, child = name.rpartition(".")
        setattr(sys.modules[parent], child, module)
    if source:
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    return module


_install("pvcnoded", "", True)
_install("pvcnoded.objects", "", True)
_install("pvcnoded.objects.MonitoringInstance", monitoring_instance)
_install("daemon_lib", "", True)
_install("daemon_lib.common", daemon_lib_common)
_install("_pvc_health", host_bridge)
)PY";

}  // namespace pvc::health::compat
