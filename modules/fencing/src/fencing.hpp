// The fencing module (modules/fencing/README.md): on coordinators, the
// dead-node scan and fence jobs (Fencer); on every node with
// suicide_intervals > 0, self-fencing (SelfFence). Served flag: "always".
#pragma once

#include <memory>
#include <mutex>
#include <thread>

#include "fencer.hpp"
#include "ipmi.hpp"
#include "pvc/module.hpp"
#include "pvc/services/rbd_locks.hpp"
#include "self_fence.hpp"
#include "settings.hpp"

namespace pvc::fencing {

// A fence job's settings: the core's keys (keepalive interval, coordinators)
// and the module's own.
FenceSettings settings_from(const Config& cfg, const Settings& own);

class FencingModule final : public Module {
public:
    ~FencingModule() override;
    std::string_view name() const override { return "fencing"; }
    // Reads the module's keys (Settings); start() runs with what it read.
    void configure(const Config& config, ConfigProblems& problems) override;
    void flat_keys(nlohmann::json& j) const override { settings_.flat_keys(j); }
    // A new node's node.ipmi.* (this node's BMC); start() writes them again
    // on every start, as the reference's registration does.
    void registration(std::vector<zk::KeyValue>& values) const override;
    void secrets(std::vector<std::string>& out) const override { out.push_back(settings_.ipmi_password); }
    void start(NodeContext& ctx) override;
    void stop() override;

private:
    // Core signals cannot unsubscribe: they reach the module through this,
    // emptied by stop().
    struct Target {
        std::mutex m;
        Fencer* fencer = nullptr;
        SelfFence* self_fence = nullptr;
    };
    // This node's BMC in ZooKeeper (every start), then the check that it
    // answers, on its own thread (ipmitool, bounded): only a warning can
    // come of it. Joined by stop().
    void register_own_bmc(NodeContext& ctx);
    void check_own_bmc(const Logger& log);

    Settings settings_;
    std::string me_;  // this node's name in ZooKeeper (its hostname)
    std::thread own_check_;
    std::shared_ptr<Target> target_ = std::make_shared<Target>();
    Subscription tick_sub_, state_sub_;
    std::unique_ptr<Ipmi> ipmi_;
    std::unique_ptr<services::RbdLocks> locks_;
    std::unique_ptr<Fencer> fencer_;
    std::unique_ptr<SelfFence> self_fence_;
};

}  // namespace pvc::fencing
