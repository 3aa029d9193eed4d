// Cluster-wide schema operations shared by the daemon and the CLI.
#pragma once

#include <string>

#include "pvc/log.hpp"
#include "pvc/zk.hpp"

#include "pvc/export.hpp"

namespace pvc {

class PVC_SDK_API SchemaError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// `pvc cluster init`: creates every missing base key (docs/wire-contract.md §2.3),
// /schema/version = 10. Existing data is never overwritten; a cluster at
// another schema version is refused (SchemaError).
PVC_SDK_API void init_cluster(zk::Session& zk);

// Reads /schema/version: throws SchemaError ("cluster not initialised", or
// "schema version N is not supported") unless it is exactly 10.
PVC_SDK_API void check_schema_version(zk::Session& zk);

// Validate/apply (the reference's schema repair): creates the missing keys of every
// base key and of every existing node, domain, network (with its reservations
// and rules), OSD, pool, volume and snapshot, with the schema's defaults.
// Never creates an object root and never overwrites. Returns the number of
// keys created.
PVC_SDK_API int validate_and_apply(zk::Session& zk, const Logger& log);

}  // namespace pvc
