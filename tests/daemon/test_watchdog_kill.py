# SPDX-License-Identifier: Apache-2.0
"""The watchdog under --overuse-policy kill, judged by simgpu's ground
truth: a slice's child without the shim over the cap is killed within
interval + grace + 1 s, and so is a slice's process on a GPU its slice was
not placed on, while the slice's well-behaved process, a well-behaved
neighbour slice on the same GPU and an unsliced process (no
--kill-unsliced) keep running and keep their memory; with --kill-unsliced
the unsliced process is killed too."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

INTERVAL, GRACE = 0.5, 1.0
w = World("wdkill", devices=2, memory="16Gi", ctx_overhead="256Mi")
try:
    hold = need_hold(w)
    w.start_daemon("--overuse-policy", "kill", "--overuse-grace", str(int(GRACE * 1000)))
    gpus = [d["uuid"] for d in w.smi()["devices"]]

    # B: a well-behaved neighbour.
    hb = Holder(w, 'exec "$HOLD" 268435456 > "$DIR/b.out"')
    t, items = w.create(hb.p.pid, 200, memory=GIB)
    check(t == REPLY | CREATE, "create B: %r" % (items,))
    gpu = get(items, "slice_gpu").split(",", 1)[1]
    other = [g for g in gpus if g != gpu][0]
    hb.go(items)
    check(wait_ready(os.path.join(w.dir, "b.out")) == "ready", "B's process failed")

    # An unsliced process on the same GPU.
    env_u = dict(w.env)
    env_u.update({"CUDA_VISIBLE_DEVICES": gpu, "LD_LIBRARY_PATH": w.simlib})
    u = subprocess.Popen([hold, str(256 * MIB)], env=env_u,
                         stdout=open(os.path.join(w.dir, "u.out"), "w"))
    w.children.append(u)
    check(wait_ready(os.path.join(w.dir, "u.out")) == "ready", "unsliced process failed")

    # A: a good process and a child without the shim over the cap. The
    # child waits for a line on its stdin (a FIFO) before allocating.
    fifo = os.path.join(w.dir, "bad.go")
    os.mkfifo(fifo)
    a = Holder(w, '"$HOLD" 536870912 > "$DIR/good.out" & '
                  '(read x < "$DIR/bad.go"; exec env -u LD_PRELOAD -u GPUSLICE_CONFIG "$HOLD" '
                  '3221225472 > "$DIR/bad.out") & wait')
    t, items = w.create(a.p.pid, 300, memory=2 * GIB)
    check(t == REPLY | CREATE, "create A: %r" % (items,))
    sid_a = get(items, "slice")
    check(get(items, "slice_gpu").split(",", 1)[1] == gpu, "A is not on B's GPU")
    a.go(items)
    check(wait_ready(os.path.join(w.dir, "good.out")) == "ready", "good process failed")
    kids = pid_of_child(a.p.pid, 1)
    good = [k for k in kids if smi_used(w, k)]
    check(len(good) == 1, "A's good process on the GPU: %r" % kids)
    good = good[0]
    bad = [k for k in kids if k != good][0]
    time.sleep(1.5)
    early = [e for e in events(w) if e["pid"] != u.pid]
    check(not early, "verdicts on well-behaved slices: %r" % early[:1])
    with open(fifo, "w") as f:
        f.write("go\n")
    check(wait_ready(os.path.join(w.dir, "bad.out")) == "ready", "bad process failed")
    t0 = time.monotonic()
    deadline = t0 + INTERVAL + GRACE + 1.0
    while os.path.exists("/proc/%d" % bad) and smi_used(w, bad) and time.monotonic() < deadline:
        st = open("/proc/%d/stat" % bad).read().rsplit(")", 1)[1].split()[0] \
            if os.path.exists("/proc/%d/stat" % bad) else "X"
        if st in ("Z", "X"):
            break
        time.sleep(0.02)
    latency = time.monotonic() - t0
    check(time.monotonic() < deadline, "the child over the cap still runs after %.2f s: %s" %
          (latency, events(w)))
    check(not smi_used(w, bad), "simgpu still shows the killed child's memory")
    print("killed %.2f s after its over-use began (bound %.1f s)" % (latency,
                                                                     INTERVAL + GRACE + 1))
    e = wait_event(w, lambda e: e["pid"] == bad and e["action"] == "killed", 1, "the kill")
    check(e["slice"] == sid_a and e["reason"] in ("memory_over_cap", "no_shim"),
          "kill evidence: %r" % e)

    # Everyone else keeps running, with their memory.
    time.sleep(INTERVAL + GRACE)
    for name, pid in (("A's good process", good), ("B", hb.p.pid), ("unsliced", u.pid)):
        check(os.path.exists("/proc/%d" % pid) and smi_used(w, pid),
              "%s (%d) was stopped" % (name, pid))
    check(hb.p.poll() is None and u.poll() is None, "a well-behaved process exited")
    e = wait_event(w, lambda e: e["pid"] == u.pid and e["action"] == "reported", 2,
                   "unsliced reported, not killed")
    check("--kill-unsliced" in e["msg"], "why the unsliced process lives: %r" % e)

    # C: a slice's process on the other GPU.
    hc = Holder(w, '(CUDA_VISIBLE_DEVICES="$OTHER" exec env -u LD_PRELOAD "$HOLD" 268435456 '
                   '> "$DIR/c.out") & wait', {"OTHER": other})
    t, items = w.create(hc.p.pid, 100, memory=GIB)
    check(t == REPLY | CREATE, "create C: %r" % (items,))
    hc.go(items)
    check(wait_ready(os.path.join(w.dir, "c.out")) == "ready", "C's process failed")
    c = pid_of_child(hc.p.pid, 0)[0]
    e = wait_event(w, lambda e: e["pid"] == c and e["reason"] == "wrong_gpu" and
                   e["action"] == "killed", INTERVAL + GRACE + 1.5, "wrong_gpu killed")
    check(e["gpu"] == other, "wrong_gpu evidence: %r" % e)

    # With --kill-unsliced the unsliced process goes too.
    w.daemon.terminate()
    w.daemon.wait(timeout=10)
    w.start_daemon("--overuse-policy", "kill", "--overuse-grace", str(int(GRACE * 1000)),
                   "--kill-unsliced")
    u.wait(timeout=INTERVAL + GRACE + 3)
    check(u.returncode == -9, "unsliced process: exit %r" % u.returncode)
    check(hb.p.poll() is None and os.path.exists("/proc/%d" % good), "a slice process was killed")
    print("PASS")
finally:
    cleanup_world(w)
