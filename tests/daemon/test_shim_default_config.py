# SPDX-License-Identifier: Apache-2.0
"""The shim and a slice config's default path it may not read (issue 17): a
node whose state directory is 0700 must not make every other user's CUDA
fail when their processes are in no slice; a process that a slice names
(GPUSLICE_SLICE) still fails closed. GPUSLICE_TEST_DEFAULT_CONFIG stands in
for the default path; the other user is nobody (root and setpriv(1))."""
import os
import pwd
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

if os.geteuid() != 0 or not shutil.which("setpriv"):
    print("SKIP: needs root and setpriv")
    sys.exit(SKIP)

w = World("shimdefault", devices=1)
try:
    nobody = pwd.getpwnam("nobody")
    locked = os.path.join(w.dir, "locked")
    os.makedirs(locked, mode=0o700)
    conf = os.path.join(locked, "slice.conf")
    with open(conf, "w") as f:
        f.write("gpuslice-slice 1\n")
    os.chmod(w.dir, 0o755)
    simdir = os.path.join(w.dir, "sim-nobody")
    os.makedirs(simdir)
    os.chown(simdir, nobody.pw_uid, nobody.pw_gid)
    hold = os.path.join(w.build, "tests/daemon/gs_alloc_hold")
    ldd = subprocess.run(["ldd", w.shim], capture_output=True, text=True).stdout
    asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": w.simlib, "SIMGPU_DIR": simdir,
           "SIMGPU_DEVICES": "1", "GPUSLICE_TEST_DEFAULT_CONFIG": conf,
           "LD_PRELOAD": (asan.group(2) + ":" if asan else "") + w.shim,
           "ASAN_OPTIONS": "detect_leaks=0"}

    def run_as_nobody(extra):
        p = subprocess.Popen(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                              hold, str(1 << 20)], env=dict(env, **extra),
                             stdout=subprocess.PIPE, text=True, cwd="/")
        line = p.stdout.readline().strip()
        p.kill()
        p.wait()
        return line

    got = run_as_nobody({})
    check(got == "ready", "a process in no slice fails on a default config it cannot read: %r"
          % got)
    got = run_as_nobody({"GPUSLICE_SLICE": "s1"})
    check(got in ("no-cuda", "oom"), "a slice's process got the GPU without its config: %r" % got)
    print("PASS")
finally:
    w.cleanup()
