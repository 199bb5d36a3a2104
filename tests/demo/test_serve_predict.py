#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The example server on simgpu inside a slice with a memory cap
(`gpuslice run`): it loads its model, answers /predict, /healthz and /stats
to curl, stops cleanly on SIGTERM; a model larger than the cap fails to load
with CUDA_ERROR_OUT_OF_MEMORY."""
import json
import signal
import subprocess

from gsenv import World, fail, free_port, ok, process_memory, wait_http


def curl(url):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "-w", "\n%{http_code}", url],
                       capture_output=True, text=True, timeout=20)
    body, _, code = r.stdout.rpartition("\n")
    return int(code or 0), body


def main():
    with World() as w:
        port = free_port()
        run = [w.gpuslice, "run", "--sim", "--gpu", "200m", "--gpu-memory", "1Gi", "--",
               w.serve, "--port", str(port), "--model-size", "512Mi", "--device-time", "2ms"]
        p = subprocess.Popen(run, env=w.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True)
        try:
            if wait_http(f"http://127.0.0.1:{port}/healthz", 20, p) is None:
                p.kill()
                fail("the server never became healthy", p.communicate()[0])
            code, body = curl(f"http://127.0.0.1:{port}/predict")
            if code != 200 or not json.loads(body)["ok"]:
                fail(f"/predict answered {code}: {body}")
            code, body = curl(f"http://127.0.0.1:{port}/stats")
            stats = json.loads(body)
            if code != 200 or stats["requests"] != 1 or stats["model_bytes"] != 512 << 20:
                fail(f"/stats answered {code}: {body}")
            ok("gs-serve in a 1Gi slice answers /predict and /stats")
            used = process_memory(w.smi(), stats["pid"])
            if not (512 << 20) <= used <= (1 << 30):
                fail(f"simgpu says the server holds {used} bytes; expected 512Mi..1Gi")
            ok(f"simgpu ground truth: {used >> 20}Mi used against a 1Gi cap")
        finally:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=20)[0]
        if p.returncode != 0 or "serve: stopped on SIGTERM" not in out:
            fail(f"SIGTERM: exit {p.returncode}", out)
        ok("SIGTERM stops the server cleanly (exit 0)")

        big = subprocess.run([w.gpuslice, "run", "--sim", "--gpu", "200m", "--gpu-memory", "1Gi",
                              "--", w.serve, "--port", str(free_port()), "--model-size", "1Gi"],
                             env=w.env, capture_output=True, text=True, timeout=30)
        if big.returncode != 1 or "CUDA_ERROR_OUT_OF_MEMORY" not in big.stderr:
            fail(f"a 1Gi model in a 1Gi cap (with its context) loaded: exit {big.returncode}",
                 big.stdout + big.stderr)
        ok("a model beyond the cap fails with CUDA_ERROR_OUT_OF_MEMORY")


if __name__ == "__main__":
    main()
