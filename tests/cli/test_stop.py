# SPDX-License-Identifier: Apache-2.0
"""gpuslice stop: refused to another user (the daemon checks the asker's
uid); the owner's stop ends the command (SIGTERM; SIGKILL after the grace
for one that ignores it) and frees the slice: simgpu shows none of its
memory, the daemon's ledger no slice. The other-user part needs root and
setpriv, and is skipped otherwise."""
import os
import pwd
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa


def holds_memory(w, pid):
    return any(p["pid"] == pid and p.get("alive", True) and p["used_bytes"] > 0
               for p in w.smi()["processes"])


w = World("stop", devices=1, memory="8Gi")
try:
    hold_bin = need_hold(w)
    w.start_daemon()
    keeper = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                               "--name", "keeper", "--", hold_bin, str(100 << 20)],
                              env=w.env, stdout=subprocess.PIPE, text=True)
    w.children.append(keeper)
    check(keeper.stdout.readline().strip() == "ready", "the holder did not allocate")
    (s,) = w.slices()
    pid = int(s["pid"])
    check(holds_memory(w, pid), "simgpu shows no memory of the holder")

    r = w.cli("stop", "nosuch")
    check(r.returncode == 1 and "'nosuch'" in r.stderr, "stop nosuch: %d %r" % (r.returncode,
                                                                             r.stderr))

    # Another user may not stop it, by id (names of others' slices are hidden).
    skipped = ""
    if os.geteuid() == 0 and shutil.which("setpriv"):
        os.chmod(w.dir, 0o755)
        os.chmod(w.sock, 0o666)
        uenv = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent",
                "GPUSLICE_SOCKET": w.sock}

        def as_nobody(*args):
            return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup",
                                   "--clear-groups", w.cli_bin, *args], env=uenv,
                                  capture_output=True, text=True, timeout=30, cwd="/")

        r = as_nobody("stop", s["id"])
        check(r.returncode == 1 and "only its owner or root may stop it" in r.stderr and
              ("uid %d" % pwd.getpwnam("nobody").pw_uid) in r.stderr,
              "stop by another user not refused: %d %r" % (r.returncode, r.stderr))
        r = as_nobody("stop", "keeper")
        check(r.returncode == 1 and "no slice named 'keeper'" in r.stderr,
              "stop by another user, by name: %d %r" % (r.returncode, r.stderr))
        check(keeper.poll() is None and len(w.slices()) == 1 and holds_memory(w, pid),
              "another user's stop stopped the slice")

        # A slice root made for nobody's process, recorded as run by a
        # `gpuslice up` that is root's (this test): nobody owns the slice but
        # may not stop that up (the daemon would SIGTERM this test).
        napper = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup",
                                   "--clear-groups", "sleep", "60"])
        w.children.append(napper)

        def napping():  # setpriv has switched to nobody and run sleep
            try:
                with open("/proc/%d/status" % napper.pid) as f:
                    st = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
                return st["Name"].strip() == "sleep" and \
                    st["Uid"].split()[0] == str(pwd.getpwnam("nobody").pw_uid)
            except OSError:
                return False
        w.wait_for(napping, what="sleep as nobody")
        t, items = w.call(CREATE, [("gpu_milli", 100), ("pid", napper.pid),
                                   ("up_spec", "/nonexistent/apis.yaml")])
        check(t == REPLY | CREATE and get(items, "slice_up_pid") == str(os.getpid()),
              "root's slice for nobody's process with up_spec: %r" % (items,))
        r = as_nobody("down")
        check(r.returncode == 1 and "runs as uid 0" in r.stderr,
              "down of root's up by the slice's owner: %d %r" % (r.returncode, r.stderr))
        napper.kill()
        napper.wait()
        w.wait_for(lambda: len(w.slices()) == 1, what="nobody's slice freed")
    else:
        skipped = " (the other-user part skipped: needs root and setpriv)"

    # The owner's stop: SIGTERM reaches the command, the slice is freed.
    r = w.cli("stop", "keeper")
    check(r.returncode == 0 and "keeper: stopped; slice %s freed" % s["id"] in r.stdout,
          "stop keeper: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    check(keeper.wait(timeout=15) == 128 + signal.SIGTERM,
          "gpuslice run after stop: status %r" % keeper.returncode)
    check(not w.slices(), "the daemon still lists a slice: %r" % w.slices())
    check(not holds_memory(w, pid), "simgpu still shows the stopped process's memory")

    # One that ignores SIGTERM gets SIGKILL after the grace period.
    stubborn = subprocess.Popen(
        [w.cli_bin, "run", "--sim", "--gpu", "200m", "--name", "stubborn", "--",
         "/usr/bin/python3", "-c",
         "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
         "print('ready', flush=True)\ntime.sleep(60)\n"],
        env=w.env, stdout=subprocess.PIPE, text=True)
    w.children.append(stubborn)
    check(stubborn.stdout.readline().strip() == "ready", "the stubborn command did not start")
    r = w.cli("stop", "--grace", "0.5", "stubborn")
    check(r.returncode == 0 and "stubborn: stopped" in r.stdout,
          "stop --grace 0.5 stubborn: %d %r %r" % (r.returncode, r.stdout, r.stderr))
    check(stubborn.wait(timeout=15) == 128 + signal.SIGKILL,
          "a command ignoring SIGTERM: status %r" % stubborn.returncode)
    check(not w.slices(), "the stubborn slice is still listed")
    check("stops pid" in w.log_text() and "SIGKILL" in w.log_text(),
          "the daemon's log does not say who stopped what")
    print("PASS" + skipped)
finally:
    w.cleanup()
