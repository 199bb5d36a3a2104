# SPDX-License-Identifier: Apache-2.0
"""A slice lives as long as its process: freed (and its files removed) when
the process exits, even a short-lived one; requests for other users'
processes, dead processes and duplicate slices are refused."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("exit")
try:
    w.start_daemon()
    p = w.spawn_sleeper()
    t, items = w.create(p.pid, 300, memory=2 << 30)
    check(t == REPLY | CREATE, "create: %r" % (items,))
    conf = get(items, "slice_config")
    sdir = get(items, "slice_dir")
    check(conf and os.path.exists(conf), "no config file")
    check(os.stat(conf).st_mode & 0o777 == 0o444, "config not read-only")
    text = open(conf).read()
    check("memory_limit = 2147483648" in text or "memory_limit=2147483648" in text,
          "config lacks the cap: " + text)
    check("context_overhead" in text, "config lacks context_overhead: " + text)
    check(os.path.isdir(sdir), "no slice dir")

    t, items = w.create(p.pid, 100)
    check(t == ERROR and "already has slice" in get(items, "message", ""), "duplicate accepted")

    p.kill()
    p.wait()
    w.wait_for(lambda: not w.slices(), what="slice freed after exit")
    check(not os.path.exists(conf) and not os.path.exists(sdir), "slice files left behind")

    # A process that lives 100 ms is followed too (pidfd, no polling).
    for _ in range(5):
        q = subprocess.Popen(["sleep", "0.1"])
        t, items = w.create(q.pid, 100)
        q.wait()
    w.wait_for(lambda: not w.slices(), timeout=5, what="short-lived slices freed")

    t, items = w.create(999999999, 100)
    check(t == ERROR, "slice for a nonexistent pid")
    if os.geteuid() != 0:
        t, items = w.create(1, 100)
        check(t == ERROR and "uid" in get(items, "message", ""), "slice for another user's process")
    print("PASS")
finally:
    w.cleanup()
