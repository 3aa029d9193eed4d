// One plain-HTTP GET with a deadline, for the metrics routes that relay
// another exporter (the active Ceph MGR's, the ZooKeeper
// exporter of the primary). Blocking: called on the API's worker threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>

namespace pvc::api {

// The body of a 200 answer; nullopt on any failure (unreachable, timeout, other status).
std::optional<std::string> http_get(const std::string& host, uint16_t port, const std::string& target,
                                    std::chrono::milliseconds deadline);

// One relayed exporter shared by every scrape (the metrics routes answer
// without a key): at most one fetch in flight, its answer (or failure)
// reused for `reuse`. A scrape that finds a fetch in flight waits for it at
// most `wait`, then takes the last answer (none yet: nullopt). So many
// clients scraping while an exporter hangs hold one worker on the network,
// not one each.
class SharedFetch {
public:
    SharedFetch(std::chrono::milliseconds reuse, std::chrono::milliseconds wait) : reuse_(reuse), wait_(wait) {}
    std::optional<std::string> get(const std::function<std::optional<std::string>()>& fetch);

private:
    using Clock = std::chrono::steady_clock;
    const std::chrono::milliseconds reuse_, wait_;
    std::mutex m_;
    std::condition_variable cv_;
    bool fetching_ = false, have_ = false;
    Clock::time_point at_{};
    std::optional<std::string> last_;
};

}  // namespace pvc::api
