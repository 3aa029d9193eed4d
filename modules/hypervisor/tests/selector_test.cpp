// Target selection (the reference's findTargetNode) as a pure function, and read from ZooKeeper.
#include "hv_fixture.hpp"
#include "pvc/target.hpp"

namespace pvc::hv::test {

using target::NodeFigures;
using target::Request;

namespace {
NodeFigures node(std::string name, long memfree, double load = 1.0, long vcpus = 0, long vms = 0, long memused = 0,
                 long memprov = 0) {
    NodeFigures f;
    f.name = std::move(name);
    f.daemon_state = "run";
    f.domain_state = "ready";
    f.memfree = memfree;
    f.memused = memused;
    f.memprov = memprov;
    f.cpuload = load;
    f.vcpualloc = vcpus;
    f.domainscount = vms;
    return f;
}
Request req(std::string sel, std::string current = "hv0") {
    Request r;
    r.node_selector = std::move(sel);
    r.cluster_selector = "mem";
    r.current_node = std::move(current);
    return r;
}
}  // namespace

TEST(Selector, MemPicksMostFreeMemory) {
    EXPECT_EQ(target::choose({node("a", 100), node("b", 300), node("c", 200)}, req("mem")), "b");
}
TEST(Selector, MemNeverPicksANodeWithNoFreeMemory) {
    EXPECT_EQ(target::choose({node("a", 0)}, req("mem")), std::nullopt);
}
TEST(Selector, MemprovUsesUsedPlusFreeMinusProvisioned) {
    auto a = node("a", 100, 1, 0, 0, 900, 500);   // 500 left
    auto b = node("b", 200, 1, 0, 0, 100, 250);   // 50 left
    EXPECT_EQ(target::choose({a, b}, req("memprov")), "a");
    auto over = node("c", 10, 1, 0, 0, 10, 100);
    EXPECT_EQ(target::choose({over}, req("memprov")), std::nullopt);
}
TEST(Selector, LoadVcpusVmsPickLowest) {
    std::vector<NodeFigures> n = {node("a", 1, 2.5, 8, 3), node("b", 1, 0.5, 4, 5), node("c", 1, 1.5, 2, 1)};
    EXPECT_EQ(target::choose(n, req("load")), "b");
    EXPECT_EQ(target::choose(n, req("vcpus")), "c");
    EXPECT_EQ(target::choose(n, req("vms")), "c");
}
TEST(Selector, TiesGoToTheLowestNodeName) {
    EXPECT_EQ(target::choose({node("hv3", 100), node("hv1", 100), node("hv2", 100)}, req("mem")), "hv1");
    EXPECT_EQ(target::choose({node("hv3", 1, 1.0), node("hv2", 1, 1.0)}, req("load")), "hv2");
}
TEST(Selector, ExcludesCurrentNodeNotReadyNodesAndOutsideTheLimit) {
    auto busy = node("b", 900);
    busy.domain_state = "flushed";
    auto dead = node("d", 900);
    dead.daemon_state = "dead";
    auto r = req("mem", "a");
    EXPECT_EQ(target::choose({node("a", 1000), busy, dead, node("c", 10)}, r), "c");
    r.node_limit = "a,b,d";
    EXPECT_EQ(target::choose({node("a", 1000), busy, dead, node("c", 10)}, r), std::nullopt);
    r.node_limit = ",";  // all elements empty: no limit
    EXPECT_EQ(target::choose({node("c", 10)}, r), "c");
    r.exclude = {"c"};
    EXPECT_EQ(target::choose({node("c", 10)}, r), std::nullopt);
}
TEST(Selector, NoneAndAbsentUseTheClusterDefaultAndUnknownMeansNoTarget) {
    auto r = req("none");
    r.cluster_selector = "vms";
    EXPECT_EQ(target::choose({node("a", 900, 1, 0, 5), node("b", 10, 1, 0, 1)}, r), "b");
    r.node_selector.reset();
    EXPECT_EQ(target::choose({node("a", 900, 1, 0, 5), node("b", 10, 1, 0, 1)}, r), "b");
    r.node_selector = "";
    EXPECT_EQ(target::choose({node("a", 900)}, r), std::nullopt);
    // No cluster default published (no primary yet): the reference default, mem.
    r.node_selector = "none";
    r.cluster_selector = "";
    EXPECT_EQ(target::choose({node("a", 900, 1, 0, 5), node("b", 10, 1, 0, 1)}, r), "a");
    r.node_selector = "bogus";
    EXPECT_EQ(target::choose({node("a", 900)}, r), std::nullopt);
}
TEST(Selector, UnparsableFiguresSkipTheNode) {
    auto bad = node("a", 0);
    bad.memfree.reset();
    EXPECT_EQ(target::choose({bad, node("b", 5)}, req("mem")), "b");
}

TEST_F(HvTest, FindTargetReadsTheClusterFromZooKeeper) {
    register_node("hv1", "ready", 100);
    register_node("hv2", "ready", 500);
    register_node("hv3", "flushed", 900);
    auto u = uuid_n(60);
    define(u, "sel", "hv1", "start");
    EXPECT_EQ(target::find_target(*admin, u), "hv2");
    set("domain.meta.node_limit", u, "hv1,hv3");
    EXPECT_EQ(target::find_target(*admin, u), std::nullopt);
    set("domain.meta.node_limit", u, "");
    set("node.memory.free", "hv2", "junk");
    EXPECT_EQ(target::find_target(*admin, u), std::nullopt);
}

}  // namespace pvc::hv::test
