// The metadata API (modules/network/README.md, "Metadata API"): EC2-style
// instance metadata and cloud-init user data over HTTP on
// 169.254.169.254:80 of the primary, for VMs on managed networks. The VM is
// the one whose interface has the MAC of the DHCP lease (or reservation)
// holding the request's source address; its user data comes from the
// provisioner's database. Boost.Beast; requests are answered on the API's
// own threads, every database call bounded by a deadline.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pvc/log.hpp"
#include "pvc/zk.hpp"

#include "pg.hpp"

namespace pvc::network {

struct VmDetails {
    std::string uuid, name, profile;
};

// The VM whose lease (any managed network's), or failing that whose
// reservation, holds `ip`, found by its interface MAC in the domain XML.
// `cache` (MAC -> UUID) is checked first and filled; may be null.
std::optional<VmDetails> find_vm(zk::Session& zk, const std::string& ip, std::map<std::string, std::string>* cache);

struct MetadataReply {
    int status = 200;
    std::string content_type = "text/html; charset=utf-8";
    std::string body;
};

class MetadataApi {
public:
    struct Options {
        std::string address = "169.254.169.254";
        uint16_t port = 80;
        PgParams db;                                      // the provisioner's database
        std::chrono::milliseconds db_deadline{5000};
        unsigned workers = 2;                             // lookups at once
    };
    MetadataApi(Options o, std::shared_ptr<zk::Session> zk, Logger log);
    ~MetadataApi();  // stops
    MetadataApi(const MetadataApi&) = delete;
    MetadataApi& operator=(const MetadataApi&) = delete;

    // Binds and serves; throws std::runtime_error when it cannot bind.
    void start();
    // Stops listening and answering; waits for lookups in progress (each
    // bounded by its deadlines).
    void stop();
    bool running() const;
    uint16_t port() const;  // the bound port (the tests bind port 0)
    // The last database failure, "" once a query worked again.
    std::string problem() const;

    // One request: method, target, source address.
    MetadataReply answer(const std::string& method, const std::string& target, const std::string& source);

private:
    struct Impl;
    std::optional<std::string> user_data(const std::string& profile);

    Options o_;
    std::shared_ptr<zk::Session> zk_;
    Logger log_;
    mutable std::mutex m_;            // problem_, cache_
    std::string problem_;
    std::map<std::string, std::string> cache_;
    std::mutex db_m_;
    std::unique_ptr<Pg> db_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace pvc::network
