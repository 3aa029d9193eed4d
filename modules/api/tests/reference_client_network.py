#!/usr/bin/python3
# The reference PVC client's network commands against our API: each call is
# what the reference `pvc network ...` command makes (its pvc.lib.network
# functions, with the argument types its Click options give), each answer
# goes through the reference's own formatters. The reference client is not
# part of this repository: PYTHONPATH names a checkout's client-cli/ (see
# api_reference_client_test.cpp). Usage: reference_client_network.py PORT
# Prints one line per step; exit status 1 if any step did not answer as the
# reference API would.
import json
import re
import sys

import pvc.lib.network as net

C = {"api_scheme": "http", "api_host": "127.0.0.1:" + sys.argv[1], "api_prefix": "/api/v1",
     "api_key": sys.argv[2] if len(sys.argv) > 2 else None, "verify_ssl": False, "debug": False}
failed = []


def plain(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def step(name, result, want=True):
    ok = result[0] == want
    print(("ok   " if ok else "FAIL ") + name + ": " + json.dumps(result[1])[:400])
    if not ok:
        failed.append(name)
    return result


def check(name, condition):
    print(("ok   " if condition else "FAIL ") + name)
    if not condition:
        failed.append(name)


# pvc network add (name_servers: Click's tuple of --dns-server; --dhcp a bool; no --mtu)
step("network add managed", net.net_add(C, "1200", "refnet", "managed", None, "refnet.local",
     ("10.120.0.1", "10.120.0.2"), "10.120.0.0/24", "10.120.0.1", "2001:db8:120::/64", "2001:db8:120::1",
     True, "10.120.0.100", "10.120.0.199"))
step("network add bridged", net.net_add(C, "1201", "refbr", "bridged", None, None, (), None, None, None, None,
     False, None, None))
step("network add duplicate", net.net_add(C, "1200", "refnet", "managed", None, None, (), None, None, None, None,
     False, None, None), want=False)
step("network add bad VNI", net.net_add(C, "0", "x", "managed", None, None, (), None, None, None, None, False,
     None, None), want=False)
ok, info = step("network info", net.net_info(C, "1200"))
if ok:
    text = plain(net.format_info(C, info, False))
    check("info shows both name servers", "DNS Servers:    10.120.0.1, 10.120.0.2" in text)
    check("info shows the DHCP range", "DHCPv4 range:   10.120.0.100 - 10.120.0.199" in text)
ok, nets = step("network list", net.net_list(C, None))
if ok:
    check("list has both networks", sorted(n["vni"] for n in nets) == [1200, 1201])
    text = plain(net.format_list(C, nets))
    check("list formats", "refnet" in text and "refbr" in text)
step("network list, no match (the reference's 404)", net.net_list(C, "nomatch"), want=False)
step("network modify", net.net_modify(C, "1200", None, "1400", None, ("10.120.0.3",), None, None, None, None, None,
     None, None))
ok, info = step("network info by description", net.net_info(C, "refnet"))
if ok:
    check("modified MTU and name server", info["mtu"] == "1400" and info["name_servers"] == ["10.120.0.3"])
step("dhcp add", net.net_dhcp_add(C, "1200", "10.120.0.5", "52:54:00:12:00:05", "h5"))
step("dhcp add bad MAC", net.net_dhcp_add(C, "1200", "10.120.0.6", "52:54:00:ZZ:00:06", "h6"), want=False)
ok, leases = step("dhcp list", net.net_dhcp_list(C, "1200", None, False))
if ok:
    check("dhcp list formats", "10.120.0.5" in plain(net.format_list_dhcp(C, leases)))
step("dhcp list static", net.net_dhcp_list(C, "1200", None, True))
step("dhcp info", net.net_dhcp_info(C, "1200", "52:54:00:12:00:05"))
step("acl add in", net.net_acl_add(C, "1200", "in", "ssh-in", "tcp dport 22 ct state new accept", None))
step("acl add out, order 0", net.net_acl_add(C, "1200", "out", "drop-out", "drop", "0"))
step("acl add duplicate", net.net_acl_add(C, "1200", "in", "ssh-in", "drop", None), want=False)
ok, acls = step("acl list", net.net_acl_list(C, "1200", None, None))
if ok:
    check("acl list: one in, one out", sorted(a["direction"] for a in acls) == ["in", "out"])
    check("acl list formats", "ssh-in" in plain(net.format_list_acl(C, acls)))
step("acl list in", net.net_acl_list(C, "1200", None, "in"))
step("acl info", net.net_acl_info(C, "1200", "ssh-in"))
ok, info = step("network info (long: leases and ACLs too)", net.net_info(C, "1200"))
if ok:
    text = plain(net.format_info(C, info, True))
    check("long info lists the reservation and the ACLs", "10.120.0.5" in text and "drop-out" in text)
step("acl remove", net.net_acl_remove(C, "1200", "ssh-in"))
step("dhcp remove", net.net_dhcp_remove(C, "1200", "52:54:00:12:00:05"))
step("sriov pf list, none (the reference's 404)", net.net_sriov_pf_list(C, "hv1"), want=False)
step("sriov vf list, none", net.net_sriov_vf_list(C, "hv1"), want=False)
step("sriov pf list, unknown node", net.net_sriov_pf_list(C, "hv9"), want=False)
step("network remove bridged", net.net_remove(C, "1201"))
step("network remove managed", net.net_remove(C, "1200"))
step("network info after removal", net.net_info(C, "1200"), want=False)
print("failed steps: " + (", ".join(failed) if failed else "none"))
sys.exit(1 if failed else 0)
