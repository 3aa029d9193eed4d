#!/usr/bin/python3
"""tools/lab's lab_alive (common.sh): a daemon killed with kill -9 but not yet
reaped is a zombie that keeps its comm; it is not running. The lab's scripts
took it for running, so a restart right after the kill (the chaos soak's
kill9-pvcnoded fault, bench/chaos/README.md) found the daemon "already
running", started nothing, and the node was fenced one deadline later.

    lab_alive_test.py <tools/lab directory>
"""
import subprocess
import sys
import time

lab = sys.argv[1]


def alive(pid, comm):
    r = subprocess.run(["bash", "-c", '. "$0/common.sh"; lab_alive "$1" "$2"', lab, str(pid), comm])
    return r.returncode == 0


def state(pid):
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


p = subprocess.Popen(["sleep", "600"])
try:
    assert alive(p.pid, "sleep"), "a running sleep is not alive"
    assert not alive(p.pid, "pvcnoded"), "another program's pid is alive"
    assert not alive("", "sleep"), "an empty pid is alive"
    p.send_signal(19)  # SIGSTOP: stopped is still running for the lab
    end = time.monotonic() + 30
    while state(p.pid) != "T":
        assert time.monotonic() < end, f"not stopped after SIGSTOP (state {state(p.pid)})"
        time.sleep(0.01)
    assert alive(p.pid, "sleep"), "a stopped sleep is not alive"
    p.kill()  # not reaped until p.wait(): a zombie
    end = time.monotonic() + 30
    while state(p.pid) != "Z":
        assert time.monotonic() < end, f"no zombie after kill -9 (state {state(p.pid)})"
        time.sleep(0.01)
    assert comm(p.pid) == "sleep", "the zombie lost its comm: the test proves nothing"
    assert not alive(p.pid, "sleep"), "a zombie (killed, not reaped) is taken for running"
finally:
    p.kill()
    p.wait()
assert not alive(p.pid, "sleep"), "a reaped process is alive"
print("lab_alive: running yes, zombie no, reaped no")
