#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice up` carries each API's compute.overuse to its slice: under a
daemon on the default policy (report), an API without the shim over its
cap whose spec says `overuse: kill` is killed (and restarted by up), one
that says `overuse: report` is only reported and keeps running, and a
well-behaved neighbour with no policy of its own (`default`) keeps serving
from the same process. A bad value refuses the whole spec before anything
starts."""
import json
import time

from gsenv import World, fail, free_port, ok, pid_alive, stop_session, wait_http

# No shim (env -u LD_PRELOAD) and a 2Gi model in a 1Gi slice.
ROGUE = ('command: [env, -u, LD_PRELOAD, gs-serve, --port, "{port}", --model-size, 2Gi, '
         '--device-time, 1ms, --threads, "1"]')
SPEC = """
- name: keeper
  command: [gs-serve, --port, "{p1}", --model-size, 64Mi, --device-time, 1ms, --threads, "2"]
  compute: {{gpu: 300m, gpu_memory: 1Gi}}
- name: reported
  {rogue_r}
  compute: {{gpu: 300m, gpu_memory: 1Gi, overuse: report}}
- name: killed
  {rogue_k}
  compute: {{gpu: 300m, gpu_memory: 1Gi, overuse: kill}}
"""


def events(w):
    r = w.cli("events", "--json")
    if r.returncode != 0:
        fail(f"gpuslice events --json: {r.returncode}", r.stderr)
    return json.loads(r.stdout or "[]")


def main():
    with World() as w:
        bad = w.spec("- {name: a, command: [x], compute: {gpu: 100m, overuse: stop}}\n", "bad.yaml")
        r = w.cli("up", "--sim", bad)
        if r.returncode == 0 or 'compute.overuse: "stop" is not an over-use policy: use one of ' \
                'report, kill, evict' not in r.stderr:
            fail(f"up with overuse: stop: exit {r.returncode}", r.stderr)
        ok("a bad compute.overuse refuses the spec")

        ports = {"keeper": free_port(), "reported": free_port(), "killed": free_port()}
        p = w.up(w.spec(SPEC.format(p1=ports["keeper"],
                                    rogue_r=ROGUE.format(port=ports["reported"]),
                                    rogue_k=ROGUE.format(port=ports["killed"]))))
        try:
            for name in ("keeper", "reported"):
                if wait_http(f"http://127.0.0.1:{ports[name]}/healthz", 30, p) is None:
                    fail(f"{name} never became healthy", w.log())
            keeper = json.loads(wait_http(f"http://127.0.0.1:{ports['keeper']}/stats", 5)[1])["pid"]
            reported = json.loads(
                wait_http(f"http://127.0.0.1:{ports['reported']}/stats", 5)[1])["pid"]
            want = {"keeper": "default", "reported": "report", "killed": "kill"}
            deadline = time.monotonic() + 20
            while True:
                got = {s["name"]: s.get("overuse") for s in w.slices()}
                if all(got.get(n) == v for n, v in want.items()) or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            if any(got.get(n) != v for n, v in want.items()):
                fail(f"ls --json overuse: {got}, expected {want}", w.log())
            ok("each slice carries its API's over-use policy (ls --json)")

            deadline = time.monotonic() + 30
            while "[killed] was killed by signal 9" not in w.log() and time.monotonic() < deadline:
                time.sleep(0.1)
            if "[killed] was killed by signal 9" not in w.log():
                fail("the overuse: kill API was not killed", w.log(), str(events(w)))
            ok("the overuse: kill API was killed (and up restarts it)")

            ids = {s["name"]: s["id"] for s in w.slices()}
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                if any(e.get("slice") == ids.get("reported") and e.get("action") == "reported"
                       for e in events(w)):
                    break
                time.sleep(0.2)
            else:
                fail("no reported event for the overuse: report API", str(events(w)))
            acted = [e for e in events(w) if e.get("slice") == ids.get("reported")
                     and e.get("action") not in ("detected", "reported")]
            if acted or not pid_alive(reported):
                fail(f"the overuse: report API was acted on: {acted}", w.log())
            ok("the overuse: report API was only reported")

            status, body = wait_http(f"http://127.0.0.1:{ports['keeper']}/predict", 5)
            if status != 200 or not pid_alive(keeper) or json.loads(
                    wait_http(f"http://127.0.0.1:{ports['keeper']}/stats", 5)[1])["pid"] != keeper:
                fail("the well-behaved API was disturbed", w.log())
            ok("the well-behaved API keeps serving from the same process")
        finally:
            rc = stop_session(p)
        if rc != 0:
            fail(f"up exited {rc} after SIGINT, expected 0", w.log())
        if w.slices():
            fail(f"slices left: {w.slices()}", w.log())
        ok("Ctrl-C stops every API (exit 0) and frees every slice")


if __name__ == "__main__":
    main()
