// The only reader of YAML text: pvcnoded.yaml → pvc::ConfigNode tree.
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config_tree_data.hpp"
#include "config_reader.hpp"

namespace pvc {

namespace {

int line_of(const YAML::Node& n) {
    YAML::Mark m = n.Mark();
    return m.is_null() || m.line < 0 ? 0 : m.line + 1;
}

// What a configuration file may be once its aliases are expanded. yaml-cpp
// keeps an alias as a reference to its anchor's node, so an alias inside the
// node it names (`a: &a {b: *a}`) is a cycle, and aliases of aliases expand
// exponentially ("billion laughs"); either would exhaust the stack or the
// memory of the tree built here. pvcnoded.yaml is a few hundred nodes, six
// levels deep.
constexpr int max_depth = 64;
constexpr std::size_t max_nodes = 100000;

struct TooLarge {
    int line;
    std::string message;
};

struct Converter {
    std::vector<YAML::Node> ancestors;  // the nodes being converted, outermost first
    std::size_t nodes = 0;

    std::shared_ptr<const ConfigNodeData> convert(const YAML::Node& n);
};

std::shared_ptr<const ConfigNodeData> Converter::convert(const YAML::Node& n) {
    for (const auto& a : ancestors)
        if (a.is(n)) throw TooLarge{line_of(n), "a YAML alias names a node that contains the alias"};
    if (ancestors.size() >= static_cast<std::size_t>(max_depth))
        throw TooLarge{line_of(n), "nested deeper than " + std::to_string(max_depth) + " levels"};
    if (++nodes > max_nodes)
        throw TooLarge{line_of(n), "more than " + std::to_string(max_nodes) + " values once its aliases are expanded"};
    ancestors.push_back(n);
    auto d = std::make_shared<ConfigNodeData>();
    d->line = line_of(n);
    switch (n.Type()) {
        case YAML::NodeType::Scalar: {
            d->kind = ConfigNodeData::Kind::scalar;
            d->scalar = n.Scalar();
            bool b = false;
            // A quoted scalar ("true") is a string, never a boolean.
            if (n.Tag() != "!" && YAML::convert<bool>::decode(n, b)) d->boolean = b;
            break;
        }
        case YAML::NodeType::Map:
            d->kind = ConfigNodeData::Kind::map;
            for (auto it = n.begin(); it != n.end(); ++it) {
                if (!it->first.IsScalar()) continue;
                d->entries.push_back({it->first.Scalar(), line_of(it->first), convert(it->second)});
            }
            break;
        case YAML::NodeType::Sequence:
            d->kind = ConfigNodeData::Kind::sequence;
            for (const auto& item : n) d->items.push_back(convert(item));
            break;
        default:
            d->kind = ConfigNodeData::Kind::null;
            break;
    }
    ancestors.pop_back();
    return d;
}

}  // namespace

ConfigNode parse_config_tree(const std::string& yaml_text, const std::string& name_for_errors) {
    YAML::Node doc;
    try {
        doc = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
        int line = e.mark.is_null() || e.mark.line < 0 ? 0 : e.mark.line + 1;
        throw ConfigError(name_for_errors, {{"", line, "YAML syntax error: " + e.msg}});
    }
    try {
        return ConfigNode(Converter{}.convert(doc), "", 1);
    } catch (const TooLarge& e) {
        throw ConfigError(name_for_errors, {{"", e.line, "YAML document refused: " + e.message}});
    }
}

}  // namespace pvc
