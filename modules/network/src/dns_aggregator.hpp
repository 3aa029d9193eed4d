// The DNS aggregator's database side (modules/network/README.md, "DNS
// aggregator"): on the primary, each managed network's zone is kept in the
// PowerDNS database (the gpgsql schema's `domains` and `records`) in step
// with what the network's dnsmasq serves, read by zone transfer. All
// database work runs on the aggregator's own thread, every call bounded by
// a deadline, so a PostgreSQL that is down or hung delays nothing else of
// the node; it is retried with backoff and reported by problem().
//
// pdns_server itself is a supervised child of the module's worker
// (pdns_arguments below), like dnsmasq.
#pragma once

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "pvc/log.hpp"

#include "axfr.hpp"
#include "pg.hpp"

namespace pvc::network {

// One managed network as the aggregator serves it.
struct DnsZone {
    std::string domain;                     // the zone, e.g. "net1000.local"
    std::string server;                     // its dnsmasq: the IPv4 gateway, else the IPv6 one
    std::vector<std::string> name_servers;  // the network's name_servers ("" = none)
    bool operator==(const DnsZone&) const = default;
};

// pdns_server's arguments after argv[0]: the reference's, in its order,
// with two changes for the packaged PowerDNS (4.7): `--default-soa-name`
// (removed in 4.4) is `--default-soa-content` with that name, and
// `--zone-cache-refresh-interval=0` (PowerDNS otherwise learns of a domain
// the aggregator inserts only after 5 minutes).
struct PdnsOptions {
    std::vector<std::string> local_addresses;  // the cluster and upstream floating addresses
    std::filesystem::path socket_dir;          // <dynamic_directory>/pdns
    PgParams db;
    uint16_t port = 53;
};
std::vector<std::string> pdns_arguments(const PdnsOptions& o);

// What one pass over a zone changes (pure: the tests call it).
struct ZoneDiff {
    std::vector<std::string> remove_ids;   // records rows to delete
    std::vector<DnsRecord> add;            // records to insert
    bool empty() const { return remove_ids.empty() && add.empty(); }
};
struct DbRecord {
    std::string id;
    DnsRecord r;
};
// `transferred`: the zone as dnsmasq sent it; only A and AAAA records below
// the apex are kept (names qualified with `domain` if they lack it).
// `stored`: the domain's A and AAAA rows. Rows not transferred go, as do
// rows whose name and type match a changed record; new records are added.
ZoneDiff diff_zone(const std::string& domain, const std::vector<DnsRecord>& transferred,
                   const std::vector<DbRecord>& stored);
// The SOA content with its serial (third field) incremented.
std::string next_soa(const std::string& content);

class DnsAggregator {
public:
    struct Options {
        PgParams db;
        std::string upstream_domain;                 // SOA and the default NS
        std::filesystem::path pdns_control = "/usr/bin/pdns_control";
        std::filesystem::path socket_dir;            // pdns's control socket directory
        std::chrono::milliseconds db_deadline{5000};     // one connect or statement
        std::chrono::milliseconds axfr_deadline{5000};
        std::chrono::milliseconds interval{10000};       // every zone again
        std::chrono::milliseconds max_backoff{10000};    // database retries: 0.5 s doubling to this
    };
    DnsAggregator(Options o, Logger log);
    ~DnsAggregator();  // stop()
    // Stops the thread (a call in progress ends by its deadline); idempotent.
    void stop();
    DnsAggregator(const DnsAggregator&) = delete;
    DnsAggregator& operator=(const DnsAggregator&) = delete;

    // Any thread, never blocking on the database.
    void set_network(const std::string& vni, const DnsZone& z);  // added or changed (a changed domain: the old one removed)
    void remove_network(const std::string& vni);  // gone from the cluster: its domain deleted (while active)
    void set_active(bool active);                 // this node is the primary (router-active)
    void poke(const std::string& vni);            // its leases changed: transfer its zone now
    // What is wrong now, for the node's health ("" if nothing).
    std::string problem() const;
    // Passes that changed a zone, for the tests and the benchmark.
    unsigned long changes() const;

private:
    void run(std::stop_token stop);
    // One network: its domain row (created if missing), then its records.
    void sync(const DnsZone& z);
    void ensure_domain(const DnsZone& z, std::string& id);
    void delete_domain(const std::string& domain);
    void purge_cache(const std::string& domain);

    Options o_;
    Logger log_;
    mutable std::mutex m_;
    std::condition_variable_any cv_;
    std::map<std::string, DnsZone> zones_;       // by VNI
    std::set<std::string> dirty_;                // VNIs to transfer at once
    std::set<std::string> removed_domains_;      // to delete
    bool active_ = false;
    bool activated_ = false;                     // every zone at once after becoming active
    std::string problem_;
    unsigned long changes_ = 0;
    std::unique_ptr<Pg> db_;                     // the thread's only
    std::jthread thread_;                        // last: stopped first
};

}  // namespace pvc::network
