# SPDX-License-Identifier: Apache-2.0
"""/metrics under compute load, judged by simgpu's ground truth: on two
simulated GPUs (placement spread), a 200m `cap` slice and a 300m `share`
slice each run a saturating program (gs-burn, 1 ms kernels) through the
shim's gate. Over a window of a few seconds:

- gpuslice_slice_gate_wait_seconds_total of the cap slice grows by most of
  the window (it is throttled to its share, so it waits the rest), and its
  wait plus its device time (simgpu-smi's busy_ns of its process) covers
  most of the window without exceeding it (the wait never counts its own
  work draining); the share slice, alone on its GPU, hardly waits;
- gpuslice_gpu_utilization_ratio of each GPU is its device busy time over
  the window by simgpu-smi (steady load), within 15 points: ~0.2 and ~1;
- promtool check metrics passes on the text.
Bounds are generous (a loaded machine slows the programs, not the ratios)."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import World, check, SKIP  # noqa: E402

PROMTOOL = shutil.which("promtool")
if not PROMTOOL or not shutil.which("curl"):
    print("SKIP: promtool or curl missing (Debian: apt-get install prometheus curl)")
    sys.exit(SKIP)

w = World("metricsc", devices=2)
burn = os.path.join(w.build, "bench/compute/gs-burn")
ptx = os.path.join(w.simlib, "gs_kernels.ptx")
if not os.path.exists(burn) or not os.path.exists(w.shim) or not os.path.exists(ptx):
    print("SKIP: gs-burn, the shim or the kernels are not built")
    w.cleanup()
    sys.exit(SKIP)
w.env["GS_KERNELS_PTX"] = ptx
WINDOW_S = 3.0
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse(text):
    """{name: [(labels dict, value)]} of the sample lines."""
    samples = {}
    for line in text.splitlines():
        m = SAMPLE.match(line) if line and not line.startswith("#") else None
        if m:
            labels = dict(LABEL.findall(m.group(3) or ""))
            samples.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return samples


def one(samples, metric, **want):
    got = [v for labels, v in samples.get(metric, [])
           if all(labels.get(k) == str(x) for k, x in want.items())]
    check(len(got) == 1, "%s%r: %d samples (%r)" % (metric, want, len(got), samples.get(metric)))
    return got[0]


def scrape(url):
    r = subprocess.run(["curl", "-sS", "--max-time", "10", url], capture_output=True, text=True,
                       timeout=15)
    check(r.returncode == 0, "GET %s: %r" % (url, r))
    return r.stdout


try:
    w.start_daemon("--policy", "spread", "--metrics-listen", "127.0.0.1:0")
    m = None
    deadline = time.time() + 10
    while not m and time.time() < deadline:
        m = re.search(r"metrics: listening on 127\.0\.0\.1:(\d+)", w.log_text())
        time.sleep(0.05)
    check(m, "no 'metrics: listening on' line: " + w.log_text())
    url = "http://127.0.0.1:%s/metrics" % m.group(1)

    for name, gpu, policy in (("capped", "200m", "cap"), ("shared", "300m", "share")):
        p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", gpu, "--policy", policy,
                              "--name", name, "--", burn, "--kernel", "1ms", "--duration", "40s"],
                             env=w.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        w.children.append(p)
    w.wait_for(lambda: {"capped", "shared"} <= {s.get("name") for s in w.slices()}, timeout=15,
               what="both slices")
    doc = json.loads(w.cli("ls", "--json").stdout)
    where = {s["name"]: (s, g) for g in doc["gpus"] for s in g["slices"]}
    check(where["capped"][1]["uuid"] != where["shared"][1]["uuid"],
          "spread put both slices on one GPU: %r" % doc)
    # Both burn: each process has device time on its GPU.
    w.wait_for(lambda: all(any(p["pid"] == where[n][0]["pid"] and p["busy_ns"] > 0
                               for p in w.smi()["processes"]) for n in where),
               timeout=15, what="both programs to run kernels")
    time.sleep(1.5)  # past start-up, and a second of NVML's utilisation window

    def figures():
        samples = parse(scrape(url))
        smi = w.smi()
        return samples, smi, time.monotonic()

    s0, smi0, t0 = figures()
    time.sleep(WINDOW_S)
    text = scrape(url)
    s1 = parse(text)
    smi1, t1 = w.smi(), time.monotonic()
    dt = t1 - t0

    def wait(samples, name):
        s, g = where[name]
        return one(samples, "gpuslice_slice_gate_wait_seconds_total", slice=s["id"],
                   gpu=g["index"], UUID=g["uuid"])

    def busy(smi, pid):
        return sum(p["busy_ns"] for p in smi["processes"] if p["pid"] == pid) / 1e9

    for name in where:
        s, g = where[name]
        dw = wait(s1, name) - wait(s0, name)
        db = busy(smi1, s["pid"]) - busy(smi0, s["pid"])
        print("%s (%s, %s): waited %.2f s, ran %.2f s on the device in %.2f s"
              % (name, s["gpu_milli"], s["policy"], dw, db, dt))
        check(dw >= 0, "%s: the wait counter went down" % name)
        if name == "capped":
            check(db <= 0.35 * dt, "capped ran %.2f s of %.2f s: not throttled" % (db, dt))
            check(dw >= 0.5 * dt, "capped waited %.2f s of %.2f s (throttled to 200m)" % (dw, dt))
            check(0.7 * dt <= dw + db <= 1.05 * dt + 0.1,
                  "capped: wait %.2f + busy %.2f s against %.2f s of wall time" % (dw, db, dt))
        else:
            check(db >= 0.6 * dt, "shared ran only %.2f s of %.2f s alone on its GPU" % (db, dt))
            check(dw <= 0.15 * dt, "shared waited %.2f s of %.2f s alone on its GPU" % (dw, dt))

    truth = {d["uuid"]: d for d in smi1["devices"]}
    before = {d["uuid"]: d for d in smi0["devices"]}
    utils = {}
    for name in where:
        g = where[name][1]
        u = one(s1, "gpuslice_gpu_utilization_ratio", gpu=g["index"], UUID=g["uuid"])
        real = (truth[g["uuid"]]["busy_ns"] - before[g["uuid"]]["busy_ns"]) / 1e9 / dt
        print("GPU %s (%s): utilisation %.2f, simgpu-smi busy %.2f" % (g["index"], name, u, real))
        check(0 <= u <= 1, "utilisation out of range: %r" % u)
        check(abs(u - real) <= 0.15, "GPU %s: utilisation %.2f, simgpu-smi says %.2f"
              % (g["index"], u, real))
        utils[name] = u
    check(utils["shared"] - utils["capped"] >= 0.5, "utilisation does not tell the GPUs apart: %r"
          % utils)

    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, "promtool check metrics: %s%s" % (r.stdout, r.stderr))
    print("PASS")
finally:
    w.cleanup()
