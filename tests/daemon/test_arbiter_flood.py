# SPDX-License-Identifier: Apache-2.0
"""Compute-protocol floods (issue 17): connections that begin a GSAR frame
(the first 8 bytes of a HELLO) and never finish it, from another user
(nobody, through setpriv; the socket's group is given to nogroup as an
admin opens the daemon to a group of users) and from root, 1,024 each.

  * nobody's: 8 wait for their HELLO (the per-uid limit on silent
    connections), the rest are answered ERROR EBUSY at once, and the 8 are
    cut off with ERROR ETIMEDOUT after 5 s;
  * root's, kept up (every closed one re-opened): at most 64 silent
    connections are kept, the oldest cut off for a newcomer past 64, the
    rest at 5 s;
  * meanwhile a real shim (gs-burn in a 300m `share` slice, alone on the
    GPU) connects and gets leases: by simgpu's ground truth it uses the idle
    GPU (>= 60%; local enforcement would cap it at 30%), the shim's log says
    its leases come from gpusliced and never that it fell back to local
    enforcement, and the daemon charges the slice (slice_gpu_time)."""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

HERE = os.path.dirname(os.path.abspath(__file__))
NOGROUP = 65534
PARTIAL_HELLO = "4753415201000100"  # GSAR, version 1, type HELLO: 8 of 32 bytes
EBUSY, ETIMEDOUT = 16, 110

w = World("arbflood", devices=1)
burn = os.path.join(w.build, "bench/compute/gs-burn")
ptx = os.path.join(w.simlib, "gs_kernels.ptx")
if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: needs root and setpriv to flood as another user")
    w.cleanup()
    sys.exit(SKIP)
if not os.path.exists(burn) or not os.path.exists(w.shim) or not os.path.exists(ptx):
    print("SKIP: gs-burn, the shim or the kernels are not built")
    w.cleanup()
    sys.exit(SKIP)
w.env["GS_KERNELS_PTX"] = ptx
shim_log = os.path.join(w.dir, "shim.log")
w.env["GPUSLICE_LOG"] = shim_log


def flooder(uid, n, hold, keep=False):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "conn_flooder.py"), w.sock, str(n),
           "--send", PARTIAL_HELLO, "--hold", str(hold)] + (["--keep"] if keep else [])
    if uid:
        cmd = ["setpriv", "--reuid=%d" % uid, "--regid=%d" % NOGROUP, "--clear-groups", "--"] + cmd
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w.children.append(p)
    line = p.stdout.readline()
    check(line, "flooder uid %d printed nothing: %s" % (uid, p.stderr.read() if p.poll() is not None else ""))
    return p, json.loads(line)


def busy():
    return {p["pid"]: p["busy_ns"] for p in w.smi()["processes"]}


try:
    os.chmod(w.dir, 0o711)
    w.start_daemon()
    os.chown(w.sock, 0, NOGROUP)

    # 1. nobody: 1,024 partial frames.
    t0 = time.monotonic()
    nobody, r = flooder(65534, 1024, 9)
    print("nobody's partial frames: %r" % r)
    check(r["accepted"] <= 8 and r["refused"] >= 1016,
          "nobody kept %d silent connections (at most 8)" % r["accepted"])
    check(r["refusal"] == "ERROR errno %d" % EBUSY, "refusal: %r" % r["refusal"])
    out = json.loads(nobody.stdout.readline())
    print("nobody's silent connections: %r" % out)
    check(out["still_open"] == 0 and out["reply"] == "ERROR errno %d" % ETIMEDOUT,
          "nobody's partial frames not timed out: %r" % out)
    check(out["closed"] == 0 or 4.5 <= out["last_closed_s"] <= 9,
          "cut off after %.1f s (deadline 5 s)" % (out["last_closed_s"] or 0))

    # 2. root: 1,024 partial frames, kept up while the shim runs.
    root, r = flooder(0, 1024, 12, keep=True)
    print("root's partial frames: %r" % r)
    check(r["accepted"] <= 64, "root kept %d silent connections (at most 64)" % r["accepted"])

    # 3. A real shim under the flood.
    p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--name", "burn", "--",
                          burn, "--kernel", "1ms", "--duration", "5s"],
                         env=w.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w.children.append(p)
    w.wait_for(lambda: [s for s in w.slices() if s.get("name") == "burn"], timeout=15,
               what="the burn slice")
    pid = int([s for s in w.slices() if s.get("name") == "burn"][0]["pid"])
    time.sleep(1.0)
    b0, m0 = busy(), time.monotonic()
    time.sleep(2.0)
    b1, m1 = busy(), time.monotonic()
    share = 100.0 * (b1.get(pid, 0) - b0.get(pid, 0)) / ((m1 - m0) * 1e9)
    gpu_time = [s.get("gpu_time") for s in w.slices() if s.get("name") == "burn"]
    print("300m share alone under the flood: %.1f%% of the GPU (daemon: slice_gpu_time %r)"
          % (share, gpu_time))
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "gs-burn: exit %d: %s %s" % (p.returncode, out, err))
    with open(shim_log) as f:
        text = f.read()
    check("leases from gpusliced" in text, "the shim never got the daemon: %s" % text[-2000:])
    check("local enforcement" not in text, "the shim fell back to local enforcement: %s" % text[-2000:])
    check(share >= 60, "300m share alone got %.1f%% of the GPU under the flood" % share)
    check(gpu_time and gpu_time[0] and int(gpu_time[0]) >= 500,
          "the daemon did not charge the slice: slice_gpu_time %r" % gpu_time)

    # 4. root's silent connections churned: cut off for newcomers or at 5 s.
    out = json.loads(root.stdout.readline())
    print("root's silent connections: %r" % out)
    check(out["reply"] == "ERROR errno %d" % ETIMEDOUT, "root's partial frames: %r" % out)
    check(w.daemon.poll() is None, "daemon died")
    log = w.log_text()
    check(log.count("compute: shim pid") < 60, "the flood filled the log (%d lines)"
          % log.count("compute: shim pid"))
    print("PASS (%.0f s)" % (time.monotonic() - t0))
finally:
    w.cleanup()
