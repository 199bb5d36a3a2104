# SPDX-License-Identifier: Apache-2.0
"""The watchdog under --overuse-policy report, on simgpu's ground truth: a
slice's child that runs without the shim and allocates past the slice's
cap (memory_over_cap and no_shim), an unsliced GPU process on a GPU with
slices (unsliced), a forged books file (books_disagree); every verdict is
an event with its evidence, events survive a restart, and nothing is
killed."""
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

w = World("watchdog", devices=2, memory="16Gi", ctx_overhead="256Mi")
try:
    hold = need_hold(w)
    w.start_daemon("--overuse-grace", "1000", "--watch-interval", "250",
                   "--metrics-listen", "127.0.0.1:0")

    # Slice A: a good process with the shim, a child without it over the cap.
    a = Holder(w, '"$HOLD" 536870912 > "$DIR/good.out" & '
                  'env -u LD_PRELOAD -u GPUSLICE_CONFIG "$HOLD" 3221225472 > "$DIR/bad.out" & '
                  'wait')
    t, items = w.create(a.p.pid, 300, memory=2 * GIB)
    check(t == REPLY | CREATE, "create A: %r" % (items,))
    sid_a, gpu = get(items, "slice"), get(items, "slice_gpu").split(",", 1)[1]
    a.go(items)
    check(wait_ready(os.path.join(w.dir, "good.out")) == "ready", "good process failed")
    check(wait_ready(os.path.join(w.dir, "bad.out")) == "ready", "bad process failed")
    kids = pid_of_child(a.p.pid, 1)
    truth = {k: smi_used(w, k) for k in kids}
    bad = [k for k in kids if truth[k] and truth[k] > 2 * GIB]
    good = [k for k in kids if truth[k] and truth[k] < GIB]
    check(len(bad) == 1 and len(good) == 1, "ground truth of A's children: %r" % truth)
    bad, good = bad[0], good[0]

    e = wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["pid"] == bad, 3,
                   "memory_over_cap for the child without the shim")
    check(e["slice"] == sid_a and e["gpu"] == gpu and e["action"] == "detected",
          "over-cap evidence: %r" % e)
    check(int(e["cap"]) == 2 * GIB and int(e["used"]) == truth[bad], "over-cap figures: %r" % e)
    e = wait_event(w, lambda e: e["reason"] == "no_shim" and e["pid"] == bad, 3,
                   "no_shim for the child")
    check("never loaded the shim" in e["msg"], "no_shim message: %r" % e)
    wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["pid"] == bad and
               e["action"] == "reported", 3, "the over-cap verdict reported after grace")
    check(not [e for e in events(w) if e["pid"] == good and e["reason"] != "unsliced"],
          "the good process has a verdict: %r" % events(w))

    # An unsliced process on A's GPU.
    env_u = dict(w.env)
    env_u.update({"CUDA_VISIBLE_DEVICES": gpu, "LD_LIBRARY_PATH": w.simlib})
    outp = open(os.path.join(w.dir, "unsliced.out"), "w")
    u = subprocess.Popen([hold, str(256 * MIB)], env=env_u, stdout=outp)
    w.children.append(u)
    check(wait_ready(os.path.join(w.dir, "unsliced.out")) == "ready", "unsliced process failed")
    e = wait_event(w, lambda e: e["reason"] == "unsliced" and e["pid"] == u.pid, 3,
                   "unsliced for a process in no slice")
    check(e["gpu"] == gpu and e["slice"] == "-" and "ancestor" in e["msg"],
          "unsliced evidence (and why it is in no slice): %r" % e)
    e = wait_event(w, lambda e: e["reason"] == "unsliced" and e["pid"] == u.pid and
                   e["action"] == "reported", 3, "unsliced reported")
    check("--kill-unsliced" not in e["msg"], "report names a kill flag: %r" % e)

    # Slice D: a child whose parent exits (reparented away from the slice's
    # process) stays in its slice: mapped once, followed by identity.
    hd = Holder(w, '/bin/sh -c \'env -u LD_PRELOAD -u GPUSLICE_CONFIG "$HOLD" 268435456 '
                   '> "$DIR/d.out" & sleep 1\'; sleep 60')
    t, items = w.create(hd.p.pid, 100, memory=GIB)
    check(t == REPLY | CREATE, "create D: %r" % (items,))
    sid_d = get(items, "slice")
    hd.go(items)
    check(wait_ready(os.path.join(w.dir, "d.out")) == "ready", "D's process failed")
    mid = pid_of_child(hd.p.pid, 0)[0]
    orphan = pid_of_child(mid, 0)[0]
    wait_event(w, lambda e: e["reason"] == "no_shim" and e["pid"] == orphan, 3, "no_shim for D")
    w.wait_for(lambda: not os.path.exists("/proc/%d" % mid) or
               open("/proc/%d/stat" % orphan).read().rsplit(")", 1)[1].split()[1] != str(mid),
               timeout=5, what="D's child reparented")
    time.sleep(1.0)
    mine = [e for e in events(w) if e["pid"] == orphan]
    check(mine and all(e["slice"] == sid_d and e["reason"] == "no_shim" for e in mine),
          "the reparented child left its slice: %r" % mine)

    # Slice B: one process with the shim, then its books forged to say 0.
    hb = Holder(w, 'exec "$HOLD" 268435456 > "$DIR/b.out"')
    t, items = w.create(hb.p.pid, 100, memory=GIB)
    check(t == REPLY | CREATE, "create B: %r" % (items,))
    sid_b, sdir_b = get(items, "slice"), get(items, "slice_dir")
    check(get(items, "slice_gpu").split(",", 1)[1] == gpu, "B is not on A's GPU: %r" % (items,))
    hb.go(items)
    check(wait_ready(os.path.join(w.dir, "b.out")) == "ready", "B's process failed")
    time.sleep(0.6)
    check(not [e for e in events(w) if e["slice"] == sid_b],
          "an honest slice has a verdict: %r" % events(w))
    forge_books(sdir_b, hb.p.pid)
    e = wait_event(w, lambda e: e["reason"] == "books_disagree" and e["pid"] == hb.p.pid, 3,
                   "books_disagree for the forged books")
    check(e["slice"] == sid_b and int(e["books"]) == 0 and
          int(e["used"]) == smi_used(w, hb.p.pid), "books evidence: %r" % e)

    # Under report nothing is killed.
    time.sleep(1.5)
    for pid in (good, bad, u.pid, hb.p.pid):
        check(os.path.exists("/proc/%d" % pid) and smi_used(w, pid),
              "pid %d was stopped under report" % pid)
    check(not [e for e in events(w) if e["action"] == "killed"], "a kill under report")

    # /metrics counts them per reason and action, as the event log does.
    port = re.search(r"metrics: listening on 127\.0\.0\.1:(\d+)", w.log_text())
    check(port, "no metrics listen line")
    text = subprocess.run(["curl", "-sS", "--max-time", "10",
                           "http://127.0.0.1:%s/metrics" % port.group(1)],
                          capture_output=True, text=True).stdout
    counted = {(m.group(1), m.group(2)): int(m.group(3)) for m in re.finditer(
        r'^gpuslice_overuse_events_total\{reason="([a-z_]+)",action="([a-z_]+)"\} (\d+)$',
        text, re.M)}
    logged = {}
    for e in events(w):
        logged[(e["reason"], e["action"])] = logged.get((e["reason"], e["action"]), 0) + 1
    check(counted.get(("memory_over_cap", "reported"), 0) >= 1 and
          all(counted.get(k, 0) >= v for k, v in logged.items()),
          "overuse counters %r, events %r" % (counted, logged))

    # The CLI lists them; they survive a restart.
    r = w.cli("events", "--json")
    check(r.returncode == 0 and '"reason": "books_disagree"' in r.stdout,
          "gpuslice events --json: %r %r" % (r.stdout[-500:], r.stderr))
    r = w.cli("events")
    check(r.returncode == 0 and "memory_over_cap" in r.stdout and sid_a in r.stdout,
          "gpuslice events: %r %r" % (r.stdout[-500:], r.stderr))
    f = subprocess.Popen([w.cli_bin, "events", "--follow", "--json"], env=w.env,
                         stdout=subprocess.PIPE, text=True)
    first = f.stdout.readline()
    f.kill()
    f.wait()
    check(first.startswith("{\"seq\": 1,"), "events --follow --json: %r" % first)
    before = events(w)
    w.daemon.terminate()
    w.daemon.wait(timeout=10)
    # A crash mid-append leaves a torn last line: dropped when loading.
    with open(os.path.join(w.state, "events.log"), "a") as f:
        f.write("seq=999999 time=1 reason=mem")
    w.start_daemon("--watch-interval", "0")
    after = events(w)
    seqs = [e["seq"] for e in after]
    check(before and set(e["seq"] for e in before) <= set(seqs) and "999999" not in seqs,
          "events across a restart: %d -> %d" % (len(before), len(after)))
    print("PASS")
finally:
    cleanup_world(w)
