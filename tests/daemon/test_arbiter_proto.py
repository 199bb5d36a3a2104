# SPDX-License-Identifier: Apache-2.0
"""The compute arbiter's protocol, spoken by a test playing the shim: the
lease page (read-only, epoch, heartbeat), HELLO/WELCOME, a WANT answered
with a lease on the page, who may connect (the slice's process and its
descendants, nobody else), malformed frames answered with ERROR while the
daemon keeps serving, and a restart (even after kill -9) that bumps the
epoch and rewrites every page in place with no lease."""
import errno
import os
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa
from gsar import *  # noqa
import gsar

w = World("arbproto", devices=1)
try:
    w.start_daemon()
    a = Agent(w.sock)
    w.children.append(a)
    t, items = w.create(a.pid, 300)
    check(t == REPLY | CREATE, "create: %r" % (items,))
    # The page is the daemon's, in its page directory, not in the tenant's
    # slice directory.
    path = os.path.join(w.state, "pages", get(items, "id"), "compute")
    check(not os.path.exists(os.path.join(get(items, "slice_dir"), "compute")),
          "a lease page in the tenant's slice directory")
    check(os.path.exists(path), "no lease page at " + path)
    st = os.stat(path)
    check(st.st_mode & 0o777 == 0o444, "lease page mode %o, not 0444" % (st.st_mode & 0o777))
    page = Page(path)
    h = page.header()
    check(h["magic"] == PAGE_MAGIC and h["version"] == 1 and h["size"] == PAGE_SIZE,
          "bad page header %r" % h)
    check(h["slice"] == get(items, "id") and h["milli"] == 300 and h["policy"] == 0,
          "page identity %r" % h)
    check(h["quantum"] > 0, "no quantum on the page")
    epoch1 = page.epoch()
    check(epoch1 > 0, "epoch 0")
    check(page.lease()[2] <= now_ns(), "a lease before any WANT")

    # Heartbeat: fresh and moving.
    hb1 = page.heartbeat()
    time.sleep(0.3)
    hb2 = page.heartbeat()
    check(hb2 > hb1 and now_ns() - hb2 < 500_000_000, "heartbeat stale: %d %d" % (hb1, hb2))

    # HELLO -> WELCOME with the page's epoch; WANT -> a lease on the page.
    s, r = a.hello()
    check(r and r[0] == WELCOME and r[2] == epoch1, "no WELCOME with the epoch: %r" % (r,))
    fut = page.futex()
    s.sendall(msg(WANT))
    deadline = time.time() + 5
    while time.time() < deadline:
        gen, start, until = page.lease()
        if gen and until > start:
            break
        time.sleep(0.0005)
    check(gen and until > start, "no lease after WANT")
    check(page.epoch() == epoch1, "epoch changed")
    check(until - start <= 50_000_000, "lease longer than 50 ms: %d" % (until - start))
    check(page.futex() != fut, "futex word not bumped with the lease")
    # The hold ends with DONE (no more work): no lease is renewed after it.
    s.sendall(msg(DONE, gen=gen, value=until - start))
    time.sleep(0.1)
    g2, st2, u2 = page.lease()
    check(u2 <= now_ns(), "lease still shown after DONE without pending work")

    # A descendant of the slice's process speaks for it too.
    s2, r = a.hello(from_child=True)
    check(r and r[0] == WELCOME, "a child of the slice's process refused: %r" % (r,))
    s2.close()

    # A process in no slice (the test itself) is refused.
    with w.connect() as o:
        o.sendall(msg(HELLO, value=1))
        r = read_msg(o)
        check(r and r[0] == ERROR and r[2] == errno.EPERM, "outsider not refused: %r" % (r,))
        check(read_msg(o) is None, "outsider's connection not closed")

    # Malformed frames: each answered with ERROR and a hang-up.
    def expect_error(data, code, what, hello=True):
        c = a.connect()
        if hello:
            c.sendall(msg(HELLO, value=1))
            r0 = read_msg(c)
            check(r0 and r0[0] == WELCOME, "HELLO before %s: %r" % (what, r0))
        c.sendall(data)
        r1 = read_msg(c)
        check(r1 and r1[0] == ERROR and r1[2] == code, "%s: got %r, want ERROR %d" % (what, r1, code))
        check(read_msg(c) is None, "%s: connection not closed" % what)
        c.close()

    expect_error(msg(99), errno.EBADMSG, "unknown type")
    expect_error(msg(WANT, flags=0x80), errno.EBADMSG, "unknown flags")
    expect_error(msg(WANT, reserved=7), errno.EBADMSG, "reserved field")
    expect_error(msg(DONE, gen=1, value=1 << 62), errno.EBADMSG, "huge busy time")
    expect_error(msg(WANT, version=9), errno.EPROTONOSUPPORT, "other version")
    expect_error(b"GSLP" + b"\0" * 28, errno.EPROTO, "wrong magic after HELLO")
    expect_error(msg(WELCOME), errno.EBADMSG, "a daemon-only frame")
    expect_error(msg(HELLO, value=1), errno.EPROTO, "second HELLO")
    expect_error(msg(WANT), errno.EPROTO, "WANT before HELLO", hello=False)
    expect_error(msg(HELLO, value=7), errno.EPROTONOSUPPORT, "HELLO of another version",
                 hello=False)
    # A partial frame and a hang-up; a frame in pieces.
    c = a.connect()
    c.sendall(msg(HELLO, value=1)[:20])
    c.close()
    c = a.connect()
    f = msg(HELLO, value=1)
    c.sendall(f[:3])
    time.sleep(0.05)
    c.sendall(f[3:])
    r = read_msg(c)
    check(r and r[0] == WELCOME, "HELLO in pieces: %r" % (r,))
    c.close()
    # Still serving both protocols.
    check(len(w.slices()) == 1, "local API broken after malformed frames")
    s3, r = a.hello()
    check(r and r[0] == WELCOME, "HELLO refused after malformed frames: %r" % (r,))
    s3.close()

    # kill -9 while a lease is held, then a restart: same page (same
    # inode, still mapped here), new epoch, no lease, fresh heartbeat.
    s.sendall(msg(WANT))
    w.wait_for(lambda: page.lease()[2] > now_ns(), timeout=5, what="a lease before kill -9")
    ino = os.stat(path).st_ino
    w.daemon.send_signal(signal.SIGKILL)
    w.daemon.wait()
    s.close()
    w.start_daemon()
    w.wait_for(lambda: page.epoch() != epoch1, timeout=5, what="a new epoch on the page")
    epoch2 = page.epoch()
    check(epoch2 > epoch1, "epoch went back: %d -> %d" % (epoch1, epoch2))
    check(os.stat(path).st_ino == ino, "page replaced rather than rewritten")
    gen2, start2, until2 = page.lease()
    check(until2 <= now_ns(), "lease left on the page after a restart")
    check(gen2 >= gen, "lease generation went back")
    check(now_ns() - page.heartbeat() < 500_000_000, "no heartbeat after restart")
    s, r = a.hello()
    check(r and r[0] == WELCOME and r[2] == epoch2, "WELCOME after restart: %r" % (r,))
    s.sendall(msg(WANT))
    w.wait_for(lambda: page.lease()[0] > gen and page.lease()[2] > page.lease()[1], timeout=5,
               what="a lease after the restart")
    # A clean stop takes the lease back too.
    w.daemon.send_signal(signal.SIGTERM)
    w.daemon.wait()
    check(page.lease()[2] <= now_ns() + 5_000_000, "lease left after SIGTERM")
    w.start_daemon()
    check(page.epoch() > epoch2, "epoch not bumped by a clean restart")
    s.close()

    # The slice's process exits: its slice and page go.
    a.kill()
    a.wait()
    w.wait_for(lambda: not w.slices(), what="slice freed")
    check(not os.path.exists(path), "lease page left behind")
    page.close()
    print("PASS")
finally:
    w.cleanup()
