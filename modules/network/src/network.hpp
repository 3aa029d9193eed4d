// The network module (network.md): host networking before ZooKeeper is
// reached, then the links of every client network under /networks on this
// node, kept in step with ZooKeeper. Loaded when
// pvc.functions.enable_networking is on.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "pvc/module.hpp"

#include "client_network.hpp"
#include "host_network.hpp"
#include "netlink.hpp"

namespace pvc::network {

class NetworkModule final : public Module {
public:
    NetworkModule();
    ~NetworkModule() override;
    std::string_view name() const override { return "network"; }
    void configure(const Config& cfg, ConfigProblems& problems) override;
    void prepare_host(const Config& cfg, const Logger& log) override;
    void start(NodeContext& ctx) override;
    void stop() override;
    // Router role (§6.2, §8): floating and gateway addresses follow the
    // takeover/relinquish; `done` once the kernel holds (or dropped) them.
    void transition(Transition t, std::function<void()> done) override;
    // On the primary: /config/upstream_ip (§8.1).
    void contribute(KeepaliveReport& report) override;

    // Networks whose keys were refused or whose links failed, with the reason
    // (for the log, and what the module will report in its health).
    std::map<std::string, std::string> failed_networks() const;

private:
    struct Entry {
        std::shared_ptr<zk::Watch> mtu_watch;
        std::optional<LinkPlan> applied;  // the links this node made for it
        std::string error;                // the last reason it was refused
        std::vector<std::string> gateways;  // its gateway addresses as last read
    };
    // Everything below runs on the worker (one thread: serialised).
    void sync(const std::vector<std::string>& children);
    // Once, on the first /networks read: links of networks deleted while
    // the daemon was down (§5.5 had no chance to run for them).
    void remove_orphans(const std::vector<std::string>& children);
    void reconcile(const std::string& vni);
    void remove(const std::string& vni, Entry& e);
    void fail(const std::string& vni, Entry& e, const std::string& why);
    unsigned maximum_mtu(NetType type);
    // Makes `link` hold `cidr` (with gratuitous ARP for IPv4) or not.
    void hold(const std::string& link, const std::string& cidr, bool want);
    void apply_router();
    template <class Fn>
    void on_worker(std::string what, Fn fn);

    HostPlan host_;
    std::optional<std::string> cluster_device_, bridge_device_;
    std::optional<unsigned> cluster_mtu_, bridge_mtu_;
    std::vector<std::pair<std::string, std::string>> floating_;  // (link, cidr) in takeover order
    std::optional<std::string> upstream_floating_;                // as configured, for /config/upstream_ip
    std::string node_;
    bool router_active_ = false;                                  // worker only
    bool orphans_checked_ = false;                                // worker only
    std::atomic<bool> upstream_ip_written_{false};

    Logger log_;
    std::shared_ptr<zk::Session> zk_;
    std::unique_ptr<Netlink> nl_;
    std::map<std::string, Entry> networks_;
    mutable std::mutex failed_m_;
    std::map<std::string, std::string> failed_;
    std::shared_ptr<zk::Watch> children_watch_;
    std::unique_ptr<ModulePool> worker_;  // last: stopped (joined) first
};

}  // namespace pvc::network
