// pvcnoded.yaml as a read-only tree with a YAML path and a line on every node,
// and typed getters that report into one problem list. The core builds the
// tree from the YAML; modules read their own keys from it (Module::configure)
// without seeing the YAML library.
#pragma once

#include <climits>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pvc/export.hpp"

namespace pvc {

struct PVC_SDK_API ConfigProblem {
    std::string path;     // YAML path, "pvc.cluster.coordinators"
    int line = 0;         // 1-based, 0 if unknown
    std::string message;
    std::string to_string(const std::string& file) const;  // "file:12: pvc.node: message"
};

class ConfigNode;

// Every problem of one configuration file, the core's and the modules'.
class PVC_SDK_API ConfigProblems {
public:
    void add(std::string path, int line, std::string message) {
        list_.push_back({std::move(path), line, std::move(message)});
    }
    void add(const ConfigNode& at, std::string message);
    bool empty() const { return list_.empty(); }
    std::size_t size() const { return list_.size(); }
    const std::vector<ConfigProblem>& list() const { return list_; }
    // The problems in line order (stable: same-line problems keep their order).
    std::vector<ConfigProblem> sorted() const;

private:
    std::vector<ConfigProblem> list_;
};

struct ConfigNodeData;  // the core's representation of one YAML node

// A place in the document: a node that may be absent, its dotted path and
// the line to blame (the key's line if written, else the nearest parent's).
// Cheap to copy; the tree is shared and immutable.
class PVC_SDK_API ConfigNode {
public:
    ConfigNode() = default;
    ConfigNode(std::shared_ptr<const ConfigNodeData> data, std::string path, int line)
        : data_(std::move(data)), path_(std::move(path)), line_(line) {}

    const std::string& path() const { return path_; }
    int line() const { return line_; }
    bool exists() const { return data_ != nullptr; }  // the key is written (its value may be null)
    bool has_value() const { return exists() && !is_null(); }
    bool is_null() const;
    bool is_scalar() const;
    bool is_map() const;
    bool is_sequence() const;
    const std::string& scalar() const;  // "" unless a scalar

    // A key of a mapping; a key written twice is reported (the first counts).
    ConfigNode child(std::string_view key, ConfigProblems& problems) const;
    // A dotted path of keys below this node ("pvc.system"), without reporting
    // duplicates: for reaching a place whose keys another reader (the core)
    // already reads and reports.
    ConfigNode at(std::string_view dotted) const;
    // Items of a sequence: path "x[i]", the item's own line.
    std::size_t size() const;
    ConfigNode item(std::size_t i) const;
    // The keys of a mapping in document order (a key written twice, twice);
    // empty unless a mapping. For readers of open-ended sections.
    std::vector<std::string> keys() const;

    // A section (a mapping). With `required_because` its absence is a problem
    // ("required section is missing<because>"). A key written with no value
    // counts as an empty section. False if absent or not a mapping.
    bool section(ConfigProblems& problems, const char* required_because = nullptr) const;

    std::optional<std::string> string(ConfigProblems& problems) const;
    std::optional<std::string> required_string(ConfigProblems& problems, std::string_view because = "") const;
    std::optional<long long> integer(ConfigProblems& problems, long long min, long long max) const;
    std::optional<int> int_value(ConfigProblems& problems, int min, int max = INT_MAX) const;
    std::optional<int> required_int(ConfigProblems& problems, int min, int max, std::string_view because) const;
    // YAML booleans only: true/false (and YAML 1.1's yes/no/on/off), unquoted.
    std::optional<bool> boolean(ConfigProblems& problems) const;

    // Assign when present and valid; leave `out` (the default) otherwise.
    void read(ConfigProblems& problems, bool& out) const;
    void read(ConfigProblems& problems, int& out, int min, int max = INT_MAX) const;
    void read(ConfigProblems& problems, std::string& out) const;

private:
    std::shared_ptr<const ConfigNodeData> data_;
    std::string path_;
    int line_ = 0;
};

}  // namespace pvc
