// A node's health as reference PVC clients read it (the API's node
// information): monitoring_health as an integer (N/A
// when it does not parse), then for every name in monitoring_plugins its
// name, last_run and health_delta as integers, message, data as JSON. A
// missing key or a value that does not parse fails the script, as it fails
// the reference's node information request.
#pragma once

namespace pvc::test {

// Arguments: ZooKeeper hosts, node. Prints
// {"health": <int|"N/A">, "plugins": [names], "details": [{name, last_run, health_delta, message, data}]}.
inline constexpr const char* node_health_py = R"(
import sys, json
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1]); zk.start()
base = "/nodes/" + sys.argv[2]
def get(p):
    return zk.get(p)[0].decode()
try:
    health = int(get(base + "/monitoring_health"))
except Exception:
    health = "N/A"
plugins = get(base + "/monitoring_plugins").split()
details = []
for p in plugins:
    d = base + "/monitoring_data/" + p
    details.append({"name": get(d), "last_run": int(get(d + "/last_run")),
                    "health_delta": int(get(d + "/health_delta")), "message": get(d + "/message"),
                    "data": json.loads(get(d + "/data"))})
print(json.dumps({"health": health, "plugins": plugins, "details": details}))
zk.stop()
)";

}  // namespace pvc::test
