# SPDX-License-Identifier: Apache-2.0
"""compute_over_share: a `cap` slice whose child runs saturating kernels
without the shim (so its launches bypass the gate) is reported with its
measured and configured share, judged against simgpu's ground truth
(busy_ns); a `share` slice doing the same alone is not (idle time is lent)."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

w = World("wdcompute", devices=1)
try:
    burn = os.path.join(w.build, "bench/compute/gs-burn")
    ptx = os.path.join(w.simlib, "gs_kernels.ptx")
    if not os.path.exists(burn) or not os.path.exists(w.shim) or not os.path.exists(ptx):
        print("SKIP: gs-burn, the shim or the kernels are not built")
        sys.exit(SKIP)
    w.env["GS_KERNELS_PTX"] = ptx
    w.start_daemon("--overuse-grace", "500")

    def run(name, policy):
        p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "200m", "--policy", policy,
                              "--name", name, "--", "/bin/sh", "-c",
                              'env -u LD_PRELOAD "$0" --kernel 1ms --duration 6s', burn],
                             env=w.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        w.children.append(p)
        return p

    lent = run("lent", "share")
    capped = run("capped", "cap")
    w.wait_for(lambda: len(w.slices()) == 2, timeout=10, what="two slices")
    ids = {s["name"]: s["id"] for s in w.slices()}
    e = wait_event(w, lambda e: e["reason"] == "compute_over_share", 8,
                   "compute_over_share for the cap slice")
    check(e["slice"] == ids["capped"] and int(e["share"]) == 200 and int(e["util"]) > 250,
          "compute evidence: %r" % e)
    check(not [x for x in events(w) if x["reason"] == "compute_over_share" and
               x["slice"] == ids["lent"]], "a share slice judged on compute")
    # simgpu's ground truth agrees: the capped slice's child got far more than 20%.
    t0 = {p["pid"]: p["busy_ns"] for p in w.smi()["processes"]}
    time.sleep(1)
    t1 = {p["pid"]: p["busy_ns"] for p in w.smi()["processes"]}
    total = sum(t1[k] - t0.get(k, 0) for k in t1)
    check(total > 0.5e9, "simgpu busy over 1 s: %d ns" % total)
    print("PASS")
finally:
    for p in w.children:
        kill_tree(p.pid)
    w.cleanup()
