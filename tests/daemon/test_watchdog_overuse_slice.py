# SPDX-License-Identifier: Apache-2.0
"""A slice's own over-use policy wins over the daemon's, end to end through
`gpuslice run --overuse`: under a daemon with the default policy (report),
the child of a `--overuse kill` slice that goes around the shim past the
cap is killed (gpuslice run exits 128+9) while the same offender in a
`--overuse report` slice is only reported; restarted with
`--overuse-policy kill`, the daemon still only reports the `report` slice
(its policy kept in the ledger). Judged by exit status, simgpu's ground
truth and `gpuslice events --json`. Bad values are refused by the CLI and
by the daemon."""
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

INTERVAL, GRACE = 0.5, 1.0
BOUND = INTERVAL + GRACE + 3.0  # detection + grace, with room for a loaded machine

# A slice whose only GPU process is a child without the shim holding 3 GiB
# against a 1 GiB cap; the shell exits with the child's status.
BAD = ('env -u LD_PRELOAD -u GPUSLICE_CONFIG "$HOLD" 3221225472 > "$DIR/%s.out"; exit $?')


def run_slice(w, policy, name):
    env = dict(w.env)
    env.update({"HOLD": hold_bin(w), "DIR": w.dir, "LD_LIBRARY_PATH": w.simlib,
                "ASAN_OPTIONS": "detect_leaks=0"})
    p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                          "--overuse", policy, "--name", name, "--", "/bin/sh", "-c", BAD % name],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w.children.append(p)
    check(wait_ready(os.path.join(w.dir, name + ".out")) == "ready", "%s's child failed" % name)
    sl = [s for s in w.slices() if s.get("name") == name]
    check(len(sl) == 1, "slice %s: %r" % (name, w.slices()))
    check(sl[0].get("overuse") == policy, "slice_overuse of %s: %r" % (name, sl[0]))
    sh = pid_of_child(p.pid, 0)[0]
    bad = pid_of_child(sh, 0)[0]
    return p, sl[0]["id"], bad


def cli_events(w):
    r = w.cli("events", "--json")
    check(r.returncode == 0, "gpuslice events --json: %d %s" % (r.returncode, r.stderr))
    out = json.loads(r.stdout)
    for e in out:
        e["pid"] = int(e.get("pid") or 0)
    return out


def wait_cli_event(w, pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in cli_events(w):
            if pred(e):
                return e
        time.sleep(0.1)
    fail("no event %s within %.1f s; events: %r; log: %s" % (what, timeout, cli_events(w),
                                                            w.log_text()[-3000:]))


w = World("wdslice", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    need_hold(w)
    w.start_daemon("--overuse-grace", str(int(GRACE * 1000)),
                   "--watch-interval", str(int(INTERVAL * 1000)))

    # Refused values: the CLI's usage error, the daemon's message.
    r = w.cli("run", "--sim", "--gpu", "100m", "--overuse", "stop", "--", "true")
    check(r.returncode == 2 and "--overuse: 'stop' is not one of report, kill, evict" in r.stderr,
          "run --overuse stop: %d %r" % (r.returncode, r.stderr))
    sleeper = w.spawn_sleeper()
    t, items = w.call(CREATE, [("gpu_milli", 100), ("pid", sleeper.pid), ("overuse", "default")])
    check(t == ERROR and "overuse policy 'default' is unknown (accepted: report, kill, evict)" in
          get(items, "message", ""), "create overuse=default: %r" % (items,))
    check(not w.slices(), "a refused create left a slice: %r" % w.slices())

    # Under the daemon's report: the report slice first, so both offend at once.
    rp, sid_r, bad_r = run_slice(w, "report", "reportme")
    kp, sid_k, bad_k = run_slice(w, "kill", "killme")
    t0 = time.monotonic()
    try:
        code = kp.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        fail("the --overuse kill slice's offender still runs after %.1f s: %r; log: %s" %
             (BOUND, cli_events(w), w.log_text()[-3000:]))
    print("--overuse kill: the offender was killed %.2f s after it was ready" %
          (time.monotonic() - t0))
    check(code == 128 + 9, "gpuslice run --overuse kill exited %r (want 137): %s" %
          (code, kp.stderr.read()))
    e = wait_cli_event(w, lambda e: e["pid"] == bad_k and e["action"] == "killed", 2,
                       "killed for the kill slice")
    check(e["slice"] == sid_k and e["reason"] in ("memory_over_cap", "no_shim"),
          "kill evidence: %r" % e)
    check(not smi_used(w, bad_k), "simgpu still shows the killed child's memory")

    e = wait_cli_event(w, lambda e: e["slice"] == sid_r and e["action"] == "reported", BOUND,
                       "reported for the report slice")
    time.sleep(INTERVAL + GRACE)
    check(rp.poll() is None and smi_used(w, bad_r),
          "the --overuse report slice's offender was stopped: %r" % rp.poll())
    killed = [e for e in cli_events(w) if e["slice"] == sid_r and e["action"] != "reported" and
              e["action"] != "detected"]
    check(not killed, "the report slice was acted on: %r" % killed)

    # The daemon's kill does not override the slice's own report, which the
    # restarted daemon reads back from its ledger.
    w.daemon.terminate()
    w.daemon.wait(timeout=10)
    w.start_daemon("--overuse-policy", "kill", "--overuse-grace", str(int(GRACE * 1000)),
                   "--watch-interval", str(int(INTERVAL * 1000)))
    sl = [s for s in w.slices() if s["id"] == sid_r]
    check(len(sl) == 1 and sl[0].get("overuse") == "report",
          "after the restart, slice %s: %r" % (sid_r, sl))
    time.sleep(BOUND)
    check(rp.poll() is None and smi_used(w, bad_r),
          "under --overuse-policy kill, the report slice's offender was stopped: %r; log: %s" %
          (rp.poll(), w.log_text()[-3000:]))
    acted = [e for e in cli_events(w) if e["slice"] == sid_r and e["action"] not in
             ("reported", "detected")]
    check(not acted, "the report slice was acted on under the daemon's kill: %r" % acted)
    print("PASS")
finally:
    cleanup_world(w)
