#include "network.hpp"

#include <dlfcn.h>

#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "pvc/schema.hpp"
#include "pvc/strings.hpp"

#include "arp.hpp"

#include <nlohmann/json.hpp>

namespace pvc::network {

namespace {
// VXLAN over IPv4: outer IP 20 + UDP 8 + VXLAN 8 + inner Ethernet 14.
constexpr unsigned vxlan_overhead = 50;

// The lease helper is installed beside the module (.so) that holds this.
std::filesystem::path module_directory() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(&module_directory), &info) == 0 || !info.dli_fname) return {};
    return std::filesystem::path(info.dli_fname).parent_path();
}

bool flag(const NetworkKeys& keys, const char* key) {
    auto it = keys.find(key);
    return it != keys.end() && it->second == "True";
}

std::optional<std::string> key_value(const NetworkKeys& keys, const char* key) {
    auto it = keys.find(key);
    if (it == keys.end() || it->second.empty() || it->second == "None") return std::nullopt;
    return it->second;
}
}  // namespace

NetworkModule::NetworkModule() = default;
NetworkModule::~NetworkModule() { stop(); }

void NetworkModule::configure(const Config& cfg, ConfigProblems& problems) {
    settings_ = Settings::read(cfg, problems);
    const Settings& net = settings_;
    host_ = plan_host(cfg, net, problems);
    cluster_device_ = net.cluster.device;
    bridge_device_ = net.bridge_dev;
    if (net.cluster.mtu) cluster_mtu_ = static_cast<unsigned>(*net.cluster.mtu);
    if (net.bridge_mtu) bridge_mtu_ = static_cast<unsigned>(*net.bridge_mtu);
    // Floating addresses: each role's floating_ip with the prefix of the
    // node's own address in the role, on the role's bridge (upstream, then
    // cluster, then storage), then the metadata address on lo.
    floating_.clear();
    struct Role {
        const char* name;
        const NetworkRole& r;
    };
    for (const Role& role : {Role{"upstream", net.upstream}, Role{"cluster", net.cluster}, Role{"storage", net.storage}}) {
        if (!role.r.floating_ip || !role.r.dev_ip || !host_.role_bridge.count(role.name)) continue;
        const std::string& f = *role.r.floating_ip;
        const std::string& own = *role.r.dev_ip;
        std::string cidr = f.substr(0, f.find('/')) + own.substr(own.find('/'));
        // The hand-over phase that moves it: C upstream, D cluster and storage.
        Floating a{host_.role_bridge.at(role.name), cidr,
                   std::string_view(role.name) == "upstream" ? TransitionPhase::C : TransitionPhase::D};
        if (std::none_of(floating_.begin(), floating_.end(),
                         [&](const Floating& f) { return f.link == a.link && f.cidr == a.cidr; }))
            floating_.push_back(a);
    }
    floating_.push_back({"lo", "169.254.169.254/32", TransitionPhase::E});
    upstream_floating_ = net.upstream.floating_ip;
    node_ = cfg.node;
    dynamic_dir_ = cfg.dynamic_directory;
    log_dir_ = cfg.log_directory;
    coordinators_ = cfg.coordinators;
    sriov_ = cfg.enable_networking && net.enable_sriov;
    sriov_devices_ = net.sriov_devices;
    if (cfg.enable_networking && cluster_mtu_ && *cluster_mtu_ < 68 + vxlan_overhead)
        problems.add(cfg.document.at("pvc.system.configuration.networking.cluster.mtu"),
                     fmt::format("{} leaves no room for VXLAN client networks (at least {})", *cluster_mtu_,
                                 68 + vxlan_overhead));
}

void NetworkModule::secrets(std::vector<std::string>& out) const {
    for (const auto* db : {&settings_.dns_database, &settings_.metadata_database})
        if (db->pass) out.push_back(*db->pass);
}

void NetworkModule::prepare_host(const Config& cfg, const Logger& log) {
    if (!cfg.enable_networking) return;
    Netlink nl;
    // SR-IOV: the PFs' VFs before the host interfaces (a PF may be one of them).
    if (sriov_) {
        SriovSysfs sys;
        if (!sys.allow_unsafe_interrupts())
            log.warn("SR-IOV: vfio_iommu_type1's allow_unsafe_interrupts could not be set (module not loaded?): SR-IOV may fail");
        for (const auto& line : prepare_pfs(sys, sriov_devices_)) {
            if (line.rfind("ok: ", 0) == 0) log.ok("{}", line.substr(4));
            else log.warn("{}", line.substr(line.find(' ') + 1));
        }
        for (const auto& d : sriov_devices_) {
            if (!d.mtu) continue;
            try {
                if (auto l = nl.link(d.phy)) {
                    if (l->mtu != static_cast<unsigned>(*d.mtu)) nl.set_mtu(l->ifindex, static_cast<unsigned>(*d.mtu));
                    if (!l->up) nl.set_up(l->ifindex, true);
                } else {
                    log.warn("SR-IOV PF {} does not exist", d.phy);
                }
            } catch (const std::exception& ex) {
                log.warn("SR-IOV PF {}: MTU {}: {}", d.phy, *d.mtu, ex.what());
            }
        }
    }
    auto changes = apply_host(nl, host_, log);
    if (changes.empty()) log.info("Host networking already in place: nothing changed");
    else log.ok("Host networking: {}", join(changes, ", "));
    // bridge_mtu: the bridged networks' maximum defaults to the bridge device's
    // MTU as it is at start-up.
    if (!bridge_mtu_ && bridge_device_) {
        if (auto l = nl.link(*bridge_device_)) bridge_mtu_ = l->mtu;
    }
}

template <class Fn>
void NetworkModule::on_worker(std::string what, Fn fn) {
    if (!worker_) return;
    worker_->post(std::move(what), [fn = std::move(fn)](std::stop_token stop) {
        if (!stop.stop_requested()) fn();
    });
}

void NetworkModule::start(NodeContext& ctx) {
    log_ = ctx.logger;
    executor_ = &ctx.executor;
    zk_ = ctx.zk;
    worker_ = std::make_unique<ModulePool>(ctx.executor, "network", 1);
    coordinator_ = ctx.config.daemon_mode == "coordinator";
    if (coordinator_) {
        // The DNS aggregator's database side: its own thread, idle until
        // this node is the router.
        const DatabaseConfig& db = settings_.dns_database;
        DnsAggregator::Options o;
        o.db = {db.host.value_or("localhost"), db.name.value_or(""), db.user.value_or(""), db.pass.value_or(""),
                db.port.value_or(5432)};
        o.upstream_domain = settings_.upstream.domain.value_or("");
        o.socket_dir = dynamic_dir_ / "pdns";
        dns_ = std::make_shared<DnsAggregator>(o, log_);
    }
    on_worker("netlink", [this] { nl_ = std::make_unique<Netlink>(); });
    on_worker("dhcp set-up", [this] {
        // The lease helper reaches ZooKeeper by the coordinators named in
        // the YAML that PVCD_CONFIG_FILE gives it: a file of the daemon's own
        // coordinators, in pvcnoded.yaml's layout (the reference helper reads
        // it the same way).
        lease_helper_ = module_directory() / "pvcnoded-dnsmasq-lease";
        try {
            auto left = stop_leftover_dnsmasq(dnsmasq_exe_, dynamic_dir_ / "dnsmasq");
            if (!left.empty()) log_.warn("DHCP: {} dnsmasq process(es) left by an earlier run stopped", left.size());
        } catch (const std::exception& ex) {
            log_.error("DHCP: looking for dnsmasq left by an earlier run: {}", ex.what());
        }
        try {
            // pdns_server of an earlier run killed outright (this daemon's socket directory).
            // (The guardian's instance names itself pdns_server-instance.)
            std::string socket_dir = "--socket-dir=" + (dynamic_dir_ / "pdns").string();
            auto left = stop_leftover_processes(pdns_exe_, socket_dir);
            auto instances = stop_leftover_processes(pdns_exe_.string() + "-instance", socket_dir);
            left.insert(left.end(), instances.begin(), instances.end());
            if (!left.empty()) log_.warn("DNS aggregator: {} pdns_server process(es) left by an earlier run stopped", left.size());
        } catch (const std::exception& ex) {
            log_.error("DNS aggregator: looking for pdns_server left by an earlier run: {}", ex.what());
        }
        if (!std::filesystem::exists(lease_helper_))
            log_.error("DHCP: the lease helper {} is missing: dnsmasq will not record leases", lease_helper_.string());
        try {
            std::filesystem::create_directories(dynamic_dir_ / "dnsmasq");
            lease_config_ = dynamic_dir_ / "dnsmasq" / "coordinators.yaml";
            std::ofstream f(lease_config_, std::ios::trunc);
            f << "# Written by pvcnoded for the dnsmasq lease helper (pvc.cluster.coordinators)\n"
              << "pvc:\n  cluster:\n    coordinators:\n";
            for (const auto& c : coordinators_) f << "      - " << nlohmann::json(c).dump() << "\n";
        } catch (const std::exception& ex) {
            log_.error("DHCP: cannot write the lease helper's configuration: {}", ex.what());
        }
    });
    on_worker("firewall base", [this] {
        // The firewall's base: our table, its hook chains and dispatchers, the operator's
        // static files. Without it no network gets rules (each says so).
        try {
            auto fw = std::make_unique<Firewall>(dynamic_dir_ / "nft");
            fw->apply_base();
            firewall_ = std::move(fw);
            log_.ok("Firewall base in place (table inet filter)");
        } catch (const std::exception& ex) {
            log_.error("Firewall: {}; client networks get no firewall rules", ex.what());
        }
    });
    if (upstream_floating_)
        upstream_ip_watch_ = zk_->watch_data(schema::path("base.config.upstream_ip"),
                                             [this](const std::optional<std::string>& v, const zk::Stat&) {
            std::lock_guard g(upstream_ip_m_);
            upstream_ip_stored_ = v;
        });
    // Watch callbacks must not block: they only queue work for the worker.
    if (sriov_) on_worker("sr-iov", [this] { start_sriov(); });
    children_watch_ = zk_->watch_children(schema::path("base.network"),
                                          [this](const std::optional<std::vector<std::string>>& children) {
        // An absent /networks is not "no networks": nothing is torn down on it.
        if (!children) return;
        on_worker("networks", [this, c = *children] { sync(c); });
    });
    log_.info("Network module started");
}

void NetworkModule::stop() {
    if (children_watch_) children_watch_->cancel();
    children_watch_.reset();
    if (upstream_ip_watch_) upstream_ip_watch_->cancel();
    upstream_ip_watch_.reset();
    if (worker_) worker_->stop();
    if (metadata_) {
        metadata_->stop();
        log_.info("Metadata API stopped (daemon stopping)");
    }
    metadata_.reset();
    if (pdns_ && pdns_->running()) {
        pid_t group = pdns_->pid();
        pdns_->stop(std::chrono::seconds(1));
        ::kill(-group, SIGKILL);  // the guardian's instance, should it outlive it
        log_.info("DNS aggregator: pdns_server stopped (daemon stopping)");
    }
    pdns_.reset();
    // Its thread ends here, not in a watch callback holding the last reference.
    if (dns_) dns_->stop();
    for (auto& [vni, e] : networks_) {
        if (e.lease_watch) e.lease_watch->cancel();
        for (auto& w : e.watches) w->cancel();
        for (auto& [k, w] : e.acl_watches) w->cancel();
        if (e.dnsmasq && e.dnsmasq->running()) {
            e.dnsmasq->stop();
            log_.info("Network {}: dnsmasq stopped (daemon stopping)", vni);
        }
    }
    networks_.clear();
    dns_.reset();
    for (auto& [name, vf] : vfs_)
        for (auto& w : vf.watches) w->cancel();
    vfs_.clear();
    vf_control_.reset();
    worker_.reset();
    firewall_.reset();
    nl_.reset();
}

std::map<std::string, std::string> NetworkModule::failed_networks() const {
    std::lock_guard g(failed_m_);
    return failed_;
}

std::map<std::string, std::string> NetworkModule::refused_firewalls() const {
    std::lock_guard g(failed_m_);
    return refused_fw_;
}

void NetworkModule::schedule(const std::string& vni, unsigned work) {
    {
        std::lock_guard g(pending_m_);
        unsigned& bits = pending_[vni];
        bool queued = bits != 0;
        bits |= work;
        if (queued) return;
    }
    on_worker("network " + vni, [this, vni] { run_scheduled(vni); });
}

void NetworkModule::run_scheduled(const std::string& vni) {
    unsigned bits;
    {
        // Taken before the work: an event from now on queues another pass.
        std::lock_guard g(pending_m_);
        bits = pending_[vni];
        pending_.erase(vni);
    }
    if (bits & work_links) return reconcile(vni);  // the firewall and DHCP too
    if (bits & work_firewall) refresh_firewall(vni);
    if (bits & work_dhcp) refresh_dhcp(vni);
}

void NetworkModule::watch_network(const std::string& vni, Entry& e) {
    // Each watch fires at once with the current value: the first pass
    // creates the links. Any key of the network redoes the network.
    auto links = [this, vni](const std::optional<std::string>&, const zk::Stat&) { schedule(vni, work_links); };
    for (const char* key : {"network.mtu", "network.type", "network.ip4.network", "network.ip4.gateway",
                            "network.ip6.network", "network.ip6.gateway", "network.ip4.dhcp", "network.ip4.dhcp_start",
                            "network.ip4.dhcp_end", "network.ip6.dhcp", "network.domain"})
        e.watches.push_back(zk_->watch_data(schema::path(key, {vni}), links));
    // The ACL lists (the firewall).
    auto acls = [this, vni](const std::optional<std::vector<std::string>>&) { schedule(vni, work_firewall); };
    for (const char* key : {"network.rule.in", "network.rule.out"})
        e.watches.push_back(zk_->watch_children(schema::path(key, {vni}), acls));
    // Its leases (dnsmasq's lease helper writes them): the DNS aggregator
    // transfers the zone at once.
    if (dns_)
        e.lease_watch = zk_->watch_children(schema::path("network.lease", {vni}),
                                            [dns = std::weak_ptr<DnsAggregator>(dns_),
                                             vni](const std::optional<std::vector<std::string>>&) {
            if (auto d = dns.lock()) d->poke(vni);
        });
    // The DHCP reservations.
    e.watches.push_back(zk_->watch_children(schema::path("network.reservation", {vni}),
                                            [this, vni](const std::optional<std::vector<std::string>>&) {
        schedule(vni, work_dhcp);
    }));
}

void NetworkModule::sync(const std::vector<std::string>& children) {
    for (const auto& vni : children) {
        if (networks_.count(vni)) continue;
        watch_network(vni, networks_[vni]);
    }
    for (auto it = networks_.begin(); it != networks_.end();) {
        if (std::find(children.begin(), children.end(), it->first) != children.end()) {
            ++it;
            continue;
        }
        remove(it->first, it->second);
        it = networks_.erase(it);
    }
    if (!orphans_checked_) {
        orphans_checked_ = true;
        remove_orphans(children);
    }
}

void NetworkModule::remove_orphans(const std::vector<std::string>& children) {
    // Only a successful read gets here (an absent /networks or a failed read
    // never calls sync), so a VNI missing from `children` is really gone.
    std::set<std::string> wanted(children.begin(), children.end());
    try {
        auto swept = remove_orphan_links(*nl_, {wanted, host_devices(), cluster_device_, bridge_device_});
        if (swept.removed.empty()) log_.debug("No links of deleted networks found");
        else log_.ok("Links of networks deleted while the daemon was down removed: {}", join(swept.removed, ", "));
        if (!swept.left.empty())
            log_.info("Links named like client networks but not made by PVC, left alone: {}", join(swept.left, ", "));
    } catch (const std::exception& ex) {
        log_.error("Removing links of deleted networks failed: {}", ex.what());
    }
    if (!firewall_) return;
    for (uint32_t vni : firewall_->networks_in_kernel()) {
        if (wanted.count(std::to_string(vni))) continue;
        try {
            firewall_->remove(vni);
            log_.ok("Firewall chains of network {} (deleted while the daemon was down) removed", vni);
        } catch (const std::exception& ex) {
            log_.error("Firewall chains of deleted network {}: removal refused: {}", vni, ex.what());
        }
    }
}

std::set<std::string> NetworkModule::host_devices() const {
    std::set<std::string> out;
    for (const auto& d : {cluster_device_, bridge_device_})
        if (d) out.insert(*d);
    for (const CoreBridge& b : host_.bridges) {
        out.insert(b.name);
        out.insert(b.device);
    }
    return out;
}

void NetworkModule::remove(const std::string& vni, Entry& e) {
    for (auto& w : e.watches) w->cancel();
    if (e.lease_watch) e.lease_watch->cancel();
    if (dns_) dns_->remove_network(vni);  // its domain goes from the database (on the router)
    for (auto& [k, w] : e.acl_watches) w->cancel();
    {
        std::lock_guard g(failed_m_);
        failed_.erase(vni);
        refused_fw_.erase(vni);
        dhcp_refused_.erase(vni);
        reservations_skipped_.erase(vni);
    }
    note_subnets(vni, std::nullopt);
    if (e.dnsmasq && e.dnsmasq->running()) {
        e.dnsmasq->stop();
        log_.ok("Network {}: dnsmasq stopped", vni);
    }
    e.dnsmasq.reset();
    std::error_code ec;
    std::filesystem::remove_all(dynamic_dir_ / "dnsmasq" / vni, ec);
    if (firewall_) {  // also chains an earlier run made
        try {
            firewall_->remove(static_cast<uint32_t>(std::stoul(vni)));
            log_.ok("Network {}: firewall chains removed", vni);
        } catch (const std::exception& ex) {
            log_.error("Network {}: removing its firewall chains was refused: {}", vni, ex.what());
        }
    }
    if (!e.applied) {
        log_.info("Network {} removed (it had no links on this node)", vni);
        return;
    }
    try {
        remove_links(*nl_, e.applied->base, e.applied->bridge);
        log_.ok("Network {} removed: {} and {} deleted", vni, e.applied->base, e.applied->bridge);
    } catch (const std::exception& ex) {
        log_.error("Network {}: removing its links failed: {}", vni, ex.what());
    }
}

void NetworkModule::fail(const std::string& vni, Entry& e, const std::string& why) {
    if (e.error != why) log_.error("Network {}: {}; its links are left as they are", vni, why);
    e.error = why;
    std::lock_guard g(failed_m_);
    failed_[vni] = why;
}

void NetworkModule::note_subnets(const std::string& vni, std::optional<NetworkSubnets> subnets) {
    auto it = subnets_.find(vni);
    if (subnets) {
        if (it != subnets_.end() && it->second == *subnets) return;
        subnets_[vni] = *subnets;
    } else {
        if (it == subnets_.end()) return;
        subnets_.erase(it);
    }
    // Only noticed: both networks keep their links, rules and DHCP as they
    // are (guests may already run on them).
    auto found = find_overlaps(subnets_);
    std::set<SubnetOverlap> now(found.begin(), found.end());
    for (const auto& o : now)
        if (!overlaps_.count(o))
            log_.warn("Networks {} ({}) and {} ({}) have overlapping subnets; both are kept as they are", o.vni_a,
                      o.subnet_a, o.vni_b, o.subnet_b);
    for (const auto& o : overlaps_)
        if (!now.count(o))
            log_.info("Networks {} ({}) and {} ({}) no longer overlap", o.vni_a, o.subnet_a, o.vni_b, o.subnet_b);
    overlaps_ = std::move(now);
    std::map<std::string, std::string> items;
    auto add = [&](const std::string& of, const std::string& own, const std::string& other, const std::string& theirs) {
        std::string& m = items[of];
        m += fmt::format("{}subnet {} overlaps network {}'s {}", m.empty() ? "" : "; ", own, other, theirs);
    };
    for (const auto& o : found) {
        add(o.vni_a, o.subnet_a, o.vni_b, o.subnet_b);
        add(o.vni_b, o.subnet_b, o.vni_a, o.subnet_a);
    }
    std::lock_guard g(failed_m_);
    overlapping_ = std::move(items);
}

unsigned NetworkModule::maximum_mtu(NetType type) {
    if (type == NetType::managed) {
        unsigned cluster = cluster_mtu_.value_or(0);
        if (!cluster) {
            auto l = nl_->link(*cluster_device_);
            if (!l) throw std::runtime_error("cluster device " + *cluster_device_ + " does not exist");
            cluster = l->mtu;
        }
        return cluster - vxlan_overhead;
    }
    if (bridge_mtu_) return *bridge_mtu_;
    auto l = nl_->link(*bridge_device_);
    if (!l) throw std::runtime_error("bridge device " + *bridge_device_ + " does not exist");
    return l->mtu;
}

void NetworkModule::hold(const std::string& link, const std::string& cidr, bool want) {
    try {
        auto l = nl_->link(link);
        if (!l) return;
        auto have = nl_->addresses(l->ifindex);
        bool held = std::find(have.begin(), have.end(), cidr) != have.end();
        if (want && !held) {
            nl_->add_address(l->ifindex, cidr);
            log_.ok("Address {} added to {}", cidr, link);
            if (cidr.find(':') == std::string::npos && link != "lo") {
                // Two replies 20 ms apart, as the reference's arping: the second from a timer, so
                // a takeover of many networks does not wait 20 ms for each.
                std::string ip = cidr.substr(0, cidr.find('/'));
                try {
                    send_arp_announcement(link, ip);
                    auto timer = std::make_shared<boost::asio::steady_timer>(executor_->io(), std::chrono::milliseconds(20));
                    // Sent from the event loop itself (a few non-blocking calls):
                    // nothing of the module is touched, it may be stopping.
                    timer->async_wait([log = log_, timer, link, ip, cidr](const boost::system::error_code& ec) {
                        if (ec) return;
                        try {
                            send_arp_announcement(link, ip);
                        } catch (const std::exception& e) {
                            log.warn("Gratuitous ARP for {} on {}: {}", cidr, link, e.what());
                        }
                    });
                } catch (const std::exception& e) {
                    log_.warn("Gratuitous ARP for {} on {}: {}", cidr, link, e.what());
                }
            }
        } else if (!want && held) {
            nl_->remove_address(l->ifindex, cidr);
            log_.ok("Address {} removed from {}", cidr, link);
        }
    } catch (const std::exception& e) {
        log_.error("Address {} on {}: {}", cidr, link, e.what());
    }
}

void NetworkModule::apply_router(TransitionPhase phase) {
    // One phase of a takeover / relinquish (docs/wire-contract.md §5.4): C-E the floating
    // addresses, F the gateways; B (relinquish) and G (takeover) dnsmasq, which
    // goes first when giving the role up and last when taking it (it binds the
    // gateways).
    for (const auto& f : floating_)
        if (f.phase == phase) hold(f.link, f.cidr, router_active_);
    if (phase == TransitionPhase::F)
        for (auto& [vni, e] : networks_) {
            if (!e.applied) continue;
            for (const auto& g : e.gateways) hold(e.applied->bridge, g, router_active_);
        }
    // Relinquish B: the DNS aggregator and the metadata API stop first, then
    // dnsmasq. Takeover G: dnsmasq, then the metadata API and the aggregator.
    if (phase == TransitionPhase::B && !router_active_) hold_router_services();
    if ((phase == TransitionPhase::B && !router_active_) || (phase == TransitionPhase::G && router_active_))
        for (auto& [vni, e] : networks_) hold_dnsmasq(vni, e);
    if (phase == TransitionPhase::G && router_active_) hold_router_services();
}

void NetworkModule::transition(Transition t, TransitionPhase phase, std::function<void()> done) {
    if (!worker_) return done();
    bool first = phase == (t == Transition::takeover ? TransitionPhase::C : TransitionPhase::B);
    worker_->post(fmt::format("{} phase {}", t == Transition::takeover ? "takeover" : "relinquish",
                              static_cast<char>(phase)),
                  [this, t, phase, first, done](std::stop_token stop) {
        if (!stop.stop_requested()) {
            if (first) {
                router_active_ = t == Transition::takeover;
                log_.info("Router role {}: {} addresses", router_active_ ? "taken over" : "relinquished",
                          router_active_ ? "adding" : "removing");
            }
            apply_router(phase);
        }
        done();
    });
}

void NetworkModule::contribute(KeepaliveReport& report) {
    // The first keepalive that finds this node no router removes floating
    // addresses a crash left (a deliberate deviation: the reference leaves
    // them until a reboot; a takeover queued before it makes it a no-op: the
    // worker runs them in order).
    if (worker_ && report.router_state != "primary" && report.router_state != "takeover" &&
        !floating_checked_.exchange(true))
        on_worker("floating address leftovers", [this] {
            if (router_active_) return;
            for (const auto& f : floating_) hold(f.link, f.cidr, false);
        });
    // Each keepalive has the worker look after the dnsmasq children (only
    // queued here: the keepalive never waits for it).
    if (worker_ && !supervise_queued_.exchange(true))
        on_worker("dnsmasq supervision", [this] {
            supervise_queued_ = false;
            supervise_dnsmasq();
            supervise_router_services();
        });
    // Every few keepalives the worker checks that our firewall rules are
    // still in the kernel (queued alike).
    if (worker_ && ++keepalives_ % firewall_check_keepalives == 0 && !firewall_check_queued_.exchange(true))
        on_worker("firewall check", [this] {
            firewall_check_queued_ = false;
            check_firewall();
        });
    // The node's health (README, "Health"): every refused or failed network,
    // every network whose firewall rules nft refused, whose DHCP settings
    // dnsmasq is not run with, whose reservations were skipped, or whose
    // subnet overlaps another's (computed when subnets change), from the
    // lists the worker keeps (a short lock, never held across work).
    {
        std::lock_guard g(failed_m_);
        for (const auto& [vni, why] : failed_)
            report.health_item("network " + vni, health_delta_per_problem, fmt::format("Network {}: {}", vni, why));
        for (const auto& [vni, why] : refused_fw_)
            report.health_item("firewall " + vni, health_delta_per_problem,
                               fmt::format("Network {}: firewall rules refused: {}", vni, why));
        for (const auto& [vni, why] : dhcp_refused_)
            report.health_item("dhcp " + vni, health_delta_per_problem, fmt::format("Network {}: {}", vni, why));
        for (const auto& [vni, why] : reservations_skipped_)
            report.health_item("reservations " + vni, health_delta_per_problem,
                               fmt::format("Network {}: reservations skipped: {}", vni, why));
        for (const auto& [vni, what] : overlapping_)
            report.health_item("overlap " + vni, health_delta_per_problem, fmt::format("Network {}: {}", vni, what));
        if (!pdns_problem_.empty())
            report.health_item("pdns", health_delta_per_problem, "DNS aggregator: " + pdns_problem_);
        if (!metadata_problem_.empty())
            report.health_item("metadata-api", health_delta_per_problem, "Metadata API: " + metadata_problem_);
    }
    // The router's databases (each read under its owner's short lock).
    if (dns_ && report.router_state == "primary")
        if (auto p = dns_->problem(); !p.empty())
            report.health_item("dns-aggregator", health_delta_per_problem, "DNS aggregator: " + p);
    std::shared_ptr<MetadataApi> metadata;
    {
        std::lock_guard g(failed_m_);
        metadata = metadata_view_;
    }
    if (metadata)
        if (auto m = metadata->problem(); !m.empty())
            report.health_item("metadata-database", health_delta_per_problem, "Metadata API: " + m);
    // /config/upstream_ip: written while the stored value differs (as the watch last saw
    // it), so a failed keepalive commit or another writer's value is put
    // right at a later keepalive.
    if (report.router_state != "primary" || !upstream_floating_) return;
    {
        std::lock_guard g(upstream_ip_m_);
        if (upstream_ip_stored_ == upstream_floating_) return;
    }
    report.write(schema::path("base.config.upstream_ip"), *upstream_floating_);
}

void NetworkModule::reconcile(const std::string& vni) {
    auto found = networks_.find(vni);
    if (found == networks_.end()) return;  // removed since
    Entry& e = found->second;
    zk::Stat mtu_stat;
    auto read = read_keys(vni, &mtu_stat);
    if (!read) return;
    NetworkKeys& keys = *read;

    ParsedNetwork parsed = parse_network(vni, keys);
    if (!parsed.network) {
        note_subnets(vni, std::nullopt);  // refused: its subnets are not compared
        return fail(vni, e, parsed.error);
    }
    const ClientNetwork& n = *parsed.network;
    if (n.type == NetType::managed) note_subnets(vni, NetworkSubnets{n.ip4_network, n.ip6_network});
    else note_subnets(vni, std::nullopt);
    const std::optional<std::string>& parent = n.type == NetType::managed ? cluster_device_ : bridge_device_;
    if (!parent)
        return fail(vni, e, n.type == NetType::managed
                                ? "no cluster device is configured for VXLAN"
                                : "a bridged network needs pvc.system.configuration.networking.bridge_device");
    try {
        std::optional<unsigned> current;
        if (auto br = nl_->link(n.bridge())) current = br->mtu;
        MtuDecision mtu = decide_mtu(n, maximum_mtu(n.type), current);
        if (!mtu.warning.empty()) log_.warn("Network {}: {}", vni, mtu.warning);
        LinkPlan plan = plan_links(n, *parent, mtu.mtu);
        ReconcileResult r = network::reconcile(*nl_, plan, host_devices());
        e.applied = plan;
        e.error.clear();
        {
            std::lock_guard g(failed_m_);
            failed_.erase(vni);
        }
        // Gateways: held exactly while router-active; a changed gateway's old
        // address goes, and one left by a crash goes when not router-active.
        std::vector<std::string> gateways = gateway_addresses(n);
        for (const auto& g : e.gateways)
            if (std::find(gateways.begin(), gateways.end(), g) == gateways.end()) hold(n.bridge(), g, false);
        for (const auto& g : gateways) hold(n.bridge(), g, router_active_);
        e.gateways = gateways;
        if (r.changes.empty()) log_.debug("Network {}: links in place, nothing changed", vni);
        else log_.ok("Network {} ({}): {}", vni, n.type == NetType::managed ? "managed" : "bridged", join(r.changes, ", "));
        apply_firewall(vni, e, n);
        apply_dhcp(vni, e, n, keys);
        // Written after the links: the watch fires again, finds the value
        // equal and changes nothing. Only over the value just read:
        // never re-create the key of a network being deleted, never
        // overwrite a client's newer value.
        if (mtu.write_back) {
            zk::Transaction tx(*zk_);
            tx.set(schema::path("network.mtu", {vni}), std::to_string(mtu.mtu), mtu_stat.version);
            if (auto st = tx.commit(); st != zk::Status::ok)
                log_.debug("Network {}: MTU not written back ({}): changed meanwhile", vni, zk::to_string(st));
        }
    } catch (const NetlinkError& ex) {
        if (ex.unsupported_kind())
            return fail(vni, e, fmt::format("this kernel cannot create {} links (802.1Q VLAN support missing): {}",
                                            n.type == NetType::managed ? "vxlan" : "vlan", ex.what()));
        fail(vni, e, ex.what());
    } catch (const std::exception& ex) {
        fail(vni, e, ex.what());
    }
}

}  // namespace pvc::network

namespace pvc::network {

std::optional<NetworkKeys> NetworkModule::read_keys(const std::string& vni, zk::Stat* mtu_stat) {
    NetworkKeys keys;
    auto root = zk_->get(schema::path("network.vni", {vni}));
    if (!root) return std::nullopt;  // being deleted: the children watch removes it
    keys[""] = *root;
    auto mtu_value = zk_->get(schema::path("network.mtu", {vni}), mtu_stat);
    auto nettype = zk_->get(schema::path("network.type", {vni}));
    if (!nettype || !mtu_value) {
        // Clients create and delete a network's keys together (one
        // transaction, a recursive delete): a missing key is a delete in
        // progress, or a creation not visible yet. The next event decides.
        log_.debug("Network {}: incomplete (no {} key yet or any more); nothing done", vni, nettype ? "mtu" : "nettype");
        return std::nullopt;
    }
    keys["nettype"] = *nettype;
    keys["mtu"] = *mtu_value;
    for (const char* k : {"ip4_network", "ip4_gateway", "ip6_network", "ip6_gateway", "dhcp4_flag", "dhcp4_start",
                          "dhcp4_end", "dhcp6_flag", "domain", "name_servers"})
        keys[k] = zk_->get(schema::path("network.vni", {vni}) + "/" + k).value_or("");
    return keys;
}

void NetworkModule::refresh_firewall(const std::string& vni) {
    auto found = networks_.find(vni);
    if (found == networks_.end() || !found->second.applied) return;  // removed, or no links (yet)
    auto keys = read_keys(vni, nullptr);
    if (!keys) return;
    ParsedNetwork parsed = parse_network(vni, *keys);
    if (!parsed.network) return;  // reconcile reports it
    apply_firewall(vni, found->second, *parsed.network);
}

void NetworkModule::apply_firewall(const std::string& vni, Entry& e, const ClientNetwork& n) {
    if (n.type != NetType::managed || !firewall_) return;  // bridged networks have none
    FirewallNetwork fw{n.vni, n.ip4_network, n.ip4_gateway, n.ip6_network, n.ip6_gateway, {}};
    std::set<std::string> seen;
    for (const char* dir : {"in", "out"}) {
        auto names = zk_->children(schema::path(dir == std::string("in") ? "network.rule.in" : "network.rule.out", {vni}));
        if (!names) continue;
        for (const auto& desc : *names) {
            Acl a{dir, desc, "", ""};
            // A rule not (yet) readable is left out for now: its watch brings it.
            auto rule = zk_->get(schema::path("rule.rule", {vni, dir, desc}));
            a.order = zk_->get(schema::path("rule.order", {vni, dir, desc})).value_or("");
            for (const char* k : {"rule", "order"}) {
                std::string key = std::string(dir) + "/" + desc + "/" + k;
                seen.insert(key);
                if (!e.acl_watches.count(key))
                    e.acl_watches[key] = zk_->watch_data(
                        schema::path(k == std::string("rule") ? "rule.rule" : "rule.order", {vni, dir, desc}),
                        [this, vni](const std::optional<std::string>&, const zk::Stat&) { schedule(vni, work_firewall); });
            }
            if (!rule) continue;
            a.rule = *rule;
            fw.acls.push_back(std::move(a));
        }
    }
    for (auto it = e.acl_watches.begin(); it != e.acl_watches.end();) {
        if (seen.count(it->first)) {
            ++it;
            continue;
        }
        it->second->cancel();
        it = e.acl_watches.erase(it);
    }
    auto out = firewall_->apply(fw);
    // A refusal may be nft missing our table or chains (removed from
    // outside); a change may have gone into chains no longer dispatched.
    if ((!out.ok || out.changed) && !firewall_restoring_ && !firewall_->intact()) return restore_firewall();
    if (out.ok) {
        if (!e.firewall_error.empty()) log_.ok("Network {}: firewall rules accepted again", vni);
        else if (out.changed) log_.ok("Network {}: firewall rules in place ({} ACLs)", vni, fw.acls.size());
        e.firewall_error.clear();
        std::lock_guard g(failed_m_);
        refused_fw_.erase(vni);
        return;
    }
    std::string why = out.acl.empty() ? out.error : fmt::format("ACL '{}': {}", out.acl, out.error);
    if (why != e.firewall_error)
        log_.error("Network {}: firewall rules refused, its previous rules stay (other networks are unaffected): {}",
                   vni, why);
    e.firewall_error = why;
    std::lock_guard g(failed_m_);
    refused_fw_[vni] = why;
}

void NetworkModule::check_firewall() {
    if (!firewall_ || firewall_->intact()) return;
    restore_firewall();
}

void NetworkModule::restore_firewall() {
    // Logged once per loss; while nft refuses the base, later checks retry quietly.
    const bool first = !firewall_lost_;
    firewall_lost_ = true;
    if (first)
        log_.warn("Firewall: our rules are no longer in the kernel (removed from outside: `nft flush ruleset`, a "
                  "reload of nftables.service?); applying the base and every network's rules again");
    try {
        firewall_->apply_base();
    } catch (const std::exception& ex) {
        if (first) log_.error("Firewall: {}; tried again every {} keepalives", ex.what(), firewall_check_keepalives);
        return;
    }
    firewall_restoring_ = true;
    for (auto& [vni, e] : networks_) {
        if (!e.applied) continue;  // no links (yet): its reconcile applies its rules
        try {
            refresh_firewall(vni);  // managed ones only
        } catch (const std::exception& ex) {
            log_.error("Network {}: its firewall rules could not be applied again: {}", vni, ex.what());
        }
    }
    firewall_restoring_ = false;
    firewall_lost_ = false;
    log_.ok("Firewall: the base and every network's rules applied again");
}

}  // namespace pvc::network

namespace pvc::network {

void NetworkModule::apply_dhcp(const std::string& vni, Entry& e, const ClientNetwork& n, const NetworkKeys& keys) {
    if (n.type != NetType::managed) {
        std::lock_guard g(failed_m_);
        dhcp_refused_.erase(vni);
        reservations_skipped_.erase(vni);
        return;
    }
    DhcpNetwork d;
    d.vni = n.vni;
    d.domain = key_value(keys, "domain").value_or("");
    d.gw4 = n.ip4_gateway;
    d.gw6 = n.ip6_gateway;
    d.ipv6 = flag(keys, "dhcp6_flag") && n.ip6_network.has_value();
    d.dhcp4 = flag(keys, "dhcp4_flag");
    d.dhcp4_start = key_value(keys, "dhcp4_start");
    d.dhcp4_end = key_value(keys, "dhcp4_end");
    // Values that reach dnsmasq's arguments (never a shell): a domain of
    // DNS characters only (',' or '/' would change an option's meaning),
    // range ends that are IPv4 addresses.
    std::string problem;
    if (d.domain.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") !=
        std::string::npos)
        problem = fmt::format("domain '{}' is not a DNS name: dnsmasq is not run for it", d.domain);
    for (const auto* end : {&d.dhcp4_start, &d.dhcp4_end})
        if (*end && reservation_problem({"00:00:00:00:00:00", **end}) != "")
            problem = fmt::format("DHCPv4 range end '{}' is not an IPv4 address: dnsmasq is not run for it", **end);
    if (problem != e.dhcp_problem && !problem.empty()) log_.error("Network {}: {}", vni, problem);
    e.dhcp_problem = problem;
    {
        std::lock_guard g(failed_m_);
        if (problem.empty()) dhcp_refused_.erase(vni);
        else dhcp_refused_[vni] = problem;
    }
    if (!problem.empty()) {
        e.dhcp.reset();
    } else {
        e.dhcp = d;
    }
    note_dns_zone(vni, e.dhcp ? &*e.dhcp : nullptr, &keys);
    sync_reservations(vni, e);
    hold_dnsmasq(vni, e);
}

void NetworkModule::refresh_dhcp(const std::string& vni) {
    auto found = networks_.find(vni);
    if (found == networks_.end() || !found->second.applied) return;
    sync_reservations(vni, found->second);
}

void NetworkModule::sync_reservations(const std::string& vni, Entry& e) {
    if (!e.applied || e.applied->type != NetType::managed) return;
    std::vector<Reservation> wanted;
    auto macs = zk_->children(schema::path("network.reservation", {vni}));
    if (!macs) return;  // not readable now: the files stay as they are
    std::string skipped;
    for (const auto& mac : *macs) {
        auto ip = zk_->get(schema::path("reservation.ip", {vni, mac}));
        if (!ip) continue;
        Reservation r{mac, *ip};
        if (std::string why = reservation_problem(r); !why.empty()) {
            log_.warn("Network {}: reservation {} skipped: {}", vni, mac, why);
            skipped += fmt::format("{}{}: {}", skipped.empty() ? "" : "; ", mac, why);
            continue;
        }
        wanted.push_back(r);
    }
    {
        std::lock_guard g(failed_m_);
        if (skipped.empty()) reservations_skipped_.erase(vni);
        else reservations_skipped_[vni] = skipped;
    }
    try {
        bool hup = sync_host_files(dynamic_dir_ / "dnsmasq" / vni, wanted);
        if (hup && e.dnsmasq && e.dnsmasq->running()) {
            e.dnsmasq->reload();
            log_.info("Network {}: reservations changed, dnsmasq reloaded", vni);
        }
    } catch (const std::exception& ex) {
        log_.error("Network {}: reservation files: {}", vni, ex.what());
    }
}

void NetworkModule::hold_dnsmasq(const std::string& vni, Entry& e) {
    bool want = router_active_ && e.applied && e.dhcp && wants_dnsmasq(*e.dhcp);
    if (!want) {
        if (e.dnsmasq && e.dnsmasq->running()) {
            e.dnsmasq->stop();
            log_.ok("Network {}: dnsmasq stopped", vni);
        }
        e.dnsmasq.reset();
        return;
    }
    std::string why_not;
    auto args = dnsmasq_arguments(*e.dhcp, {lease_helper_, dynamic_dir_ / "dnsmasq" / vni}, &why_not);
    if (!why_not.empty()) log_.warn("Network {}: {}", vni, why_not);
    if (e.dnsmasq && e.dnsmasq->args() == args) return;
    if (e.dnsmasq) {
        e.dnsmasq->stop();
        log_.info("Network {}: its DHCP/DNS settings changed: dnsmasq restarted", vni);
    }
    std::vector<std::string> env = {"DNSMASQ_BRIDGE_INTERFACE=vmbr" + vni, "PVCD_CONFIG_FILE=" + lease_config_.string()};
    e.dnsmasq = std::make_unique<Dnsmasq>(dnsmasq_exe_, std::move(args), std::move(env),
                                          log_dir_ / "dnsmasq" / ("dnsmasq-" + vni + ".log"));
    auto ev = e.dnsmasq->supervise();
    if (ev.kind == Dnsmasq::Event::started) log_.ok("Network {}: dnsmasq started ({})", vni, ev.what);
    else log_.error("Network {}: dnsmasq did not start: {}; next try in {} ms", vni, ev.what, ev.next_try.count());
}

void NetworkModule::supervise_dnsmasq() {
    for (auto& [vni, e] : networks_) {
        if (!e.dnsmasq) continue;
        auto ev = e.dnsmasq->supervise();
        switch (ev.kind) {
        case Dnsmasq::Event::none: break;
        case Dnsmasq::Event::started: log_.ok("Network {}: dnsmasq restarted ({})", vni, ev.what); break;
        case Dnsmasq::Event::exited:
            log_.warn("Network {}: dnsmasq exited ({}); restarting in {} ms", vni, ev.what, ev.next_try.count());
            break;
        case Dnsmasq::Event::start_failed:
            log_.error("Network {}: dnsmasq did not start: {}; next try in {} ms", vni, ev.what, ev.next_try.count());
            break;
        }
    }
}

}  // namespace pvc::network

namespace pvc::network {

void NetworkModule::start_sriov() {
    try {
        vf_control_ = netlink_vf_control();
        SriovSysfs sys;
        auto reg = register_sriov(*zk_, node_, sriov_devices_, sys, *vf_control_);
        for (const auto& line : reg.log) {
            if (line.rfind("ok: ", 0) == 0) log_.ok("{}", line.substr(4));
            else if (line.rfind("error: ", 0) == 0) log_.error("{}", line.substr(7));
            else log_.warn("{}", line.substr(line.find(' ') + 1));
        }
        for (const auto& name : reg.vfs) {
            auto pf = zk_->get(schema::path("sriov_vf.pf", {node_, name}));
            if (!pf || name.size() <= pf->size() + 1) continue;
            Vf& vf = vfs_[name];
            vf.pf = *pf;
            vf.index = static_cast<uint32_t>(std::stoul(name.substr(pf->size() + 1)));
            // The VF netdev's MTU (no up; absent when bound to vfio).
            if (auto mtu = zk_->get(schema::path("sriov_vf.mtu", {node_, name}))) {
                try {
                    if (!vf_control_->set_mtu(name, static_cast<unsigned>(std::stoul(*mtu))))
                        log_.debug("SR-IOV VF {}: no netdev (bound to vfio?): MTU not set", name);
                } catch (const std::exception& ex) {
                    log_.warn("SR-IOV VF {}: MTU '{}': {}", name, *mtu, ex.what());
                }
            }
            // Any config key: the whole configuration again, in one request
            // (the first calls, at once, are the start's apply).
            auto changed = [this, name](const std::optional<std::string>&, const zk::Stat&) {
                {
                    std::lock_guard g(pending_m_);
                    if (!vf_pending_.insert(name).second) return;
                }
                on_worker("VF " + name, [this, name] {
                    {
                        std::lock_guard g(pending_m_);
                        vf_pending_.erase(name);
                    }
                    apply_vf(name);
                });
            };
            for (const char* k : {"vlan_id", "vlan_qos", "tx_rate_min", "tx_rate_max", "spoof_check", "link_state",
                                  "trust", "query_rss"})
                vf.watches.push_back(
                    zk_->watch_data(schema::path(std::string("sriov_vf.config.") + k, {node_, name}), changed));
        }
    } catch (const std::exception& ex) {
        log_.error("SR-IOV: {}", ex.what());
    }
}

void NetworkModule::apply_vf(const std::string& name) {
    auto it = vfs_.find(name);
    if (it == vfs_.end() || !vf_control_) return;
    Vf& vf = it->second;
    std::vector<std::string> warnings;
    try {
        auto sent = apply_vf_config(*zk_, node_, name, vf.pf, vf.index, *vf_control_, vf.applied, warnings);
        for (const auto& w : warnings) log_.warn("SR-IOV VF {}: {}", name, w);
        if (!sent) return;
        vf.applied = sent;
        const VfConfig& c = *sent;
        log_.ok("SR-IOV VF {}: vlan {} qos {}, tx rate {}-{}, spoof check {}, link state {}, trust {}, query_rss {}", name,
                c.vlan_id, c.vlan_qos, c.tx_rate_min, c.tx_rate_max, c.spoof_check, c.link_state, c.trust, c.query_rss);
    } catch (const std::exception& ex) {
        log_.error("SR-IOV VF {}: configuration refused: {}", name, ex.what());
    }
}

}  // namespace pvc::network
