# SPDX-License-Identifier: Apache-2.0
"""Slices survive kill -9 of the daemon: none lost, none doubled; slices of
processes that died meanwhile are freed on restart; ids are never reused."""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("persist")
try:
    w.start_daemon()
    sleepers = [w.spawn_sleeper() for _ in range(4)]
    ids = []
    for i, p in enumerate(sleepers):
        t, items = w.create(p.pid, 200 + i, memory=1 << 30, name="s%d" % i)
        check(t == REPLY | CREATE, "create failed: %r" % (items,))
        ids.append(get(items, "id"))
    before = sorted((s["id"], s["milli"], s["pid"], tuple(s["gpus"])) for s in w.slices())
    check(len(before) == 4, "expected 4 slices, got %r" % (before,))

    w.daemon.send_signal(signal.SIGKILL)
    w.daemon.wait()
    # One owner dies while no daemon runs.
    sleepers[3].kill()
    sleepers[3].wait()

    w.start_daemon()
    after = sorted((s["id"], s["milli"], s["pid"], tuple(s["gpus"])) for s in w.slices())
    expect = [b for b in before if b[0] != ids[3]]
    check(after == expect, "after restart: %r, expected: %r" % (after, expect))
    check(sorted(a[0] for a in after) == sorted(ids[:3]), "ids changed: %r" % (after,))
    check("still runs; following it" in w.log_text(), "no reconcile log")

    # Followed again: an owner exiting now frees its slice.
    sleepers[0].kill()
    sleepers[0].wait()
    w.wait_for(lambda: len(w.slices()) == 2, what="slice of killed owner freed")

    # A new slice gets a fresh id, never one from before the crash.
    p = w.spawn_sleeper()
    t, items = w.create(p.pid, 100)
    check(t == REPLY | CREATE, "create after restart failed: %r" % (items,))
    check(get(items, "id") not in ids, "id reused: %s" % get(items, "id"))

    # Capacity is still accounted: the restored slices count.
    used = {}
    for s in w.slices():
        used[s["gpus"][0]] = used.get(s["gpus"][0], 0) + int(s["milli"])
    t, items = w.call(STATUS)
    free = [int(v) for k, v in items if k == "gpu_free_milli"]
    check(sum(free) == 2000 - sum(used.values()), "free %r vs used %r" % (free, used))

    # SIGTERM: clean exit, socket removed, live slices kept for the next start.
    w.daemon.send_signal(signal.SIGTERM)
    check(w.daemon.wait(timeout=10) == 0, "daemon exit status after SIGTERM")
    check(not os.path.exists(w.sock), "socket left behind")
    w.start_daemon()
    check(len(w.slices()) == 3, "slices after SIGTERM restart: %r" % (w.slices(),))
    print("PASS")
finally:
    w.cleanup()
