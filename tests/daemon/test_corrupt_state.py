# SPDX-License-Identifier: Apache-2.0
"""A corrupt, truncated or unknown-version state file stops the daemon with
a clear error and is never replaced by an empty ledger."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

cases = {
    "garbage": b"\x00\x01not a ledger\n",
    "truncated": b"gpuslice-ledger 1\nnext_id 3\nslice id=s1 milli=300 memory=1048576 pol",
    "version": b"gpuslice-ledger 9\nnext_id 1\nend 0\n",
}
for name, content in cases.items():
    w = World("corrupt-" + name)
    try:
        os.makedirs(w.state)
        path = os.path.join(w.state, "ledger")
        with open(path, "wb") as f:
            f.write(content)
        d = w.start_daemon(wait=False)
        rc = d.wait(timeout=15)
        log = w.log_text()
        check(rc != 0, "%s: daemon started on a corrupt ledger" % name)
        check(": error: " in log and path in log, "%s: error does not name the file: %s" % (name, log))
        check("refusing to start" in log, "%s: no refusal line: %s" % (name, log))
        if name == "version":
            check("unsupported ledger version" in log, "version not named: " + log)
        with open(path, "rb") as f:
            check(f.read() == content, "%s: state file was modified" % name)
        check(not os.path.exists(w.sock), "%s: socket created" % name)
    finally:
        w.cleanup()

# An unreadable state file (a directory in its place) is refused as well.
w = World("corrupt-dir")
try:
    os.makedirs(os.path.join(w.state, "ledger"))
    d = w.start_daemon(wait=False)
    check(d.wait(timeout=15) != 0, "daemon started with an unreadable ledger")
finally:
    w.cleanup()
# A FIFO in place of the ledger: opening it must not hang the daemon (a
# reader would wait forever for a writer); it is refused like any
# non-file.
w = World("corrupt-fifo")
try:
    os.makedirs(w.state)
    path = os.path.join(w.state, "ledger")
    os.mkfifo(path, 0o600)
    d = w.start_daemon(wait=False)
    try:
        rc = d.wait(timeout=15)
    except Exception:
        d.kill()
        fail("daemon hung on a FIFO in place of its ledger")
    log = w.log_text()
    check(rc != 0 and "not a regular file" in log and path in log,
          "a FIFO ledger is refused naming it: rc %s %s" % (rc, log))
finally:
    w.cleanup()
print("PASS")
