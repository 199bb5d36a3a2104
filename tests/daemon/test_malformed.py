# SPDX-License-Identifier: Apache-2.0
"""Malformed, oversized, truncated, slow and unknown messages are answered
with error frames; the daemon keeps serving everyone else."""
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("malformed")
try:
    w.start_daemon()

    def expect_error(data, what, closes):
        s = w.connect()
        s.sendall(data)
        r = read_frame(s)
        check(r is not None and r[0] == ERROR, "%s: no error frame: %r" % (what, r))
        check(get(r[1], "message"), "%s: error without message" % what)
        if closes:
            s.settimeout(5)
            check(s.recv(1) == b"", "%s: connection not closed" % what)
        else:  # the same connection still works
            s.sendall(frame(STATUS))
            r2 = read_frame(s)
            check(r2 and r2[0] == REPLY | STATUS, "%s: connection unusable after error" % what)
        s.close()
        return r

    expect_error(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "http garbage", True)
    expect_error(frame(STATUS, version=2), "bad version", True)
    r = expect_error(frame(CREATE, length=1 << 30), "oversized length", True)
    check("exceeds" in get(r[1], "message"), "oversize message: %r" % (r,))
    expect_error(frame(77), "unknown type", False)
    expect_error(frame(CREATE, [("gpu_milli", "lots"), ("pid", 1)]), "bad value", False)
    expect_error(struct.pack(">IHHI", MAGIC, 1, CREATE, 9) + b"no equal\n", "bad payload", False)
    expect_error(frame(CREATE, [("gpu_milli", 1500), ("pid", os.getpid())]), "bad share", False)
    expect_error(frame(RELEASE, [("id", "s999")]), "unknown slice", False)

    # Memory near 2^64 must not wrap to 0 when rounded up to 2 MiB (0 would
    # mean "default cap"), nor may more than the largest GPU's be asked.
    sleeper = w.spawn_sleeper()
    for mem, what in (("18446744073709551615", "memory 2^64-1"),
                      (str(2**64 - (2 << 20) + 1), "memory just past the rounding limit"),
                      (str((16 << 30) + 1), "memory above the largest GPU (16Gi)"),
                      (" -1", "memory with a space and a sign"),
                      ("+1048576", "memory with a plus sign")):
        r = expect_error(frame(CREATE, [("gpu_milli", 300), ("memory", mem), ("pid", sleeper.pid)]),
                         what, False)
        if "GPU" in what:
            check("largest GPU" in get(r[1], "message"), "%s: %r" % (what, r))
    check(w.slices() == [], "a bad memory request made a slice: %r" % w.slices())
    # PLAN's "want=<milli>,<memory>" is parsed as strictly as CREATE's fields.
    for want in ("-1,0", " 300,0", "+300,0", "300, 5", "300,-1", "300,", ",0", "300",
                 "4294967596,0", "300,18446744073709551615", "300,%d" % ((16 << 30) + 1)):
        r = expect_error(frame(PLAN, [("want", want)]), "plan want %r" % want, False)
        check("want #1" in get(r[1], "message"), "plan %r: %r" % (want, r))
    t, items = w.call(PLAN, [("want", "300,1073741824"), ("want", "1000,0")])
    check(t == REPLY | PLAN and len([v for k, v in items if k == "place"]) == 2,
          "a valid plan refused: %r" % (items,))

    # A slow client with half a frame does not stall others, and is cut off.
    slow = w.connect()
    slow.sendall(frame(STATUS)[:6])
    t, items = w.call(STATUS)
    check(t == REPLY | STATUS, "no status while a half frame is pending")
    # Served before the slow client was cut off: the daemon did not wait on it.
    slow.setblocking(False)
    try:
        slow.recv(1)
        fail("slow client answered before others were served")
    except BlockingIOError:
        pass
    slow.setblocking(True)
    slow.settimeout(15)
    r = read_frame(slow)
    check(r and r[0] == ERROR and "incomplete" in get(r[1], "message"), "slow client: %r" % (r,))
    slow.close()

    # A client that hangs up mid-frame is forgotten.
    s = w.connect()
    s.sendall(frame(LIST)[:5])
    s.close()

    # Connection limit: extra connections are refused, the rest keep working.
    conns = [w.connect() for _ in range(130)]
    refused = 0
    for c in conns[-2:]:
        c.settimeout(5)
        try:
            r = read_frame(c)
            if r and r[0] == ERROR:
                refused += 1
        except socket.timeout:
            pass
    check(refused == 2, "connections past the limit of 128 not refused (%d)" % refused)
    conns[0].sendall(frame(STATUS))
    check(read_frame(conns[0])[0] == REPLY | STATUS, "pooled connection unusable")
    for c in conns:
        c.close()

    check(w.daemon.poll() is None, "daemon died")
    t, items = w.call(LIST)
    check(t == REPLY | LIST, "daemon not serving at the end")
    print("PASS")
finally:
    w.cleanup()
