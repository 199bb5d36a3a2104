# SPDX-License-Identifier: Apache-2.0
"""A draining slice does not keep its dead process's pid: the slice's process
exits while a grandchild that left its tree holds GPU memory (the slice
drains), and a new process gets the same pid (root sets ns_last_pid). A
slice for that new process is made; the draining one stays draining. On
the previous daemon the create was refused ('process N already has slice')
for as long as the first slice drained. SKIP when not root or when the pid
cannot be had again (another process took it)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa


if os.geteuid() != 0:
    print("SKIP: needs root (ns_last_pid)")
    sys.exit(SKIP)
w = World("drainreuse", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    need_hold(w)
    w.start_daemon("--watch-interval", "250")
    h = outliving_holder(w, 1073741824)
    t, items = w.create(h.p.pid, 500, memory=4 * GIB)
    check(t == REPLY | CREATE, "create A: %r" % (items,))
    sid = get(items, "slice")
    old_pid = h.p.pid
    h.go(items)
    check(wait_ready(os.path.join(w.dir, "g.out")) == "ready", "the grandchild failed")
    held = [p for p in w.smi()["processes"] if p.get("alive", True) and
            p["used_bytes"] >= GIB]
    check(len(held) == 1, "simgpu processes: %r" % w.smi()["processes"])
    STRAYS.append(held[0]["pid"])
    h.p.wait(timeout=10)
    w.wait_for(lambda: (ls_slice(w, sid, missing_ok=True) or {}).get("state") == "draining",
               timeout=5, what="slice %s draining" % sid)

    again = spawn_with_pid(old_pid)
    if again is None:
        print("SKIP: pid %d could not be had again" % old_pid)
        sys.exit(SKIP)
    STRAYS.append(again.pid)
    t, items = w.create(again.pid, 300)
    check(t == REPLY | CREATE,
          "a slice for the new process %d, which has the draining slice's old pid: %r" %
          (again.pid, items))
    check((ls_slice(w, sid, missing_ok=True) or {}).get("state") == "draining",
          "the first slice still drains: %r" % ls_slice(w, sid, missing_ok=True))
    again.kill()
    again.wait()
    print("PASS")
finally:
    cleanup_world(w)
