// The only reader of YAML text: pvcnoded.yaml → pvc::ConfigNode tree.
#include <yaml-cpp/yaml.h>

#include "config_tree_data.hpp"
#include "config_reader.hpp"

namespace pvc {

namespace {

int line_of(const YAML::Node& n) {
    YAML::Mark m = n.Mark();
    return m.is_null() || m.line < 0 ? 0 : m.line + 1;
}

std::shared_ptr<const ConfigNodeData> convert(const YAML::Node& n) {
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
    return ConfigNode(convert(doc), "", 1);
}

}  // namespace pvc
