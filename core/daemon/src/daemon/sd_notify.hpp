// systemd's notification protocol (sd_notify(3), sd_watchdog_enabled(3)),
// the two calls pvcnoded makes, without libsystemd: linking it mapped
// libsystemd with libgcrypt, libgpg-error, liblz4 and libcap into every
// daemon (about 0.8 MiB of RSS) for one datagram per keepalive.
#pragma once

#include <cstdint>

namespace pvc::sd {

// Sends `state` (e.g. "READY=1") as one datagram to $NOTIFY_SOCKET (a path,
// or '@' for the abstract namespace). Nothing without $NOTIFY_SOCKET; errors
// are ignored, as sd_notify's are by its callers.
void notify(const char* state);

// True with the interval when systemd's watchdog is on for this process:
// $WATCHDOG_USEC set to a positive number and $WATCHDOG_PID, if set, ours.
bool watchdog_enabled(uint64_t& usec);

}  // namespace pvc::sd
