#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Memory-cap scenarios of the real-GPU kit: each allocation path in its own
slice (`gpuslice run --gpu 500m --gpu-memory CAP -- gs-memcap PATH`) fills
the slice to its cap and must be refused with CUDA_ERROR_OUT_OF_MEMORY; at
the peak, NVML's per-process used memory (read here, outside the shim: the
ground truth) must be within the cap.

  memcap_check.py --build BUILD [--sim] [--paths alloc,pitch,...] [--cap 2Gi] [--out FILE]

Prints figures and one VERDICT line per check; exit 0 when the scenarios ran
(whatever the verdicts), 1 when the harness broke. BUILD is a build tree or
an unpacked kit bundle (tests/gpu/pack.sh)."""
import argparse
import ctypes
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../bench/compute"))
from compute_bench import Report  # noqa: E402
from gsworld import HarnessError, World, preload_env  # noqa: E402

MiB = 1 << 20


class ProcInfo(ctypes.Structure):  # nvmlProcessInfo_t (v2/v3 layout)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class Nvml:
    """The few NVML calls the kit needs, by ctypes, in this (unshimmed) process."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        if self.lib.nvmlInit_v2() != 0:
            raise HarnessError("nvmlInit_v2 failed")

    def used_by(self, pid):
        """Used device memory of pid summed over all GPUs, or None."""
        n = ctypes.c_uint()
        self.lib.nvmlDeviceGetCount_v2(ctypes.byref(n))
        total, seen = 0, False
        for i in range(n.value):
            h = ctypes.c_void_p()
            if self.lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) != 0:
                continue
            cnt = ctypes.c_uint(64)
            arr = (ProcInfo * 64)()
            fn = getattr(self.lib, "nvmlDeviceGetComputeRunningProcesses_v3", None) or \
                self.lib.nvmlDeviceGetComputeRunningProcesses_v2
            if fn(h, ctypes.byref(cnt), arr) != 0:
                continue
            for p in arr[:cnt.value]:
                if p.pid == pid:
                    total += p.usedGpuMemory
                    seen = True
        return total if seen else None


class NvmlQuery:
    """Asks NVML in a child process (`memcap_check.py --nvml-used PID`), so a
    sanitizer build's simgpu NVML can get the ASan runtime preloaded."""

    def __init__(self, lib, env):
        self.lib, self.env = lib, preload_env(env, [lib]) if os.path.isabs(lib) else env

    def used_by(self, pid):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--nvml-used", str(pid),
                            "--nvml-lib", self.lib], env=self.env, capture_output=True,
                           text=True, timeout=30)
        if r.returncode != 0:
            raise HarnessError(f"NVML query: {r.stderr.strip()[-1000:]}")
        v = r.stdout.strip()
        return None if v == "none" else int(v)


def run_path(w, nvml, path, cap, rep):
    cmd = [w.gpuslice, "run"] + (["--sim"] if w.sim else []) + \
        ["--gpu", "500m", "--gpu-memory", str(cap), "--name", f"memcap-{path}", "--",
         w.prog("gs-memcap"), path]
    p = subprocess.Popen(cmd, env=w.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = p.stdout.readline()
        peak = p.stdout.readline()
        if not first.startswith("memcap ") or peak.strip() != "peak":
            p.kill()
            raise HarnessError(f"gs-memcap {path}: {first!r} {p.stderr.read()[-1000:]}")
        f = dict(kv.split("=", 1) for kv in first.split()[1:])
        used = nvml.used_by(int(f["pid"]))
        p.stdin.write("\n")
        p.stdin.flush()
        rest, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0:
        raise HarnessError(f"gs-memcap {path}: exit {p.returncode}: {err[-1000:]}")
    cap_b, ctx, alloc, chunk = int(f["cap"]), int(f["ctx"]), int(f["allocated"]), int(f["chunk"])
    usable = cap_b - ctx
    rep.line(f"   {path:<6} cap {cap_b // MiB} MiB (context {ctx // MiB} MiB): allocated "
             f"{alloc // MiB} MiB in {f['chunks']} x {chunk // MiB} MiB, then {f['refusal']}; "
             f"NVML used at peak {'-' if used is None else used // MiB} MiB; "
             f"after free: {rest.strip().split('=')[-1]}")
    rep.verdict(f"memcap_{path}_refused", f["refusal"], "target CUDA_ERROR_OUT_OF_MEMORY",
                f["refusal"] == "CUDA_ERROR_OUT_OF_MEMORY")
    rep.verdict(f"memcap_{path}_usable", f"{alloc // MiB} MiB",
                f"target >= cap - context - one chunk = {(usable - chunk) // MiB} MiB",
                alloc >= usable - chunk)
    rep.verdict(f"memcap_{path}_nvml", "-" if used is None else f"{used // MiB} MiB",
                f"target <= cap {cap_b // MiB} MiB", used is not None and used <= cap_b)
    rep.verdict(f"memcap_{path}_after_free", rest.strip(), "target after_free=ok",
                rest.strip() == "after_free=ok")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nvml-used", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--nvml-lib", help=argparse.SUPPRESS)
    ap.add_argument("--build")
    ap.add_argument("--sim", action="store_true")
    ap.add_argument("--paths", default="alloc,pitch,async,vmm,array")
    ap.add_argument("--cap", type=int, default=2 << 30)
    ap.add_argument("--kernels")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.nvml_used is not None:  # child mode: print one process's used memory
        used = Nvml(a.nvml_lib).used_by(a.nvml_used)
        print("none" if used is None else used)
        return 0
    if not a.build:
        ap.error("--build is required")
    rep = Report(a.out)
    rep.line(f"== memory cap: {a.cap // MiB} MiB slices, one allocation path each; ground truth: "
             f"NVML per-process used memory ({'simgpu' if a.sim else 'the real driver'})")
    source = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        with World(a.build, source, sim=a.sim, kernels=a.kernels) as w:
            nvml = NvmlQuery(os.path.join(w.simlib, "libnvidia-ml.so.1") if a.sim
                             else "libnvidia-ml.so.1", w.env)
            for path in a.paths.split(","):
                run_path(w, nvml, path, a.cap, rep)
    except (HarnessError, OSError, subprocess.SubprocessError) as e:
        rep.line(f"HARNESS ERROR: memcap: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
