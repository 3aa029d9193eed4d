#include "pvc/cluster.hpp"

#include <algorithm>
#include <map>
#include <set>

#include "pvc/schema.hpp"

namespace pvc {
namespace {

using schema::Class;

// Creates `path` with `data` if absent; true if created. A missing parent
// (object deleted meanwhile) is not an error: nothing is created.
bool create_if_absent(zk::Session& zk, const std::string& path, const std::string& data) {
    try {
        zk.create(path, data);
        return true;
    } catch (const zk::Error& e) {
        if (e.status == zk::Status::node_exists || e.status == zk::Status::no_node) return false;
        throw;
    }
}

std::string parent_of(const std::string& path) {
    auto pos = path.rfind('/');
    return pos == 0 ? "/" : path.substr(0, pos);
}

std::string leaf_of(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// Creates the missing keys of one object (ids fill the class templates),
// listing each parent once instead of probing every key.
int apply_object(zk::Session& zk, Class cls, const std::vector<std::string>& ids) {
    int created = 0;
    std::map<std::string, std::set<std::string>> listed;
    for (const auto& key : schema::keys_of(cls)) {
        if (key.name == schema::root_of(cls).name) continue;  // never create an object root
        std::string path = schema::path(key.name, ids);
        std::string parent = parent_of(path);
        auto it = listed.find(parent);
        if (it == listed.end()) {
            auto kids = zk.raw_children(parent);
            if (!kids) return created;  // object vanished
            it = listed.emplace(parent, std::set<std::string>(kids->begin(), kids->end())).first;
        }
        if (it->second.count(leaf_of(path))) continue;
        if (create_if_absent(zk, path, std::string(key.apply_default))) {
            ++created;
            it->second.insert(leaf_of(path));
            listed.emplace(path, std::set<std::string>{});
        }
    }
    return created;
}

std::vector<std::string> kids(zk::Session& zk, const std::string& path) {
    auto c = zk.children(path);
    return c ? *c : std::vector<std::string>{};
}

}  // namespace

void init_cluster(zk::Session& zk) {
    if (auto v = zk.get(schema::path("base.schema.version")); v && !v->empty() && *v != std::to_string(schema::version))
        throw SchemaError("cluster is at schema version " + *v + "; this pvc supports exactly version " +
                          std::to_string(schema::version));
    for (const auto& key : schema::keys_of(Class::base)) {
        if (key.name == "base.root") continue;
        create_if_absent(zk, std::string(key.tmpl), std::string(key.apply_default));
    }
}

void check_schema_version(zk::Session& zk) {
    auto v = zk.get(schema::path("base.schema.version"));
    if (!v || v->empty())
        throw SchemaError("cluster not initialised: " + schema::path("base.schema.version") +
                          " is missing (run 'pvc cluster init' first)");
    if (*v != std::to_string(schema::version))
        throw SchemaError("cluster schema version is '" + *v + "'; this daemon supports exactly version " +
                          std::to_string(schema::version) + " and does not migrate in place");
}

int validate_and_apply(zk::Session& zk, const Logger& log) {
    int created = 0;
    for (const auto& key : schema::keys_of(Class::base)) {
        if (key.name == "base.root") continue;
        if (create_if_absent(zk, std::string(key.tmpl), std::string(key.apply_default))) ++created;
    }
    for (const auto& n : kids(zk, schema::path("base.node"))) created += apply_object(zk, Class::node, {n});
    for (const auto& d : kids(zk, schema::path("base.domain"))) created += apply_object(zk, Class::domain, {d});
    for (const auto& vni : kids(zk, schema::path("base.network"))) {
        created += apply_object(zk, Class::network, {vni});
        for (const auto& mac : kids(zk, schema::path("network.reservation", {vni})))
            created += apply_object(zk, Class::reservation, {vni, mac});
        for (const char* dir : {"in", "out"})
            for (const auto& acl : kids(zk, schema::path(std::string("network.rule.") + dir, {vni})))
                created += apply_object(zk, Class::rule, {vni, dir, acl});
    }
    for (const auto& id : kids(zk, schema::path("base.osd"))) created += apply_object(zk, Class::osd, {id});
    for (const auto& pool : kids(zk, schema::path("base.pool"))) created += apply_object(zk, Class::pool, {pool});
    for (const auto& pool : kids(zk, schema::path("base.volume")))
        for (const auto& vol : kids(zk, schema::path("base.volume") + "/" + pool))
            created += apply_object(zk, Class::volume, {pool, vol});
    for (const auto& pool : kids(zk, schema::path("base.snapshot")))
        for (const auto& vol : kids(zk, schema::path("base.snapshot") + "/" + pool))
            for (const auto& snap : kids(zk, schema::path("base.snapshot") + "/" + pool + "/" + vol))
                created += apply_object(zk, Class::snapshot, {pool, vol, snap});
    if (created) log.info("Schema validation created {} missing key(s)", created);
    return created;
}

}  // namespace pvc
