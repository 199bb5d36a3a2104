# SPDX-License-Identifier: Apache-2.0
"""A request/response slice alone on the GPU (the model-serving case): each
request is one 2 ms kernel then cuStreamSynchronize (gs-reqload, closed
loop). Through the real daemon's arbiter and the shim's launch gate:

  * a 300m `share` slice alone gets the idle GPU: a batch of requests takes
    at most twice as long as in a whole-GPU slice (gate off). This is what
    broke when the gate kept a stale "pending" slice waiting for a drain
    report that never came, or made every request wait for a fresh grant
    (hundreds of ms per request: a 100x regression);
  * a 300m `cap` slice alone stays at its cap: the batch takes at least 1.8x
    as long (3.3x at an exact cap).

Coarse on purpose: timing on a loaded 2-core machine
varies, the regressions this catches do not."""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("arbrr", devices=1)
reqload = os.path.join(w.build, "bench/compute/gs-reqload")
ptx = os.path.join(w.simlib, "gs_kernels.ptx")
if not os.path.exists(reqload) or not os.path.exists(w.shim) or not os.path.exists(ptx):
    print("SKIP: gs-reqload, the shim or the kernels are not built")
    w.cleanup()
    sys.exit(SKIP)
w.env["GS_KERNELS_PTX"] = ptx
w.env["GPUSLICE_LOG"] = os.path.join(w.dir, "shim.log")

# A fixed batch of N requests, all due at once (the rate is far above what
# 2 ms requests allow), so the program runs closed loop and the latency of
# the last request to finish is the time the whole batch took.
N = 250
LOAD = [reqload, "--rate", "%d" % (N * 10), "--kernels", "1", "--kernel", "2ms",
        "--duration", "100ms", "--warmup", "0"]


def batch(args, what):
    r = subprocess.run(args, env=w.env, capture_output=True, text=True, timeout=40)
    check(r.returncode == 0, "%s: exit %d: %s %s" % (what, r.returncode, r.stdout, r.stderr))
    m = re.search(r"requests=(\d+) .* p50_us=([0-9.]+) p99_us=([0-9.]+) max_us=([0-9.]+)", r.stdout)
    check(m, "%s: no figures in %r" % (what, r.stdout))
    n, secs = int(m.group(1)), float(m.group(4)) / 1e6
    check(n == N, "%s: %d requests, expected %d" % (what, n, N))
    print("%-22s %d requests in %6.3f s: %6.1f req/s" % (what, n, secs, n / secs))
    return secs


def sliced(milli, policy):
    return [w.cli_bin, "run", "--sim", "--gpu", "%dm" % milli, "--policy", policy, "--"] + LOAD


try:
    w.start_daemon()
    # A whole GPU (--gpu 1): the same preload and slice, the gate off.
    base = batch([w.cli_bin, "run", "--sim", "--gpu", "1", "--"] + LOAD, "whole GPU (ungated)")
    share = batch(sliced(300, "share"), "300m share alone")
    check(share <= 2 * base,
          "300m share alone took %.2f s for %d requests, a whole GPU %.2f s: the idle GPU is "
          "not lent to a request/response slice" % (share, N, base))
    cap = batch(sliced(300, "cap"), "300m cap alone")
    check(cap >= 1.8 * base, "300m cap alone took %.2f s for %d requests, a whole GPU %.2f s: "
          "above its cap" % (cap, N, base))
    print("PASS")
finally:
    w.cleanup()
