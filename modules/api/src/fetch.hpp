// One plain-HTTP GET with a deadline, for the metrics routes that relay
// another exporter (the active Ceph MGR's, the ZooKeeper
// exporter of the primary). Blocking: called on the API's worker threads.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace pvc::api {

// The body of a 200 answer; nullopt on any failure (unreachable, timeout, other status).
std::optional<std::string> http_get(const std::string& host, uint16_t port, const std::string& target,
                                    std::chrono::milliseconds deadline);

}  // namespace pvc::api
