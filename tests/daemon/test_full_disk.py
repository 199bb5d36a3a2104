# SPDX-License-Identifier: Apache-2.0
"""A full disk under the state directory (issue 17): a create that cannot
be recorded is refused as the daemon's failure (logged at warning, answered
-EIO naming the disk) and not as a request that does not fit (-ENOSPC,
logged at info), and the slices already made are kept. The state directory
is a 256 KiB tmpfs in a mount namespace of its own (root and unshare(1))."""
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

w = World("fulldisk", devices=1)
try:
    os.makedirs(w.state, mode=0o700)
    logf = open(w.log, "ab")
    script = ('mount --make-rprivate / && mount -t tmpfs -o size=256k,mode=0700 gs-full "$1" '
              '&& shift && exec "$@"')
    w.daemon = subprocess.Popen(
        ["unshare", "-m", "sh", "-c", script, "sh", w.state, w.daemon_bin, "--sim", "--state-dir",
         w.state, "--socket", w.sock], env=w.env, stdout=logf, stderr=logf)
    logf.close()
    w.wait_for(lambda: os.path.exists(w.sock), timeout=15, what="the daemon's socket")
    p1 = w.spawn_sleeper()
    t, items = w.create(p1.pid, 100, memory=1 << 30)
    check(t == REPLY | CREATE, "first slice refused: %r" % (items,))
    first = get(items, "id")
    # Fill the daemon's tmpfs from inside its mount namespace.
    subprocess.run(["nsenter", "-t", str(w.daemon.pid), "-m", "sh", "-c",
                    "dd if=/dev/zero of=%s/filler bs=4k 2>/dev/null; true" % w.state], check=True)
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
