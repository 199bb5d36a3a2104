# SPDX-License-Identifier: Apache-2.0
"""Every program of the build (each installed one, simgpu-smi and the
kubelet plugin) answers --version with exactly "NAME VERSION\\n", VERSION
being CMake's project(gpuslice VERSION ...), exit 0.
Usage: version_check.py VERSION PROGRAM..."""
import os
import subprocess
import sys

version, programs = sys.argv[1], sys.argv[2:]
bad = []
for p in programs:
    name = os.path.basename(p)
    r = subprocess.run([p, "--version"], capture_output=True, text=True, timeout=20,
                       env=dict(os.environ, SIMGPU_DIR="/nonexistent/simgpu"))
    want = "%s %s\n" % (name, version)
    if r.returncode != 0 or r.stdout != want:
        bad.append("%s --version: exit %d, %r (want %r) %s" %
                   (name, r.returncode, r.stdout, want, r.stderr.strip()))
    else:
        print("ok: " + r.stdout.strip())
if not programs:
    bad.append("no programs given")
if bad:
    print("FAIL:\n  " + "\n  ".join(bad), file=sys.stderr)
    sys.exit(1)
