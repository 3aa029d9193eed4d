// The one-daemon-per-node guard (core/README.md, "One daemon per node"): an
// exclusive kazoo lock inside /nodes/<node>, its contender ephemeral to the
// daemon's session. These helpers decide which contenders left by earlier
// daemons are provably stale, so a start never waits for a holder that
// cannot exist any more.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/zk.hpp"

namespace pvc::node_guard {

// Who holds a guard contender, as recorded in its data.
struct Holder {
    std::string node;
    long pid = 0;
    unsigned long long start = 0;  // the process's start time (clock ticks since boot)
    std::string boot;              // /proc/sys/kernel/random/boot_id
    std::string pidns;             // the PID namespace the pid belongs to
};

// This process as a Holder, and its encoding as contender data
// ("pvcnoded node=… pid=… start=… boot=… pidns=… host=<fqdn>").
Holder self(const std::string& node);
std::string encode(const Holder& h, const std::string& fqdn);
// nullopt for data that is not ours (another format, an older daemon).
std::optional<Holder> decode(const std::string& data);

// True only when `h` is provably gone: recorded for `node` on this very boot
// of this host, in our PID namespace, and its process no longer exists (or
// its pid now belongs to another process). Anything unprovable is false.
bool gone(const Holder& h, const std::string& node);

// Removes the guard contenders under `root` that are provably stale:
//  * persistent ones (ephemeral owner 0): a kazoo contender is always
//    ephemeral, so only a restore of a backup can have written it;
//  * those of an earlier daemon of this host that is gone (a crash).
// Returns a description of each remaining contender (a holder that may be
// alive), for the log line saying what the start waits for.
std::vector<std::string> clear_stale(zk::Session& zk, const std::string& root, const std::string& node,
                                     const Logger& log);

}  // namespace pvc::node_guard
