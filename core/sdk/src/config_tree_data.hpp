// The node behind a pvc::ConfigNode: built once by the YAML reader
// (config_yaml.cpp), then shared read-only.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace pvc {

struct ConfigNodeData {
    enum class Kind { null, scalar, map, sequence };
    Kind kind = Kind::null;
    std::string scalar;
    std::optional<bool> boolean;  // an unquoted YAML boolean spelling
    int line = 0;                 // 1-based, 0 if unknown

    struct Entry {
        std::string key;
        int key_line = 0;
        std::shared_ptr<const ConfigNodeData> value;
    };
    std::vector<Entry> entries;  // a mapping's scalar keys, in document order
    std::vector<std::shared_ptr<const ConfigNodeData>> items;  // a sequence
};

}  // namespace pvc
