# SPDX-License-Identifier: Apache-2.0
"""Nothing `gpuslice up` or `gpuslice run` starts outlives it, whatever kills
it: kill -9 or SIGHUP (a closed terminal) of `up` with two APIs, each of which
forks a grandchild that setsid()s or double-forks and keeps the API's
listening port; kill -9 of `run` likewise. Within a few seconds every API
process and grandchild is gone, the daemon holds no slice and the ports are
free."""
import os
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

API = r'''
import os, socket, sys, time
name, mode, out = sys.argv[1:4]
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(4)
port = s.getsockname()[1]
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    if mode == "double" and os.fork() != 0:
        os._exit(0)
    os.setsid()
    os.write(w, b"%d\n" % os.getpid())
    time.sleep(600)
    os._exit(0)
if mode == "double":
    os.waitpid(pid, 0)
grand = int(os.read(r, 64))
with open(out + ".tmp", "w") as f:
    f.write("%d %d %d\n" % (os.getpid(), grand, port))
os.rename(out + ".tmp", out)
print(name, "up", flush=True)
time.sleep(600)
'''

SPEC = """
- name: api-a
  command: ["{py}", "{api}", "api-a", "setsid", "{dir}/api-a"]
  compute: {{gpu: 200m, gpu_memory: 1Gi}}
- name: api-b
  command: ["{py}", "{api}", "api-b", "double", "{dir}/api-b"]
  compute: {{gpu: 300m, gpu_memory: 1Gi}}
"""


def alive(pid):
    """Running (a zombie nobody reaps is gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


def port_free(port):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def wait_pids(path, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if os.path.exists(path):
            with open(path) as f:
                return [int(x) for x in f.read().split()]
        time.sleep(0.05)
    fail("no pids in %s" % path)


def check_gone(w, what, procs):
    """procs: [(main, grandchild, port)]: all gone, no slice, ports free."""
    deadline = time.time() + 8
    while time.time() < deadline:
        left = [p for m, g, _ in procs for p in (m, g) if alive(p)]
        if not left and not w.slices():
            break
        time.sleep(0.05)
    left = [p for m, g, _ in procs for p in (m, g) if alive(p)]
    check(not left, "%s: processes left running: %r" % (what, left))
    check(not w.slices(), "%s: slices left: %r" % (what, w.slices()))
    busy = [port for _, _, port in procs if not port_free(port)]
    check(not busy, "%s: ports still held: %r" % (what, busy))


def kill_leftovers(procs):
    for m, g, _ in procs:
        for p in (m, g):
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


w = World("orphans", devices=1)
procs = []
try:
    w.env["GPUSLICE_SHIM"] = w.shim if os.path.exists(w.shim) else "/dev/null"
    w.start_daemon()
    api = os.path.join(w.dir, "api.py")
    with open(api, "w") as f:
        f.write(API)
    for n, sig in enumerate((signal.SIGKILL, signal.SIGHUP)):
        d = os.path.join(w.dir, "up%d" % n)
        os.makedirs(d)
        spec = os.path.join(d, "apis.yaml")
        with open(spec, "w") as f:
            f.write(SPEC.format(py=sys.executable, api=api, dir=d))
        up = subprocess.Popen([w.cli_bin, "up", "--sim", "--grace", "2", spec], env=w.env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs = [tuple(wait_pids(os.path.join(d, a))) for a in ("api-a", "api-b")]
        w.wait_for(lambda: len(w.slices()) == 2, what="the two slices of up")
        check(all(alive(p) for m, g, _ in procs for p in (m, g)), "not all started")
        check(not any(port_free(p) for _, _, p in procs), "ports not held")
        up.send_signal(sig)
        up.wait(timeout=20)
        check_gone(w, "up after %s" % signal.Signals(sig).name, procs)
        kill_leftovers(procs)
        procs = []

    for mode in ("setsid", "double"):
        out = os.path.join(w.dir, "run-" + mode)
        run = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "200m", "--gpu-memory", "1Gi",
                                "--", sys.executable, api, "run", mode, out], env=w.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs = [tuple(wait_pids(out))]
        w.wait_for(lambda: len(w.slices()) == 1, what="the slice of run")
        run.kill()
        run.wait(timeout=20)
        check_gone(w, "run (%s) after SIGKILL" % mode, procs)
        procs = []

    # A command that ends on its own takes what it left behind with it.
    out = os.path.join(w.dir, "run-exit")
    r = w.cli("run", "--sim", "--gpu", "100m", "--", "sh", "-c",
              "setsid sleep 600 & echo $! > %s; exit 3" % out)
    check(r.returncode == 3, "run's status is not the command's: %d %s" % (r.returncode, r.stderr))
    with open(out) as f:
        left = int(f.read())
    w.wait_for(lambda: not alive(left), timeout=5, what="the command's leftover to be killed")
    r = w.cli("run", "--sim", "--gpu", "100m", "--", "sh", "-c", "kill -TERM $$")
    check(r.returncode == 128 + signal.SIGTERM, "signal status: %d" % r.returncode)
    print("PASS")
finally:
    kill_leftovers(procs)
    w.cleanup()
