// The live-migration call itself (URIs and flags as the reference's), apart from the
// ZooKeeper handshake in domain.cpp so it can be tested and tuned alone.
#pragma once

#include <libvirt/libvirt.h>

#include <optional>
#include <string>

#include "pvc/config.hpp"
#include "settings.hpp"

namespace pvc::hv {

// Destination libvirt URI from the `migration_uri` template
// ({node}, {cluster_domain}), e.g. qemu+tcp://hv2.pvc.local/system.
std::string destination_uri(const Settings& settings, const std::string& target_node);
// Migration data URI: tcp://<host of the destination URI>.
std::string migration_data_uri(const std::string& destination_uri);

// One live-migration attempt of `dom` to `dest_uri`. nullopt on success,
// else the error text. Flags: VIR_MIGRATE_LIVE only (classic, transient on
// both sides, as the reference does); the migration data goes to
// tcp://<destination host>.
std::optional<std::string> migrate_live(virDomainPtr dom, const std::string& dest_uri);

}  // namespace pvc::hv
