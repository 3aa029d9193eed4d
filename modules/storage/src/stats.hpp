// The statistics' encodings (pools and OSDs): Ceph's replies turned
// into the JSON texts the reference writes under /ceph. Pure functions, no
// Ceph or ZooKeeper: the collector (collector.hpp) feeds them.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rados.hpp"

namespace pvc::storage {

using OrderedJson = nlohmann::ordered_json;

// json.dumps() of the reference: ", " and ": " separators, non-ASCII escaped.
std::string python_json(const OrderedJson& value);

// A pool's statistics (the reference's fields, in its order) from its `ceph df --format
// json` entry and its `rados df` counters. Throws std::exception when a field
// is missing (the caller logs and skips that pool).
OrderedJson pool_stats(const nlohmann::json& df_pool, const PoolCounters& counters);

// `ceph df` JSON → its `pools` array keyed by pool name (throws on bad JSON).
std::map<std::string, nlohmann::json> df_pools(const std::string& ceph_df_json);

// One row of `ceph osd status` (plain text), values as printed.
struct OsdStatusRow {
    std::string node, used, avail, wr_ops, wr_data, rd_ops, rd_data, state;
};
// The table keyed by OSD id: ANSI colours removed, borders and headers
// ignored, Ceph 14 (`| id | host | …`) and 16+ (`id host …`) layouts.
std::map<std::string, OsdStatusRow> parse_osd_status(const std::string& text);

// `osd dump` and `osd df` JSON → per-id objects with the reference's OSD fields.
std::map<std::string, OrderedJson> osd_dump_fields(const std::string& osd_dump_json);
std::map<std::string, OrderedJson> osd_df_fields(const std::string& osd_df_json);

// The merged `/ceph/osds/<id>/stats` object (dump, df, status keys in that
// order); nullopt when the id is missing from any of the three.
std::optional<OrderedJson> osd_stats(const std::string& id, const std::map<std::string, OrderedJson>& dump,
                                     const std::map<std::string, OrderedJson>& df,
                                     const std::map<std::string, OsdStatusRow>& status);

// Names as ZooKeeper gives them, checked before they reach Ceph or a path.
bool valid_pool_name(const std::string& name);
bool valid_osd_id(const std::string& id);

}  // namespace pvc::storage
