#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice up` refuses a spec that does not fit as a whole: nothing starts,
exit status 3, and the message names the API, the GPU and what it is short of."""
import os
import subprocess

from gsenv import World, fail, ok

SPEC = """
- name: first
  command: [sh, -c, "touch {tmp}/started-first; exec sleep 600"]
  compute: {{gpu: 600m, gpu_memory: 2Gi}}
- name: second
  command: [sh, -c, "touch {tmp}/started-second; exec sleep 600"]
  compute: {{gpu: 300m, gpu_memory: 2Gi}}
- name: third
  command: [sh, -c, "touch {tmp}/started-third; exec sleep 600"]
  compute: {{gpu: {third}, gpu_memory: {third_mem}}}
"""


def started(w):
    return [n for n in ("first", "second", "third")
            if os.path.exists(os.path.join(w.tmp, f"started-{n}"))]


def main():
    with World() as w:
        # Share: 600m + 300m + 200m > 1000m.
        r = w.cli("up", "--sim", w.spec(SPEC.format(tmp=w.tmp, third="200m", third_mem="1Gi")))
        out = r.stdout + r.stderr
        if r.returncode != 3:
            fail(f"exit status {r.returncode}, expected 3", out)
        for want in ("API third", "GPU 0", "short of 100m share (100m free)", "Nothing was started"):
            if want not in r.stderr:
                fail(f"the refusal does not say {want!r}", out)
        ok("a spec short of share is refused, naming the API, the GPU and the shortfall")
        if started(w):
            fail(f"started despite the refusal: {started(w)}")
        if w.slices():
            fail(f"slices left after a refusal: {w.slices()}")
        ok("nothing was started and no slice was taken")

        # Memory: 2Gi + 2Gi + 13Gi > 16Gi although the shares fit.
        r = w.cli("up", "--sim", w.spec(SPEC.format(tmp=w.tmp, third="100m", third_mem="13Gi")))
        if r.returncode != 3 or "short of" not in r.stderr or "memory" not in r.stderr:
            fail(f"memory shortfall: exit {r.returncode}", r.stderr)
        if started(w) or w.slices():
            fail("something started on a memory refusal")
        ok("a spec short of memory is refused and starts nothing")

        # A command that cannot be run is not restarted (issue 15): up says
        # why, frees its slice and, with no API left, exits 4 by itself.
        bad = w.spec("- name: broken\n  command: [sh, -c, 'exec /nonexistent/serve']\n"
                     "  compute: {gpu: 100m, gpu_memory: 1Gi}\n", name="broken.yaml")
        try:
            r = w.cli("up", "--sim", bad, timeout=20)
        except subprocess.TimeoutExpired:
            fail("up kept restarting a command that cannot be run")
        want = "up: broken: not restarted: sh exited with status 127 (command not found)"
        if r.returncode != 4 or want not in r.stderr or "restarting" in r.stderr:
            fail(f"a command not found: exit {r.returncode}", r.stderr)
        if w.slices():
            fail(f"slices left after up gave up: {w.slices()}")
        ok("a command that cannot be run is not restarted; up exits 4 and frees its slice")


if __name__ == "__main__":
    main()
