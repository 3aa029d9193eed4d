// The API's JSON objects (api.md §3), built from the cluster view, keys in
// the reference's order (nlohmann::ordered_json).
#pragma once

#include <cstdint>
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

// A VM object; nullopt when it cannot be built (api.md Q17: omitted from lists).
std::optional<Json> vm_object(const Reader& r, const std::string& uuid);

// VM objects serialized, cached per VM and rebuilt only when something under
// /domains/<uuid> changed: GET /vm with 1,000 VMs is a concatenation.
class VmCache {
public:
    // The serialized object ("" when it cannot be built).
    std::string get(const Reader& r, const std::string& uuid);
    // The object itself (null when it cannot be built).
    std::shared_ptr<const Json> object(const Reader& r, const std::string& uuid);
    void clear();

private:
    struct Item {
        uint64_t generation = 0;
        std::string text;
        std::shared_ptr<const Json> object;
    };
    const Item& item(const Reader& r, const std::string& uuid);  // under m_
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
// "10G", "1024M", "0B" (api.md §3.5).
std::string human_size(uint64_t bytes);

}  // namespace pvc::api
