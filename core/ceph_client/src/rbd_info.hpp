#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "connection.hpp"

namespace pvc::ceph {

using Json = nlohmann::ordered_json;

// `rbd info --format json <pool>/<name>` as the command prints it.
std::string rbd_info_json(Connection& c, Io& io, const std::string& name);
// The image's snapshot names (rbd_snap_list).
std::vector<std::string> snapshot_names(rbd_image_t image);
// json.dumps() of Python: ", " and ": " separators, ASCII only, order kept.
std::string py_dumps(const Json& j);

}  // namespace pvc::ceph
