# SPDX-License-Identifier: Apache-2.0
"""A "container" for the tests, as a container runtime makes one from a
device plugin's answer or a CDI spec's edits: a private mount namespace
(unshare -m) with a fresh /run and the mounts that live under
/run/gpuslice (the slice config, the slice directory, the daemon's socket
directory) bound where the container expects them; the command is exec'd,
so its pid is the Popen's."""
import os
import re
import subprocess
import uuid

SCRIPT = r'''
set -e
mount -t tmpfs gs-run /run
while read -r host ctr mode; do
    if [ -d "$host" ]; then mkdir -p "$ctr"; else mkdir -p "$(dirname "$ctr")"; touch "$ctr"; fi
    mount --bind "$host" "$ctr"
    if [ "$mode" = ro ]; then mount -o remount,bind,ro "$ctr"; fi
done < "$1"
shift
exec "$@"
'''


def preload_of(shim):
    """LD_PRELOAD for the shim (the sanitizer's runtime first in an ASan build)."""
    ldd = subprocess.run(["ldd", shim], capture_output=True, text=True).stdout
    asan = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
    return (asan.group(2) + ":" if asan else "") + shim


def run(tmp, mounts, env, argv):
    """Start argv in a container: mounts [(host, container, read_only)]
    (those outside /run/gpuslice are left out), env the whole environment."""
    table = os.path.join(tmp, "mounts-%s" % uuid.uuid4().hex[:8])
    with open(table, "w") as f:
        for host, ctr, ro in mounts:
            if ctr.startswith("/run/gpuslice"):
                f.write("%s %s %s\n" % (host, ctr, "ro" if ro else "rw"))
    env = dict(env)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    return subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", SCRIPT,
                             "container", table] + list(argv), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def can_unshare():
    return subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                          capture_output=True).returncode == 0
