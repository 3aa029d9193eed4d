// The daemon's side of the log sink (not part of the SDK's headers: modules
// log through pvc::Logger only).
#pragma once

#include <memory>

#include "pvc/export.hpp"

namespace pvc {

class LogSink;

// A batch of lines from one thread (the keepalive's): lines logged after
// hold_zookeeper_log() wake no ZooKeeper writer; release_zookeeper_log()
// writes the ring at once on the calling thread if the lines waiting are due
// (the routine batch window has ended, or a warning or error is waiting, and
// a period has passed since the last write), else leaves them to the writer.
// Every hold needs its release.
PVC_SDK_API void hold_zookeeper_log(const std::shared_ptr<LogSink>& sink);
PVC_SDK_API void release_zookeeper_log(const std::shared_ptr<LogSink>& sink) noexcept;

}  // namespace pvc
