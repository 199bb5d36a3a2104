# SPDX-License-Identifier: Apache-2.0
"""A slice's memory is counted until every process that holds it is gone
(issue 13): the slice's first process starts a grandchild that leaves its
tree (setsid, double fork) and holds 2 GiB, then exits. The slice is not
freed: it stays `draining` in ls (with the grandchild's memory, by NVML),
and a second slice that would over-commit the GPU is refused. Once the
grandchild is gone by simgpu's ground truth, the slice is freed and the
second slice fits. A daemon restarted meanwhile keeps the slice draining."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa


w = World("draining", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    need_hold(w)
    w.start_daemon("--watch-interval", "250")
    h = outliving_holder(w, 2147483648)
    t, items = w.create(h.p.pid, 600, memory=4 * GIB)
    check(t == REPLY | CREATE, "create A: %r" % (items,))
    sid = get(items, "slice")
    h.go(items)
    check(wait_ready(os.path.join(w.dir, "g.out")) == "ready", "the grandchild failed")
    held = [p for p in w.smi()["processes"] if p.get("alive", True) and
            p["used_bytes"] >= 2 * GIB]
    check(len(held) == 1, "simgpu processes: %r" % w.smi()["processes"])
    g = held[0]["pid"]
    STRAYS.append(g)
    h.p.wait(timeout=10)
    with open("/proc/%d/stat" % g) as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    check(ppid != h.p.pid, "the grandchild is still below the slice's process")

    # The slice's process is gone; its grandchild still holds 2 GiB.
    w.wait_for(lambda: (ls_slice(w, sid, missing_ok=True) or {}).get("state") == "draining",
               timeout=5, what="slice %s draining: %r" % (sid, ls_slice(w, sid, missing_ok=True)))
    s = ls_slice(w, sid, missing_ok=True)
    check(s["memory_used_bytes"] is not None and s["memory_used_bytes"] >= smi_used(w, g),
          "a draining slice shows its grandchild's memory: %r (truth %r)" % (s, smi_used(w, g)))
    r = w.cli("ls")
    check(r.returncode == 0 and "draining" in r.stdout, "ls table: %s" % r.stdout)
    other = w.spawn_sleeper()
    t, items = w.create(other.pid, 600)
    check(t == ERROR, "a second 600m slice over-commits the GPU while %s drains: %r" %
          (sid, items))
    check(smi_used(w, g) == 2 * GIB + 256 * MIB, "the grandchild's memory by simgpu")

    # A restarted daemon keeps it draining: its process is gone, not its memory.
    w.daemon.terminate()
    w.daemon.wait(timeout=10)
    w.start_daemon("--watch-interval", "250")
    time.sleep(0.6)
    check((ls_slice(w, sid, missing_ok=True) or {}).get("state") == "draining",
          "after a restart: %r" % ls_slice(w, sid, missing_ok=True))
    t, items = w.create(other.pid, 600)
    check(t == ERROR, "a 600m slice over-commits the GPU after the restart: %r" % (items,))

    # The grandchild goes: the driver frees its memory, the daemon the slice.
    os.kill(g, signal.SIGKILL)
    w.wait_for(lambda: not smi_used(w, g), timeout=5, what="the grandchild's memory freed")
    w.wait_for(lambda: ls_slice(w, sid, missing_ok=True) is None, timeout=5,
               what="slice %s freed" % sid)
    t, items = w.create(other.pid, 600)
    check(t == REPLY | CREATE, "the second slice once the first is freed: %r" % (items,))
    check("no process of it holds GPU memory" in w.log_text(), "the log says why it was freed")
    print("PASS")
finally:
    cleanup_world(w)
