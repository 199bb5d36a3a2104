# SPDX-License-Identifier: Apache-2.0
"""Compute shares end to end: `gpuslice run --sim` of saturating programs
(gs-burn, 1 ms kernels) through the shim's launch gate and gpusliced's
arbiter, judged by simgpu's ground truth (per-process busy_ns from
simgpu-smi, not the shim's or the arbiter's own accounting): 250m/750m
ordered and within 5 points, a `cap` slice alone not above its share, a
dead holder's neighbour takes the GPU, and a daemon killed with -9 and
restarted is survived (the slice keeps running, reconnects, and gets the
idle GPU again under `share`)."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("arbe2e", devices=1)
burn = os.path.join(w.build, "bench/compute/gs-burn")
ptx = os.path.join(w.simlib, "gs_kernels.ptx")
if not os.path.exists(burn) or not os.path.exists(w.shim) or not os.path.exists(ptx):
    print("SKIP: gs-burn, the shim or the kernels are not built")
    w.cleanup()
    sys.exit(SKIP)
w.env["GS_KERNELS_PTX"] = ptx
w.env["GPUSLICE_LOG"] = os.path.join(w.dir, "shim.log")


def start(name, milli, seconds, policy=None):
    args = [w.cli_bin, "run", "--sim", "--gpu", "%dm" % milli, "--name", name]
    if policy:
        args += ["--policy", policy]
    p = subprocess.Popen(args + ["--", burn, "--kernel", "1ms", "--duration", "%gs" % seconds],
                         env=w.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w.children.append(p)
    return p


def pids(names):
    out = {}
    w.wait_for(lambda: all(n in {s.get("name") for s in w.slices()} for n in names), timeout=15,
               what="slices %s" % (names,))
    for s in w.slices():
        if s.get("name") in names:
            out[s["name"]] = int(s["pid"])
    return out


def busy():
    return {p["pid"]: p["busy_ns"] for p in w.smi()["processes"]}


def window(seconds):
    b0, t0 = busy(), time.monotonic()
    time.sleep(seconds)
    b1, t1 = busy(), time.monotonic()
    return {pid: b1[pid] - b0.get(pid, 0) for pid in b1}, (t1 - t0) * 1e9


def finish(p, what):
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "%s: exit %d: %s %s" % (what, p.returncode, out, err))


try:
    w.start_daemon()

    # 1. 250m and 750m, both saturating.
    pa, pb = start("a", 250, 4), start("b", 750, 4)
    ids = pids(["a", "b"])
    time.sleep(0.8)
    d, _ = window(2.0)
    ba, bb = d.get(ids["a"], 0), d.get(ids["b"], 0)
    check(ba > 0 and bb > 0, "a slice did no work: %d %d" % (ba, bb))
    sa = 100.0 * ba / (ba + bb)
    print("250m/750m: %.1f%% / %.1f%% of the GPU time used" % (sa, 100 - sa))
    check(sa < 50, "shares not ordered: 250m got %.1f%%" % sa)
    check(abs(sa - 25) <= 5, "250m got %.1f%% of the GPU time" % sa)
    # 2. The 250m process dies: the 750m one takes the whole GPU.
    os.kill(ids["a"], signal.SIGKILL)
    pa.communicate(timeout=30)
    time.sleep(0.3)
    d, wall = window(0.8)
    fb = 100.0 * d.get(ids["b"], 0) / wall
    print("750m after its neighbour died: %.1f%% of the GPU" % fb)
    check(fb >= 70, "750m got %.1f%% after its neighbour died" % fb)
    finish(pb, "750m")

    # 3. cap alone.
    pc = start("c", 300, 3, "cap")
    ids = pids(["c"])
    time.sleep(0.6)
    d, wall = window(2.0)
    fc = 100.0 * d.get(ids["c"], 0) / wall
    print("300m cap alone: %.1f%% of the GPU" % fc)
    check(fc <= 35, "cap slice used %.1f%% (share 30%%)" % fc)
    check(fc >= 10, "cap slice starved: %.1f%%" % fc)
    finish(pc, "cap")

    # 4. kill -9 and restart the daemon under a running share slice.
    pd = start("d", 300, 6)
    ids = pids(["d"])
    time.sleep(0.8)
    w.daemon.send_signal(signal.SIGKILL)
    w.daemon.wait()
    time.sleep(0.7)
    w.start_daemon()
    check([s for s in w.slices() if s.get("name") == "d"], "slice lost across the restart")
    time.sleep(1.5)  # the shim reconnects (every 500 ms) and leaves local enforcement
    d, wall = window(1.0)
    fd = 100.0 * d.get(ids["d"], 0) / wall
    print("300m share alone after a daemon restart: %.1f%% of the GPU" % fd)
    check(fd >= 60, "300m share alone got %.1f%% after the restart (idle GPU not lent)" % fd)
    finish(pd, "restart")
    print("PASS")
finally:
    w.cleanup()
