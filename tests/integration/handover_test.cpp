// The primary hand-over with a reference Python coordinator as the peer
// (issue 11, docs/wire-contract.md §5.4): a kazoo script follows the reference's
// sequence exactly (its lock phases on /config/primary_node/sync_lock and its
// sleeps) against pvcnoded, in both directions. The daemon loads a test module
// that records each phase its transition hook is called in (before `done`);
// while the script holds each of its phase locks it reads that record and our
// router state, so the interleaving is checked by the locks, not by clocks.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "pvc/cluster.hpp"
#include "pvc/schema.hpp"
#include "pvc/test/daemon_process.hpp"
#include "pvc/test/node_config.hpp"
#include "pvc/test/zk_server.hpp"
#include "pvc/zk.hpp"

using namespace std::chrono_literals;
using pvc::schema::path;
using pvc::test::DaemonProcess;
using pvc::test::slurp;

namespace {

// Shared by both scripts: the record of our phases, and a snapshot of it
// (with our router state) taken while the script holds a phase's lock.
const char* script_common = R"(
import sys, time, json
from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout
from kazoo.recipe.lock import ReadLock
# kazoo 2.8.0's ReadLock never finds its own name among the write contenders
# and so waits for the last write contender even when it came after it (a
# deadlock with that writer, who waits for this reader). Later kazoo and the
# recipe (docs/wire-contract.md §4.1): the write contender just before it.
def _predecessor(self, node):
    own, pred = node[-10:], None
    for c in self.client.get_children(self.path):
        m = self._contenders_re.search(c)
        if m and m.group(1) < own and (pred is None or m.group(1) > pred[-10:]):
            pred = c
    return pred
ReadLock._get_predecessor = _predecessor
hosts, record, side = sys.argv[1], sys.argv[2], sys.argv[3]
zk = KazooClient(hosts=hosts); zk.start()
sync = '/config/primary_node/sync_lock'
zk.ensure_path(sync)
marks, seen = {}, {}
def mark(what):
    marks[what] = time.time(); print(what, marks[what], zk.get_children(sync), file=sys.stderr, flush=True)
def ours():
    try:
        return ''.join(l.split()[2] for l in open(record) if l.split()[1] == side)
    except FileNotFoundError:
        return ''
def snap(phase): seen[phase] = {'ours': ours(), 'router': zk.get('/nodes/hv1/routerstate')[0].decode()}
)";

// The reference old primary (hv2, primary) hands over to hv1, as after
// `pvc node primary hv1`: the reference's reaction (0.5 s, relinquish) and the
// old primary's phases of the hand-over.
const char* reference_old_primary = R"(
mark('requested'); zk.set('/config/primary_node', b'hv1')
time.sleep(0.5)
zk.set('/nodes/hv2/routerstate', b'relinquish')
time.sleep(0.2)
l = zk.ReadLock(sync); l.acquire(); mark('A'); l.release()
l = zk.WriteLock(sync); l.acquire(); mark('B acquired'); time.sleep(0.2); snap('B'); mark('B released'); l.release()
zk.set(sync, b'')
time.sleep(0.1)
for p in 'CDEF':
    l = zk.ReadLock(sync); l.acquire(); mark(p); snap(p); l.release()
l = zk.ReadLock(sync)
try:
    l.acquire(timeout=60)
except LockTimeout:
    pass
mark('G'); snap('G'); l.release()
end = time.time() + 2   # the reference's 2 s sleep, watching for our `primary` meanwhile
while time.time() < end:
    if 'primary' not in marks and zk.get('/nodes/hv1/routerstate')[0] == b'primary': mark('primary')
    time.sleep(0.01)
zk.set('/nodes/hv2/routerstate', b'secondary')
print(json.dumps({'marks': marks, 'seen': seen}))
)";

// The reference candidate (hv2, secondary) takes over from hv1, as after
// `pvc node primary hv2`: the candidate's phases of the hand-over.
const char* reference_candidate = R"(
mark('requested'); zk.set('/config/primary_node', b'hv2')
time.sleep(0.5)
zk.set('/nodes/hv2/routerstate', b'takeover')
primary = zk.Lock('/config/primary_node'); primary.acquire()
zk.ensure_path(sync)
l = zk.WriteLock(sync); l.acquire(); mark('A'); time.sleep(1); snap('A'); l.release(); zk.set(sync, b'')
time.sleep(0.1)
l = zk.ReadLock(sync); l.acquire(); mark('B'); snap('B'); l.release()
for p, s in zip('CDEFG', [0.5, 0.2, 0.2, 0.2, 0.2]):
    l = zk.WriteLock(sync); l.acquire(); time.sleep(s); mark(p); snap(p); l.release(); zk.set(sync, b'')
time.sleep(2)
primary.release()
zk.set('/nodes/hv2/routerstate', b'primary')
print(json.dumps({'marks': marks, 'seen': seen}))
)";

class Handover : public ::testing::Test {
protected:
    void SetUp() override {
        zk = pvc::zk::Session::connect({server.hosts()});
        pvc::init_cluster(*zk);
    }
    // hv2: the reference coordinator the script plays, registered as the reference registers a node.
    void register_peer(const std::string& router) {
        zk->ensure_path(path("node.name", {"hv2"}));
        ASSERT_TRUE(zk->write({{path("node.mode", {"hv2"}), "coordinator"},
                               {path("node.state.daemon", {"hv2"}), "run"},
                               {path("node.state.router", {"hv2"}), router}}));
    }
    void start_daemon() {
        o.node = "hv1";
        o.coordinators = "[hv1:" + std::to_string(server.port()) + "]";
        o.base_dir = dir.path() / "hv1";
        o.module_dir = pvc::test::build_dir() + "/test-modules/handover";
        auto cfg = pvc::test::write_node_config(o);
        daemon = std::make_unique<DaemonProcess>("hv1", cfg, o.base_dir / "out.log");
    }
    std::string record() const { return (o.base_dir / "run" / "handover-phases").string(); }
    std::string router(const std::string& node) { return zk->get(path("node.state.router", {node})).value_or(""); }
    std::string logs() { return slurp(o.base_dir / "log" / "pvc.log") + slurp(o.base_dir / "out.log.err"); }
    // Our recorded phases of one side, with their times.
    std::vector<std::pair<char, double>> phases(const std::string& side) {
        std::vector<std::pair<char, double>> out;
        std::ifstream in(record());
        double t;
        std::string s;
        char p;
        while (in >> t >> s >> p)
            if (s == side) out.emplace_back(p, t);
        return out;
    }
    nlohmann::json run_script(const char* body, const std::string& side) {
        auto r = pvc::test::run_python(std::string(script_common) + body, {server.hosts(), record(), side}, 120s);
        EXPECT_EQ(r.status, 0) << r.out << r.err << logs();
        auto j = nlohmann::json::parse(r.out, nullptr, false);
        EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
        return j;
    }

    pvc::test::ZkServer server;
    pvc::test::TempDir dir{"handover"};
    std::shared_ptr<pvc::zk::Session> zk;
    pvc::test::NodeConfigOptions o;
    std::unique_ptr<DaemonProcess> daemon;
};

// (a) pvcnoded takes over from the reference old primary.
TEST_F(Handover, TakesOverFromAReferenceOldPrimaryPhaseByPhase) {
    register_peer("primary");
    ASSERT_TRUE(zk->write(path("base.config.primary_node"), "hv2"));
    start_daemon();
    ASSERT_TRUE(pvc::test::eventually([&] { return router("hv1") == "secondary"; }, 15s)) << logs();

    auto j = run_script(reference_old_primary, "takeover");
    ASSERT_TRUE(j.contains("seen")) << j.dump();
    const auto& seen = j["seen"];
    // While the peer held its phase-B write lock (DHCP stopping), nothing of
    // ours had moved; in each of its read phases C..F we had done exactly the
    // same phase (our write lock before its read lock), and in its G our
    // services were up while our `primary` was not yet published.
    EXPECT_EQ(seen["B"]["ours"], "") << seen.dump();
    EXPECT_EQ(seen["B"]["router"], "takeover") << seen.dump();
    EXPECT_EQ(seen["C"]["ours"], "C") << seen.dump();
    EXPECT_EQ(seen["D"]["ours"], "CD") << seen.dump();
    EXPECT_EQ(seen["E"]["ours"], "CDE") << seen.dump();
    EXPECT_EQ(seen["F"]["ours"], "CDEF") << seen.dump();
    EXPECT_EQ(seen["G"]["ours"], "CDEFG") << seen.dump();
    EXPECT_EQ(seen["G"]["router"], "takeover") << seen.dump();
    ASSERT_TRUE(pvc::test::eventually([&] { return router("hv1") == "primary"; }, 10s)) << logs();
    EXPECT_EQ(router("hv2"), "secondary");

    // Figures (from the script's clock and our record, the same host clock).
    const auto& m = j["marks"];
    auto ours = phases("takeover");
    ASSERT_EQ(ours.size(), 5u);
    EXPECT_GT(ours[0].second, m["B released"].get<double>()) << "our upstream address before the peer's phase B ended";
    ASSERT_TRUE(m.contains("primary")) << "our `primary` was not published within the peer's 2 s after its G";
    double published = m["primary"].get<double>();
    std::printf("[ figure ] reference -> pvcnoded: our phase C %.3f s after the request (peer's B released at %.3f s), "
                "G at %.3f s, `primary` seen at %.3f s (the peer's G at %.3f s)\n",
                ours[0].second - m["requested"].get<double>(), m["B released"].get<double>() - m["requested"].get<double>(),
                ours[4].second - m["requested"].get<double>(), published - m["requested"].get<double>(),
                m["G"].get<double>() - m["requested"].get<double>());
}

// (b) The reference candidate takes over from pvcnoded relinquishing.
TEST_F(Handover, RelinquishesToAReferenceCandidatePhaseByPhase) {
    register_peer("secondary");
    start_daemon();
    // A lone running coordinator: no primary recorded, so it claims the role;
    // with no old primary its takeover has nobody to wait for.
    ASSERT_TRUE(pvc::test::eventually([&] { return router("hv1") == "primary"; }, 15s)) << logs();
    ASSERT_EQ(phases("takeover").size(), 5u) << logs();

    auto j = run_script(reference_candidate, "relinquish");
    ASSERT_TRUE(j.contains("seen")) << j.dump();
    const auto& seen = j["seen"];
    // The candidate's phase A (1 s under its write lock): we had not begun.
    // Its B read lock waited for our B (DHCP and API stopped); in each of its
    // write phases C..G we had done only the phases before it (our read lock
    // after its write lock), and in G our `secondary` was not yet written.
    EXPECT_EQ(seen["A"]["ours"], "") << seen.dump();
    EXPECT_EQ(seen["A"]["router"], "relinquish") << seen.dump();
    EXPECT_EQ(seen["B"]["ours"], "B") << seen.dump();
    EXPECT_EQ(seen["C"]["ours"], "B") << seen.dump();
    EXPECT_EQ(seen["D"]["ours"], "BC") << seen.dump();
    EXPECT_EQ(seen["E"]["ours"], "BCD") << seen.dump();
    EXPECT_EQ(seen["F"]["ours"], "BCDE") << seen.dump();
    EXPECT_EQ(seen["G"]["ours"], "BCDEF") << seen.dump();
    EXPECT_EQ(seen["G"]["router"], "relinquish") << seen.dump();
    EXPECT_EQ(router("hv1"), "secondary") << logs();
    EXPECT_EQ(router("hv2"), "primary");

    const auto& m = j["marks"];
    auto ours = phases("relinquish");
    ASSERT_EQ(ours.size(), 5u);
    for (size_t i = 1; i < ours.size(); ++i)  // our C..F each after the candidate's same phase
        EXPECT_GT(ours[i].second, m[std::string(1, ours[i].first)].get<double>()) << ours[i].first;
    std::printf("[ figure ] pvcnoded -> reference: our phase B (DHCP, API stop) %.3f s after the request, "
                "our F %.3f s (the candidate's F at %.3f s)\n",
                ours[0].second - m["requested"].get<double>(), ours[4].second - m["requested"].get<double>(),
                m["F"].get<double>() - m["requested"].get<double>());
}

}  // namespace
