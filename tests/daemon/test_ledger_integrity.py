# SPDX-License-Identifier: Apache-2.0
"""Parseable ledger corruption (issue 17) stops gpusliced instead of
starting it over-committed: an edited record fails the ledger's checksum
(`sum`); without a checksum (a ledger of an older gpusliced, or one repaired
by hand with its sum line deleted) the capacity invariants still hold: the
shares on a GPU above 1000m, memory caps above the GPU's memory, a slice on
a GPU the node does not have. A consistent ledger without a checksum loads,
and the next save writes one."""
import os
import re
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

GI = 1 << 30


def stop(w):
    w.daemon.send_signal(signal.SIGTERM)
    check(w.daemon.wait(timeout=10) == 0, "daemon did not stop cleanly: " + w.log_text())
    w.daemon = None


def ledger_path(w):
    return os.path.join(w.state, "ledger")


def read(w):
    with open(ledger_path(w)) as f:
        return f.read()


def write(w, text):
    with open(ledger_path(w), "w") as f:
        f.write(text)


def unsum(text):
    return re.sub(r"^sum [0-9a-f]{16}\n", "", text, flags=re.M)


def refused(w, what, *wants):
    before = len(w.log_text())
    d = w.start_daemon(wait=False)
    try:
        rc = d.wait(timeout=10)
    except subprocess.TimeoutExpired:
        d.kill()
        d.wait()
        fail("%s: the daemon did not stop" % what)
    w.daemon = None
    log = w.log_text()[before:]
    check(rc != 0, "%s: the daemon started over-committed: %s" % (what, log))
    check(": error: refusing to start" in log, "%s: no refusal: %s" % (what, log))
    for want in wants:
        check(want in log, "%s: %r not in the refusal: %s" % (what, want, log))


w = World("ledger-integrity", devices=1, memory="16Gi")
try:
    w.start_daemon()
    a, b = w.spawn_sleeper(), w.spawn_sleeper()
    t, items = w.create(a.pid, 300, memory=4 * GI)
    check(t == REPLY | CREATE, "slice a: %r" % (items,))
    t, items = w.create(b.pid, 700, memory=4 * GI)
    check(t == REPLY | CREATE, "slice b: %r" % (items,))
    stop(w)
    good = read(w)
    check(re.search(r"^sum [0-9a-f]{16}\nend 2\n\Z", good, flags=re.M),
          "no checksum line before end: " + good)

    # 300m edited to 500m: 1200m on a 1000m GPU.
    edited = good.replace("milli=300 ", "milli=500 ")
    write(w, edited)
    refused(w, "edited share", ledger_path(w), "checksum", "edited or damaged")
    write(w, unsum(edited))
    refused(w, "edited share, sum deleted", "add up to 1200m")

    # A changed pid would free a live slice.
    m = re.search(r"pid=(\d+)", good)
    write(w, good.replace(m.group(0), "pid=%d" % (int(m.group(1)) + 1), 1))
    refused(w, "edited pid", "checksum")

    # Memory caps above the GPU's 16 GiB.
    write(w, unsum(good.replace("memory=%d " % (4 * GI), "memory=%d " % (14 * GI), 1)))
    refused(w, "memory sum", "memory caps on GPU 0", "more than its %d" % (16 * GI))

    # A GPU this node does not have: the slice would drop out of the
    # accounting and its share be handed out again.
    uuid = re.search(r"gpu=0,(\S+)", good).group(1)
    write(w, unsum(good.replace(uuid, "GPU-00000000-dead-beef-0000-000000000000", 1)))
    refused(w, "unknown GPU", "GPU-00000000-dead-beef", "does not have (1 GPU)")

    # Consistent and without a checksum (an older gpusliced's): it loads,
    # the slices are kept, and the next save writes the checksum.
    write(w, unsum(good))
    w.start_daemon()
    check(len(w.slices()) == 2, "slices not kept: %r" % w.slices())
    c = w.spawn_sleeper()
    t, items = w.create(c.pid, 100, memory=GI)
    check(t == ERROR and "1000m" not in (get(items, "message") or "x"), "")  # GPU full
    p = w.call(RELEASE, [("id", "s1")])
    check(p[0] == REPLY | RELEASE, "release: %r" % (p[1],))
    check(re.search(r"^sum [0-9a-f]{16}\nend 1\n\Z", read(w), flags=re.M),
          "the next save wrote no checksum: " + read(w))
    print("PASS")
finally:
    w.cleanup()
