# SPDX-License-Identifier: Apache-2.0
"""gpuslice logs: a slice started by gpuslice run logs by default; after an
allocation over its cap, its log holds the shim's refusal; --tail; -f
follows what a later slice of that name appends and stops on Ctrl-C;
--log-dir; a GPUSLICE_LOG of the user's wins; a running slice's id finds
its name's log; no log: a clear error."""
import os
import select
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa


def read_until(p, want, bound=20):
    """Lines of p's stdout until one contains `want` (bounded, so a test
    that fails says so instead of hanging). Reads the fd itself: a buffered
    readline would hide lines from select."""
    got, deadline = [], time.monotonic() + bound
    while time.monotonic() < deadline:
        while "\n" in pending[0]:
            line, pending[0] = pending[0].split("\n", 1)
            got.append(line)
            if want in line:
                return got
        ready, _, _ = select.select([p.stdout], [], [], 0.5)
        if ready:
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                break
            pending[0] += chunk.decode()
    fail("logs -f never printed %r; it printed %r" % (want, got))


pending = [""]


w = World("logs", devices=1, memory="8Gi")
try:
    hold_bin = need_hold(w)
    w.start_daemon()
    logdir = w.env["GPUSLICE_LOG_DIR"]
    over = str(2 << 30)  # 2Gi in a 1Gi slice

    def refuse(name, *extra, env=None):
        r = subprocess.run([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                            "--name", name, *extra, "--", hold_bin, over],
                           env=env or w.env, capture_output=True, text=True, timeout=30)
        check(r.returncode == 4 and r.stdout.strip() == "oom",
              "an allocation over the cap was not refused: %d %r %r" % (r.returncode, r.stdout,
                                                                        r.stderr))

    # A FIFO where the log should be (a user's own directory may hold
    # anything): a clear error at once, not a logs that waits for a writer.
    os.makedirs(logdir, exist_ok=True)
    os.mkfifo(os.path.join(logdir, "piped.log"))
    try:
        r = w.cli("logs", "piped")
    except subprocess.TimeoutExpired:
        fail("logs of a FIFO blocked waiting for a writer")
    check(r.returncode == 1 and "not a regular file" in r.stderr,
          "logs of a FIFO: %d %r" % (r.returncode, r.stderr))
    os.unlink(os.path.join(logdir, "piped.log"))

    # No log yet: the error names the name and where it looked.
    r = w.cli("logs", "refuser")
    check(r.returncode == 1 and "'refuser'" in r.stderr and
          os.path.join(logdir, "refuser.log") in r.stderr,
          "logs of a name without a log: %d %r" % (r.returncode, r.stderr))

    refuse("refuser")
    r = w.cli("logs", "refuser")
    check(r.returncode == 0 and ("refused %s bytes" % over) in r.stdout,
          "the shim's refusal is not in the log: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    check("run: slice s" in r.stdout, "no start line in the log: %r" % r.stdout)
    lines = r.stdout.splitlines()
    r = w.cli("logs", "--tail", "1", "refuser")
    check(r.returncode == 0 and r.stdout.splitlines() == lines[-1:],
          "--tail 1: %r, the log ends %r" % (r.stdout, lines[-1:]))
    r = w.cli("logs", "--tail", "x", "refuser")
    check(r.returncode == 2 and "--tail" in r.stderr, "--tail x: %d %r" % (r.returncode, r.stderr))

    # -f: prints what is there, then what a later slice of that name adds.
    f = subprocess.Popen([w.cli_bin, "logs", "-f", "refuser"], env=w.env,
                         stdout=subprocess.PIPE)
    w.children.append(f)
    read_until(f, "refused %s bytes" % over)
    refuse("refuser")
    got = read_until(f, "refused %s bytes" % over)
    check(any("run: slice s" in line for line in got),
          "logs -f did not print the second slice's start: %r" % got)
    f.send_signal(signal.SIGINT)
    try:
        rc = f.wait(timeout=10)
    except subprocess.TimeoutExpired:
        fail("logs -f did not stop on SIGINT")
    check(rc == 0, "logs -f after Ctrl-C: status %d" % rc)

    # --log-dir, for run and logs.
    other = os.path.join(w.dir, "elsewhere")
    refuse("moved", "--log-dir", other)
    check(os.path.exists(os.path.join(other, "moved.log")) and
          not os.path.exists(os.path.join(logdir, "moved.log")), "--log-dir not used")
    r = w.cli("logs", "--log-dir", other, "moved")
    check(r.returncode == 0 and "refused" in r.stdout, "logs --log-dir: %r" % r.stderr)

    # The user's own GPUSLICE_LOG wins.
    mine = os.path.join(w.dir, "mine.log")
    env = dict(w.env, GPUSLICE_LOG=mine)
    refuse("own", env=env)
    with open(mine) as fh:
        check(("refused %s bytes" % over) in fh.read(), "the user's GPUSLICE_LOG was not used")
    check(not os.path.exists(os.path.join(logdir, "own.log")),
          "a log was made although the user chose GPUSLICE_LOG")
    # The id of a running slice with a name finds its name's log.
    hold = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                             "--name", "byid", "--", hold_bin, str(100 << 20)],
                            env=w.env, stdout=subprocess.PIPE, text=True)
    w.children.append(hold)
    check(hold.stdout.readline().strip() == "ready", "the holder did not allocate")
    sid = [s["id"] for s in w.slices() if s.get("name") == "byid"][0]
    r = w.cli("logs", sid)
    check(r.returncode == 0 and ("run: slice %s byid" % sid) in r.stdout,
          "logs by the id of a named slice: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    hold.terminate()
    hold.wait(timeout=15)

    r = w.cli("logs", "../etc/passwd")
    check(r.returncode == 1 and "not a slice name" in r.stderr, "a path as a name: %r" % r.stderr)
    print("PASS")
finally:
    w.cleanup()
