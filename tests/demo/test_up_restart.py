#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice up` restarts an API that exits, with a backoff that doubles, gives
every start its own slice, and leaves no slice behind after Ctrl-C."""
import re
import time

from gsenv import World, fail, ok, stop_session

SPEC = """
- name: crashy
  command: [sh, -c, 'echo "start cfg=$GPUSLICE_CONFIG"; test -r "$GPUSLICE_CONFIG" && echo readable; exit 3']
  compute: {gpu: 100m, gpu_memory: 1Gi}
- name: steady
  command: [sh, -c, 'echo ready; exec sleep 600']
  compute: {gpu: 200m, gpu_memory: 1Gi}
"""


def main():
    with World() as w:
        p = w.up(w.spec(SPEC))
        time.sleep(4.5)
        rc = stop_session(p)
        log = w.log()
        if rc != 0:
            fail(f"up exited {rc} after SIGINT, expected 0", log)
        starts = re.findall(r"^\[crashy\] start cfg=(\S+)$", log, re.M)
        if len(starts) < 3:
            fail(f"{len(starts)} starts of the crashing API in 4.5s, expected at least 3", log)
        if log.count("[crashy] readable") < len(starts):
            fail("a start ran without a readable slice config", log)
        ok(f"a crashing API is restarted ({len(starts)} starts), each in a slice")
        delays = [float(d) for d in re.findall(r"\[crashy\] exited with status 3 .*restarting in "
                                                r"([0-9.]+)s", log)]
        if delays[:3] != [0.5, 1.0, 2.0]:
            fail(f"backoff {delays}, expected 0.5s, 1.0s, 2.0s, ...", log)
        ok(f"the backoff doubles: {delays}")
        if not re.search(r"^\[steady\] ready$", log, re.M):
            fail("the steady API's output is not prefixed", log)
        left = w.slices()
        if left:
            fail(f"slices left after stop: {left}", log)
        ok("no slice is left after Ctrl-C")


if __name__ == "__main__":
    main()
