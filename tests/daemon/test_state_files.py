# SPDX-License-Identifier: Apache-2.0
"""State files that are not regular files (issue 17): a FIFO, a symbolic
link, a device or a directory in place of the ledger or the lock stops
gpusliced promptly with an error naming the file and what it is, and a FIFO
in place of the daemon's log makes `gpuslice run` refuse at once instead of
leaving a process blocked in open(2) behind."""
import os
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa


def plant(path, kind, target):
    if kind == "fifo":
        os.mkfifo(path, 0o600)
    elif kind == "symlink":
        with open(target, "w") as f:
            f.write("gpuslice-ledger 1\nnext_id 1\nend 0\n")
        os.symlink(target, path)
    elif kind == "device":
        os.mknod(path, 0o600 | 0o020000, os.makedev(1, 3))  # /dev/null's numbers
    elif kind == "directory":
        os.mkdir(path)


WORDS = {"fifo": "a FIFO", "symlink": "a symbolic link", "device": "a character device",
         "directory": "a directory"}


def holders(w):
    """Processes started for this world (its directory in their environment)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open("/proc/%s/environ" % pid, "rb") as f:
                if w.dir.encode() in f.read():
                    out.append(int(pid))
        except OSError:
            pass
    return out


for name in ("ledger", "lock"):
    for kind in ("fifo", "symlink", "device", "directory"):
        if kind == "device" and os.geteuid() != 0:
            continue
        w = World("statefile-%s-%s" % (name, kind))
        try:
            os.makedirs(w.state, mode=0o700)
            path = os.path.join(w.state, name)
            plant(path, kind, os.path.join(w.dir, "elsewhere"))
            d = w.start_daemon(wait=False)
            try:
                rc = d.wait(timeout=10)
            except subprocess.TimeoutExpired:
                d.kill()
                d.wait()
                fail("%s %s: the daemon did not stop within 10 s: %s" % (name, kind, w.log_text()))
            log = w.log_text()
            check(rc != 0, "%s %s: the daemon started: %s" % (name, kind, log))
            want = "%s is %s, not a regular file" % (path, WORDS[kind])
            check(want in log, "%s %s: no error naming the file and its kind (%r): %s"
                  % (name, kind, want, log))
            check(": error: " in log, "%s %s: not logged as an error: %s" % (name, kind, log))
            check("in use by another" not in log, "%s %s: misleading message: %s"
                  % (name, kind, log))
            if kind == "symlink":
                with open(os.path.join(w.dir, "elsewhere")) as f:
                    check(f.read().startswith("gpuslice-ledger"), "the link's target was written")
        finally:
            w.cleanup()

# The CLI starting a daemon: a FIFO in place of the daemon's log.
w = World("statefile-cli-log")
try:
    os.makedirs(w.state, mode=0o700)
    log = os.path.join(w.state, "gpusliced.log")
    os.mkfifo(log, 0o600)
    try:
        r = w.cli("run", "--sim", "--gpu", "100m", "--", "true", timeout=10)
    except subprocess.TimeoutExpired:
        fail("gpuslice run hung on a FIFO in place of the daemon's log")
    check(r.returncode != 0, "gpuslice run succeeded: %s" % r.stderr)
    check("%s is a FIFO, not a regular file" % log in r.stderr,
          "the refusal does not name the log: %r" % r.stderr)
    left = holders(w)
    check(not left, "processes left behind: %r" % left)
finally:
    if os.path.exists(log):
        os.unlink(log)  # World.cleanup reads the log: not a FIFO
    for pid in holders(w):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    w.cleanup()
print("PASS")
