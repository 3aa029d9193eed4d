// The primary coordinator's DNS aggregator and metadata API, as the network
// module holds them (modules/network/README.md, "DNS aggregator",
// "Metadata API"). Everything here runs on the module's worker, and never
// waits on the database: the aggregator's database work is on its own
// thread, the metadata API's lookups on its own pool.
#include <signal.h>

#include <fmt/format.h>

#include "pvc/strings.hpp"

#include "network.hpp"

namespace pvc::network {

void NetworkModule::note_dns_zone(const std::string& vni, const DhcpNetwork* d, const NetworkKeys* keys) {
    if (!dns_) return;
    // A managed network with a domain and a gateway has a zone (its dnsmasq
    // serves it on the gateway); one that loses either loses its zone.
    if (!d || d->domain.empty() || d->domain == "None" || (!d->gw4 && !d->gw6)) {
        dns_->remove_network(vni);
        return;
    }
    DnsZone z;
    z.domain = d->domain;
    z.server = d->gw4 ? *d->gw4 : *d->gw6;
    if (keys) {
        auto it = keys->find("name_servers");
        if (it != keys->end() && !it->second.empty() && it->second != "None")
            for (auto& s : split(it->second, ','))
                if (auto t = trim(s); !t.empty()) z.name_servers.push_back(t);
    }
    dns_->set_network(vni, z);
}

void NetworkModule::hold_router_services() {
    if (!coordinator_) return;
    if (!router_active_) {
        // Relinquish: nothing of the aggregator writes from here on (a pass
        // in progress rolls back), pdns_server and the metadata API stop.
        if (dns_) dns_->set_active(false);
        if (pdns_ && pdns_->running()) {
            pid_t group = pdns_->pid();
            pdns_->stop(std::chrono::seconds(1));
            ::kill(-group, SIGKILL);  // the guardian's instance, should it outlive it
            log_.ok("DNS aggregator: pdns_server stopped");
        }
        pdns_.reset();
        if (metadata_) {
            metadata_->stop();
            log_.ok("Metadata API stopped");
        }
        metadata_.reset();
        std::lock_guard g(failed_m_);
        metadata_view_.reset();
        pdns_problem_.clear();
        metadata_problem_.clear();
        return;
    }
    // Takeover: the metadata API, then pdns_server and the database side.
    if (!metadata_) {
        const DatabaseConfig& db = settings_.metadata_database;
        MetadataApi::Options o;
        o.db = {db.host.value_or("localhost"), db.name.value_or(""), db.user.value_or(""), db.pass.value_or(""),
                db.port.value_or(5432)};
        metadata_ = std::make_shared<MetadataApi>(o, zk_, log_);
        std::lock_guard g(failed_m_);
        metadata_view_ = metadata_;
    }
    supervise_router_services();
    if (dns_) dns_->set_active(true);
}

void NetworkModule::supervise_router_services() {
    if (!coordinator_ || !router_active_) return;
    // The metadata API: listening, or tried again at each keepalive.
    if (metadata_ && !metadata_->running()) {
        std::string problem;
        try {
            metadata_->start();
            log_.ok("Metadata API listening on 169.254.169.254:{}", metadata_->port());
        } catch (const std::exception& ex) {
            problem = ex.what();
        }
        std::lock_guard g(failed_m_);
        if (problem != metadata_problem_ && !problem.empty())
            log_.error("Metadata API: {}; tried again at each keepalive", problem);
        metadata_problem_ = problem;
    }
    // pdns_server: on the cluster and upstream floating addresses; a dead
    // one is restarted with backoff (1 s doubling to 60 s).
    if (!pdns_ && !std::filesystem::exists(pdns_exe_)) {
        std::lock_guard g(failed_m_);
        if (pdns_problem_.empty()) log_.error("DNS aggregator: {} is not installed (Debian package pdns-server)", pdns_exe_.string());
        pdns_problem_ = pdns_exe_.string() + " is not installed (Debian packages pdns-server, pdns-backend-pgsql)";
        return;
    }
    if (!pdns_) {
        PdnsOptions o;
        for (const auto* f : {&settings_.cluster.floating_ip, &settings_.upstream.floating_ip})
            if (*f) o.local_addresses.push_back(f->value().substr(0, f->value().find('/')));
        o.socket_dir = dynamic_dir_ / "pdns";
        const DatabaseConfig& db = settings_.dns_database;
        o.db = {db.host.value_or("localhost"), db.name.value_or(""), db.user.value_or(""), db.pass.value_or(""),
                db.port.value_or(5432)};
        std::error_code ec;
        std::filesystem::create_directories(o.socket_dir, ec);
        pdns_ = std::make_unique<Dnsmasq>(pdns_exe_, pdns_arguments(o),
                                          std::vector<std::string>{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"},
                                          log_dir_ / "pdns" / "pdns-aggregator.log");
    }
    pid_t before = pdns_->pid();
    auto ev = pdns_->supervise();
    std::string problem;
    switch (ev.kind) {
    case Dnsmasq::Event::none:
        if (!pdns_->running()) return;  // backing off: the problem stays as it was
        break;
    case Dnsmasq::Event::started: log_.ok("DNS aggregator: pdns_server started ({})", ev.what); break;
    case Dnsmasq::Event::exited:
        ::kill(-before, SIGKILL);  // its instance, should the guardian have died alone
        problem = fmt::format("pdns_server exited ({}); restarting in {} ms", ev.what, ev.next_try.count());
        log_.warn("DNS aggregator: {}", problem);
        break;
    case Dnsmasq::Event::start_failed:
        problem = fmt::format("pdns_server did not start: {}; next try in {} ms", ev.what, ev.next_try.count());
        log_.error("DNS aggregator: {}", problem);
        break;
    }
    std::lock_guard g(failed_m_);
    pdns_problem_ = problem;
}

}  // namespace pvc::network
