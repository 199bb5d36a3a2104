# SPDX-License-Identifier: Apache-2.0
"""A private gpuslice world for the compute benchmark and the real-GPU kit:
its own simgpu state (sim mode), its own gpusliced (state dir and socket in a
temporary directory), slices started with `gpuslice run`, and the ground
truth of how much device time each slice's process got.

Ground truth, never the shim's own accounting:
  * "smi" (simgpu): simgpu's busy_ns per process, sampled every 1 ms by
    gs-simtrace (start_sampler); `simgpu-smi --json` where a single reading
    is enough.
  * "kernels" (real GPU; also runnable on simgpu): the load program gs-burn
    appends "<CLOCK_MONOTONIC ns> <completed kernels>" as its units complete;
    completed gs_busy kernels x their length is the device time it got. This
    is exact when at most one slice's kernels run at a time (what the gate
    enforces); when the hardware time-slices contexts itself, a preempted
    gs_busy still counts its full length (it spins on %globaltimer), so the
    shares then over-count: the figures print the sum of all shares, which
    stays <= 100% only when the assumption held.
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time


class HarnessError(Exception):
    """The harness itself broke (not a figure that misses its target)."""


def cache_var(build, name):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                m = re.match(rf"^{name}:[A-Z]+=(.*)$", line.strip())
                if m:
                    return m.group(1)
    except OSError:
        pass
    return ""


def is_bundle(path):
    """True for an unpacked real-GPU kit bundle (tests/gpu/pack.sh): a
    MANIFEST and the programs in bin/ instead of a build tree."""
    return os.path.isfile(os.path.join(path, "MANIFEST")) and \
        os.path.isfile(os.path.join(path, "bin/gpuslice"))


def quantum_ns(source):
    """The arbiter's default quantum from src/core/arbiter.h."""
    try:
        with open(os.path.join(source, "src/core/arbiter.h")) as f:
            text = f.read()
    except OSError:
        return 4_000_000
    m = re.search(r"#define\s+GS_ARB_DEFAULT_QUANTUM_NS\s+\((\d+)\s*\*\s*GS_ARB_NS_PER_MS\)", text)
    return int(m.group(1)) * 1_000_000 if m else 4_000_000


def asan_runtime(lib):
    """Path of the ASan runtime a sanitizer build's library links, or ''.
    Such a library can only be loaded into a program that is not built with
    ASan when the runtime is preloaded first."""
    try:
        r = subprocess.run(["ldd", lib], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return ""
    for line in r.stdout.splitlines():
        if "libasan" in line and "=>" in line:
            return line.split("=>")[1].split("(")[0].strip()
    return ""


def preload_env(env, libs):
    """env with LD_PRELOAD set to libs (the ASan runtime first when one of
    them needs it) and leak checks off, as `gpuslice run` does."""
    env = dict(env)
    asan = next((a for a in map(asan_runtime, libs) if a), "")
    env["LD_PRELOAD"] = ":".join(([asan] if asan else []) + list(libs))
    if asan:
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    return env


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def cmdline0(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


class Slice:
    """One `gpuslice run` and the load program it runs."""

    def __init__(self, world, name, milli, policy, argv, progress=None, env=None):
        self.world, self.name, self.milli, self.policy = world, name, milli, policy
        self.progress = progress
        self.out = os.path.join(world.tmp, f"{name}.out")
        self.err = os.path.join(world.tmp, f"{name}.err")
        cmd = [world.gpuslice, "run"]
        if world.sim:
            cmd.append("--sim")
        if milli is None:  # no slice at all: the bare program
            cmd = []
        else:
            gpu = "1" if milli >= 1000 else f"{milli}m"
            cmd += ["--gpu", gpu]
            if milli < 1000:
                cmd += ["--policy", policy]
            cmd += ["--name", name, "--"]
        with open(self.out, "w") as o, open(self.err, "w") as e:
            self.proc = subprocess.Popen(cmd + argv, env=env or world.env, stdout=o, stderr=e,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        self.pid = None
        self.argv0 = argv[0]

    def program_pid(self, timeout=10):
        """The pid of the load program (the CLI's child; the process itself
        when run bare)."""
        if self.pid:
            return self.pid
        if self.milli is None:
            self.pid = self.proc.pid
            return self.pid
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            # The program runs below the CLI, possibly under a shepherd
            # process (gpuslice run -> shepherd -> program): the first
            # descendant that runs argv[0].
            todo = children(self.proc.pid)
            while todo:
                pid = todo.pop(0)
                if cmdline0(pid) == self.argv0:
                    self.pid = pid
                    return self.pid
                todo += children(pid)
            if self.proc.poll() is not None:
                raise HarnessError(f"{self.name}: gpuslice run exited {self.proc.returncode}: "
                                   f"{self.stderr()}")
            time.sleep(0.02)
        raise HarnessError(f"{self.name}: the load program did not start")

    def stderr(self):
        try:
            with open(self.err) as f:
                return f.read().strip()[-2000:]
        except OSError:
            return ""

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self.name}: did not finish in {timeout:.0f}s")
        if rc != 0:
            raise HarnessError(f"{self.name}: exit status {rc}: {self.stderr()}")
        with open(self.out) as f:
            text = f.read()
        for line in text.splitlines():
            if line.startswith(("burn ", "reqload ")):
                return dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        raise HarnessError(f"{self.name}: no result line in its output: {text[-500:]!r}")

    def kill(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                pass
            self.proc.wait()

    def series(self):
        """[(t_ns, cumulative busy ns)] from the progress file ('kernels' truth)."""
        pts = []
        with open(self.progress) as f:
            for line in f:
                p = line.split()
                if len(p) == 2:
                    pts.append((int(p[0]), int(p[1])))
        return pts


class World:
    """simgpu (sim mode) + gpusliced + the CLI, all private to one temp dir."""

    def __init__(self, build, source, sim=True, timeslice_us=None, kernels=None, trace=None):
        self.build, self.source, self.sim = os.path.abspath(build), source, sim
        self.trace = trace  # diagnostic: a directory to keep the traces in (sim only)
        self.tracer = None
        self.sampler = None
        self.tmp = tempfile.mkdtemp(prefix="gs-compute.")
        if is_bundle(self.build):  # an unpacked kit (tests/gpu/pack.sh): bin/, lib/, kernels/
            self.gpuslice = os.path.join(self.build, "bin/gpuslice")
            self.daemon_bin = os.path.join(self.build, "bin/gpusliced")
            self.bindir = os.path.join(self.build, "bin")
            self.shim = os.path.join(self.build, "lib/gpuslice/libgpuslice.so")
            self.simlib = os.path.join(self.build, "lib/sim") if sim else ""
            ptx = kernels or os.path.join(self.build, "kernels/gs_kernels.ptx")
        else:  # a build tree
            self.gpuslice = os.path.join(self.build, "src/cli/gpuslice")
            self.daemon_bin = os.path.join(self.build, "src/daemon/gpusliced")
            self.bindir = os.path.join(self.build, "bench/compute")
            self.shim = os.path.join(self.build, "src/shim/libgpuslice.so")
            self.simlib = cache_var(self.build, "GS_SIM_LIBDIR") if sim else ""
            ptx = kernels or cache_var(self.build, "GS_KERNELS_PTX")
        self.smi_bin = os.path.join(self.simlib, "simgpu-smi") if sim else ""
        for p in (self.gpuslice, self.daemon_bin, os.path.join(self.bindir, "gs-burn"), ptx):
            if not os.path.exists(p):
                raise HarnessError(f"not built: {p}")
        self.env = dict(os.environ)
        self.env.update({
            "GPUSLICE_SOCKET": os.path.join(self.tmp, "gpusliced.sock"),
            "GPUSLICE_STATE_DIR": os.path.join(self.tmp, "state"),
            "XDG_RUNTIME_DIR": self.tmp,
            "GS_KERNELS_PTX": ptx,
            "GPUSLICE_DAEMON": self.daemon_bin,
        })
        self.env.pop("GPUSLICE_CONFIG", None)
        self.env.pop("LD_PRELOAD", None)
        if sim:
            os.makedirs(os.path.join(self.tmp, "sim"))
            self.env.update({
                "SIMGPU_DIR": os.path.join(self.tmp, "sim"),
                "SIMGPU_DEVICES": "1", "SIMGPU_MEMORY": "16Gi", "SIMGPU_CTX_OVERHEAD": "256Mi",
                "GPUSLICE_SIM_LIBDIR": self.simlib,
            })
            if timeslice_us:
                self.env["SIMGPU_TIMESLICE_US"] = str(timeslice_us)
        self.daemon = None

    def bare_env(self):
        """Environment of a program run without gpuslice (simgpu on the path)."""
        env = dict(self.env)
        if self.sim:
            env["LD_LIBRARY_PATH"] = self.simlib + (":" + env["LD_LIBRARY_PATH"]
                                                    if env.get("LD_LIBRARY_PATH") else "")
        return env

    def start_daemon(self):
        args = [self.daemon_bin, "--state-dir", self.env["GPUSLICE_STATE_DIR"],
                "--socket", self.env["GPUSLICE_SOCKET"]]
        if self.sim:
            args.append("--sim")
        self.daemon_log = os.path.join(self.tmp, "gpusliced.log")
        env = self.env
        if self.trace:
            env = dict(self.env, GPUSLICE_ARB_TRACE=os.path.join(self.tmp, "arb.trace"))
        with open(self.daemon_log, "w") as log:
            self.daemon = subprocess.Popen(args, env=env, stdout=log, stderr=log,
                                           stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 15
        while not os.path.exists(self.env["GPUSLICE_SOCKET"]):
            if self.daemon.poll() is not None or time.monotonic() > deadline:
                with open(self.daemon_log) as f:
                    raise HarnessError(f"gpusliced did not start: {f.read()[-1500:]}")
            time.sleep(0.05)

    def start_tracer(self):
        """Diagnostic: gs-simtrace samples simgpu's device every 100 us."""
        if self.trace and self.sim and not self.tracer:
            self.tracer = subprocess.Popen([self.prog("gs-simtrace"),
                                            os.path.join(self.tmp, "sim.trace"), "100"],
                                           env=self.env, stdin=subprocess.DEVNULL)

    def start_sampler(self, period_us=1000):
        """Ground truth on simgpu: gs-simtrace reads simgpu's per-process
        busy counters every `period_us` (1 ms) until stop_sampler(). Finer
        than simgpu-smi every ~100 ms, whose windows' edges had to be
        interpolated: with 50 ms kernels that misplaced up to half a
        kernel per edge (measured: 1.8-2.9 points over 1 s where the
        counters themselves say 0.6)."""
        path = os.path.join(self.tmp, "truth.trace")
        self.sampler = (subprocess.Popen([self.prog("gs-simtrace"), path, str(period_us)],
                                         env=self.env, stdin=subprocess.DEVNULL), path)

    def stop_sampler(self):
        """{pid: [(t_ns, busy_ns)]} from the sampler started by start_sampler."""
        proc, path = self.sampler
        self.sampler = None
        proc.send_signal(signal.SIGTERM)
        if proc.wait(timeout=30) != 0:
            raise HarnessError(f"gs-simtrace exited with {proc.returncode}")
        out = {}
        with open(path) as f:
            for line in f:
                p = line.split()
                t = int(p[0])
                for x in p[2:]:
                    pid, busy, _ = x.split(":")
                    out.setdefault(int(pid), []).append((t, int(busy)))
        return out

    def close(self):
        if self.sampler:
            self.sampler[0].kill()
            self.sampler[0].wait()
        if self.tracer:
            self.tracer.send_signal(signal.SIGTERM)
            self.tracer.wait()
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        if self.trace:
            os.makedirs(self.trace, exist_ok=True)
            for f in ("arb.trace", "sim.trace"):
                if os.path.exists(os.path.join(self.tmp, f)):
                    subprocess.run(["cp", os.path.join(self.tmp, f), self.trace], check=False)
        subprocess.run(["rm", "-rf", self.tmp], check=False)

    def __enter__(self):
        self.start_daemon()
        return self

    def __exit__(self, *exc):
        self.close()

    def prog(self, name):
        return os.path.join(self.bindir, name)

    def slice(self, name, milli, policy, argv, progress=False, env=None):
        """Starts argv in a slice of `milli` (>= 1000: whole GPU; None: no
        gpuslice at all, with `env` or bare_env())."""
        prog_file = os.path.join(self.tmp, f"{name}.progress") if progress else None
        if prog_file:
            argv = argv + ["--progress", prog_file]
        if milli is None and env is None:
            env = self.bare_env()
        return Slice(self, name, milli, policy, argv, prog_file, env)

    def smi(self):
        """(device sim time ns, {pid: busy_ns}) from simgpu-smi --json."""
        r = subprocess.run([self.smi_bin, "--json"], env=self.env, capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            raise HarnessError(f"simgpu-smi --json: {r.stderr.strip()}")
        js = json.loads(r.stdout)
        t = js["devices"][0]["sim_time_ns"] if js["devices"] else time.monotonic_ns()
        return t, {p["pid"]: p["busy_ns"] for p in js["processes"]}
