// The client library's SR-IOV VF bookkeeping (used / used_by): what
// define_vm, write_vm_xml, relocate_vm and undefine_vm write under
// /nodes/<node>/sriov/vf/<vf> for a VM's direct and hostdev NICs, against a
// real ZooKeeper. The VF keys are laid as the network module registers them.
#include <pvc/client.hpp>
#include <pvc/schema.hpp>
#include <pvc/test/zk_server.hpp>
#include <pvc/zk.hpp>

#include <gtest/gtest.h>

using namespace pvc;
using namespace std::chrono_literals;
using schema::path;

namespace {

const std::string kPhyMac = "00:00:00:00:00:00";

std::string bridge_nic(const std::string& mac) {
    return "<interface type='bridge'><mac address='" + mac + "'/><source bridge='vmbr100'/></interface>";
}
std::string direct_nic(const std::string& vf, const std::string& mac) {
    return "<interface type='direct'><mac address='" + mac + "'/><source dev='" + vf + "' mode='passthrough'/></interface>";
}
std::string hostdev_nic(const std::string& vf, const std::string& mac) {
    return "<interface type='hostdev' managed='yes'><mac address='" + mac +
           "'/><source><address type='pci' domain='0x0000' bus='0x3b' slot='0x02' function='0x1'/></source>"
           "<sriov_device>" + vf + "</sriov_device></interface>";
}

class ClientSriov : public ::testing::Test {
protected:
    static void SetUpTestSuite() { server_ = new test::ZkServer(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        zk_ = zk::Session::connect({server_->hosts(), 10s, 15s, 10s});
        n1_ = test::unique_name("hv1");
        n2_ = test::unique_name("hv2");
        zk_->ensure_path(path("base.domain"));
        for (const auto& n : {n1_, n2_}) {
            zk_->ensure_path(path("node.sriov.vf", {n}));
            for (const auto& vf : {"ens1f0v0", "ens1f0v1"}) register_vf(n, vf);
        }
    }

    // The keys the network module creates for a VF (docs/wire-contract.md §3.4).
    void register_vf(const std::string& node, const std::string& vf) {
        ASSERT_TRUE(zk_->write({{path("sriov_vf.phy", {node, vf}), ""},
                                {path("sriov_vf.pf", {node, vf}), "ens1f0"},
                                {path("sriov_vf.mtu", {node, vf}), "1500"},
                                {path("sriov_vf.mac", {node, vf}), kPhyMac},
                                {path("sriov_vf.phy_mac", {node, vf}), kPhyMac},
                                {path("sriov_vf.used", {node, vf}), "False"},
                                {path("sriov_vf.used_by", {node, vf}), ""}}));
    }

    client::VmDefinition vm(const std::string& name, const std::string& node, const std::string& nics) {
        client::VmDefinition d;
        d.uuid = client::new_uuid();
        d.name = name;
        d.xml = xml(name, d.uuid, nics);
        d.node = node;
        return d;
    }
    static std::string xml(const std::string& name, const std::string& uuid, const std::string& nics) {
        return "<domain type='kvm'><name>" + name + "</name><uuid>" + uuid +
               "</uuid><memory unit='MiB'>1024</memory><vcpu>1</vcpu><devices>" + nics + "</devices></domain>";
    }

    std::string vf_key(const std::string& key, const std::string& node, const std::string& vf) {
        return zk_->get(path(key, {node, vf})).value_or("<absent>");
    }
    // used, used_by and mac of a VF, joined.
    std::string vf_use(const std::string& node, const std::string& vf) {
        return vf_key("sriov_vf.used", node, vf) + " " + vf_key("sriov_vf.used_by", node, vf) + " " +
               vf_key("sriov_vf.mac", node, vf);
    }
    std::string free_vf() { return "False  " + kPhyMac; }
    std::string used_by(const std::string& uuid, const std::string& mac) { return "True " + uuid + " " + mac; }

    static test::ZkServer* server_;
    std::shared_ptr<zk::Session> zk_;
    std::string n1_, n2_;
};
test::ZkServer* ClientSriov::server_ = nullptr;

}  // namespace

TEST_F(ClientSriov, DefineWithDirectNicClaimsTheVfOnTheVmsNode) {
    auto d = vm("web1", n1_, bridge_nic("52:54:00:00:00:01") + direct_nic("ens1f0v0", "52:54:00:00:01:01"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), used_by(d.uuid, "52:54:00:00:01:01"));
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), free_vf());
    EXPECT_EQ(vf_use(n2_, "ens1f0v0"), free_vf());  // the same VF on another node is not the VM's
    EXPECT_EQ(zk_->get(path("domain.meta.migrate_method", {d.uuid})).value_or(""), "none");  // direct can live-migrate
}

TEST_F(ClientSriov, DefineWithHostdevNicClaimsTheVfAndSetsShutdownMigration) {
    auto d = vm("db1", n1_, hostdev_nic("ens1f0v1", "52:54:00:00:02:01"));
    d.migrate_method = "live";
    ASSERT_TRUE(client::define_vm(*zk_, d));
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), used_by(d.uuid, "52:54:00:00:02:01"));
    EXPECT_EQ(zk_->get(path("domain.meta.migrate_method", {d.uuid})).value_or(""), "shutdown");
}

TEST_F(ClientSriov, DefineIsRefusedWhenTheVfIsUsedByAnotherVmAndWritesNothing) {
    auto a = vm("owner", n1_, direct_nic("ens1f0v0", "52:54:00:00:03:01"));
    ASSERT_TRUE(client::define_vm(*zk_, a));
    auto b = vm("intruder", n1_, direct_nic("ens1f0v0", "52:54:00:00:03:02"));
    try {
        client::define_vm(*zk_, b);
        FAIL() << "define_vm claimed a VF another VM uses";
    } catch (const client::VfInUse& e) {
        std::string m = e.what();
        EXPECT_NE(m.find("\"ens1f0v0\""), std::string::npos) << m;
        EXPECT_NE(m.find("\"owner\""), std::string::npos) << m;  // the VM using it, by name
        EXPECT_NE(m.find(n1_), std::string::npos) << m;
    }
    EXPECT_FALSE(zk_->exists(path("domain.name", {b.uuid})));  // nothing half-written
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), used_by(a.uuid, "52:54:00:00:03:01"));
}

TEST_F(ClientSriov, DefineOnANodeWithoutThatVfTracksNothing) {
    auto d = vm("web2", n1_, direct_nic("ens9f0v0", "52:54:00:00:04:01"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    EXPECT_FALSE(zk_->exists(path("sriov_vf.phy", {n1_, "ens9f0v0"})));  // no key created for an unknown VF
}

TEST_F(ClientSriov, VmWithoutSriovNicsLeavesEveryVfAlone) {
    auto d = vm("plain", n1_, bridge_nic("52:54:00:00:05:01"));
    d.migrate_method = "live";
    auto writes = [&] { return zk_->stats().requests - zk_->stats().reads; };
    auto before = writes();
    ASSERT_TRUE(client::define_vm(*zk_, d));
    EXPECT_EQ(writes() - before, 1u);  // the VM's one transaction, as before
    before = writes();
    ASSERT_TRUE(client::write_vm_xml(*zk_, d.uuid, d.name, {}, xml(d.name, d.uuid, bridge_nic("52:54:00:00:05:02"))));
    EXPECT_EQ(writes() - before, 1u);
    ASSERT_TRUE(client::relocate_vm(zk_, d.uuid, "stop", n2_, "", {}));
    EXPECT_EQ(zk_->get(path("domain.meta.migrate_method", {d.uuid})).value_or(""), "live");
    for (const auto& n : {n1_, n2_})
        for (const auto& vf : {"ens1f0v0", "ens1f0v1"}) EXPECT_EQ(vf_use(n, vf), free_vf()) << n << " " << vf;
}

TEST_F(ClientSriov, ModifyClaimsAddedAndReleasesRemovedNics) {
    auto d = vm("web3", n1_, direct_nic("ens1f0v0", "52:54:00:00:06:01"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    ASSERT_TRUE(client::write_vm_xml(*zk_, d.uuid, d.name, {}, xml(d.name, d.uuid, hostdev_nic("ens1f0v1", "52:54:00:00:06:02"))));
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), free_vf());  // mac back to phy_mac
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), used_by(d.uuid, "52:54:00:00:06:02"));
    EXPECT_EQ(zk_->get(path("domain.meta.migrate_method", {d.uuid})).value_or(""), "shutdown");
    ASSERT_TRUE(client::write_vm_xml(*zk_, d.uuid, d.name, {}, xml(d.name, d.uuid, bridge_nic("52:54:00:00:06:03"))));
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), free_vf());
}

TEST_F(ClientSriov, ModifyIsRefusedWhenTheAddedVfIsUsedAndWritesNothing) {
    auto a = vm("holder", n1_, direct_nic("ens1f0v1", "52:54:00:00:07:01"));
    ASSERT_TRUE(client::define_vm(*zk_, a));
    auto b = vm("web4", n1_, direct_nic("ens1f0v0", "52:54:00:00:07:02"));
    ASSERT_TRUE(client::define_vm(*zk_, b));
    std::string old_xml = b.xml, new_xml = xml(b.name, b.uuid, direct_nic("ens1f0v1", "52:54:00:00:07:03"));
    EXPECT_THROW(client::write_vm_xml(*zk_, b.uuid, b.name, {}, new_xml), client::VfInUse);
    EXPECT_EQ(zk_->get(path("domain.xml", {b.uuid})).value_or(""), old_xml);
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), used_by(b.uuid, "52:54:00:00:07:02"));  // not released either
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), used_by(a.uuid, "52:54:00:00:07:01"));
}

TEST_F(ClientSriov, UndefineReleasesTheVms) {
    auto d = vm("web5", n1_, direct_nic("ens1f0v0", "52:54:00:00:08:01") + hostdev_nic("ens1f0v1", "52:54:00:00:08:02"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    ASSERT_TRUE(client::undefine_vm(zk_, d.uuid));
    EXPECT_FALSE(zk_->exists(path("domain.name", {d.uuid})));
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), free_vf());
    EXPECT_EQ(vf_use(n1_, "ens1f0v1"), free_vf());
}

TEST_F(ClientSriov, MoveClaimsOnTheTargetAndReleasesOnTheSource) {
    auto d = vm("web6", n1_, direct_nic("ens1f0v0", "52:54:00:00:09:01"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    ASSERT_TRUE(client::relocate_vm(zk_, d.uuid, "stop", n2_, n1_, {}));  // migrate
    EXPECT_EQ(zk_->get(path("domain.node", {d.uuid})).value_or(""), n2_);
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), free_vf());
    EXPECT_EQ(vf_use(n2_, "ens1f0v0"), used_by(d.uuid, "52:54:00:00:09:01"));
    ASSERT_TRUE(client::relocate_vm(zk_, d.uuid, "stop", n1_, "", {}));  // unmigrate
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), used_by(d.uuid, "52:54:00:00:09:01"));
    EXPECT_EQ(vf_use(n2_, "ens1f0v0"), free_vf());
}

TEST_F(ClientSriov, MoveIsRefusedWhenTheTargetsVfIsUsedByAnotherVm) {
    auto other = vm("other", n2_, direct_nic("ens1f0v0", "52:54:00:00:0a:01"));
    ASSERT_TRUE(client::define_vm(*zk_, other));
    auto d = vm("web7", n1_, direct_nic("ens1f0v0", "52:54:00:00:0a:02"));
    ASSERT_TRUE(client::define_vm(*zk_, d));
    EXPECT_THROW(client::relocate_vm(zk_, d.uuid, "stop", n2_, "", {}), client::VfInUse);
    EXPECT_EQ(zk_->get(path("domain.node", {d.uuid})).value_or(""), n1_);
    EXPECT_EQ(vf_use(n1_, "ens1f0v0"), used_by(d.uuid, "52:54:00:00:0a:02"));
    EXPECT_EQ(vf_use(n2_, "ens1f0v0"), used_by(other.uuid, "52:54:00:00:0a:01"));
}
