# SPDX-License-Identifier: Apache-2.0
"""The watchdog's detection latency and CPU cost on simgpu, at the issue's
scale: 8 GPUs x 64 processes, each process with a context and 2 MiB on one
GPU (so NVML lists 64 processes on every GPU: 512 in all), one slice per GPU
so that every GPU is watched. The 512 processes are in no slice, the worst
case: every process is a verdict in every sample. They are idle (a context
and memory held, then pause()), so a 2-core machine is not swamped.
Latency: from a new unsliced process's allocation to the daemon's event,
over N trials. Cost: the daemon's CPU time over a steady window, as a share
of one core, and the watchdog's own CPU time per sample (without NVML's
calls, which are simgpu's here).
Usage: bench_watchdog.py BUILD_DIR [trials]
Environment: GS_BENCH_WD_PROCS (processes per GPU, default 64);
GS_BENCH_WD_SHAPE=every-gpu: the other reading of "8 x 64", 64 processes
each with a context on all 8 GPUs (NVML still lists 64 on each GPU, but
only 64 distinct processes are mapped per sample)."""
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
trials = int(sys.argv[2]) if len(sys.argv) > 2 else 30
simlib = os.path.join(build, "sim")
hold = os.path.join(build, "tests/daemon/gs_alloc_hold")
INTERVAL_MS, GPUS = 500, 8
PROCS = int(os.environ.get("GS_BENCH_WD_PROCS", "64"))
EVERY_GPU = os.environ.get("GS_BENCH_WD_SHAPE", "") == "every-gpu"
STEADY_S = 10
if not os.path.exists(hold):
    print("watchdog bench: %s is not built (the tests' holder); skipped" % hold)
    sys.exit(0)
tmp = tempfile.mkdtemp(prefix="gs-bench-wd-")
env = dict(os.environ, SIMGPU_DIR=os.path.join(tmp, "sim"), SIMGPU_DEVICES=str(GPUS),
           SIMGPU_MEMORY="80Gi", SIMGPU_CTX_OVERHEAD="64Mi", GPUSLICE_SIM_LIBDIR=simlib,
           LD_LIBRARY_PATH=simlib)
os.makedirs(env["SIMGPU_DIR"])
sock = os.path.join(tmp, "d.sock")


def call(mtype, items=()):
    payload = "".join("%s=%s\n" % kv for kv in items).encode()
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    s.sendall(struct.pack(">IHHI", 0x47534C50, 1, mtype, len(payload)) + payload)
    buf = b""
    while len(buf) < 12:
        buf += s.recv(12 - len(buf))
    length = struct.unpack(">IHHI", buf)[3]
    data = b""
    while len(data) < length:
        data += s.recv(length - len(data))
    s.close()
    return [tuple(l.split("=", 1)) for l in data.decode().splitlines()]


def cpu_ticks(pid):
    f = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])


# A holder on every GPU (GS_BENCH_WD_SHAPE=every-gpu): gs_alloc_hold holds
# device 0 only.
HOLD_ALL = r'''
import ctypes, time
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0
n = ctypes.c_int()
cu.cuDeviceGetCount(ctypes.byref(n))
for i in range(n.value):
    d, c, p = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_uint64()
    assert cu.cuDeviceGet(ctypes.byref(d), i) == 0
    assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(c), d) == 0
    assert cu.cuCtxSetCurrent(c) == 0
    assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(2 << 20)) == 0
print("ready", flush=True)
time.sleep(3600)
'''


def holder(gpu):
    """An idle process with a context and 2 MiB on GPU index gpu (None:
    on every GPU)."""
    if gpu is None:
        return subprocess.Popen([sys.executable, "-c", HOLD_ALL], env=env,
                                stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    e = dict(env, CUDA_VISIBLE_DEVICES=str(gpu))
    return subprocess.Popen([hold, str(2 << 20)], env=e, stdout=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)


def ready(p):
    line = p.stdout.readline().strip()
    assert line == b"ready", "holder %d said %r" % (p.pid, line)
    p.stdout.close()


procs = []
log = open(os.path.join(tmp, "daemon.log"), "w")
daemon = subprocess.Popen([os.path.join(build, "src/daemon/gpusliced"), "--sim", "--state-dir",
                           os.path.join(tmp, "state"), "--socket", sock, "--policy", "spread",
                           "--watch-interval", str(INTERVAL_MS)], env=env, stdout=log, stderr=log)
try:
    for _ in range(300):
        try:
            call(4)
            break
        except OSError:
            time.sleep(0.05)
    for g in range(GPUS):
        p = subprocess.Popen(["sleep", "3600"])
        procs.append(p)
        items = call(1, [("gpu_milli", 100), ("pid", p.pid)])
        assert ("slice_gpu" in dict(items)), items
    t_start = time.monotonic()
    n_holders = PROCS if EVERY_GPU else GPUS * PROCS
    for i in range(n_holders):
        procs.append(holder(None if EVERY_GPU else i % GPUS))
        if i % 32 == 31:  # a batch at a time: each start reads every process's /proc
            for p in procs[-32:]:
                ready(p)
    for p in procs[GPUS:]:
        if not p.stdout.closed:
            ready(p)
    t_up = time.monotonic() - t_start
    time.sleep(2 + 4 * INTERVAL_MS / 1000)  # every process seen, graced and reported
    hz = os.sysconf("SC_CLK_TCK")
    t0, c0 = time.monotonic(), cpu_ticks(daemon.pid)
    time.sleep(STEADY_S)
    t1, c1 = time.monotonic(), cpu_ticks(daemon.pid)
    core_pct = 100.0 * (c1 - c0) / hz / (t1 - t0)

    def last_seq():
        seqs = [int(v.split(" ", 1)[0][4:]) for k, v in call(6) if k == "event"]
        return max(seqs) if seqs else 0

    lat = []
    for i in range(trials):
        since = last_seq()
        p = holder(i % GPUS)
        ready(p)
        t = time.monotonic()
        found = False
        while time.monotonic() - t < 5 and not found:
            for k, v in call(6, [("since", since)]):
                if k == "event" and (" pid=%d " % p.pid) in v:
                    found = True
                    break
            else:
                time.sleep(0.005)
        lat.append((time.monotonic() - t) * 1000 if found else float("inf"))
        p.kill()
        p.wait()
        time.sleep((i % 5) * 0.097)  # different phases against the interval
    lat.sort()
    p50 = lat[len(lat) // 2]
    p99 = lat[min(len(lat) - 1, int(round(0.99 * (len(lat) - 1))))]
    smi = subprocess.run([os.path.join(simlib, "simgpu-smi"), "--json"], env=env,
                         capture_output=True, text=True, timeout=30)
    listed = len(re.findall(r'"alive": true', smi.stdout))
finally:
    for p in procs:
        p.kill()
        p.wait()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)
    log.close()
per_sample, own_ms, own_pct = "", None, None
for line in open(os.path.join(tmp, "daemon.log")):
    if "CPU per sample" in line:
        per_sample = line.strip().split("watchdog: ", 1)[1]
        nums = [int(x) for x in re.findall(r"(\d+) us", per_sample)]
        if len(nums) >= 2:
            own_ms = (nums[0] - nums[1]) / 1000.0
            own_pct = 100.0 * own_ms / INTERVAL_MS
print("watchdog, %d GPUs x %d processes each (%d processes%s, all unsliced: every process a "
      "verdict), interval %d ms; up in %.1f s, %d (process, GPU) pairs alive by simgpu at the "
      "end" % (GPUS, PROCS, n_holders, ", each on every GPU" if EVERY_GPU else "", INTERVAL_MS,
               t_up, listed))
ok_lat = p99 <= INTERVAL_MS + 100
print("  detection latency: p50 %.0f ms, p99 %.0f ms over %d trials (target p99 <= %d ms): %s"
      % (p50, p99, trials, INTERVAL_MS + 100, "PASS" if ok_lat else "FAIL"))
print("  daemon CPU, all of it: %.2f%% of one core over %d s (simgpu's NVML included)" %
      (core_pct, STEADY_S))
print("  %s" % per_sample)
ok_cost = own_pct is not None and own_pct <= 1.0
if own_pct is not None:
    print("  the watchdog's own CPU (without NVML's calls): %.2f ms per sample (%.1f us per "
          "process), %.2f%% of one core (target <= 1%%): %s" %
          (own_ms, 1000.0 * own_ms / n_holders, own_pct, "PASS" if ok_cost else "FAIL"))
else:
    print("  the watchdog's own CPU: not in the daemon's log: FAIL")
print("  verdict: %s" % ("PASS" if ok_lat and ok_cost else "FAIL"))
