// Loopback ports for the servers a test starts (ZooKeeper, Ceph monitors,
// ipmi_sim).
#pragma once

namespace pvc::test {

// A port free on 127.0.0.1 for both TCP and UDP, chosen below the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), so no outgoing connection
// of any process can take it between this call and the server's bind, and
// claimed for the life of this process by a lock file under
// /tmp/pvc-test-ports, so no other test process running beside this one is
// handed it too. Throws when none is left.
int reserve_port();

// Claims `port` as reserve_port() does: true when this process now holds
// it (it was free for TCP and UDP and no other test process holds it).
bool claim_port(int port);

}  // namespace pvc::test
