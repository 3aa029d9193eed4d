#!/usr/bin/python3
# The reference PVC client's storage commands against our API: each call is
# what the reference `pvc storage ...` command makes (its pvc.lib.storage
# functions, with the arguments its Click arguments and options give: PGs
# and sizes as strings, the tier `default`, `--format raw` unless given),
# each answer goes through the reference's own formatters. The reference
# client is not part of this repository: PYTHONPATH names a checkout's
# client-cli/ (see api_reference_client_test.cpp). The test has a mini
# Ceph, the pool `rbd` recorded with statistics, and OSD 0 recorded as the
# primary's collection records it.
# Usage: reference_client_storage.py PORT KEY SCRATCH_DIR
# Prints one line per step; exit status 1 if any step did not answer as the
# reference API would.
import json
import os
import re
import subprocess
import sys

import pvc.lib.storage as st

C = {"api_scheme": "http", "api_host": "127.0.0.1:" + sys.argv[1], "api_prefix": "/api/v1",
     "api_key": sys.argv[2], "verify_ssl": False, "debug": False}
scratch = sys.argv[3]
failed = []


def plain(text):
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def step(name, result, want=True, message=None):
    ok = result[0] == want and (message is None or result[1] == message)
    print(("ok   " if ok else "FAIL ") + name + ": " + json.dumps(result[1])[:400])
    if not ok:
        failed.append(name)
        if message is not None:
            print("     wanted: " + json.dumps(message))
    return result


def check(name, condition):
    print(("ok   " if condition else "FAIL ") + name)
    if not condition:
        failed.append(name)


# pvc storage status / util
ok, status = step("storage status", st.ceph_status(C))
if ok:
    text = plain(st.format_raw_output(C, status))
    check("status formats", "Ceph cluster status (primary node hv1)" in text and "HEALTH_OK" in text)
ok, util = step("storage util", st.ceph_util(C))
if ok:
    check("util formats", "Ceph cluster utilization (primary node hv1)" in plain(st.format_raw_output(C, util)))

# pvc storage pool add|list|info|set-pgs (click: pgs a string, tier default, replcfg default)
step("pool add", st.ceph_pool_add(C, "refpool", "8", "copies=2,mincopies=1", "default"),
     message='Created RBD pool "refpool" with 8 PGs')
step("pool add duplicate", st.ceph_pool_add(C, "refpool", "8", "copies=2,mincopies=1", "default"), want=False)
step("pool add bad replcfg", st.ceph_pool_add(C, "refbad", "8", "copies=two", "default"), want=False,
     message='ERROR: Replication configuration "copies=two" is not valid.')
ok, pools = step("pool list rbd", st.ceph_pool_list(C, "rbd"))
if ok:
    check("pool list formats", "rbd default 8" in plain(st.format_list_pool(C, pools)))
step("pool list, no match (the reference's 404)", st.ceph_pool_list(C, "nomatch"), want=False,
     message="Pool not found.")
ok, pool = step("pool info", st.ceph_pool_info(C, "refpool"))
if ok:
    check("pool info: name, tier, pgs", pool["name"] == "refpool" and pool["tier"] == "default" and pool["pgs"] == "8")
step("pool set-pgs", st.ceph_pool_set_pgs(C, "refpool", "16"), message="Set PGs count to 16 for RBD pool 'refpool'.")
step("pool set-pgs not a power of two", st.ceph_pool_set_pgs(C, "refpool", "12"), want=False,
     message="ERROR: Invalid PGs number '12': must be a non-zero power of 2.")

# pvc storage volume add|info|list|resize|clone|rename|upload
step("volume list, none (the reference's 404)", st.ceph_volume_list(C, None, "refpool"), want=False,
     message="Volume not found.")
step("volume add", st.ceph_volume_add(C, "refpool", "refvol", "8M"),
     message="Created RBD volume 'refvol' of size '8192K' in pool 'refpool'.")
step("volume add duplicate", st.ceph_volume_add(C, "refpool", "refvol", "8M"), want=False)
step("volume add bad unit", st.ceph_volume_add(C, "refpool", "refv2", "10k"), want=False,
     message="ERROR: Requested volume size '10k' does not have a valid SI unit")
step("volume add, no pool", st.ceph_volume_add(C, "nopool", "refv2", "8M"), want=False,
     message="ERROR: No pool with name 'nopool' is present in the cluster.")
ok, vol = step("volume info", st.ceph_volume_info(C, "refpool", "refvol"))
if ok:
    check("volume info: size", vol["stats"]["size"] == "8192K" and vol["pool"] == "refpool")
step("volume resize", st.ceph_volume_modify(C, "refpool", "refvol", new_size="16M"),
     message="Resized RBD volume 'refvol' to size '16M' in pool 'refpool'.")
step("volume resize, none given", st.ceph_volume_modify(C, "refpool", "refvol"), want=False,
     message="At least one modification must be specified")
step("volume clone", st.ceph_volume_clone(C, "refpool", "refvol", "refclone"),
     message="Cloned RBD volume 'refvol' to 'refclone' in pool 'refpool'")
step("volume rename", st.ceph_volume_modify(C, "refpool", "refclone", new_name="refren"),
     message="Renamed RBD volume 'refclone' to 'refren' in pool 'refpool'.")
ok, vols = step("volume list", st.ceph_volume_list(C, None, "refpool"))
if ok:
    check("volume list: both", sorted(v["name"] for v in vols) == ["refren", "refvol"])
    text = plain(st.format_list_volume(C, vols))
    check("volume list formats", "refren refpool 16M" in text and "refvol refpool 16M" in text)
raw = os.path.join(scratch, "ref.raw")
with open(raw, "wb") as f:
    f.write(bytes((i * 131 + 7) % 251 for i in range(3 * 1024 * 1024 + 5)))
step("volume upload raw (no file size, as the client sends it)",
     st.ceph_volume_upload(C, "refpool", "refvol", "raw", raw),
     message="Wrote uploaded file to volume 'refvol' in pool 'refpool'.")
qcow = os.path.join(scratch, "ref.qcow2")
subprocess.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow], check=True)
step("volume upload qcow2", st.ceph_volume_upload(C, "refpool", "refren", "qcow2", qcow),
     message="Converted and wrote uploaded file to volume 'refren' in pool 'refpool'.")
step("volume upload, no volume", st.ceph_volume_upload(C, "refpool", "nov", "raw", raw), want=False,
     message="Target volume 'nov' does not exist in pool 'refpool'.")

# pvc storage volume snapshot add|list|rename|remove
step("snapshot list, none (the reference's 404)", st.ceph_snapshot_list(C, None, None, "refpool"), want=False,
     message="Volume snapshot not found.")
step("snapshot add", st.ceph_snapshot_add(C, "refpool", "refvol", "snap1"),
     message="Created RBD snapshot 'snap1' of volume 'refvol' in pool 'refpool'.")
step("snapshot add duplicate", st.ceph_snapshot_add(C, "refpool", "refvol", "snap1"), want=False)
step("snapshot add, no volume", st.ceph_snapshot_add(C, "refpool", "nov", "snap1"), want=False,
     message="ERROR: No volume with name 'nov' is present in pool 'refpool'.")
ok, snaps = step("snapshot list", st.ceph_snapshot_list(C, None, "refvol", "refpool"))
if ok:
    check("snapshot list: one", len(snaps) == 1 and snaps[0]["snapshot"] == "snap1")
    check("snapshot list formats", "snap1 refvol refpool" in plain(st.format_list_snapshot(C, snaps)))
step("snapshot info", st.ceph_snapshot_info(C, "refpool", "refvol", "snap1"))
step("snapshot rename", st.ceph_snapshot_modify(C, "refpool", "refvol", "snap1", new_name="snap2"),
     message="Renamed RBD snapshot 'snap1' to 'snap2' for volume 'refvol' in pool 'refpool'.")
ok, vol = step("volume info: snapshot counted", st.ceph_volume_info(C, "refpool", "refvol"))
if ok:
    check("snapshot_count 1", vol["stats"]["snapshot_count"] == 1)
step("snapshot remove", st.ceph_snapshot_remove(C, "refpool", "refvol", "snap2"),
     message="Removed RBD snapshot 'snap2' of volume 'refvol' in pool 'refpool'.")
step("snapshot remove missing", st.ceph_snapshot_remove(C, "refpool", "refvol", "snap2"), want=False,
     message="ERROR: No snapshot with name 'snap2' is present of volume refvol in pool refpool.")

# pvc storage osd list|info|in|out|set|unset
ok, osds = step("osd list", st.ceph_osd_list(C, None))
if ok:
    check("osd list formats", plain(st.format_list_osd(C, osds)).startswith("0 hv1 /dev/sdb"))
step("osd info", st.ceph_osd_info(C, "0"))
step("osd list, no match (the reference's 404)", st.ceph_osd_list(C, "7"), want=False, message="OSD not found.")
step("osd out", st.ceph_osd_state(C, "0", "out"), message="Set OSD 0 offline.")
step("osd in", st.ceph_osd_state(C, "0", "in"), message="Set OSD 0 online.")
step("osd out, no such OSD", st.ceph_osd_state(C, "9", "out"), want=False,
     message="ERROR: No OSD with ID '9' is present in the cluster.")
step("osd set noout", st.ceph_osd_option(C, "noout", "set"), message="Set OSD property 'noout'.")
step("osd unset noout", st.ceph_osd_option(C, "noout", "unset"), message="Unset OSD property 'noout'.")

# removals
step("volume remove", st.ceph_volume_remove(C, "refpool", "refren"),
     message="Removed RBD volume 'refren' in pool 'refpool'.")
step("volume remove missing", st.ceph_volume_remove(C, "refpool", "refren"), want=False,
     message="ERROR: No volume with name 'refren' is present in pool 'refpool'.")
step("pool remove", st.ceph_pool_remove(C, "refpool"), message="Removed RBD pool 'refpool' and all volumes.")
step("pool info after removal", st.ceph_pool_info(C, "refpool"), want=False)
print("failed steps: " + (", ".join(failed) if failed else "none"))
sys.exit(1 if failed else 0)
