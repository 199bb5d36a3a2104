# SPDX-License-Identifier: Apache-2.0
"""Local-API connection floods (issue 17), with the adversary a real other
user: the socket is mode 0660, so the test gives its group to nogroup (as
an admin opens the daemon to a group of users) and floods as nobody
through setpriv.

  * 200 idle connections from nobody: 32 are taken (the per-uid limit),
    the rest are refused at once with an error frame naming the uid and
    the limit; root and another user are still served promptly;
  * three more users flood 32 each: together they cannot take the last 16
    connections, kept for root and slices' processes: root is still
    served, a fifth user is refused with that reason;
  * the idle connections are closed by the daemon after 30 s (no request
    asks to be kept: events --follow reconnects every second), and nobody
    is served again right after."""
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

HERE = os.path.dirname(os.path.abspath(__file__))
NOGROUP = 65534
if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: needs root and setpriv to flood as another user")
    sys.exit(SKIP)


def as_user(uid, *args, **kw):
    return subprocess.Popen(["setpriv", "--reuid=%d" % uid, "--regid=%d" % NOGROUP,
                             "--clear-groups", "--", "/usr/bin/python3"] + list(args),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def flood(uid, n, hold):
    p = as_user(uid, os.path.join(HERE, "conn_flooder.py"), w.sock, str(n), "--hold", str(hold))
    w.children.append(p)
    line = p.stdout.readline()
    check(line, "flooder uid %d printed nothing: %s" % (uid, p.stderr.read() if p.poll() is not None else ""))
    return p, json.loads(line)


def served(uid):
    """A STATUS from uid (root: this process): seconds it took."""
    t0 = time.monotonic()
    if uid == 0:
        t, items = w.call(STATUS)
        check(t == REPLY | STATUS, "root not served: %r" % (items,))
        return time.monotonic() - t0
    code = ("import socket,struct,sys\n"
            "s=socket.socket(socket.AF_UNIX);s.settimeout(10);s.connect(sys.argv[1])\n"
            "try: s.sendall(struct.pack('>IHHI',0x47534C50,1,4,0))\n"
            "except OSError: pass  # refused: the error frame is there to read\n"
            "h=s.recv(12);print(struct.unpack('>IHHI',h)[2] if len(h)==12 else -1)\n"
            "print(s.recv(65536).decode(errors='replace').replace(chr(10),' '))\n")
    p = as_user(uid, "-c", code, w.sock)
    out, err = p.communicate(timeout=20)
    lines = out.splitlines()
    return time.monotonic() - t0, (int(lines[0]) if lines else -2), " ".join(lines[1:]) + err


w = World("connflood", devices=1)
try:
    os.chmod(w.dir, 0o711)  # others may reach the socket inside
    w.start_daemon()
    os.chown(w.sock, 0, NOGROUP)

    # 1. nobody opens 200 idle connections.
    t_flood = time.monotonic()
    nobody, r = flood(65534, 200, 45)
    print("nobody's flood: %r" % r)
    check(r["accepted"] == 32 and r["refused"] == 168,
          "per-uid limit: %d taken, %d refused of 200 (want 32/168)" % (r["accepted"], r["refused"]))
    check("uid 65534" in (r["refusal"] or "") and "at most 32" in r["refusal"],
          "refusal does not say why: %r" % r["refusal"])
    dt = served(0)
    check(dt < 1.0, "root served in %.2f s during the flood" % dt)
    dt, t, text = served(4242)
    check(t == REPLY | STATUS and dt < 3.0, "another user not served (%d, %.2f s): %s" % (t, dt, text))
    print("during the flood: root and uid 4242 served")

    # 2. Three more users, 32 each: 128 non-root connections asked for, 112 taken.
    others = [flood(uid, 32, 45) for uid in (4001, 4002, 4003)]
    taken = sum(o[1]["accepted"] for o in others)
    print("three more users: %d taken (%r)" % (taken, [o[1] for o in others]))
    check(taken == 112 - 32, "non-root users took %d more connections (want %d)" % (taken, 112 - 32))
    last = others[-1][1]
    check("kept for root" in (last["refusal"] or ""), "reserve refusal: %r" % last["refusal"])
    dt = served(0)
    check(dt < 1.0, "root not served from its reserve (%.2f s)" % dt)
    dt, t, text = served(4242)
    check(t == ERROR and "kept for root" in text, "a fifth user took the reserve: %d %s" % (t, text))
    print("reserve: root served, uid 4242 refused (%s)" % text.strip()[:120])

    # 3. Idle connections are closed after 30 s.
    out = json.loads(nobody.stdout.readline())
    print("nobody's connections: %r" % out)
    check(out["closed"] == 32, "%d of nobody's 32 idle connections closed" % out["closed"])
    idle = out["last_closed_s"]
    check(28 <= idle <= 36, "idle connections closed after %.1f s (want 30)" % idle)
    for p, _ in others:
        p.communicate(timeout=30)
    dt, t, text = served(65534)
    check(t == REPLY | STATUS, "nobody not served after its flood: %d %s" % (t, text))
    check(w.daemon.poll() is None, "daemon died")
    log = w.log_text()
    refusals = log.count("refused: too many connections")
    check(0 < refusals < 40, "refusals logged %d times (rate limit: a line a second)" % refusals)
    print("PASS (%.0f s)" % (time.monotonic() - t_flood))
finally:
    w.cleanup()
