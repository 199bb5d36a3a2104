# SPDX-License-Identifier: Apache-2.0
"""The CLI refuses a daemon socket whose directory another local user
controls (owned by someone else, or writable by group/others): such a user
could have made it first, e.g. /tmp/gpuslice-<uid>, and answer in the
daemon's place. Needs root (chown); skipped otherwise."""
import os
import pwd
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

if os.geteuid() != 0:
    print("SKIP: needs root to chown a directory to another user")
    sys.exit(SKIP)
try:
    nobody = pwd.getpwnam("nobody")
except KeyError:
    print("SKIP: no user nobody")
    sys.exit(SKIP)

w = World("sockdir", devices=1)
try:
    def impostor(d, mode, uid):
        """A listening socket in d (mode, owner uid): the fake daemon."""
        os.makedirs(d)
        os.chmod(d, mode)
        path = os.path.join(d, "gpusliced.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(path)
        s.listen(4)
        s.setblocking(False)
        os.chown(d, uid, -1)
        return s, path

    def never_connected(s, what):
        try:
            s.accept()[0].close()
            fail("%s: the CLI connected to the impostor's socket" % what)
        except BlockingIOError:
            pass

    for name, mode, uid, want in (
            ("other-owner", 0o700, nobody.pw_uid, "owned by uid %d" % nobody.pw_uid),
            ("world-writable", 0o777, 0, "writable by group or others"),
            ("sticky-tmp-like", 0o1777, 0, "writable by group or others")):
        d = os.path.join(w.dir, name)
        s, path = impostor(d, mode, uid)
        w.env["GPUSLICE_SOCKET"] = path
        for args in (("ls",), ("run", "--sim", "--gpu", "100m", "--", "true")):
            r = w.cli(*args)
            check(r.returncode != 0, "%s %s: accepted (%d)" % (name, args[0], r.returncode))
            check(d in r.stderr and want in r.stderr,
                  "%s %s: message should name %s and say %r: %r" % (name, args[0], d, want,
                                                                  r.stderr))
            check("starting gpusliced" not in r.stderr, "%s: started a daemon" % name)
        never_connected(s, name)
        s.close()

    # A directory that is ours (root's) and private is used as before: no
    # daemon answers there, so ls says it cannot reach one.
    d = os.path.join(w.dir, "mine")
    s, path = impostor(d, 0o700, 0)
    s.close()
    os.unlink(path)
    w.env["GPUSLICE_SOCKET"] = path
    r = w.cli("ls")
    check(r.returncode != 0 and "refusing" not in r.stderr, "own dir refused: %r" % r.stderr)
    print("PASS")
finally:
    w.cleanup()
