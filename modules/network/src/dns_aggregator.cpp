#include "dns_aggregator.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "pvc/strings.hpp"

extern char** environ;

namespace pvc::network {

namespace {

using Clock = std::chrono::steady_clock;

std::string lower(std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string text(const DnsRecord& r) { return fmt::format("{} {} IN {} {}", r.name, r.ttl, r.type, r.data); }

// Runs argv (no shell, output discarded) for at most `deadline`; its exit
// status, or -1 when it could not run or was killed at the deadline.
int run_bounded(const std::vector<std::string>& argv_s, std::chrono::milliseconds deadline) {
    std::vector<char*> argv;
    for (const auto& s : argv_s) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, argv[0], &fa, &at, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    if (rc != 0) return -1;
    auto end = Clock::now() + deadline;
    int status = 0;
    for (;;) {
        pid_t r = ::waitpid(pid, &status, WNOHANG);
        if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (r < 0) return -1;
        if (Clock::now() >= end) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            return -1;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
}

}  // namespace

std::vector<std::string> pdns_arguments(const PdnsOptions& o) {
    return {"--no-config",
            "--daemon=no",
            "--guardian=yes",
            "--disable-syslog=yes",
            "--disable-axfr=no",
            "--allow-axfr-ips=0.0.0.0/0",
            "--local-address=" + join(o.local_addresses, ","),
            "--local-port=" + std::to_string(o.port),
            "--log-dns-details=on",
            "--loglevel=3",
            "--master=yes",
            "--slave=yes",
            "--slave-renotify=yes",
            "--version-string=powerdns",
            "--default-soa-content=dns.pvc.local hostmaster.@ 0 10800 3600 604800 3600",
            "--zone-cache-refresh-interval=0",
            "--socket-dir=" + o.socket_dir.string(),
            "--launch=gpgsql",
            "--gpgsql-host=" + o.db.host,
            "--gpgsql-port=" + std::to_string(o.db.port),
            "--gpgsql-dbname=" + o.db.dbname,
            "--gpgsql-user=" + o.db.user,
            "--gpgsql-password=" + o.db.password,
            "--gpgsql-dnssec=no"};
}

ZoneDiff diff_zone(const std::string& domain_in, const std::vector<DnsRecord>& transferred,
                   const std::vector<DbRecord>& stored) {
    const std::string domain = lower(domain_in);
    std::vector<DnsRecord> wanted;
    for (DnsRecord r : transferred) {
        if (r.type != "A" && r.type != "AAAA") continue;
        r.name = lower(r.name);
        if (r.name == domain) continue;  // the apex: dnsmasq's, not the aggregator's
        if (r.name.find(domain) == std::string::npos) r.name += "." + domain;
        if (std::find(wanted.begin(), wanted.end(), r) == wanted.end()) wanted.push_back(std::move(r));
    }
    ZoneDiff d;
    std::set<std::string> have;
    for (const auto& s : stored) have.insert(text(s.r));
    std::vector<DnsRecord> fresh;
    for (const auto& w : wanted)
        if (!have.count(text(w))) fresh.push_back(w);
    std::set<std::string> keep;
    for (const auto& w : wanted) keep.insert(text(w));
    for (const auto& s : stored) {
        bool gone = !keep.count(text(s.r));
        // The same name and type with other data (a new address): the old row goes.
        bool replaced = std::any_of(fresh.begin(), fresh.end(),
                                    [&](const DnsRecord& f) { return f.name == s.r.name && f.type == s.r.type; });
        // A row twice (written twice by an earlier run): only the first stays.
        bool duplicate = !gone && std::any_of(stored.begin(), stored.end(), [&](const DbRecord& o) {
            return &o < &s && text(o.r) == text(s.r);
        });
        if (gone || replaced || duplicate) d.remove_ids.push_back(s.id);
    }
    d.add = std::move(fresh);
    return d;
}

std::string next_soa(const std::string& content) {
    auto f = words(content);
    if (f.size() < 3) return content;
    try {
        f[2] = std::to_string(std::stoull(f[2]) + 1);
    } catch (const std::exception&) {
        return content;
    }
    return join(f, " ");
}

DnsAggregator::DnsAggregator(Options o, Logger log) : o_(std::move(o)), log_(std::move(log)) {
    thread_ = std::jthread([this](std::stop_token stop) {
        try {
            run(stop);
        } catch (const std::exception& e) {
            log_.error("DNS aggregator: its thread ended: {}", e.what());
        }
    });
}

DnsAggregator::~DnsAggregator() { stop(); }

void DnsAggregator::stop() {
    thread_.request_stop();
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void DnsAggregator::set_network(const std::string& vni, const DnsZone& z_in) {
    DnsZone z = z_in;
    z.domain = lower(z.domain);
    std::lock_guard g(m_);
    auto it = zones_.find(vni);
    if (it != zones_.end() && it->second == z) return;
    if (it != zones_.end() && it->second.domain != z.domain && active_) removed_domains_.insert(it->second.domain);
    removed_domains_.erase(z.domain);
    zones_[vni] = z;
    dirty_.insert(vni);
    cv_.notify_all();
}

void DnsAggregator::remove_network(const std::string& vni) {
    std::lock_guard g(m_);
    auto it = zones_.find(vni);
    if (it == zones_.end()) return;
    if (active_) removed_domains_.insert(it->second.domain);
    dirty_.erase(vni);
    zones_.erase(it);
    cv_.notify_all();
}

void DnsAggregator::set_active(bool active) {
    std::lock_guard g(m_);
    if (active_ == active) return;
    active_ = active;
    activated_ = active;
    if (!active) {
        dirty_.clear();
        removed_domains_.clear();
        problem_.clear();
    }
    cv_.notify_all();
}

void DnsAggregator::poke(const std::string& vni) {
    std::lock_guard g(m_);
    if (!zones_.count(vni)) return;
    dirty_.insert(vni);
    cv_.notify_all();
}

std::string DnsAggregator::problem() const {
    std::lock_guard g(m_);
    return problem_;
}

unsigned long DnsAggregator::changes() const {
    std::lock_guard g(m_);
    return changes_;
}

void DnsAggregator::run(std::stop_token stop) {
    auto backoff = std::chrono::milliseconds(500);
    Clock::time_point retry_at{}, next_full{}, later_at{};
    std::set<std::string> later;  // zones whose transfer failed: again in a second
    bool connected_before = false;
    for (;;) {
        std::map<std::string, DnsZone> zones;
        std::set<std::string> dirty, removed;
        bool full = false;
        {
            std::unique_lock l(m_);
            for (;;) {
                if (stop.stop_requested()) return;
                auto now = Clock::now();
                if (!active_) {
                    if (db_) {
                        l.unlock();
                        db_.reset();  // the new primary's business now
                        l.lock();
                        connected_before = false;
                        log_.info("DNS aggregator: inactive, database connection closed");
                    }
                    later.clear();
                    backoff = std::chrono::milliseconds(500);
                    retry_at = {};
                    cv_.wait(l, stop, [&] { return active_; });
                    continue;
                }
                if (!later.empty() && now >= later_at) {
                    dirty_.insert(later.begin(), later.end());
                    later.clear();
                }
                bool work = !dirty_.empty() || !removed_domains_.empty() || activated_ || now >= next_full;
                if (now >= retry_at && work) break;
                auto until = now >= retry_at ? next_full : retry_at;
                if (!later.empty()) until = std::min(until, later_at);
                cv_.wait_until(l, stop, until, [&] {
                    return !active_ || (Clock::now() >= retry_at &&
                                        (!dirty_.empty() || !removed_domains_.empty() || activated_));
                });
            }
            auto now = Clock::now();
            full = activated_ || now >= next_full;
            activated_ = false;
            if (full) next_full = now + o_.interval;
            zones = zones_;
            dirty.swap(dirty_);
            removed.swap(removed_domains_);
        }
        std::set<std::string> done;
        try {
            if (db_ && db_->broken()) db_.reset();
            if (!db_) {
                db_ = std::make_unique<Pg>(o_.db, o_.db_deadline);
                if (connected_before) log_.ok("DNS aggregator: connected to the PostgreSQL database again");
                else log_.info("DNS aggregator: connected to PostgreSQL database {} at {}:{}", o_.db.dbname,
                               o_.db.host, o_.db.port);
                connected_before = true;
            }
            for (auto it = removed.begin(); it != removed.end();) {
                delete_domain(*it);
                it = removed.erase(it);
            }
            for (const auto& [vni, z] : zones) {
                if (!full && !dirty.count(vni)) continue;
                if (stop.stop_requested()) return;
                try {
                    sync(z);
                } catch (const AxfrError& e) {
                    // dnsmasq not (yet) answering: again in a second, then at every pass.
                    log_.debug("DNS aggregator: zone {} from {}: {}", z.domain, z.server, e.what());
                    if (later.empty()) later_at = Clock::now() + std::chrono::seconds(1);
                    later.insert(vni);
                }
                done.insert(vni);
            }
            backoff = std::chrono::milliseconds(500);
            retry_at = {};
            std::lock_guard g(m_);
            if (!problem_.empty()) log_.ok("DNS aggregator: database reachable again");
            problem_.clear();
        } catch (const std::exception& e) {
            db_.reset();
            std::lock_guard g(m_);
            for (const auto& [vni, z] : zones)
                if ((full || dirty.count(vni)) && !done.count(vni)) dirty_.insert(vni);
            if (active_) removed_domains_.insert(removed.begin(), removed.end());
            std::string why = fmt::format("PostgreSQL database {} at {}:{}: {}", o_.db.dbname, o_.db.host, o_.db.port,
                                          e.what());
            // The item's text stays the same while the failure does (a
            // changing text would be a ZooKeeper write at every keepalive).
            std::string item = fmt::format("{}; retrying with backoff (up to {} s)", why,
                                           std::chrono::duration_cast<std::chrono::seconds>(o_.max_backoff).count());
            if (item != problem_) log_.error("DNS aggregator: {}", item);
            problem_ = item;
            retry_at = Clock::now() + backoff;
            backoff = std::min(backoff * 2, o_.max_backoff);
        }
    }
}

void DnsAggregator::ensure_domain(const DnsZone& z, std::string& id) {
    auto rows = db_->exec("SELECT id FROM domains WHERE name=$1", {z.domain}, o_.db_deadline);
    if (!rows.rows.empty() && rows.rows[0][0]) {
        id = *rows.rows[0][0];
        return;
    }
    db_->exec("BEGIN", {}, o_.db_deadline);
    auto ins = db_->exec(
        "INSERT INTO domains (name, type, account, notified_serial) VALUES ($1, 'MASTER', 'internal', 0) RETURNING id",
        {z.domain}, o_.db_deadline);
    id = ins.rows.at(0).at(0).value_or("");
    const std::string& up = o_.upstream_domain;
    db_->exec("INSERT INTO records (domain_id, name, content, type, ttl, prio) VALUES ($1, $2, $3, 'SOA', 86400, 0)",
              {id, z.domain, fmt::format("nsX.{} root.{} 1 10800 1800 86400 86400", up, up)}, o_.db_deadline);
    std::vector<std::string> ns;
    for (const auto& n : z.name_servers)
        if (!n.empty()) ns.push_back(n);
    if (ns.empty()) ns.push_back("pvc-dns." + up);
    for (const auto& n : ns)
        db_->exec("INSERT INTO records (domain_id, name, content, type, ttl, prio) VALUES ($1, $2, $3, 'NS', 86400, 0)",
                  {id, z.domain, n}, o_.db_deadline);
    db_->exec("COMMIT", {}, o_.db_deadline);
    log_.ok("DNS aggregator: domain {} added", z.domain);
}

void DnsAggregator::delete_domain(const std::string& domain) {
    db_->exec("BEGIN", {}, o_.db_deadline);
    db_->exec("DELETE FROM records WHERE domain_id IN (SELECT id FROM domains WHERE name=$1)", {domain},
              o_.db_deadline);
    auto r = db_->exec("DELETE FROM domains WHERE name=$1", {domain}, o_.db_deadline);
    db_->exec("COMMIT", {}, o_.db_deadline);
    if (r.affected) log_.ok("DNS aggregator: domain {} removed", domain);
    purge_cache(domain);
}

void DnsAggregator::sync(const DnsZone& z) {
    std::string id;
    ensure_domain(z, id);
    auto transferred = axfr(z.server, z.domain, o_.axfr_deadline);
    auto rows = db_->exec("SELECT id, name, type, content, ttl FROM records WHERE domain_id=$1 AND type IN ('A', 'AAAA')",
                          {id}, o_.db_deadline);
    std::vector<DbRecord> stored;
    for (const auto& row : rows.rows) {
        DbRecord s;
        s.id = row[0].value_or("");
        s.r.name = row[1].value_or("");
        s.r.type = row[2].value_or("");
        s.r.data = row[3].value_or("");
        try {
            s.r.ttl = static_cast<uint32_t>(std::stoul(row[4].value_or("0")));
        } catch (const std::exception&) {
        }
        stored.push_back(std::move(s));
    }
    ZoneDiff d = diff_zone(z.domain, transferred, stored);
    if (d.empty()) return;
    db_->exec("BEGIN", {}, o_.db_deadline);
    for (const auto& rid : d.remove_ids) db_->exec("DELETE FROM records WHERE id=$1", {rid}, o_.db_deadline);
    for (const auto& r : d.add)
        db_->exec("INSERT INTO records (domain_id, name, ttl, type, prio, content) VALUES ($1, $2, $3, $4, 0, $5)",
                  {id, r.name, std::to_string(r.ttl), r.type, r.data}, o_.db_deadline);
    auto soa = db_->exec("SELECT content FROM records WHERE domain_id=$1 AND type='SOA'", {id}, o_.db_deadline);
    if (!soa.rows.empty() && soa.rows[0][0])
        db_->exec("UPDATE records SET content=$1 WHERE domain_id=$2 AND type='SOA'", {next_soa(*soa.rows[0][0]), id},
                  o_.db_deadline);
    {
        // Relinquished meanwhile: the new primary writes from now on.
        std::lock_guard g(m_);
        if (!active_) {
            db_->exec("ROLLBACK", {}, o_.db_deadline);
            return;
        }
    }
    db_->exec("COMMIT", {}, o_.db_deadline);
    {
        std::lock_guard g(m_);
        ++changes_;
    }
    std::vector<std::string> added;
    for (const auto& r : d.add) added.push_back(r.name + " " + r.type + " " + r.data);
    log_.info("DNS aggregator: zone {}: {} record(s) removed, added: {}", z.domain, d.remove_ids.size(),
              added.empty() ? "none" : join(added, ", "));
    purge_cache(z.domain);
}

void DnsAggregator::purge_cache(const std::string& domain) {
    // PowerDNS caches answers (a name asked for before it existed: 60 s);
    // the changed zone's entries are dropped so the new records answer at once.
    int rc = run_bounded({o_.pdns_control.string(), "--socket-dir=" + o_.socket_dir.string(), "purge", domain + "$"},
                         std::chrono::seconds(2));
    if (rc != 0) log_.debug("DNS aggregator: pdns_control purge {}$: exit {}", domain, rc);
}

}  // namespace pvc::network
