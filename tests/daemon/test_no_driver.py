# SPDX-License-Identifier: Apache-2.0
"""Without --sim and without an NVIDIA driver, gpusliced says exactly that
and how to use the simulator."""
import ctypes.util
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("nodriver")
try:
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        print("SKIP: a real NVIDIA driver is installed")
        sys.exit(SKIP)
    except OSError:
        pass
    env = dict(w.env)
    env.pop("LD_LIBRARY_PATH", None)
    r = subprocess.run([w.daemon_bin, "--state-dir", w.state, "--socket", w.sock], env=env,
                       capture_output=True, text=True, timeout=15)
    check(r.returncode != 0, "daemon started without a driver")
    check("no NVIDIA driver found" in r.stderr and "libnvidia-ml.so.1" in r.stderr
          and "--sim" in r.stderr, "unclear error: " + r.stderr)
    check(" gpusliced[" in r.stderr and ": error: " in r.stderr, "log format: " + r.stderr)
    r = subprocess.run([w.daemon_bin, "--policy", "random"], env=env, capture_output=True,
                       text=True, timeout=15)
    check(r.returncode == 2 and "binpack, spread" in r.stderr, "bad --policy: " + r.stderr)
    print("PASS")
finally:
    w.cleanup()
