// Power loss of a node with running guests (fencing, docs/wire-contract.md §5.7): three
// coordinators, each with a lab BMC (tools/lab/bmc.sh). The test cuts hv3's
// power through its BMC as an operator's ipmitool would: hv3's pvcnoded,
// libvirtd and both guests are SIGKILLed at once. Keepalive 1 s × 3 intervals,
// no saving throws, successful_fence=migrate. Then:
//   exactly one fence job (hv1 and hv2 both scan; the write lock on hv3's
//   daemonstate lets one through), daemonstate run → dead → fenced, domainstate
//   fence-flush → flushed, both guests `start` on the survivors and RUNNING in
//   their libvirtd (one each: recovery books each VM it places), never running
//   on two nodes; the fence job powers hv3 on again, it registers and reaches
//   `run` with its VMs elsewhere; `ready` (what `pvc node ready` writes) brings
//   them home, live.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "lab.hpp"
#include "pvc/schema.hpp"

namespace {

using namespace std::chrono_literals;
using pvc::e2e::Client;
using pvc::e2e::contains_word;
using pvc::e2e::Lab;
using pvc::e2e::NodeView;
using pvc::e2e::wait_for;
using pvc::schema::path;
using Clock = std::chrono::steady_clock;

constexpr int keepalive_s = 1;
constexpr int fence_intervals = 3;
constexpr int dead_node = 3;
const std::vector<int> all_nodes{1, 2, 3};

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

size_t count(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + what.size())) ++n;
    return n;
}

// Every value a key takes, with its ZooKeeper version and when the test saw it.
class KeyHistory {
public:
    KeyHistory(pvc::zk::Session& zk, const std::string& key) {
        watch_ = zk.watch_data(key, [this](const std::optional<std::string>& v, const pvc::zk::Stat& st) {
            std::lock_guard g(m_);
            if (!seen_.empty() && seen_.back().version == st.version) return;
            seen_.push_back({v.value_or("<absent>"), st.version, Clock::now()});
        });
    }
    struct Entry {
        std::string value;
        int32_t version;
        Clock::time_point at;
    };
    std::vector<Entry> entries() const {
        std::lock_guard g(m_);
        return seen_;
    }
    // The first entry with `value` at or after index `from`; -1 if none.
    int find(const std::string& value, int from = 0) const {
        std::lock_guard g(m_);
        for (int i = from; i < static_cast<int>(seen_.size()); ++i)
            if (seen_[i].value == value) return i;
        return -1;
    }
    std::string text() const {
        std::lock_guard g(m_);
        std::string out;
        for (auto& e : seen_) out += e.value + "(v" + std::to_string(e.version) + ") ";
        return out;
    }

private:
    mutable std::mutex m_;
    std::vector<Entry> seen_;
    std::shared_ptr<pvc::zk::Watch> watch_;
};

// When hv3's keepalive znode last changed (polled every 10 ms by its mzxid).
class KeepaliveTracker {
public:
    KeepaliveTracker(std::shared_ptr<pvc::zk::Session> zk, const std::string& node)
        : thread_([zk, key = path("node.keepalive", {node}), this](std::stop_token st) {
              int64_t last = -1;
              while (!st.stop_requested()) {
                  pvc::zk::Stat stat;
                  try {
                      if (zk->exists(key, &stat) && stat.mzxid != last) {
                          last = stat.mzxid;
                          std::lock_guard g(m_);
                          changes_.push_back(Clock::now());
                      }
                  } catch (const std::exception&) {
                  }
                  std::this_thread::sleep_for(10ms);
              }
          }) {}
    // The last change seen before `t`.
    std::optional<Clock::time_point> last_before(Clock::time_point t) const {
        std::lock_guard g(m_);
        std::optional<Clock::time_point> out;
        for (auto c : changes_)
            if (c < t) out = c;
        return out;
    }

private:
    mutable std::mutex m_;
    std::vector<Clock::time_point> changes_;
    std::jthread thread_;
};

// Polls every node's libvirtd every 10 ms: a guest RUNNING on two nodes at
// once is counted. A node whose libvirtd is gone (power cut) is reconnected
// when it is back.
class TwiceRunningWatch {
public:
    TwiceRunningWatch(const Lab& lab, std::vector<std::string> uuids)
        : thread_([&lab, uuids = std::move(uuids), this](std::stop_token st) {
              std::map<int, std::unique_ptr<NodeView>> views;
              std::map<int, Clock::time_point> retry;
              std::map<std::string, int> overlap;
              while (!st.stop_requested()) {
                  for (int n : all_nodes) {
                      auto& v = views[n];
                      if (v && !v->connected()) v.reset();
                      if (!v && Clock::now() >= retry[n]) {
                          try {
                              v = std::make_unique<NodeView>(lab.libvirt_uri(n));
                          } catch (const std::exception&) {
                              retry[n] = Clock::now() + 200ms;
                          }
                      }
                  }
                  // A live migration's target runs only after its source has
                  // paused, so reading the nodes in one order can see both
                  // RUNNING; a second pass in the reverse order reads the
                  // target first: both RUNNING again is a real overlap.
                  auto running_on = [&](const std::string& uuid, bool reverse, std::string& where) {
                      int running = 0;
                      for (size_t i = 0; i < all_nodes.size(); ++i) {
                          int n = all_nodes[reverse ? all_nodes.size() - 1 - i : i];
                          if (views[n] && views[n]->running(uuid)) {
                              ++running;
                              where += Lab::node_name(n) + " ";
                          }
                      }
                      return running;
                  };
                  // libvirt marks a migration's source paused only after QEMU's
                  // STOP event is processed, so for a few milliseconds both ends
                  // can read RUNNING in either order. A guest that really runs
                  // twice (a fenced node's guest restarted while it still runs)
                  // does so for seconds: count an overlap seen in 5 samples in a
                  // row (50 ms or more).
                  for (const auto& uuid : uuids) {
                      std::string where;
                      if (running_on(uuid, false, where) > 1 && running_on(uuid, true, where) > 1) {
                          if (++overlap[uuid] == 5) {
                              std::lock_guard g(m_);
                              ++twice_;
                              if (first_.empty()) first_ = uuid + " on " + where;
                          }
                      } else {
                          overlap[uuid] = 0;
                      }
                  }
                  ++samples_;
                  std::this_thread::sleep_for(10ms);
              }
          }) {}
    int twice() const {
        std::lock_guard g(m_);
        return twice_;
    }
    std::string first() const {
        std::lock_guard g(m_);
        return first_;
    }
    int samples() const { return samples_; }

private:
    mutable std::mutex m_;
    int twice_ = 0;
    std::string first_;
    std::atomic<int> samples_{0};
    std::jthread thread_;
};

class FencingPowerLoss : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        try {
            pvc::e2e::LabOptions o;
            o.nodes = all_nodes;
            o.vm_shutdown_timeout = 3;
            o.keepalive_interval = keepalive_s;
            o.fencing = true;
            o.coordinators = all_nodes;
            o.fence_intervals = fence_intervals;
            o.saving_throws = 0;
            o.successful_fence = "migrate";
            lab_ = std::make_unique<Lab>(o);
        } catch (const std::exception& e) {
            setup_error_ = e.what();
        }
    }
    static void TearDownTestSuite() { lab_.reset(); }

    void SetUp() override {
        ASSERT_TRUE(lab_) << "lab did not come up: " << setup_error_;
        client_ = std::make_unique<Client>(lab_->zk());
    }
    void TearDown() override {
        if (HasFailure() && lab_) {
            std::cerr << lab_->all_daemon_logs();
            std::cerr << "----- chassis hv3 -----\n" << lab_->chassis_log(dead_node);
        }
        if (lab_)
            for (auto& uuid : uuids_)
                if (lab_->zk()->exists(path("domain.state", {uuid}))) lab_->zk()->write(path("domain.state", {uuid}), "stop");
    }

    std::string domain(const char* key, const std::string& uuid) { return client_->get(key, uuid); }
    std::string node(const char* key, int n) { return client_->node_key(key, Lab::node_name(n)); }
    // What `pvc node ready` writes (the CLI's node_domainstate): unflush.
    void ready(int n) { lab_->zk()->write(path("node.state.domain", {Lab::node_name(n)}), "unflush"); }

    static std::unique_ptr<Lab> lab_;
    static std::string setup_error_;
    std::unique_ptr<Client> client_;
    std::vector<std::string> uuids_;
};

std::unique_ptr<Lab> FencingPowerLoss::lab_;
std::string FencingPowerLoss::setup_error_;

TEST_F(FencingPowerLoss, NodeLosingPowerIsFencedOnceItsGuestsRunElsewhereAndComeHomeWhenReady) {
    const std::string hv3 = Lab::node_name(dead_node);
    // Every node in service (a new node registers flushed).
    for (int n : all_nodes) ready(n);
    ASSERT_TRUE(wait_for([&] {
        for (int n : all_nodes)
            if (node("node.state.domain", n) != "ready") return false;
        return true;
    }, 30s)) << "nodes not ready: " << node("node.state.domain", 1) << " " << node("node.state.domain", 2) << " "
             << node("node.state.domain", 3);

    // Two guests on hv3. The `vms` selector makes the survivors equal (no VMs
    // each): without the recovery's tally both guests would go to hv1.
    for (int i = 0; i < 2; ++i) {
        std::string uuid = pvc::e2e::random_uuid(), name = "e2e-fence-" + uuid.substr(0, 8);
        uuids_.push_back(uuid);
        client_->define(uuid, name, pvc::e2e::tiny_domain_xml(lab_->domain_type(), name, uuid, lab_->console_dir()),
                        hv3, "stop", "live");
        lab_->zk()->write(path("domain.meta.node_selector", {uuid}), "vms");
        client_->change_state(uuid, "start");
    }
    NodeView hv3_view(lab_->libvirt_uri(dead_node));
    ASSERT_TRUE(wait_for([&] { return hv3_view.running(uuids_[0]) && hv3_view.running(uuids_[1]); }, 30s))
        << "guests not running on hv3: state " << domain("domain.state", uuids_[0]) << "/"
        << domain("domain.state", uuids_[1]);
    // The recovery reads runningdomains: both must be published (next keepalive).
    ASSERT_TRUE(wait_for([&] {
        std::string running = node("node.running_domains", dead_node);
        return contains_word(running, uuids_[0]) && contains_word(running, uuids_[1]);
    }, 10s)) << "runningdomains of hv3: " << node("node.running_domains", dead_node);
    // The fencers trust their observations only after a full deadline of them.
    std::this_thread::sleep_for(std::chrono::seconds(keepalive_s * fence_intervals + 1));
    ASSERT_EQ(node("node.state.daemon", dead_node), "run");

    KeyHistory daemonstate(*lab_->zk(), path("node.state.daemon", {hv3}));
    KeyHistory domainstate(*lab_->zk(), path("node.state.domain", {hv3}));
    KeepaliveTracker keepalive(lab_->zk(), hv3);
    TwiceRunningWatch twice(*lab_, uuids_);
    std::this_thread::sleep_for(2s);  // a keepalive or two seen, the twice-running watch connected

    // The power cut, through the BMC.
    auto off = lab_->chassis_power(dead_node, "off");
    const auto t_cut = Clock::now();
    ASSERT_EQ(off.status, 0) << "ipmitool power off: " << off.output;
    // pvcnoded, libvirtd and the two guests' QEMUs at least.
    int killed = 0;
    {
        std::string chassis = lab_->chassis_log(dead_node);
        auto at = chassis.find("power off: killed ");
        if (at != std::string::npos) killed = std::atoi(chassis.c_str() + at + 18);
        EXPECT_GE(killed, 4) << chassis;
    }
    auto last_keepalive = keepalive.last_before(t_cut);
    ASSERT_TRUE(last_keepalive.has_value()) << "no keepalive of hv3 seen before the power cut";

    // Recovery: both guests `start` on a survivor and running in its libvirtd.
    NodeView hv1_view(lab_->libvirt_uri(1)), hv2_view(lab_->libvirt_uri(2));
    auto view_of = [&](const std::string& n) -> NodeView* {
        return n == "hv1" ? &hv1_view : n == "hv2" ? &hv2_view : nullptr;
    };
    Clock::time_point t_assigned{}, t_running{};
    bool recovered = wait_for([&] {
        bool assigned = true, running = true;
        for (auto& uuid : uuids_) {
            std::string n = domain("domain.node", uuid);
            bool here = domain("domain.state", uuid) == "start" && view_of(n);
            assigned = assigned && here;
            running = running && here && view_of(n)->running(uuid);
        }
        if (assigned && t_assigned == Clock::time_point{}) t_assigned = Clock::now();
        if (running) t_running = Clock::now();
        return running;
    }, 60s, 10ms);
    ASSERT_TRUE(recovered) << "guests not running on the survivors 60 s after the power cut: "
                           << domain("domain.node", uuids_[0]) << "/" << domain("domain.state", uuids_[0]) << ", "
                           << domain("domain.node", uuids_[1]) << "/" << domain("domain.state", uuids_[1])
                           << "; daemonstate " << daemonstate.text() << "; domainstate " << domainstate.text();
    EXPECT_NE(domain("domain.node", uuids_[0]), domain("domain.node", uuids_[1]))
        << "recovery put both guests on one node";
    for (auto& uuid : uuids_) EXPECT_EQ(domain("domain.last_node", uuid), hv3) << uuid;

    // Keys as the reference sequences them: run → dead → fenced (no other write
    // between, by the versions), ready → fence-flush → flushed.
    ASSERT_TRUE(wait_for([&] { return domainstate.find("flushed") >= 0; }, 10s)) << domainstate.text();
    int i_dead = daemonstate.find("dead"), i_fenced = daemonstate.find("fenced");
    ASSERT_GE(i_dead, 1) << daemonstate.text();
    // The daemon died with its power: no keepalive from the cut to its death.
    EXPECT_EQ(keepalive.last_before(daemonstate.entries()[i_dead].at), last_keepalive)
        << "hv3 wrote a keepalive after its power was cut";
    ASSERT_GT(i_fenced, i_dead) << daemonstate.text();
    auto ds = daemonstate.entries();
    EXPECT_EQ(ds[i_fenced].version, ds[i_dead].version + 1) << daemonstate.text();
    EXPECT_EQ(ds[i_dead - 1].value, "run") << daemonstate.text();
    EXPECT_EQ(ds[i_dead].version, ds[i_dead - 1].version + 1) << daemonstate.text();
    int i_flushed = domainstate.find("flushed");
    int i_fflush = domainstate.find("fence-flush");
    auto dom = domainstate.entries();
    ASSERT_GE(i_flushed, 1) << domainstate.text();
    // fence-flush may be overwritten before the watch reads it: then the
    // versions prove exactly two writes after ready.
    if (i_fflush >= 0) {
        EXPECT_LT(i_fflush, i_flushed) << domainstate.text();
    }
    int i_ready = i_fflush >= 0 ? i_fflush - 1 : i_flushed - 1;
    EXPECT_EQ(dom[i_ready].value, "ready") << domainstate.text();
    EXPECT_EQ(dom[i_flushed].version, dom[i_ready].version + 2) << domainstate.text();
    EXPECT_LE(seconds(ds[i_dead].at - t_cut), keepalive_s * (fence_intervals + 2) + 2.0)
        << "detected late: the deadline is " << keepalive_s * fence_intervals << " s";

    // Exactly one fence: one job in the survivors' logs, one power off of
    // the fencer (the first is the test's), one power on.
    std::this_thread::sleep_for(std::chrono::seconds(keepalive_s * fence_intervals));
    std::string logs = lab_->daemon_log(1) + lab_->daemon_log(2);
    EXPECT_EQ(count(logs, "Node " + hv3 + " seems dead; starting fence job"), 1u) << logs;
    EXPECT_EQ(count(logs, "Node " + hv3 + " is confirmed powered off"), 1u) << logs;
    EXPECT_EQ(count(logs, "Node " + hv3 + " is fenced"), 1u) << logs;
    EXPECT_EQ(count(logs, "Recovered the VMs of " + hv3 + ": 2 moved, 0 stopped for autostart, 0 left alone"), 1u)
        << logs;
    EXPECT_EQ(count(logs, "FAILED TO FENCE"), 0u) << logs;

    // The fence job powered hv3 on again: it boots, registers and runs, its
    // guests staying on the survivors (it is flushed).
    ASSERT_TRUE(wait_for([&] { return lab_->chassis_log(dead_node).find("set power 1") != std::string::npos; }, 20s))
        << lab_->chassis_log(dead_node);
    // The test's cut, then the fencer's off and on (one job: counted in the
    // logs above). ipmitool's lanplus session resends a request whose answer
    // is late, and the lab's chassis program is slow under load: the BMC may
    // then carry out one command twice.
    std::string chassis = lab_->chassis_log(dead_node);
    EXPECT_GE(count(chassis, "set power 0"), 2u) << chassis;
    EXPECT_GE(count(chassis, "set power 1"), 1u) << chassis;
    EXPECT_LT(chassis.find("set power 0", chassis.find("set power 0") + 1), chassis.find("set power 1")) << chassis;
    ASSERT_TRUE(lab_->wait_daemon_run(dead_node, 60s)) << "hv3 did not come back to run after power on:\n"
                                                       << lab_->daemon_log(dead_node);
    int i_back = daemonstate.find("run", i_fenced);
    ASSERT_GT(i_back, i_fenced) << daemonstate.text();
    auto status = lab_->chassis_power(dead_node, "status");
    EXPECT_NE(status.output.find("Chassis Power is on"), std::string::npos) << status.output;
    EXPECT_EQ(node("node.state.domain", dead_node), "flushed");
    NodeView hv3_back(lab_->libvirt_uri(dead_node));
    for (auto& uuid : uuids_) {
        EXPECT_FALSE(hv3_back.running(uuid)) << uuid << " running on the returned hv3 before ready";
        EXPECT_NE(domain("domain.node", uuid), hv3);
    }

    // Figures: the bound we promise is the deadline (3 s) + IPMI + recovery.
    std::cout << "[ figures  ] keepalive " << keepalive_s << " s x " << fence_intervals
              << " intervals, 0 saving throws, 2 real guests (" << lab_->domain_type() << ")\n"
              << "[ figures  ] last keepalive -> power cut: " << seconds(t_cut - *last_keepalive) << " s\n"
              << "[ figures  ] last keepalive -> dead: " << seconds(ds[i_dead].at - *last_keepalive) << " s\n"
              << "[ figures  ] dead -> fenced (IPMI off confirmed): " << seconds(ds[i_fenced].at - ds[i_dead].at)
              << " s\n"
              << "[ figures  ] fenced -> every guest start on a survivor: " << seconds(t_assigned - ds[i_fenced].at)
              << " s\n"
              << "[ figures  ] start on a survivor -> every guest RUNNING in libvirt: "
              << seconds(t_running - t_assigned) << " s\n"
              << "[ figures  ] last keepalive -> every guest running elsewhere: "
              << seconds(t_running - *last_keepalive) << " s\n"
              << "[ figures  ] fenced -> hv3 powered on by the fence job, booted, in run: "
              << seconds(daemonstate.entries()[i_back].at - ds[i_fenced].at) << " s\n";

    // `pvc node ready hv3`: its guests come home (lastnode = hv3), live.
    const auto t_ready = Clock::now();
    ready(dead_node);
    bool home = wait_for([&] {
        if (node("node.state.domain", dead_node) != "ready") return false;
        for (auto& uuid : uuids_)
            if (domain("domain.node", uuid) != hv3 || domain("domain.state", uuid) != "start" ||
                !hv3_back.running(uuid))
                return false;
        return true;
    }, 60s, 20ms);
    ASSERT_TRUE(home) << "guests not home after ready: domainstate " << node("node.state.domain", dead_node) << "; "
                      << domain("domain.node", uuids_[0]) << "/" << domain("domain.state", uuids_[0]) << ", "
                      << domain("domain.node", uuids_[1]) << "/" << domain("domain.state", uuids_[1]);
    std::cout << "[ figures  ] ready -> every guest running home on hv3: " << seconds(Clock::now() - t_ready) << " s\n";
    for (auto& uuid : uuids_) {
        EXPECT_FALSE(hv1_view.running(uuid)) << uuid;
        EXPECT_FALSE(hv2_view.running(uuid)) << uuid;
    }

    EXPECT_GT(twice.samples(), 100);
    EXPECT_EQ(twice.twice(), 0) << "a guest ran on two nodes at once: " << twice.first();
}

}  // namespace
