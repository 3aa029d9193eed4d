// The API module's configuration: the optional `pvc.api` block of
// pvcnoded.yaml, shaped like the reference's pvcapid.yaml so
// operators carry their settings over, plus our request limits:
//
//   pvc:
//     api:
//       listen_address: 192.0.2.10     default: the upstream floating address with
//                                      networking on, else 127.0.0.1
//       listen_port: 7370
//       authentication:
//         enabled: true                default true
//         tokens:                      X-Api-Key values (empty tokens refused)
//           - description: operators
//             token: 5a0e...
//       ssl:
//         enabled: false
//         cert_file: /etc/pvc/api-cert.pem
//         key_file: /etc/pvc/api-key.pem
//       limits:
//         max_body_bytes: 2097152
//         max_header_bytes: 16384
//         max_connections: 64
//         max_connections_per_client: 16   from one address (IPv6: one /64)
//         reserved_connections: 16     of max_connections, for clients with a valid key
//                                      (default: a quarter of max_connections)
//         max_requests_per_client: 4   handled at once for one address (of 8 workers)
//         header_timeout: 5            seconds to send a request's header (idle sockets closed)
//         request_timeout: 30          seconds to receive a request / send a response
//         cpu_budget: 5                seconds of CPU per request
//         time_budget: 1800            seconds per request (a `wait=true` request's wait)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "http_server.hpp"
#include "pvc/ceph_client.hpp"
#include "pvc/config.hpp"

namespace pvc::api {

struct ApiToken {
    std::string description, token;
};

struct ApiSettings {
    std::string node;
    bool coordinator = false;
    ServerOptions server;
    bool auth_enabled = true;
    std::vector<ApiToken> tokens;
    // The storage routes' Ceph client settings (routes_storage.cpp): this
    // node's pvc.system.configuration.storage; nullopt without that section.
    std::optional<ceph::Settings> ceph;
};

// Reads and validates pvc.api; every problem goes to `problems` with its YAML path.
ApiSettings read_api_settings(const Config& config, ConfigProblems& problems);
// The Ceph client's settings from pvc.system.configuration.storage
// (ceph_config_file, ceph_admin_keyring, ceph_timeout; validated by the
// storage module), pvc.system.hypervisor.migration_uri and the cluster
// network's domain (live resize); nullopt without a ceph_config_file.
std::optional<ceph::Settings> read_ceph_settings(const Config& config);

}  // namespace pvc::api
