#include "pvc/target.hpp"

#include <algorithm>
#include <charconv>

#include "pvc/schema.hpp"
#include "pvc/strings.hpp"
#include "pvc/zk.hpp"

namespace pvc::target {

std::optional<Selector> parse_selector(std::string_view s) {
    for (std::size_t i = 0; i < std::size(selector_names); ++i)
        if (s == selector_names[i]) return static_cast<Selector>(i);
    return std::nullopt;
}

namespace {

std::optional<long> parse_long(const std::optional<std::string>& s) {
    if (!s) return std::nullopt;
    long v = 0;
    auto* b = s->data();
    auto* e = s->data() + s->size();
    auto r = std::from_chars(b, e, v);
    if (r.ec != std::errc() || r.ptr != e || s->empty()) return std::nullopt;
    return v;
}

std::optional<double> parse_double(const std::optional<std::string>& s) {
    if (!s || s->empty()) return std::nullopt;
    try {
        size_t used = 0;
        double v = std::stod(*s, &used);
        if (used != s->size()) return std::nullopt;
        return v;
    } catch (...) {
        return std::nullopt;
    }
}

}  // namespace

std::optional<std::string> choose(const std::vector<NodeFigures>& nodes, const Request& request) {
    std::string sel_text = request.node_selector.value_or("none");
    if (sel_text == "none" || sel_text == "None") sel_text = request.cluster_selector;
    // No cluster default published yet (no primary has run a keepalive):
    // the daemon's own default, as every primary would publish it.
    if (sel_text.empty() && request.node_selector.value_or("none") != "") sel_text = "mem";
    auto selector = parse_selector(sel_text);
    if (!selector) return std::nullopt;

    std::vector<std::string> limit;
    if (request.node_limit) {
        limit = split_all(*request.node_limit, ',');
        if (std::all_of(limit.begin(), limit.end(), [](const std::string& n) { return n.empty(); })) limit.clear();
    }

    std::vector<const NodeFigures*> candidates;
    for (const auto& n : nodes) {
        if (!limit.empty() && std::find(limit.begin(), limit.end(), n.name) == limit.end()) continue;
        if (n.name == request.current_node) continue;
        if (std::find(request.exclude.begin(), request.exclude.end(), n.name) != request.exclude.end()) continue;
        if (n.daemon_state != "run" || n.domain_state != "ready") continue;
        candidates.push_back(&n);
    }
    std::sort(candidates.begin(), candidates.end(), [](auto* a, auto* b) { return a->name < b->name; });

    std::optional<std::string> best;
    switch (*selector) {
    case Selector::mem: {
        long threshold = 0;
        for (auto* n : candidates)
            if (n->memfree && *n->memfree > threshold) { threshold = *n->memfree; best = n->name; }
        break;
    }
    case Selector::memprov: {
        long threshold = 0;
        for (auto* n : candidates) {
            if (!n->memfree || !n->memused || !n->memprov) continue;
            long avail = *n->memused + *n->memfree - *n->memprov;
            if (avail > threshold) { threshold = avail; best = n->name; }
        }
        break;
    }
    case Selector::load: {
        double threshold = 9999.0;
        for (auto* n : candidates)
            if (n->cpuload && *n->cpuload < threshold) { threshold = *n->cpuload; best = n->name; }
        break;
    }
    case Selector::vcpus: {
        long threshold = 9999;
        for (auto* n : candidates)
            if (n->vcpualloc && *n->vcpualloc < threshold) { threshold = *n->vcpualloc; best = n->name; }
        break;
    }
    case Selector::vms: {
        long threshold = 9999;
        for (auto* n : candidates)
            if (n->domainscount && *n->domainscount < threshold) { threshold = *n->domainscount; best = n->name; }
        break;
    }
    }
    return best;
}

std::vector<NodeFigures> read_nodes(zk::Session& session) {
    std::vector<NodeFigures> out;
    auto names = session.children(schema::path("base.node"));
    if (!names) return out;
    for (const auto& name : *names) {
        NodeFigures f;
        f.name = name;
        auto get = [&](std::string_view key) { return session.get(schema::path(key, {name})); };
        f.daemon_state = get("node.state.daemon").value_or("");
        f.domain_state = get("node.state.domain").value_or("");
        f.memfree = parse_long(get("node.memory.free"));
        f.memused = parse_long(get("node.memory.used"));
        f.memprov = parse_long(get("node.memory.provisioned"));
        f.vcpualloc = parse_long(get("node.vcpu.allocated"));
        f.domainscount = parse_long(get("node.count.provisioned_domains"));
        f.cpuload = parse_double(get("node.cpu.load"));
        out.push_back(std::move(f));
    }
    return out;
}

Request read_request(zk::Session& session, const std::string& uuid) {
    Request r;
    r.node_limit = session.get(schema::path("domain.meta.node_limit", {uuid}));
    r.node_selector = session.get(schema::path("domain.meta.node_selector", {uuid}));
    r.cluster_selector = session.get(schema::path("base.config.migration_target_selector")).value_or("");
    r.current_node = session.get(schema::path("domain.node", {uuid})).value_or("");
    return r;
}

std::optional<std::string> find_target(zk::Session& session, const std::string& uuid,
                                       const std::vector<std::string>& exclude) {
    auto request = read_request(session, uuid);
    request.exclude = exclude;
    return choose(read_nodes(session), request);
}

}  // namespace pvc::target
