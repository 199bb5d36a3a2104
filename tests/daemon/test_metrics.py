# SPDX-License-Identifier: Apache-2.0
"""gpusliced --metrics-listen: /metrics in the Prometheus text format.

Two slices on simgpu (real allocations through the shim when it is built);
every figure checked against `gpuslice ls --json` and simgpu-smi's ground
truth; `promtool check metrics` passes on the text; a real Prometheus server
scrapes the daemon and a PromQL query over its HTTP API returns a slice's
memory; bad and slow clients are bounded and never hold up the local API."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import World, check, fail, SKIP, LIST, REPLY  # noqa: E402

PROMTOOL = shutil.which("promtool")
PROMETHEUS = shutil.which("prometheus")
if not PROMTOOL or not PROMETHEUS or not shutil.which("curl"):
    print("SKIP: promtool, prometheus or curl missing (Debian: apt-get install prometheus curl)")
    sys.exit(SKIP)

TIMEOUT_S = 5  # NODE_HTTP_TIMEOUT_S
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def parse(text):
    """{name: [(labels dict, value)]}, and the HELP/TYPE of each family."""
    samples, types, helps = {}, {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, t = line.split(" ", 3)
            check(name not in types, "family %s declared twice" % name)
            types[name] = t
        elif line.startswith("# HELP "):
            parts = line.split(" ", 3)
            helps[parts[2]] = parts[3] if len(parts) > 3 else ""
        elif line:
            m = SAMPLE.match(line)
            check(m is not None, "not a sample line: %r" % line)
            labels = dict(LABEL.findall(m.group(3) or ""))
            samples.setdefault(m.group(1), []).append((labels, float(m.group(4))))
    return samples, types, helps


def one(samples, metric, **want):
    got = [v for labels, v in samples.get(metric, [])
           if all(labels.get(k) == str(x) for k, x in want.items())]
    check(len(got) == 1, "%s%r: %d samples (%r)" % (metric, want, len(got), samples.get(metric)))
    return got[0]


def curl(*args, timeout=10):
    return subprocess.run(["curl", "-sS", "--max-time", str(timeout)] + list(args),
                          capture_output=True, text=True, timeout=timeout + 5)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


w = World("metrics", devices=2, memory="16Gi")
prom = None
holders = []
try:
    w.start_daemon("--metrics-listen", "127.0.0.1:0")
    port = None
    deadline = time.time() + 10
    while port is None and time.time() < deadline:
        m = re.search(r"metrics: listening on 127\.0\.0\.1:(\d+)", w.log_text())
        port = int(m.group(1)) if m else None
        time.sleep(0.05)
    check(port, "no 'metrics: listening on' line: " + w.log_text())
    url = "http://127.0.0.1:%d/metrics" % port

    # Bad flags are refused before anything starts.
    bad = subprocess.run([w.daemon_bin, "--sim", "--state-dir", w.state + "-x", "--socket",
                          w.sock + "-x", "--metrics-listen", "::1:9400"], env=w.env,
                         capture_output=True, text=True, timeout=10)
    check(bad.returncode == 2 and "IPv6 goes in brackets" in bad.stderr,
          "--metrics-listen ::1:9400: %d %r" % (bad.returncode, bad.stderr))
    # A port in use stops a daemon at start (exit 1), saying why.
    busy = subprocess.run([w.daemon_bin, "--sim", "--state-dir", w.state + "-y", "--socket",
                           w.sock + "-y", "--metrics-listen", "127.0.0.1:%d" % port], env=w.env,
                          capture_output=True, text=True, timeout=30)
    check(busy.returncode == 1 and "cannot listen on 127.0.0.1:%d" % port in busy.stderr,
          "a second daemon on the same port: %d %r" % (busy.returncode, busy.stderr[-500:]))

    # Two slices: with real allocations when the shim and the helper exist.
    alloc = os.path.join(w.build, "tests/daemon/gs_alloc_hold")
    real = os.path.exists(alloc) and os.path.exists(w.shim)
    specs = [("api-a", "300m", "4Gi", 1 << 30), ("api-b", "200m", "2Gi", 512 << 20)]
    for name, gpu, mem, use in specs:
        if real:
            p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", gpu, "--gpu-memory", mem,
                                  "--name", name, "--", alloc, str(use)], env=w.env,
                                 stdout=subprocess.PIPE, text=True)
            holders.append(p)
            check(p.stdout.readline().startswith("ready"), "%s: alloc helper not ready" % name)
        else:
            sl = w.spawn_sleeper()
            t, items = w.create(sl.pid, int(gpu[:-1]), memory=int(mem[:-2]) << 30, name=name)
            check(t != 0xFFFF, "create %s: %r" % (name, items))
    doc = json.loads(w.cli("ls", "--json").stdout)
    smi = w.smi()

    r = curl("-i", url)
    check(r.returncode == 0 and r.stdout.startswith("HTTP/1.1 200"), "GET /metrics: %r" % (r,))
    head, _, text = r.stdout.partition("\n\n")  # text mode: \r\n read as \n
    check("text/plain; version=0.0.4" in head, "content type: " + head)
    samples, types, helps = parse(text)

    for name, t in types.items():
        check(name.startswith("gpuslice_"), "name without the prefix: " + name)
        check(helps.get(name), "no help text for " + name)
        check((t == "counter") == name.endswith("_total"), "%s is a %s" % (name, t))
    check(one(samples, "gpuslice_daemon_up") == 1, "daemon_up")
    check(one(samples, "gpuslice_build_info", version="0.1.0") == 1, "build_info")
    check(one(samples, "gpuslice_slices") == 2, "slices")

    truth = {d["uuid"]: d for d in smi["devices"]}
    for g in doc["gpus"]:
        lab = {"gpu": g["index"], "UUID": g["uuid"]}
        check(one(samples, "gpuslice_gpu_info", model_name=g["name"], **lab) == 1, "gpu_info")
        check(one(samples, "gpuslice_gpu_memory_total_bytes", **lab) == g["memory_total_bytes"],
              "total")
        check(one(samples, "gpuslice_gpu_memory_used_bytes", **lab) ==
              truth[g["uuid"]]["memory_used"], "gpu used vs simgpu-smi")
        check(one(samples, "gpuslice_gpu_free_milli", **lab) == g["share_free_milli"], "free_milli")
        check(one(samples, "gpuslice_gpu_free_memory_bytes", **lab) == g["memory_free_bytes"],
              "free_memory")
        check(one(samples, "gpuslice_gpu_slices", **lab) == len(g["slices"]), "gpu slices")
        check(one(samples, "gpuslice_gpu_healthy", **lab) == 1, "healthy")
        # Nothing ran kernels: NVML's utilisation is simgpu's idle device.
        util = one(samples, "gpuslice_gpu_utilization_ratio", **lab)
        check(util == 0 if truth[g["uuid"]]["busy_ns"] == 0 else 0 <= util <= 1,
              "utilisation %r, simgpu-smi busy_ns %r" % (util, truth[g["uuid"]]["busy_ns"]))
        for s in g["slices"]:
            sl = {"slice": s["id"], "name": s["name"], "kind": "local", **lab}
            check(one(samples, "gpuslice_slice_info", policy=s["policy"], **sl) == 1, "info")
            check(one(samples, "gpuslice_slice_share_milli", **sl) == s["gpu_milli"], "share")
            check(one(samples, "gpuslice_slice_memory_cap_bytes", **sl) == s["memory_limit_bytes"],
                  "cap")
            used = sum(p["used_bytes"] for p in smi["processes"] if p["pid"] == s["pid"])
            got = one(samples, "gpuslice_slice_memory_used_bytes", **sl)
            check(got == used and (not real or used >= dict(
                (n, u) for n, _, _, u in specs)[s["name"]]),
                "slice %s used %r, simgpu-smi %r" % (s["id"], got, used))
            if s["memory_used_bytes"] is not None:
                check(got == s["memory_used_bytes"], "slice used vs ls")
            check(one(samples, "gpuslice_slice_gpu_time_seconds_total", **sl) >= 0, "gpu time")
            check(one(samples, "gpuslice_slice_leases_total", **sl) >= 0, "leases")
            # Holders of memory that never launch: no wait for the gate.
            check(one(samples, "gpuslice_slice_gate_wait_seconds_total", **sl) == 0, "gate wait")

    # promtool's checks (format and lint) pass.
    r = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True,
                       text=True, timeout=30)
    check(r.returncode == 0, "promtool check metrics: %s%s" % (r.stdout, r.stderr))

    # HEAD, POST, unknown paths.
    r = curl("-I", url)
    check(r.stdout.startswith("HTTP/1.1 200"), "HEAD: %r" % r.stdout)
    r = curl("-o", "/dev/null", "-w", "%{http_code}", "-X", "POST", "-d", "x=1", url)
    check(r.stdout == "405", "POST: %r" % r.stdout)
    r = curl("-i", "-X", "DELETE", url)
    check(r.stdout.startswith("HTTP/1.1 405") and "Allow: GET, HEAD" in r.stdout,
          "DELETE: %r" % r.stdout)
    r = curl("-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:%d/nope" % port)
    check(r.stdout == "404", "unknown path: %r" % r.stdout)

    # A real Prometheus scrapes the daemon every second.
    pdir = tempfile.mkdtemp(prefix="prom-", dir=w.dir)
    with open(os.path.join(pdir, "prometheus.yml"), "w") as f:
        f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                "scrape_configs:\n  - job_name: gpusliced\n    static_configs:\n"
                "      - targets: ['127.0.0.1:%d']\n" % port)
    pport = free_port()
    plog = open(os.path.join(pdir, "log"), "wb")
    prom = subprocess.Popen([PROMETHEUS, "--config.file", os.path.join(pdir, "prometheus.yml"),
                             "--storage.tsdb.path", os.path.join(pdir, "data"),
                             "--web.listen-address", "127.0.0.1:%d" % pport],
                            stdout=plog, stderr=plog)
    plog.close()
    s1, s1_uuid = [(s, g["uuid"]) for g in doc["gpus"] for s in g["slices"]
                   if s["name"] == "api-a"][0]
    want = [v for lab, v in samples["gpuslice_slice_memory_used_bytes"]
            if lab["slice"] == s1["id"]][0]
    q = 'gpuslice_slice_memory_used_bytes{slice="%s"}' % s1["id"]
    api = "http://127.0.0.1:%d/api/v1/query?query=%s" % (pport, urllib.parse.quote(q))
    deadline, result = time.time() + 40, None
    while time.time() < deadline and not result:
        check(prom.poll() is None, "prometheus exited: " + open(os.path.join(pdir, "log")).read())
        r = curl(api, timeout=3)
        if r.returncode == 0:
            try:
                result = json.loads(r.stdout)["data"]["result"]
            except (ValueError, KeyError):
                result = None
        if not result:
            time.sleep(0.25)
    check(result, "Prometheus never returned %s: %s" % (q, open(os.path.join(pdir, "log")).read()))
    check(len(result) == 1 and float(result[0]["value"][1]) == want and want > 0 or not real,
          "PromQL %s: %r, want %r" % (q, result, want))
    check(result[0]["metric"].get("UUID") == s1_uuid, "PromQL labels: %r" % result)
    print("PromQL %s = %s (the daemon's text: %d)" % (q, result[0]["value"][1], want))
    up = curl("http://127.0.0.1:%d/api/v1/query?query=up" % pport)
    check('"1"' in up.stdout, "the scrape target is not up: " + up.stdout)
    prom.terminate()
    prom.wait(timeout=15)
    prom = None

    # A client that sends part of a request and stalls is dropped.
    t0 = time.monotonic()
    c = socket.create_connection(("127.0.0.1", port))
    c.sendall(b"GET /metr")
    c.settimeout(TIMEOUT_S + 5)
    try:
        data = c.recv(100)
    except socket.timeout:
        fail("a stalled client was kept past %d s" % (TIMEOUT_S + 5))
    except ConnectionResetError:
        data = b""
    took = time.monotonic() - t0
    c.close()
    check(took >= TIMEOUT_S - 1 and took <= TIMEOUT_S + 3,
          "stalled client dropped after %.1f s (data %r)" % (took, data))
    print("a stalled client was dropped after %.1f s" % took)

    # A request larger than the bound is refused, not buffered.
    c = socket.create_connection(("127.0.0.1", port))
    c.settimeout(10)
    try:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40000 + b"\r\n\r\n")
        reply = c.recv(200)
    except (ConnectionResetError, BrokenPipeError):
        reply = b""
    c.close()
    check(not reply.startswith(b"HTTP/1.1 200"), "an oversized request was served: %r" % reply)
    print("an oversized request got %r" % reply[:40])

    # 100 connections at once (partial requests) do not hold up the local
    # API, and once they go /metrics answers again.
    conns = []
    for _ in range(100):
        try:
            c = socket.create_connection(("127.0.0.1", port), timeout=2)
            c.sendall(b"GET /metrics HTTP/1.1\r\n")
            conns.append(c)
        except OSError:
            pass
    t0 = time.monotonic()
    t, items = w.call(LIST)
    check(t == REPLY | LIST, "list while 100 HTTP clients wait")
    r = w.cli("ls", timeout=10)
    check(r.returncode == 0 and "api-a" in r.stdout, "gpuslice ls: %r" % (r,))
    check(time.monotonic() - t0 < 3, "local API slow under HTTP load: %.1f s" %
          (time.monotonic() - t0))
    for c in conns:
        c.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        r = curl("-o", "/dev/null", "-w", "%{http_code}", url, timeout=3)
        if r.stdout == "200":
            break
        time.sleep(0.2)
    check(r.stdout == "200", "/metrics after the burst: %r" % (r,))
    check(w.daemon.poll() is None, "daemon died")
    print("PASS")
finally:
    if prom and prom.poll() is None:
        prom.kill()
        prom.wait()
    for p in holders:
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    w.cleanup()
