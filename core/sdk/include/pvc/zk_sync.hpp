// ZooKeeper's sync for a session: reads after it see every write that any
// client had committed when it was sent.
//
// A ZooKeeper server answers reads from its own copy, which may trail the
// leader's (an ensemble of several servers); watches trail too, by the time
// their re-reads take. Where an answer must not miss what another client
// just wrote (the API confirming a "not found", or reading before a write),
// sync first, then read.
#pragma once

#include <string>

#include "pvc/export.hpp"
#include "pvc/zk.hpp"

namespace pvc::zk {

// One round trip (libzookeeper's zoo_async on `path`): the server the
// session is connected to catches up with the leader, and the session's
// later reads come after that. Bounded by the session's op_timeout; throws
// zk::Error as a read does when it cannot be done (connection lost,
// closed). A Session that is not libzookeeper's (a test double holding one
// copy) has nothing to catch up with: returns at once.
PVC_SDK_API void sync(Session& session, const std::string& path = "/");

}  // namespace pvc::zk
