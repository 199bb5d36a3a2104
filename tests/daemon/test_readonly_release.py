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
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
    print("SKIP: needs root, unshare and nsenter")
    sys.exit(SKIP)
probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"],
                       capture_output=True)
if probe.returncode != 0:
    print("SKIP: cannot mount a tmpfs in a mount namespace: %r" % probe.stderr)
    sys.exit(SKIP)

w = World("rorelease", devices=1)


def inside(cmd):
    """A shell command in the daemon's mount namespace (its view of the state)."""
    return subprocess.run(["nsenter", "-t", str(w.daemon.pid), "-m", "sh", "-c", cmd],
                          capture_output=True, text=True, timeout=10)


def left(sid):
    r = inside("ls -d %s/conf/%s.conf %s/slices/%s 2>/dev/null; grep -c 'id=%s ' %s/ledger"
               % (w.state, sid, w.state, sid, sid, w.state))
    return r.stdout.split()


try:
    os.makedirs(w.state, mode=0o700)
    logf = open(w.log, "ab")
    script = ('mount --make-rprivate / && mount -t tmpfs -o size=4m,mode=0700 gs-ro "$1" '
              '&& shift && exec "$@"')
    w.daemon = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", script, "sh", w.state, w.daemon_bin, "--sim", "--state-dir",
         w.state, "--socket", w.sock], env=w.env, stdout=logf, stderr=logf)
    logf.close()
    w.wait_for(lambda: os.path.exists(w.sock), timeout=15, what="the daemon's socket")
    keep = w.spawn_sleeper()
    t, items = w.create(keep.pid, 100, memory=1 << 30)
    check(t == REPLY | CREATE, "slice refused: %r" % (items,))
    kept = get(items, "id")
    p = w.spawn_sleeper()
    t, items = w.create(p.pid, 200, memory=1 << 30)
    check(t == REPLY | CREATE, "slice refused: %r" % (items,))
    sid = get(items, "id")
    check(len(left(sid)) == 3 and left(sid)[-1] == "1", "files and record: %r" % left(sid))
    r = inside("for d in conf slices pages; do mount --bind {s}/$d {s}/$d && "
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
    r = inside("umount {s}/conf && umount {s}/slices && umount {s}/pages && rm {s}/filler"
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
