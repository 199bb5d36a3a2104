# SPDX-License-Identifier: Apache-2.0
"""Processes that leave their slice's tree before their first sample
(setsid, double fork) still count in their slice, by their books slot
(issue 13). A 1 GiB slice under --overuse-policy kill: a setsid'd
grandchild holds the cap through the shim; the tenant zeroes its books'
total and a second setsid'd grandchild gets another 1 GiB through the
shim. By simgpu's ground truth the slice holds 2 GiB: the watchdog maps
both to the slice (not `unsliced`), reports books_forged and
memory_over_cap, and `gpuslice ls` shows the 2 GiB; but a process that is
in its slice by the tenant's own books only is not killed on their word
(kill_failed, both still hold their memory: --kill-unsliced is not
given)."""
import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

GRACE_MS = 1000


def holders(w):
    """simgpu's processes that hold memory, alive."""
    return {p["pid"]: p["used_bytes"] for p in w.smi()["processes"]
            if p.get("alive", True) and p["used_bytes"]}


w = World("books-claim", devices=1, memory="16Gi", ctx_overhead="256Mi")
try:
    need_hold(w)
    w.start_daemon("--watch-interval", "250", "--overuse-grace", str(GRACE_MS),
                   "--overuse-policy", "kill")
    h = Holder(w, 'setsid /bin/sh -c \'"$HOLD" 805306368 > "$DIR/g1.out" &\'; '
                  'while [ ! -e "$DIR/go" ]; do sleep 0.05; done; '
                  'setsid /bin/sh -c \'"$HOLD" 805306368 > "$DIR/g2.out" &\'; exec sleep 60')
    t, items = w.create(h.p.pid, 300, memory=GIB)
    check(t == REPLY | CREATE, "create: %r" % (items,))
    sid, sdir = get(items, "slice"), get(items, "slice_dir")
    h.go(items)
    check(wait_ready(os.path.join(w.dir, "g1.out")) == "ready", "g1 failed")
    g1 = [p for p, b in holders(w).items() if b == GIB]
    check(len(g1) == 1, "simgpu: %r" % holders(w))
    g1 = g1[0]
    STRAYS.append(g1)
    w.wait_for(lambda: ls_slice(w, sid)["memory_used_bytes"] == GIB, timeout=5,
               what="ls shows g1's 1 GiB in its slice: %r" % ls_slice(w, sid))
    check(not [e for e in events(w) if e["pid"] == g1],
          "g1, within its slice's cap, has events: %r" % events(w))

    with open(os.path.join(sdir, "memory"), "r+b") as f:
        f.seek(32)
        f.write(struct.pack("<Q", 0))  # the books' total (slice_state.h `used`)
    open(os.path.join(w.dir, "go"), "w").close()
    check(wait_ready(os.path.join(w.dir, "g2.out")) == "ready", "g2 was refused")
    g2 = [p for p in holders(w) if p != g1]
    check(len(g2) == 1, "simgpu: %r" % holders(w))
    g2 = g2[0]
    STRAYS.append(g2)

    wait_event(w, lambda e: e["reason"] == "books_forged" and e["slice"] == sid, 3,
               "books_forged")
    e = wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["slice"] == sid and
                   e["action"] == "kill_failed", GRACE_MS / 1000 + 4,
                   "memory_over_cap acted on (kill_failed)")
    check("books slot only" in e["msg"], "why it was not killed: %r" % e)
    check(not [e for e in events(w) if e["reason"] == "unsliced"],
          "a grandchild of the slice is unsliced: %r" % events(w))
    check(ls_slice(w, sid)["memory_used_bytes"] == 2 * GIB, "ls: %r" % ls_slice(w, sid))
    truth = holders(w)
    check(truth.get(g1) == GIB and truth.get(g2) == GIB,
          "the grandchildren were killed on the books' word: %r" % truth)
    check(not [e for e in events(w) if e["action"] == "killed"], "a kill: %r" % events(w))
    print("PASS")
finally:
    cleanup_world(w)
