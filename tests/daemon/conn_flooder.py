# SPDX-License-Identifier: Apache-2.0
"""The adversary of test_conn_flood.py and test_arbiter_flood.py, run as the
flooding user (setpriv): opens N connections to the daemon's socket, each
sending `--send` bytes (hex; none: an idle local-API connection), prints one
JSON line with what the daemon did at once (accepted: still open; refused:
answered and closed, with the first refusal's text), then waits up to
`--hold` seconds for the daemon to close the ones it accepted and prints a
second line (how many it closed, the last after how many seconds, the
first reply of a closed one). With --keep it re-opens what is closed until
--hold ends, keeping the pressure on."""
import argparse
import json
import resource
import select
import socket
import struct
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("socket")
ap.add_argument("n", type=int)
ap.add_argument("--send", default="")
ap.add_argument("--hold", type=float, default=0)
ap.add_argument("--keep", action="store_true")
a = ap.parse_args()
payload = bytes.fromhex(a.send)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, a.n + 64)), hard))


def readable(socks, timeout):
    """The sockets of socks with something to read (or a hang-up)."""
    p = select.poll()
    by_fd = {s.fileno(): s for s in socks}
    for fd in by_fd:
        p.register(fd, select.POLLIN)
    return [by_fd[fd] for fd, _ in p.poll(int(timeout * 1000))]


def opener():
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(a.socket)
            break
        except (BlockingIOError, ConnectionRefusedError):
            s.close()
            time.sleep(0.005)
    if payload:
        s.sendall(payload)
    return s


def reply_text(data):
    """What the daemon answered: a local-API error frame's message, or a
    compute-protocol ERROR's errno."""
    if len(data) >= 12 and data[:4] == b"GSLP":
        length = struct.unpack(">I", data[8:12])[0]
        body = data[12:12 + length].decode(errors="replace")
        for line in body.splitlines():
            if line.startswith("message="):
                return line[8:]
        return body
    if len(data) >= 32 and data[:4] == b"GSAR":
        return "ERROR errno %d" % struct.unpack_from("<Q", data, 16)[0]
    return repr(data[:40])


t0 = time.monotonic()
conns = [opener() for _ in range(a.n)]
time.sleep(1.0)  # the daemon answers a refusal at accept time
open_, refused, first = [], 0, None
ready = set(readable(conns, 0))
for s in conns:
    if s not in ready:
        open_.append(s)
        continue
    data = b""
    try:
        data = s.recv(4096)
    except OSError:
        pass
    refused += 1
    if first is None:
        first = reply_text(data)
    s.close()
print(json.dumps({"accepted": len(open_), "refused": refused, "refusal": first}), flush=True)

closed, last, closed_reply, reopened = 0, None, None, 0
deadline = time.monotonic() + a.hold
while open_ and time.monotonic() < deadline:
    for s in readable(open_, max(0.0, deadline - time.monotonic())):
        data = b""
        try:
            data = s.recv(4096)
            while data and len(data) < 4096:
                more = s.recv(4096)
                if not more:
                    break
                data += more
        except OSError:
            pass
        if closed_reply is None and data:
            closed_reply = reply_text(data)
        open_.remove(s)
        s.close()
        closed += 1
        last = time.monotonic() - t0
        if a.keep:
            time.sleep(0.01)  # pressure, not a CPU burner
            open_.append(opener())
            reopened += 1
print(json.dumps({"closed": closed, "last_closed_s": last, "reply": closed_reply,
                  "reopened": reopened, "still_open": len(open_)}), flush=True)
