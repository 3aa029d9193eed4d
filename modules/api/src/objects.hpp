// The API's JSON objects, built from the cluster view, keys in
// the reference's order (nlohmann::ordered_json).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cluster_view.hpp"

namespace pvc::api {

using Json = nlohmann::ordered_json;

// Every document the API writes: invalid UTF-8 (a byte a client sent) is
// replaced, never a throw.
std::string dump(const Json& j);

using Reader = ClusterView::Reader;

Json node_object(const Reader& r, const std::string& name);
std::optional<long long> to_int(const std::string& s);
double to_float(const std::string& s);

// A VM object; nullopt when it cannot be built (omitted from lists, as the reference does).
std::optional<Json> vm_object(const Reader& r, const std::string& uuid);

// VM objects serialized, cached per VM and rebuilt only when something under
// /domains/<uuid> changed: GET /vm with 1,000 VMs is a concatenation.
class VmCache {
public:
    // The serialized object (null when it cannot be built).
    std::shared_ptr<const std::string> get(const Reader& r, const std::string& uuid);
    // True when the VM's object can be built (lists leave the others out).
    bool readable(const Reader& r, const std::string& uuid);
    // The VM's Prometheus sample lines, one string per metric family, built
    // with the object (null when it cannot be built). Only the serialized
    // forms are kept, not the object: a VM costs its text twice, no more.
    using Lines = std::vector<std::string>;
    std::shared_ptr<const Lines> metric_lines(const Reader& r, const std::string& uuid);
    // Sets how metric lines are built from an object (metrics.cpp).
    void set_metric_builder(std::function<Lines(const Json&)> build) { build_lines_ = std::move(build); }
    // The whole unfiltered list body, rebuilt only when something under /domains changed.
    std::shared_ptr<const std::string> list_body(const Reader& r, const std::function<std::string()>& build);
    void clear();

private:
    struct Item {
        uint64_t generation = 0;
        std::shared_ptr<const std::string> text;
        std::shared_ptr<const Lines> metrics;
    };
    Item& item(const Reader& r, const std::string& uuid);  // under m_
    std::function<Lines(const Json&)> build_lines_;
    uint64_t list_generation_ = ~0ULL;
    std::shared_ptr<const std::string> list_;
    std::mutex m_;
    std::map<std::string, Item> items_;
};

Json cluster_status(const Reader& r, VmCache& vms);

Json network_object(const Reader& r, const std::string& vni);
// Leases of a network (reservations, then dynamic unless `static_only`).
Json lease_object(const Reader& r, const std::string& vni, const std::string& mac);
Json acl_object(const Reader& r, const std::string& vni, const std::string& direction, const std::string& description);

Json osd_object(const Reader& r, const std::string& id);
Json pool_object(const Reader& r, const std::string& name);
Json volume_object(const Reader& r, const std::string& pool, const std::string& volume);
// "10G", "1024M", "0B" (the reference's size texts).
std::string human_size(uint64_t bytes);

}  // namespace pvc::api
