// pvc::ConfigNode: typed reads with the problem texts every part of
// pvcnoded.yaml shares, the core's keys and the modules'.
#include "pvc/config_tree.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "config_tree_data.hpp"

namespace pvc {

std::string ConfigProblem::to_string(const std::string& file) const {
    std::string out = file;
    if (line > 0) out += fmt::format(":{}", line);
    out += ": ";
    if (!path.empty()) out += path + ": ";
    out += message;
    return out;
}

void ConfigProblems::add(const ConfigNode& at, std::string message) { add(at.path(), at.line(), std::move(message)); }

std::vector<ConfigProblem> ConfigProblems::sorted() const {
    auto out = list_;
    std::stable_sort(out.begin(), out.end(), [](const ConfigProblem& a, const ConfigProblem& b) { return a.line < b.line; });
    return out;
}

using Kind = ConfigNodeData::Kind;

bool ConfigNode::is_null() const { return data_ && data_->kind == Kind::null; }
bool ConfigNode::is_scalar() const { return data_ && data_->kind == Kind::scalar; }
bool ConfigNode::is_map() const { return data_ && data_->kind == Kind::map; }
bool ConfigNode::is_sequence() const { return data_ && data_->kind == Kind::sequence; }

const std::string& ConfigNode::scalar() const {
    static const std::string empty;
    return is_scalar() ? data_->scalar : empty;
}

ConfigNode ConfigNode::child(std::string_view key, ConfigProblems& problems) const {
    std::string path = path_.empty() ? std::string(key) : path_ + "." + std::string(key);
    if (!is_map()) return ConfigNode(nullptr, std::move(path), line_);
    ConfigNode found(nullptr, path, line_);
    for (const auto& e : data_->entries) {
        if (e.key != key) continue;
        int line = e.key_line > 0 ? e.key_line : line_;
        if (!found.exists())
            found = ConfigNode(e.value, path, line);
        else
            problems.add(path, line, "duplicate key");
    }
    return found;
}

ConfigNode ConfigNode::at(std::string_view dotted) const {
    ConfigProblems problems;  // not reported: see the header
    ConfigNode n = *this;
    while (!dotted.empty()) {
        auto dot = dotted.find('.');
        n = n.child(dotted.substr(0, dot), problems);
        dotted = dot == std::string_view::npos ? std::string_view{} : dotted.substr(dot + 1);
    }
    return n;
}

std::size_t ConfigNode::size() const {
    if (is_sequence()) return data_->items.size();
    if (is_map()) return data_->entries.size();
    return 0;
}

std::vector<std::string> ConfigNode::keys() const {
    std::vector<std::string> out;
    if (is_map())
        for (const auto& e : data_->entries) out.push_back(e.key);
    return out;
}

ConfigNode ConfigNode::item(std::size_t i) const {
    std::string path = fmt::format("{}[{}]", path_, i);
    if (!is_sequence() || i >= data_->items.size()) return ConfigNode(nullptr, std::move(path), line_);
    const auto& d = data_->items[i];
    return ConfigNode(d, std::move(path), d->line > 0 ? d->line : line_);
}

bool ConfigNode::section(ConfigProblems& problems, const char* required_because) const {
    if (!exists()) {
        if (required_because) problems.add(*this, fmt::format("required section is missing{}", required_because));
        return false;
    }
    if (is_null()) return true;
    if (!is_map()) {
        problems.add(*this, "expected a mapping (a section of keys)");
        return false;
    }
    return true;
}

std::optional<std::string> ConfigNode::string(ConfigProblems& problems) const {
    if (!has_value()) return std::nullopt;
    if (!is_scalar()) {
        problems.add(*this, "expected a string");
        return std::nullopt;
    }
    return data_->scalar;
}

std::optional<std::string> ConfigNode::required_string(ConfigProblems& problems, std::string_view because) const {
    if (!has_value()) {
        problems.add(*this, fmt::format("required key is missing{}", because));
        return std::nullopt;
    }
    return string(problems);
}

std::optional<long long> ConfigNode::integer(ConfigProblems& problems, long long min, long long max) const {
    if (!has_value()) return std::nullopt;
    const std::string& text = scalar();
    long long value = 0;
    const char* begin = text.data();
    const char* end = text.data() + text.size();
    if (begin != end && *begin == '+') ++begin;
    auto [ptr, ec] = std::from_chars(begin, end, value);
    if (!is_scalar() || text.empty() || ec != std::errc{} || ptr != end) {
        problems.add(*this, "expected an integer");
        return std::nullopt;
    }
    if (value < min || value > max) {
        if (max >= INT_MAX)
            problems.add(*this, fmt::format("must be at least {} (got {})", min, value));
        else
            problems.add(*this, fmt::format("must be between {} and {} (got {})", min, max, value));
        return std::nullopt;
    }
    return value;
}

std::optional<int> ConfigNode::int_value(ConfigProblems& problems, int min, int max) const {
    auto v = integer(problems, min, max == INT_MAX ? LLONG_MAX : max);
    if (v && *v > INT_MAX) {
        problems.add(*this, "integer out of range");
        return std::nullopt;
    }
    if (v) return static_cast<int>(*v);
    return std::nullopt;
}

std::optional<int> ConfigNode::required_int(ConfigProblems& problems, int min, int max,
                                            std::string_view because) const {
    if (!has_value()) {
        problems.add(*this, fmt::format("required key is missing{}", because));
        return std::nullopt;
    }
    return int_value(problems, min, max);
}

std::optional<bool> ConfigNode::boolean(ConfigProblems& problems) const {
    if (!has_value()) return std::nullopt;
    if (!is_scalar() || !data_->boolean) {
        problems.add(*this, "expected a boolean (true or false)");
        return std::nullopt;
    }
    return *data_->boolean;
}

void ConfigNode::read(ConfigProblems& problems, bool& out) const {
    if (auto v = boolean(problems)) out = *v;
}
void ConfigNode::read(ConfigProblems& problems, int& out, int min, int max) const {
    if (auto v = int_value(problems, min, max)) out = *v;
}
void ConfigNode::read(ConfigProblems& problems, std::string& out) const {
    if (auto v = string(problems)) out = *v;
}

}  // namespace pvc
