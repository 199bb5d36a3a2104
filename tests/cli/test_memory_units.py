# SPDX-License-Identifier: Apache-2.0
"""A plain number for memory means bytes (issue 15): `--gpu-memory 3000`,
`gpu_memory: 3000` in a spec and a local-API request for 3000 bytes are
refused up front with a message that suggests the unit (3000Mi), instead of
passing the fit check and failing at the first CUDA context."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

HINT = "3000 is 3000 bytes, below the 64Mi minimum; did you mean 3000Mi?"

w = World("memory-units", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    if not os.path.exists(w.shim):
        w.env["GPUSLICE_SHIM"] = "/dev/null"
    w.start_daemon()

    r = w.cli("run", "--gpu", "300m", "--gpu-memory", "3000", "--", "true", timeout=20)
    check(r.returncode != 0, "--gpu-memory 3000 was accepted: %s" % r.stderr)
    check("--gpu-memory: " + HINT in r.stderr, "run: %r" % r.stderr)
    r = w.cli("run", "--gpu", "300m", "--gpu-memory", "3000Mi", "--", "true", timeout=20)
    check(r.returncode == 0, "3000Mi refused: %s" % r.stderr)

    marker = os.path.join(w.dir, "started")
    spec = os.path.join(w.dir, "apis.yaml")
    with open(spec, "w") as f:
        f.write("- name: hami\n  command: [sh, -c, \"touch %s; exec sleep 600\"]\n"
                "  compute: {gpu: 300m, gpu_memory: 3000}\n" % marker)
    try:
        r = w.cli("up", spec, timeout=20)
    except subprocess.TimeoutExpired:
        fail("gpuslice up kept going on gpu_memory: 3000")
    check(r.returncode != 0, "up accepted gpu_memory: 3000: %s" % r.stderr)
    check("compute.gpu_memory: " + HINT in r.stderr, "up: %r" % r.stderr)
    check(not os.path.exists(marker), "the API was started")

    # The daemon refuses it too, whoever asks (a client of the local API).
    sleeper = w.spawn_sleeper()
    t, items = w.create(sleeper.pid, 300, memory=3000)
    msg = dict(items).get("message", "")
    check("3000 bytes is below the 64Mi minimum; did you mean 3000Mi?" in msg,
          "local API: %r %r" % (t, items))
    check(w.slices() == [], "slices left: %r" % w.slices())
    print("PASS")
finally:
    w.cleanup()
