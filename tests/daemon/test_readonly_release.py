# SPDX-License-Identifier: Apache-2.0
"""A slice freed while the state directory refuses writes (issue 17): the
release cannot reach the disk (the ledger's save, the slice's files), so the
daemon keeps trying; once the disk takes writes again the saved ledger no
longer names the slice and its files are gone, with no restart. The state
directory is a tmpfs in a mount namespace of the daemon's own (root,
unshare(1) and nsenter(1)); the adversity: conf/, slices/ and pages/ bound
read-only over themselves (a read-only remount of the whole directory is
refused while the daemon holds its lock and event log open for writing)
and the tmpfs filled, so the ledger cannot be saved either."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

skip_unless_tmpfs_namespace()

w = World("rorelease", devices=1)


def left(sid):
    r = w.in_daemon_ns("ls -d %s/conf/%s.conf %s/slices/%s 2>/dev/null; grep -c 'id=%s ' %s/ledger"
               % (w.state, sid, w.state, sid, sid, w.state))
    return r.stdout.split()


try:
    w.start_daemon_on_tmpfs("4m")
    keep = w.spawn_sleeper()
    t, items = w.create(keep.pid, 100, memory=1 << 30)
    check(t == REPLY | CREATE, "slice refused: %r" % (items,))
    kept = get(items, "id")
    p = w.spawn_sleeper()
    t, items = w.create(p.pid, 200, memory=1 << 30)
    check(t == REPLY | CREATE, "slice refused: %r" % (items,))
    sid = get(items, "id")
    check(len(left(sid)) == 3 and left(sid)[-1] == "1", "files and record: %r" % left(sid))
    r = w.in_daemon_ns("for d in conf slices pages; do mount --bind {s}/$d {s}/$d && "
               "mount -o remount,bind,ro {s}/$d || exit 1; done; "
               "dd if=/dev/zero of={s}/filler bs=4k 2>/dev/null; true".format(s=w.state))
    check(r.returncode == 0, "read-only conf/ and slices/, a full disk: %r" % r.stderr)
    p.kill()
    p.wait()
    w.wait_for(lambda: sid not in [s["id"] for s in w.slices()], what="the slice freed in memory")
    time.sleep(2.5)  # the daemon has tried again at least once meanwhile
    stuck = left(sid)
    check(len(stuck) == 3 and stuck[-1] == "1", "left behind while read-only: %r" % stuck)
    log = w.log_text()
    check("Read-only file system" in log and "No space left" in log, "the failures not logged")
    r = w.in_daemon_ns("umount {s}/conf && umount {s}/slices && umount {s}/pages && rm {s}/filler"
               .format(s=w.state))
    check(r.returncode == 0, "writable again: %r" % r.stderr)
    w.wait_for(lambda: left(sid) == ["0"], timeout=10,
               what="the freed slice's record and files gone once the disk takes writes")
    check(len(left(kept)) == 3 and left(kept)[-1] == "1", "the other slice kept: %r"
          % left(kept))
    check("is saved again" in w.log_text(), "the recovery is not logged")
    print("PASS")
finally:
    w.cleanup()
