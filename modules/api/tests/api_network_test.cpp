// The network write routes (POST /network, PUT/DELETE /network/<vni>,
// leases, ACLs, SR-IOV VF set and lists) in-process against a real
// ZooKeeper: status codes, the reference's messages, the keys written (the
// client library's checks and races are tested in
// integration-client_network_test), and read-your-writes through the view.
#include "api_fixture.hpp"

namespace pvc::api::test {
namespace {

using schema::path;

class ApiNetwork : public ApiFixture {};

std::string add_query(const std::string& vni, const std::string& desc) {
    return "/network?vni=" + vni + "&description=" + desc +
           "&nettype=managed&mtu=&ip4_network=10.30.0.0/24&ip4_gateway=10.30.0.1&dhcp4=true"
           "&dhcp4_start=10.30.0.100&dhcp4_end=10.30.0.199&name_servers=10.30.0.1";
}

TEST_F(ApiNetwork, AddModifyDeleteAndReadBack) {
    auto r = post(add_query("300", "lab"));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Network 'lab' added successfully!");
    EXPECT_EQ(key("network.nameservers", {"300"}), "10.30.0.1");  // one server, not its characters
    EXPECT_EQ(key("network.domain", {"300"}), "lab.local");
    // The view shows it at once (the answer waited for it).
    auto g = get("/network/300");
    ASSERT_EQ(g.status, 200) << g.body;

    r = post(add_query("300", "lab"));
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: A network with VNI '300' already exists!");
    r = post("/network?vni=301&description=x");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["nettype"], "A valid nettype must be specified");
    r = post("/network?description=x&nettype=managed");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["vni"], "Missing required parameter in the query string or the post body");
    r = post("/network?vni=301&description=x&nettype=managed&dhcp4=true");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: DHCPv4 start and end addresses are required for a DHCPv4-enabled network.");

    // POST /network/<vni>: the path's VNI, nothing at the ZooKeeper root.
    r = post("/network/302?description=bridge302&nettype=bridged");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(key("network.type", {"302"}), "bridged");
    EXPECT_FALSE(session->exists("/nettype"));

    r = call("PUT", "/network/lab?mtu=1400");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Network 'lab' modified successfully!");
    EXPECT_EQ(key("network.mtu", {"300"}), "1400");
    EXPECT_EQ(key("network.nameservers", {"300"}), "10.30.0.1");  // kept: not given
    r = call("PUT", "/network/300?name_servers=10.30.0.2&name_servers=10.30.0.3");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(key("network.nameservers", {"300"}), "10.30.0.2,10.30.0.3");
    r = call("PUT", "/network/399?mtu=1400");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: Could not find network '399' in the cluster!");
    EXPECT_FALSE(session->exists(path("network.vni", {"399"})));

    r = call("DELETE", "/network/302");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Network 'bridge302' removed successfully!");
    EXPECT_EQ(get("/network/302").status, 404);
    EXPECT_EQ(call("DELETE", "/network/302").status, 400);
}

TEST_F(ApiNetwork, LeasesAndAcls) {
    ASSERT_EQ(post(add_query("310", "office310")).status, 200);
    auto r = post("/network/310/lease?macaddress=52:54:00:00:31:01&ipaddress=10.30.0.10&hostname=web");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "DHCP reservation '52:54:00:00:31:01' added successfully!");
    EXPECT_EQ(key("reservation.ip", {"310", "52:54:00:00:31:01"}), "10.30.0.10");
    EXPECT_EQ(get("/network/310/lease/52:54:00:00:31:01").status, 200);
    r = post("/network/310/lease/52:54:00:00:31:02?ipaddress=10.30.0.11");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(key("reservation.hostname", {"310", "52:54:00:00:31:02"}), "None");
    r = post("/network/310/lease?macaddress=nomac&ipaddress=10.30.0.12");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: MAC address 'nomac' is not valid! Always use ':' as a separator.");
    r = call("DELETE", "/network/310/lease/web");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "DHCP static reservation '52:54:00:00:31:01' removed successfully!");
    EXPECT_EQ(call("DELETE", "/network/310/lease/web").status, 400);

    r = post("/network/310/acl?description=dns&rule=udp%20dport%2053%20accept&direction=out");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Firewall rule 'dns' added successfully!");
    EXPECT_EQ(key("rule.rule", {"310", "out", "dns"}), "udp dport 53 accept");  // out stays out
    r = post("/network/310/acl/ssh?rule=tcp%20dport%2022%20accept");  // no direction: in
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(key("rule.order", {"310", "in", "ssh"}), "0");
    r = post("/network/310/acl?description=x&rule=accept&direction=up");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"]["direction"], "A valid direction must be specified.");
    r = post("/network/310/acl?rule=accept");
    EXPECT_EQ(r.json()["message"]["description"], "A whitespace-free description must be specified.");
    EXPECT_EQ(get("/network/310/acl/ssh").status, 200);
    r = call("DELETE", "/network/310/acl/ssh");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Firewall rule 'ssh' removed successfully!");
    r = call("DELETE", "/network/310/acl/ssh");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: No firewall rule exists matching description 'ssh'!");
    EXPECT_EQ(post("/network/nonet/acl?description=x&rule=accept").json()["message"],
              "ERROR: Could not find network 'nonet' in the cluster!");
}

TEST_F(ApiNetwork, SriovListsAndVfSet) {
    const std::string vf = "ens2f0v1";
    ASSERT_TRUE(session->write({{path("node.sriov", {"hv1"}), ""},
                                {path("node.sriov.pf", {"hv1"}), ""},
                                {path("sriov_pf.phy", {"hv1", "ens2f0"}), ""},
                                {path("sriov_pf.mtu", {"hv1", "ens2f0"}), "1500"},
                                {path("node.sriov.vf", {"hv1"}), ""},
                                {path("sriov_vf.phy", {"hv1", vf}), ""},
                                {path("sriov_vf.pf", {"hv1", vf}), "ens2f0"},
                                {path("sriov_vf.config", {"hv1", vf}), ""}}));
    auto r = call("PUT", "/sriov/vf/hv1/" + vf + "?vlan_id=7&spoof_check=false");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()["message"], "Successfully modified configuration of SR-IOV VF '" + vf + "' on node 'hv1'.");
    EXPECT_EQ(key("sriov_vf.config.vlan_id", {"hv1", vf}), "7");
    EXPECT_EQ(key("sriov_vf.config.spoof_check", {"hv1", vf}), "False");
    r = call("PUT", "/sriov/vf/hv1/" + vf);
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: No changes to apply.");
    r = call("PUT", "/sriov/vf/hv1/" + vf + "?link_state=on");
    EXPECT_EQ(r.json()["message"]["link_state"], "A valid state must be specified");
    EXPECT_EQ(call("PUT", "/sriov/vf/hv9/" + vf + "?trust=true").json()["message"],
              "ERROR: Specified node 'hv9' is invalid.");

    r = get("/sriov/pf/hv1");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()[0]["vfs"][0], vf);
    r = get("/sriov/vf?node=hv1&pf=ens2f0");
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.json()[0]["config"]["vlan_id"], "7");
    EXPECT_EQ(get("/sriov/vf/hv1/" + vf).status, 200);
    r = get("/sriov/vf/hv1/ens2f0v9");
    EXPECT_EQ(r.status, 404);
    EXPECT_EQ(r.json()["message"], "No VF 'ens2f0v9' found on node 'hv1'");
    EXPECT_EQ(get("/sriov/pf/hv2").status, 404);
    r = get("/sriov/vf/hv9");
    EXPECT_EQ(r.status, 400);
    EXPECT_EQ(r.json()["message"], "ERROR: Specified node \"hv9\" is invalid.");
}

}  // namespace
}  // namespace pvc::api::test
