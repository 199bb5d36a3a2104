# SPDX-License-Identifier: Apache-2.0
"""Books the tenant cannot forge (issue 13), on simgpu's ground truth. A
slice (1 GiB cap, its own policy kill) whose first shim process holds the
cap; `gpuslice ls` shows the slice's memory over all its processes by NVML
(the daemon's figure, not the books). A process of the slice then zeroes
the books' total (`used`) by writing the file: the daemon reports
books_forged (reported, never killed for that alone), and a second shim
process, let through by the forged books, takes the slice past its cap:
ls shows the ground truth above the cap, memory_over_cap is detected and,
under kill, both processes are killed and the driver holds nothing of the
slice any more."""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

GRACE_MS = 3000


def zero_used(sdir):
    """What a tenant can do: rewrite its books' slice total to 0 (the
    slots stay: slice_state.h, `used` at offset 32)."""
    with open(os.path.join(sdir, "memory"), "r+b") as f:
        f.seek(32)
        f.write(struct.pack("<Q", 0))


w = World("books-forged", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    need_hold(w)
    w.start_daemon("--watch-interval", "250", "--overuse-grace", str(GRACE_MS))
    # p1 holds 768 MiB + its 256 MiB context: the whole 1 GiB cap.
    h = Holder(w, '"$HOLD" 805306368 > "$DIR/p1.out" & '
                  'while [ ! -e "$DIR/go" ]; do sleep 0.05; done; '
                  '"$HOLD" 805306368 > "$DIR/p2.out" & wait')
    t, items = w.call(CREATE, [("gpu_milli", 300), ("pid", h.p.pid), ("memory", GIB),
                               ("overuse", "kill")])
    check(t == REPLY | CREATE, "create: %r" % (items,))
    sid, sdir = get(items, "slice"), get(items, "slice_dir")
    h.go(items)
    check(wait_ready(os.path.join(w.dir, "p1.out")) == "ready", "p1 failed")
    p1 = pid_of_child(h.p.pid, 0)[0]
    truth1 = smi_used(w, p1)
    check(truth1 == GIB, "p1 holds %r by simgpu, expected the 1 GiB cap" % truth1)
    # The slice's memory in ls is NVML's over its processes (the holder's
    # shell holds nothing; its child p1 holds the cap).
    w.wait_for(lambda: ls_slice(w, sid)["memory_used_bytes"] == truth1, timeout=5,
               what="ls memory_used = ground truth %d: %r" % (truth1, ls_slice(w, sid)))
    time.sleep(0.6)
    check(not [e for e in events(w) if e["slice"] == sid],
          "an honest slice has events: %r" % events(w))

    # The tenant zeroes the books' total: the daemon notices.
    zero_used(sdir)
    e = wait_event(w, lambda e: e["reason"] == "books_forged" and e["slice"] == sid, 3,
                   "books_forged for the rewritten total")
    check(e["action"] == "detected" and int(e["books"]) == 0 and int(e["used"]) == GIB,
          "books_forged evidence: %r" % e)
    wait_event(w, lambda e: e["reason"] == "books_forged" and e["slice"] == sid and
               e["action"] == "reported", GRACE_MS / 1000 + 3, "books_forged reported")
    check(smi_used(w, p1) == GIB, "p1 was stopped for forged books alone")

    # The forged books let a second process through the shim past the cap.
    open(os.path.join(w.dir, "go"), "w").close()
    check(wait_ready(os.path.join(w.dir, "p2.out")) == "ready",
          "p2 was refused: the forged books did not let it through")
    kids = pid_of_child(h.p.pid, 1)
    p2 = [k for k in kids if k != p1][0]
    total = smi_used(w, p1) + smi_used(w, p2)
    check(total == 2 * GIB, "the slice holds %d by simgpu, expected 2 GiB" % total)
    e = wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["slice"] == sid, 3,
                   "memory_over_cap after the forged books")
    check(int(e["cap"]) == GIB, "over-cap evidence: %r" % e)
    s = ls_slice(w, sid)
    check(s["memory_used_bytes"] is not None and s["memory_used_bytes"] >= total or
          not os.path.exists("/proc/%d" % p2),
          "ls shows %r for a slice holding %d by NVML" % (s["memory_used_bytes"], total))

    # Under kill, the slice's processes go and the driver frees their memory.
    wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["slice"] == sid and
               e["action"] == "killed", GRACE_MS / 1000 + 3, "the over-cap slice killed")
    w.wait_for(lambda: not smi_used(w, p1) and not smi_used(w, p2), timeout=5,
               what="the killed processes' memory freed")
    print("PASS")
finally:
    cleanup_world(w)
