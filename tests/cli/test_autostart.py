# SPDX-License-Identifier: Apache-2.0
"""gpuslice run starts a daemon when none answers (with --sim), and later
commands use it; ls --json lists GPUs and slices with stable keys."""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

w = World("autostart", devices=2, memory="8Gi")
daemon_pid = None
try:
    if not os.path.exists(w.shim):
        w.env["GPUSLICE_SHIM"] = "/dev/null"
    check(not os.path.exists(w.sock), "socket exists before the test")
    r = w.cli("run", "--sim", "--gpu", "250m", "--", "true")
    check(r.returncode == 0, "run without a daemon: %d %s" % (r.returncode, r.stderr))
    check("starting gpusliced" in r.stderr, "no notice: %r" % r.stderr)
    # The state directory has the daemon's modes: as root, readable by every
    # user's shim (their slice configs are below it).
    mode = os.stat(w.state).st_mode & 0o777
    check(mode == (0o755 if os.geteuid() == 0 else 0o700), "state dir mode %o" % mode)
    t, items = w.call(STATUS)
    check(t == REPLY | STATUS and get(items, "sim") == "1", "daemon not running: %r" % (items,))
    daemon_pid = int(get(items, "pid"))

    hold = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                             "--name", "api-a", "--", "sleep", "30"], env=w.env)
    w.wait_for(lambda: len(w.slices()) == 1, what="slice of the held run")
    r = w.cli("ls", "--json")
    check(r.returncode == 0, "ls --json: %s" % r.stderr)
    doc = json.loads(r.stdout)
    gpus = doc["gpus"]
    check(len(gpus) == 2, "gpus: %r" % gpus)
    for g in gpus:
        for k in ("index", "uuid", "name", "healthy", "memory_total_bytes", "share_free_milli",
                  "memory_free_bytes", "context_overhead_bytes", "slices"):
            check(k in g, "gpu key %s missing" % k)
    sl = [s for g in gpus for s in g["slices"]]
    check(len(sl) == 1, "slices: %r" % sl)
    s = sl[0]
    for k in ("id", "name", "gpu_milli", "whole_gpus", "memory_limit_bytes", "memory_used_bytes",
              "policy", "pid", "uid", "created_unix_seconds", "config_path", "slice_dir_path"):
        check(k in s, "slice key %s missing" % k)
    check(s["name"] == "api-a" and s["gpu_milli"] == 300 and s["memory_limit_bytes"] == 1 << 30,
          "slice: %r" % s)
    check(sorted(g["share_free_milli"] for g in gpus) == [700, 1000], "free: %r" % gpus)
    r = w.cli("ls")
    check(r.returncode == 0 and "api-a" in r.stdout and "300m" in r.stdout, "ls table: " + r.stdout)
    r = w.cli("--help")
    check(r.returncode == 0 and all(c in r.stdout for c in ("run", "ls", "up")), "help")
    for c in ("run", "ls", "up"):
        r = w.cli(c, "--help")
        check(r.returncode == 0 and "usage" in (r.stdout + r.stderr).lower(), "%s --help" % c)
    hold.terminate()
    hold.wait()

    # memory_used is NVML's ground truth for the slice's process.
    alloc = os.path.join(w.build, "tests/daemon/gs_alloc_hold")
    if os.path.exists(alloc) and os.path.exists(w.shim):
        p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "400m", "--gpu-memory", "2Gi",
                              "--", alloc, str(1 << 30)], env=w.env, stdout=subprocess.PIPE, text=True)
        check(p.stdout.readline().startswith("ready"), "alloc helper did not start")
        doc = json.loads(w.cli("ls", "--json").stdout)
        sl = [s for g in doc["gpus"] for s in g["slices"]]
        check(len(sl) == 1 and sl[0]["memory_used_bytes"] is not None
              and sl[0]["memory_used_bytes"] >= 1 << 30, "memory_used_bytes: %r" % sl)
        p.terminate()
        p.wait()
    print("PASS")
finally:
    if daemon_pid:
        try:
            os.kill(daemon_pid, signal.SIGTERM)
            for _ in range(500):  # it is not our child: wait for it to go
                os.kill(daemon_pid, 0)
                time.sleep(0.02)
        except OSError:
            pass
    w.cleanup()
