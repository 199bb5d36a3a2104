# SPDX-License-Identifier: Apache-2.0
"""A full disk under the state directory (issue 17): a create that cannot
be recorded is refused as the daemon's failure (logged at warning, answered
-EIO naming the disk) and not as a request that does not fit (-ENOSPC,
logged at info), and the slices already made are kept. The state directory
is a 256 KiB tmpfs in a mount namespace of its own (root and unshare(1))."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

skip_unless_tmpfs_namespace()

w = World("fulldisk", devices=1)
try:
    w.start_daemon_on_tmpfs("256k")
    p1 = w.spawn_sleeper()
    t, items = w.create(p1.pid, 100, memory=1 << 30)
    check(t == REPLY | CREATE, "first slice refused: %r" % (items,))
    first = get(items, "id")
    # Fill the daemon's tmpfs from inside its mount namespace.
    w.in_daemon_ns("dd if=/dev/zero of=%s/filler bs=4k 2>/dev/null; true" % w.state,
                   check_rc=True)
    p2 = w.spawn_sleeper()
    t, items = w.create(p2.pid, 100, memory=1 << 30)
    check(t == ERROR, "a slice was made on a full disk: %r" % (items,))
    code, msg = int(get(items, "code")), get(items, "message", "")
    check(code == -5, "a full disk answered code %d (want -EIO, not -ENOSPC 'does not fit'): %s"
          % (code, msg))
    check("No space left on device" in msg, "the refusal does not say the disk is full: " + msg)
    time.sleep(0.2)
    lines = [l for l in w.log_text().splitlines() if "No space left on device" in l]
    check(lines and all(": warning: " in l or ": error: " in l for l in lines),
          "a full disk is not logged at warning: %r" % lines)
    check([s["id"] for s in w.slices()] == [first], "the first slice was not kept: %r"
          % w.slices())
    print("PASS")
finally:
    w.cleanup()
