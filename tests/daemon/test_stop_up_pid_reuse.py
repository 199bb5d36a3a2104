# SPDX-License-Identifier: Apache-2.0
"""create's up_spec pins the asking process (SO_PEERCRED's pid) only while it
is the asker's user's: the asker connects, forks, and exits, its child
keeping the socket; another user's process gets the asker's pid (root sets
ns_last_pid); the child then makes a slice with up_spec. A stop of
target=up must not signal that other user's process: it is refused (no
`gpuslice up` is recorded) and the process lives on. On the previous
daemon it got SIGTERM. SKIP when not root or when the pid cannot be had
again."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

STOP = 7


if os.geteuid() != 0:
    print("SKIP: needs root (ns_last_pid, another user's process)")
    sys.exit(SKIP)
w = World("stopreuse", devices=1)
other = None
try:
    w.start_daemon()
    target = w.spawn_sleeper()
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    asker = os.fork()
    if asker == 0:  # the asker: connects, leaves the socket to a child, exits
        s = w.connect()
        if os.fork() == 0:
            os.close(go_w)
            os.read(go_r, 1)
            s.sendall(frame(CREATE, [("gpu_milli", 100), ("pid", target.pid),
                                     ("up_spec", "/nonexistent/spec.toml")]))
            t, items = read_frame(s)
            os.write(res_w, (get(items, "id", "") if t == REPLY | CREATE else "").encode())
            os._exit(0)
        os._exit(0)
    os.waitpid(asker, 0)
    os.close(go_r)
    os.close(res_w)
    other = spawn_with_pid(asker, 65534)
    if other is None:
        os.write(go_w, b"x")
        print("SKIP: pid %d could not be had again" % asker)
        sys.exit(SKIP)
    os.write(go_w, b"x")
    sid = os.read(res_r, 100).decode()
    check(sid, "the create with up_spec failed")
    t, items = w.call(STOP, [("id", sid), ("target", "up")])
    time.sleep(0.2)
    check(other.poll() is None,
          "another user's process (uid 65534) that got the asker's pid %d was signalled by a "
          "stop of target=up: %r" % (asker, items))
    check(t == ERROR, "stop target=up of a slice whose asker is gone: %r" % (items,))
    print("PASS")
finally:
    if other is not None and other.poll() is None:
        other.kill()
        other.wait()
    w.cleanup()
