# SPDX-License-Identifier: Apache-2.0
"""A state directory another user can write to (issue 17), tried as that
user: gpusliced refuses a state directory that is group- or
other-writable (sticky or not), owned by someone else, or below a
directory another user can write to without the sticky bit; and it never
follows a `conf` or `slices` symlink planted below it (the root daemon
would write its slice configs into the other user's directory)."""
import os
import pwd
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

root = os.geteuid() == 0
try:
    nobody = pwd.getpwnam("nobody").pw_uid
except KeyError:
    nobody = None


def refused(w, what, *wants):
    d = w.start_daemon(wait=False)
    try:
        rc = d.wait(timeout=10)
    except subprocess.TimeoutExpired:
        d.kill()
        d.wait()
        fail("%s: the daemon did not stop" % what)
    log = w.log_text()
    check(rc != 0, "%s: the daemon started: %s" % (what, log))
    check(": error: " in log, "%s: no error logged: %s" % (what, log))
    for want in wants:
        check(want in log, "%s: %r not in the error: %s" % (what, want, log))
    check(not os.path.exists(w.sock), "%s: socket created" % what)


# Writable by others, with and without the sticky bit.
for mode in (0o777, 0o1777, 0o770):
    w = World("statedir-%o" % mode)
    try:
        os.mkdir(w.state)
        os.chmod(w.state, mode)
        refused(w, "mode %o" % mode, w.state, "writable by group or others")
        check(not os.path.exists(os.path.join(w.state, "ledger")) and
              not os.path.exists(os.path.join(w.state, "conf")), "files made in a refused dir")
    finally:
        w.cleanup()

# Below a directory others can write to (no sticky bit): they can rename
# the state directory away and put their own in its place.
w = World("statedir-parent")
try:
    parent = os.path.join(w.dir, "shared")
    os.mkdir(parent)
    os.chmod(parent, 0o777)
    w.state = os.path.join(parent, "state")
    os.mkdir(w.state, 0o700)
    refused(w, "parent 0777", w.state, parent, "lets another user replace it")
finally:
    w.cleanup()

if root and nobody is not None:
    # Owned by another user.
    w = World("statedir-owner")
    try:
        os.mkdir(w.state, 0o700)
        os.chown(w.state, nobody, -1)
        refused(w, "owned by nobody", w.state, "owned by uid %d" % nobody)
    finally:
        w.cleanup()

    # conf and slices planted as symlinks to the other user's directories
    # (made while the directory was open to them; it no longer is).
    for sub in ("conf", "slices"):
        w = World("statedir-link-" + sub)
        try:
            os.mkdir(w.state, 0o700)
            trap = os.path.join(w.dir, "attacker")
            os.mkdir(trap, 0o777)
            os.chown(trap, nobody, -1)
            os.symlink(trap, os.path.join(w.state, sub))
            refused(w, sub + " symlink", os.path.join(w.state, sub), "a symbolic link")
            check(os.listdir(trap) == [], "the daemon wrote into the planted %s: %r"
                  % (sub, os.listdir(trap)))
        finally:
            w.cleanup()

# The modes the daemon makes itself are accepted (0700 here: we made it).
w = World("statedir-ok")
try:
    os.mkdir(w.state, 0o700)
    w.start_daemon()
    st = os.lstat(os.path.join(w.state, "conf"))
    check(not (st.st_mode & 0o022), "conf is writable by others: %o" % st.st_mode)
finally:
    w.cleanup()
print("PASS")
