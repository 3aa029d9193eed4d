// The network module (modules/network/README.md): host networking before ZooKeeper is
// reached, then the links of every client network under /networks on this
// node, kept in step with ZooKeeper. Loaded when
// pvc.functions.enable_networking is on.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "pvc/module.hpp"

#include "client_network.hpp"
#include "dns_aggregator.hpp"
#include "dnsmasq.hpp"
#include "firewall.hpp"
#include "host_network.hpp"
#include "metadata_api.hpp"
#include "netlink.hpp"
#include "settings.hpp"
#include "sriov.hpp"

namespace pvc::network {

class NetworkModule final : public Module {
public:
    NetworkModule();
    ~NetworkModule() override;
    std::string_view name() const override { return "network"; }
    // Reads and validates the module's keys (Settings); the rest of the
    // module runs with what it read.
    void configure(const Config& cfg, ConfigProblems& problems) override;
    void flat_keys(nlohmann::json& j) const override { settings_.flat_keys(j); }
    // The coordinators' database passwords.
    void secrets(std::vector<std::string>& out) const override;
    void prepare_host(const Config& cfg, const Logger& log) override;
    void start(NodeContext& ctx) override;
    void stop() override;
    // Router role: floating and gateway addresses follow the
    // takeover/relinquish; `done` once the kernel holds (or dropped) them.
    void transition(Transition t, TransitionPhase phase, std::function<void()> done) override;
    // On the primary: /config/upstream_ip.
    void contribute(KeepaliveReport& report) override;

    // What each refused network and each refused firewall costs the node's
    // health (KeepaliveReport::health; a plugin's "degraded" figure).
    static constexpr int health_delta_per_problem = 10;

    // Networks whose keys were refused or whose links failed, with the reason
    // (for the log and the node's health).
    std::map<std::string, std::string> failed_networks() const;
    // Networks whose firewall rules nft refused (their previous rules stay),
    // with the ACL blamed and nft's message.
    std::map<std::string, std::string> refused_firewalls() const;

private:
    struct Entry {
        std::vector<std::shared_ptr<zk::Watch>> watches;  // the network's keys, its ACL lists
        std::map<std::string, std::shared_ptr<zk::Watch>> acl_watches;  // "<dir>/<acl>/<rule|order>"
        std::optional<LinkPlan> applied;  // the links this node made for it
        std::string error;                // the last reason it was refused
        std::string firewall_error;       // the last reason its rules were refused
        std::vector<std::string> gateways;  // its gateway addresses as last read
        std::optional<DhcpNetwork> dhcp;  // its dnsmasq's inputs as last read (managed, valid)
        std::unique_ptr<Dnsmasq> dnsmasq; // router-active only
        std::shared_ptr<zk::Watch> lease_watch;  // coordinators: its leases poke the DNS aggregator
        std::string dhcp_problem;         // the last thing said about its DHCP set-up
    };
    // What a watch asks the worker to redo for a network; coalesced: a burst
    // of events is one pass over the state read at that time.
    enum Work : unsigned { work_links = 1, work_firewall = 2, work_dhcp = 4 };
    void schedule(const std::string& vni, unsigned work);
    void run_scheduled(const std::string& vni);
    void watch_network(const std::string& vni, Entry& e);
    // The network's keys as read now (nullopt: not all there, e.g. being deleted).
    std::optional<NetworkKeys> read_keys(const std::string& vni, zk::Stat* mtu_stat);
    void apply_firewall(const std::string& vni, Entry& e, const ClientNetwork& n);
    void refresh_firewall(const std::string& vni);
    // Our rules removed from outside (`nft flush ruleset`, a reload of
    // nftables.service): the base and every network's rules applied again.
    // Checked after a change nft refused or made, and every
    // firewall_check_keepalives keepalives (queued, on the worker).
    void check_firewall();
    void restore_firewall();
    static constexpr unsigned firewall_check_keepalives = 3;
    // DHCP: the network's reservation files (every node), and its dnsmasq
    // held exactly while router-active (restarted when its arguments change).
    void apply_dhcp(const std::string& vni, Entry& e, const ClientNetwork& n, const NetworkKeys& keys);
    void refresh_dhcp(const std::string& vni);
    void sync_reservations(const std::string& vni, Entry& e);
    void hold_dnsmasq(const std::string& vni, Entry& e);
    // Reaps and restarts (with backoff) dnsmasq instances that died.
    void supervise_dnsmasq();
    // Coordinators: the DNS aggregator (pdns_server, a supervised child, and
    // the database side on its own thread) and the metadata API, held
    // exactly while router-active (started in phase G, stopped in B), and
    // supervised at each keepalive like dnsmasq.
    void hold_router_services();
    void supervise_router_services();
    void note_dns_zone(const std::string& vni, const DhcpNetwork* d, const NetworkKeys* keys);
    // SR-IOV: registration, then each VF's configuration as ZooKeeper says.
    void start_sriov();
    void apply_vf(const std::string& vf);
    // Everything below runs on the worker (one thread: serialised).
    void sync(const std::vector<std::string>& children);
    // Once, on the first /networks read: links of networks deleted while
    // the daemon was down (their removal had no chance to run).
    void remove_orphans(const std::vector<std::string>& children);
    // The host's configured devices and their bridges: never a client
    // network's link, never removed.
    std::set<std::string> host_devices() const;
    void reconcile(const std::string& vni);
    void remove(const std::string& vni, Entry& e);
    void fail(const std::string& vni, Entry& e, const std::string& why);
    // The network's accepted subnets (nullopt: none to compare: removed,
    // refused, bridged); when they differ from the last ones, the overlaps
    // are computed again (README, "Health").
    void note_subnets(const std::string& vni, std::optional<NetworkSubnets> subnets);
    unsigned maximum_mtu(NetType type);
    // Makes `link` hold `cidr` (with gratuitous ARP for IPv4) or not.
    void hold(const std::string& link, const std::string& cidr, bool want);
    void apply_router(TransitionPhase phase);
    template <class Fn>
    void on_worker(std::string what, Fn fn);

    Settings settings_;
    HostPlan host_;
    std::optional<std::string> cluster_device_, bridge_device_;
    std::optional<unsigned> cluster_mtu_, bridge_mtu_;
    struct Floating {
        std::string link, cidr;
        TransitionPhase phase;  // the hand-over phase that moves it
    };
    std::vector<Floating> floating_;                              // in takeover order
    std::optional<std::string> upstream_floating_;                // as configured, for /config/upstream_ip
    std::string node_;
    bool router_active_ = false;                                  // worker only
    bool orphans_checked_ = false;                                // worker only
    std::mutex upstream_ip_m_;
    std::optional<std::string> upstream_ip_stored_;               // /config/upstream_ip as last seen (nullopt: absent, not seen yet)
    std::shared_ptr<zk::Watch> upstream_ip_watch_;

    Logger log_;
    Executor* executor_ = nullptr;            // its io_context times the second ARP reply
    std::shared_ptr<zk::Session> zk_;
    std::unique_ptr<Netlink> nl_;
    std::map<std::string, Entry> networks_;
    std::filesystem::path dynamic_dir_, log_dir_;
    std::vector<std::string> coordinators_;
    std::filesystem::path dnsmasq_exe_ = "/usr/sbin/dnsmasq";
    std::filesystem::path lease_helper_;      // beside the module
    std::filesystem::path lease_config_;      // what PVCD_CONFIG_FILE names for the helper
    std::atomic<bool> supervise_queued_{false};
    std::atomic<bool> floating_checked_{false};  // leftovers of a crash looked for
    bool sriov_ = false;
    std::vector<SriovDevice> sriov_devices_;
    std::unique_ptr<VfControl> vf_control_;                       // worker only
    struct Vf {
        std::string pf;
        uint32_t index = 0;
        std::optional<VfConfig> applied;
        std::vector<std::shared_ptr<zk::Watch>> watches;
    };
    std::map<std::string, Vf> vfs_;                               // worker only
    std::set<std::string> vf_pending_;                            // under pending_m_
    std::unique_ptr<Firewall> firewall_;                          // worker only; null if nft is unusable
    bool firewall_lost_ = false;                                  // worker only: missing, not put back yet
    bool firewall_restoring_ = false;                             // worker only
    std::atomic<unsigned> keepalives_{0};
    std::atomic<bool> firewall_check_queued_{false};
    std::mutex pending_m_;
    std::map<std::string, unsigned> pending_;                     // VNI -> Work bits queued
    mutable std::mutex failed_m_;
    std::map<std::string, std::string> failed_;
    std::map<std::string, std::string> refused_fw_;
    std::map<std::string, std::string> dhcp_refused_;  // DHCP settings dnsmasq is not run with
    std::map<std::string, std::string> reservations_skipped_;  // "<mac>: <why>; ..."
    std::map<std::string, std::string> overlapping_;  // "subnet <a> overlaps network <b>'s <b's>; ..."
    std::map<std::string, NetworkSubnets> subnets_;   // worker only: accepted managed networks' subnets
    std::string pdns_problem_;                        // under failed_m_: pdns_server not running
    std::string metadata_problem_;                    // under failed_m_: the metadata API not listening
    bool coordinator_ = false;
    std::filesystem::path pdns_exe_ = "/usr/sbin/pdns_server";
    std::shared_ptr<DnsAggregator> dns_;              // coordinators; its own thread (watches hold weak references)
    std::unique_ptr<Dnsmasq> pdns_;                   // worker only: pdns_server (a supervised child like dnsmasq)
    std::shared_ptr<MetadataApi> metadata_;           // worker only; its own threads
    std::shared_ptr<MetadataApi> metadata_view_;      // under failed_m_: the same, for contribute()
    std::set<SubnetOverlap> overlaps_;                // worker only: as last logged
    std::shared_ptr<zk::Watch> children_watch_;
    std::unique_ptr<ModulePool> worker_;  // last: stopped (joined) first
};

}  // namespace pvc::network
