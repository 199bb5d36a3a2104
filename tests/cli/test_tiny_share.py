# SPDX-License-Identifier: Apache-2.0
"""Quantities that passed the plan and then failed (issue 17): a share
whose default memory cannot hold one CUDA context (10m of 16 GiB is 162 MiB,
a context takes 256 MiB) is refused up front by `run` and by `up`'s plan,
saying why and what to ask for, instead of failing in the slice config (and
`up` restarting it forever); `--gpu 9` is refused by the parser like the
protocol refuses it, and whole GPUs beyond the node's count name the count."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

w = World("tiny-share", devices=2, memory="16Gi", ctx_overhead="256Mi")
try:
    if not os.path.exists(w.shim):
        w.env["GPUSLICE_SHIM"] = "/dev/null"
    w.start_daemon()

    r = w.cli("run", "--gpu", "10m", "--", "true", timeout=20)
    check(r.returncode != 0, "a 10m slice was made: %s" % r.stderr)
    for want in ("gpu share 10m gets 162.0Mi of memory by default", "a share of at least 16m",
                 "gpu memory above 256.0Mi"):
        check(want in r.stderr, "run --gpu 10m: %r not in %r" % (want, r.stderr))
    check("context_overhead" not in r.stderr, "internal message shown: %r" % r.stderr)
    check(w.slices() == [], "slices left: %r" % w.slices())
    r = w.cli("run", "--gpu", "16m", "--", "true", timeout=20)
    check(r.returncode == 0, "16m refused: %s" % r.stderr)
    r = w.cli("run", "--gpu", "10m", "--gpu-memory", "512Mi", "--", "true", timeout=20)
    check(r.returncode == 0, "10m with 512Mi refused: %s" % r.stderr)
    r = w.cli("run", "--gpu", "100m", "--gpu-memory", "200Mi", "--", "true", timeout=20)
    check(r.returncode != 0 and "gpu memory 200.0Mi is not more than a CUDA context takes"
          in r.stderr, "200Mi: %d %r" % (r.returncode, r.stderr))

    # up: refused by the plan before anything starts, never restarted.
    marker = os.path.join(w.dir, "started")
    spec = os.path.join(w.dir, "apis.yaml")
    with open(spec, "w") as f:
        f.write("- name: tiny\n  command: [sh, -c, \"touch %s; exec sleep 600\"]\n"
                "  compute: {gpu: 10m}\n" % marker)
    try:
        r = w.cli("up", spec, timeout=20)
    except subprocess.TimeoutExpired:
        fail("gpuslice up kept going on a 10m API")
    check(r.returncode != 0, "up accepted a 10m API: %s" % r.stderr)
    check("API tiny" in r.stderr and "a share of at least 16m" in r.stderr,
          "up's refusal: %r" % r.stderr)
    check(not os.path.exists(marker), "the API was started")
    check(w.slices() == [], "slices left: %r" % w.slices())

    # Whole GPUs: the parser's bound is the protocol's (8).
    for q in ("9", "64", "9000m"):
        r = w.cli("run", "--gpu", q, "--", "true", timeout=20)
        check(r.returncode != 0 and "more than 8 GPUs, the most one slice holds" in r.stderr
              and "not a number up to 8000" not in r.stderr, "--gpu %s: %r" % (q, r.stderr))
    r = w.cli("run", "--gpu", "4", "--", "true", timeout=20)
    check(r.returncode != 0 and "this node has 2 GPUs" in r.stderr, "--gpu 4: %r" % r.stderr)
    print("PASS")
finally:
    w.cleanup()
