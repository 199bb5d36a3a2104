#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice up` with two example servers on simgpu: both answer /predict
in their slices; Ctrl-C stops both (exit 0), their processes are gone, their
slices are freed and simgpu shows no memory held by them."""
import json

from gsenv import World, fail, free_port, ok, pid_alive, stop_session, wait_http

SPEC = """
- name: alpha
  command: [gs-serve, --port, "{p1}", --model-size, 64Mi, --device-time, 1ms, --threads, "2"]
  compute: {{gpu: 300m, gpu_memory: 1Gi}}
- name: beta
  command: [gs-serve, --port, "{p2}", --model-size, 128Mi, --device-time, 1ms, --threads, "2"]
  compute: {{gpu: 600m, gpu_memory: 2Gi}}
"""


def main():
    with World() as w:
        ports = {"alpha": free_port(), "beta": free_port()}
        p = w.up(w.spec(SPEC.format(p1=ports["alpha"], p2=ports["beta"])))
        pids = {}
        for name, port in ports.items():
            if wait_http(f"http://127.0.0.1:{port}/healthz", 20, p) is None:
                stop_session(p)
                fail(f"{name} never became healthy", w.log())
            status, body = wait_http(f"http://127.0.0.1:{port}/predict", 5)
            if status != 200 or not json.loads(body)["ok"]:
                stop_session(p)
                fail(f"{name} /predict answered {status} {body}", w.log())
            pids[name] = json.loads(wait_http(f"http://127.0.0.1:{port}/stats", 5)[1])["pid"]
        ok("both APIs answer /predict")
        live = w.slices()
        if len(live) != 2:
            stop_session(p)
            fail(f"{len(live)} slices while running, expected 2: {live}", w.log())
        ok("each API runs in its own slice")
        rc = stop_session(p)
        log = w.log()
        if rc != 0:
            fail(f"up exited {rc} after SIGINT, expected 0", log)
        if "[alpha] serve: stopped on SIGTERM" not in log or "[beta] serve: stopped" not in log:
            fail("the servers were not stopped with SIGTERM", log)
        alive = [n for n, pid in pids.items() if pid_alive(pid)]
        if alive:
            fail(f"still running: {alive}", log)
        if w.slices():
            fail(f"slices left: {w.slices()}", log)
        ok("Ctrl-C stops every API (exit 0) and frees every slice")


if __name__ == "__main__":
    main()
