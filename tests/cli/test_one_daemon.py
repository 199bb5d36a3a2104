# SPDX-License-Identifier: Apache-2.0
"""One daemon per machine, and the CLI asks it what it serves:
- read-only commands (ls, events, top) never start a daemon: they say none
  answers and exit non-zero;
- a daemon started with --sim is remembered: `gpuslice run` without --sim
  (and without GPUSLICE_SIM_LIBDIR or any SIMGPU_* setting) runs a CUDA
  program on the daemon's simgpu, its GPU the slice's;
- a user other than root who cannot reach the machine's daemon
  (/run/gpuslice) is refused with what to do, and gets no private daemon on
  real GPUs; --sim still gets a private simulated daemon, which later
  commands without --sim find; gpusliced as that user wants --state-dir or
  --sim; the machine's socket belongs to its group (--socket-group).
The last part needs root (to run as nobody), and is skipped otherwise."""
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

CUDA = r'''
import ctypes, sys
try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    print("no-driver", e)
    sys.exit(3)
n = ctypes.c_int(0)
r = cu.cuInit(0)
r2 = cu.cuDeviceGetCount(ctypes.byref(n))
print("cuda", r, r2, n.value, flush=True)
sys.exit(0 if r == 0 and r2 == 0 and n.value == 1 else 4)
'''

SYSTEM_SOCK = "/run/gpuslice/gpusliced.sock"


def system_daemon_answers():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(SYSTEM_SOCK)
        return True
    except OSError:
        return False
    finally:
        s.close()


def stop_pid(pid):
    try:
        os.kill(pid, signal.SIGTERM)
        for _ in range(500):
            os.kill(pid, 0)
            time.sleep(0.02)
    except OSError:
        pass


w = World("onedaemon", devices=2, memory="8Gi")
started = []
try:
    if not os.path.exists(w.shim):
        w.env["GPUSLICE_SHIM"] = "/dev/null"
    # 1. Read-only commands never start a daemon.
    for args in (("ls",), ("ls", "--json"), ("events",), ("top", "--once")):
        r = w.cli(*args)
        check(r.returncode != 0, "%s with no daemon: exit 0" % (args,))
        check("no gpuslice daemon" in r.stderr and w.sock in r.stderr,
              "%s: no clear message: %r" % (args, r.stderr))
        check("starting gpusliced" not in r.stderr, "%s started a daemon" % (args,))
        check(not os.path.exists(w.sock), "%s: a daemon answers now" % (args,))

    # 2. --sim is remembered by the daemon.
    r = w.cli("run", "--sim", "--gpu", "100m", "--", "true")
    check(r.returncode == 0 and "starting gpusliced --sim" in r.stderr, "run --sim: %r" % r.stderr)
    t, items = w.call(STATUS)
    started.append(int(get(items, "pid")))
    check(get(items, "sim") == "1" and get(items, "sim_libdir") == w.simlib,
          "status does not say simgpu and its libraries: %r" % items)
    hold = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "600m", "--", "sleep", "60"],
                            env=w.env)
    w.children.append(hold)
    w.wait_for(lambda: len(w.slices()) == 1, what="the held slice")
    cuda = os.path.join(w.dir, "cuda.py")
    with open(cuda, "w") as f:
        f.write(CUDA)
    bare = {k: v for k, v in w.env.items()
            if not k.startswith("SIMGPU_") and k not in ("GPUSLICE_SIM_LIBDIR", "LD_LIBRARY_PATH")}
    r = subprocess.run([w.cli_bin, "run", "--gpu", "500m", "--", sys.executable, cuda], env=bare,
                       capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and "cuda 0 0 1" in r.stdout,
          "run without --sim on a --sim daemon: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    hold.terminate()
    hold.wait()
    r = w.cli("ls")
    check(r.returncode == 0 and "GPU" in r.stdout, "ls with a daemon: %r" % r.stderr)

    # 3. As another user: the machine's daemon or a clear refusal.
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        print("PASS (the other-user part skipped: needs root and setpriv)")
        sys.exit(0)
    nobody = pwd.getpwnam("nobody")
    home = os.path.join(w.dir, "nobody")
    os.makedirs(os.path.join(home, "sim"))
    os.chmod(w.dir, 0o755)
    os.chown(home, nobody.pw_uid, nobody.pw_gid)
    os.chown(os.path.join(home, "sim"), nobody.pw_uid, nobody.pw_gid)
    shutil.copy(cuda, os.path.join(home, "cuda.py"))
    private = "/tmp/gpuslice-sim-%d" % nobody.pw_uid
    shutil.rmtree(private, ignore_errors=True)
    uenv = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home,
            "GPUSLICE_SHIM": w.env.get("GPUSLICE_SHIM", w.shim), "GPUSLICE_SIM_LIBDIR": w.simlib,
            "SIMGPU_DIR": os.path.join(home, "sim"), "SIMGPU_DEVICES": "1"}

    def as_nobody(*args, env=None):
        return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
                              + list(args), env=env or uenv, capture_output=True, text=True,
                              timeout=30, cwd=home)

    if not system_daemon_answers():
        want = ("no gpuslice daemon at /run/gpuslice/gpusliced.sock: start it (systemctl start "
                "gpusliced) or ask to be added to the group gpuslice")
        for args in (("ls",), ("run", "--gpu", "100m", "--", "true")):
            r = as_nobody(w.cli_bin, *args)
            check(r.returncode != 0 and want in r.stderr,
                  "nobody %s: not refused clearly: %d %r" % (args[0], r.returncode, r.stderr))
            check("starting gpusliced" not in r.stderr and not os.path.exists(private),
                  "nobody %s: a private daemon was started" % args[0])
        r = as_nobody(w.daemon_bin)
        check(r.returncode == 2 and "--state-dir" in r.stderr and "--sim" in r.stderr,
              "gpusliced as nobody without --state-dir: %d %r" % (r.returncode, r.stderr))
        # --sim still gets a private simulated daemon; later commands find it.
        r = as_nobody(w.cli_bin, "run", "--sim", "--gpu", "100m", "--", "true")
        check(r.returncode == 0 and "starting gpusliced --sim" in r.stderr and private in r.stderr,
              "nobody run --sim: %d %r" % (r.returncode, r.stderr))
        sock = os.path.join(private, "gpusliced.sock")
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        s.sendall(frame(STATUS))
        t, items = read_frame(s)
        s.close()
        started.append(int(get(items, "pid")))
        r = as_nobody(w.cli_bin, "ls", "--json")
        check(r.returncode == 0 and '"gpus"' in r.stdout, "nobody ls: %r" % r.stderr)
        r = as_nobody(w.cli_bin, "run", "--gpu", "100m", "--", "/usr/bin/python3", "cuda.py",
                      env={k: v for k, v in uenv.items() if not k.startswith("SIMGPU_")})
        check(r.returncode == 0 and "cuda 0 0 1" in r.stdout,
              "nobody run on its --sim daemon: %d %r %r" % (r.returncode, r.stdout, r.stderr))

    # The machine's socket belongs to its group: a member reaches it.
    sysdir = os.path.join(w.dir, "sys")
    os.makedirs(sysdir, 0o755)
    ssock = os.path.join(sysdir, "gpusliced.sock")
    logf = open(os.path.join(w.dir, "sys.log"), "ab")
    sysd = subprocess.Popen([w.daemon_bin, "--sim", "--state-dir", sysdir, "--socket", ssock,
                             "--socket-group", "nogroup"], env=w.env, stdout=logf, stderr=logf)
    logf.close()
    w.children.append(sysd)
    w.wait_for(lambda: os.path.exists(ssock), what="the group daemon's socket")
    time.sleep(0.2)
    st = os.stat(ssock)
    check(st.st_gid == 65534 and st.st_mode & 0o777 == 0o660,
          "socket group/mode: %d %o" % (st.st_gid, st.st_mode))
    r = as_nobody(w.cli_bin, "ls", env=dict(uenv, GPUSLICE_SOCKET=ssock))
    check(r.returncode == 0 and "GPU" in r.stdout, "group member ls: %r" % r.stderr)
    # Root's slice on the shared daemon: another user sees it, not its pid,
    # name or files; root sees everything.
    rootrun = subprocess.Popen([w.cli_bin, "run", "--gpu", "200m", "--name", "roots", "--",
                                "sleep", "30"], env=dict(w.env, GPUSLICE_SOCKET=ssock),
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    w.children.append(rootrun)

    def slices_seen(run):
        r = run()
        check(r.returncode == 0, "ls --json: %r" % r.stderr)
        return [s for g in json.loads(r.stdout)["gpus"] for s in g["slices"]]

    mine = lambda: subprocess.run([w.cli_bin, "ls", "--json"], env=dict(w.env,
                                  GPUSLICE_SOCKET=ssock), capture_output=True, text=True,
                                  timeout=30)
    w.wait_for(lambda: slices_seen(mine), what="root's slice")
    own = slices_seen(mine)[0]
    check(own["pid"] and own["config_path"] and own["name"] == "roots",
          "root sees its slice: %s" % own)
    other = slices_seen(lambda: as_nobody(w.cli_bin, "ls", "--json",
                                          env=dict(uenv, GPUSLICE_SOCKET=ssock)))[0]
    check(other["gpu_milli"] == 200 and other["pid"] in (0, None) and other["config_path"] is None
          and other["slice_dir_path"] is None and not other["name"],
          "another user sees no private details: %s" % other)
    rootrun.terminate()
    rootrun.wait()
    print("PASS")
finally:
    for pid in started:
        stop_pid(pid)
    shutil.rmtree("/tmp/gpuslice-sim-65534", ignore_errors=True)
    w.cleanup()
