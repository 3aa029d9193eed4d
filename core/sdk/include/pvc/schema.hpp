// The ZooKeeper key schema, version 10: the one place where key paths live.
//
// Every key is named as in the reference's schema file ("node.keepalive",
// "domain.state", ...). A key's path is a template whose `{}` placeholders
// are filled, in order, with the identifiers of the objects it belongs to:
//
//   schema::path("base.config.primary_node")             -> /config/primary_node
//   schema::path("node.keepalive", {"hv1"})              -> /nodes/hv1/keepalive
//   schema::path("monitoring_plugin.data", {"hv1", "disk"})
//                                                         -> /nodes/hv1/monitoring_data/disk/data
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc::schema {

inline constexpr int version = 10;

// Object classes of the schema, in the reference's element order; `task`
// (node tasks, docs/wire-contract.md §3.10) is ours, not the reference's: no
// base key, never created by initialisation or validate/apply.
enum class Class { base, node, domain, network, osd, pool, volume, snapshot,
                   monitoring_plugin, sriov_pf, sriov_vf, tag, reservation, lease, rule, logs, task };

struct Key {
    std::string_view name;      // "node.keepalive"
    Class cls;
    std::string_view tmpl;      // "/nodes/{}/keepalive"
    std::string_view apply_default;  // data written when validate/apply creates it
    // Node keys: data a new node's registration writes when neither the core
    // nor a module gives a value.
    std::string_view register_default = {};
};

// Full path of `key`; throws std::invalid_argument for an unknown key or a
// wrong number of identifiers.
PVC_SDK_API std::string path(std::string_view key, std::initializer_list<std::string_view> ids = {});
PVC_SDK_API std::string path(std::string_view key, const std::vector<std::string>& ids);

// Every key of the schema.
PVC_SDK_API const std::vector<Key>& keys();
// The keys of one class, root key first (parents before children).
PVC_SDK_API std::vector<Key> keys_of(Class cls);
// The root key of a class ("node.name" for Class::node, ...).
PVC_SDK_API const Key& root_of(Class cls);

// True if `child` (a child znode name, not a path) is a kazoo lock contender
// (`...__lock__0000000042` / `...__rlock__0000000042`), never a real child.
PVC_SDK_API bool is_lock_contender(std::string_view child);

}  // namespace pvc::schema
