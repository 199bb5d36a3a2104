# SPDX-License-Identifier: Apache-2.0
"""A private gpuslice world for one test: its own simgpu (SIMGPU_DIR), its own
daemon (state dir and socket in a temporary directory, started with --sim and
stopped at the end), so a test never touches a real setup or another test.

Paths come from the environment ctest sets (tests/demo/CMakeLists.txt)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fail(what, *logs):
    print(f"FAIL: {what}", file=sys.stderr)
    for log in logs:
        if log:
            print(f"--- log\n{log}", file=sys.stderr)
    sys.exit(1)


def ok(what):
    print(f"ok: {what}", flush=True)


class World:
    def __init__(self, memory="16Gi"):
        self.build = os.environ["GS_BUILD_DIR"]
        self.source = os.environ["GS_SOURCE_DIR"]
        self.gpuslice = os.environ["GPUSLICE_BIN"]
        self.serve = os.environ["GS_SERVE_BIN"]
        self.simlib = os.environ["GS_SIM_LIBDIR"]
        self.tmp = tempfile.mkdtemp(prefix="gs-demo-test.")
        self.daemon = None
        self.env = dict(os.environ)
        self.env.update(private_env(self.tmp, self.build, self.simlib, memory))
        self.env["PATH"] = os.path.dirname(self.serve) + ":" + self.env.get("PATH", "")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def cli(self, *args, timeout=30):
        return subprocess.run([self.gpuslice, *args], env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def slices(self):
        r = self.cli("ls", "--json")
        if r.returncode != 0:
            fail(f"gpuslice ls --json: {r.returncode}", r.stderr)
        return list_slices(json.loads(r.stdout))

    def smi(self):
        r = subprocess.run([os.path.join(self.simlib, "simgpu-smi"), "--json"], env=self.env,
                           capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            fail("simgpu-smi --json", r.stderr)
        return json.loads(r.stdout)

    def spec(self, text, name="apis.yaml"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def up(self, *args):
        """Start `gpuslice up --sim ARGS` in its own session, output to a file."""
        self.up_log = os.path.join(self.tmp, "up.log")
        log = open(self.up_log, "w")
        p = subprocess.Popen([self.gpuslice, "up", "--sim", *args], env=self.env, stdout=log,
                             stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        return p

    def log(self):
        try:
            with open(self.up_log) as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        stop_daemon(self)
        shutil.rmtree(self.tmp, ignore_errors=True)


def wait_http(url, timeout, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return None
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            time.sleep(0.1)
    return None


def stop_session(p, sig=signal.SIGINT, timeout=20):
    try:
        os.killpg(p.pid, sig)
    except ProcessLookupError:
        pass
    try:
        return p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        return None


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def private_env(tmp, build, simlib, memory="16Gi"):
    """Environment that points simgpu, the daemon and the CLI into tmp."""
    os.makedirs(os.path.join(tmp, "sim"), exist_ok=True)
    return {
        "SIMGPU_DIR": os.path.join(tmp, "sim"),
        "SIMGPU_DEVICES": "1",
        "SIMGPU_MEMORY": memory,
        "SIMGPU_CTX_OVERHEAD": "256Mi",
        "GPUSLICE_SIM_LIBDIR": simlib,
        "GPUSLICE_SOCKET": os.path.join(tmp, "gpusliced.sock"),
        "GPUSLICE_STATE_DIR": os.path.join(tmp, "state"),
        "XDG_RUNTIME_DIR": tmp,
        "GPUSLICE_LOG_DIR": os.path.join(tmp, "logs"),  # slices' logs (gpuslice logs)
        "GS_KERNELS_PTX": os.environ.get("GS_KERNELS_PTX", ""),
    }


def daemon_pids(tmp):
    """Processes whose command line names this world's state dir: the
    daemon the CLI started for us."""
    state = os.path.join(tmp, "state")
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"--state-dir" in argv and state.encode() in argv:
            pids.append(int(d))
    return pids


def stop_daemon(world):
    for pid in daemon_pids(world.tmp):
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while daemon_pids(world.tmp) and time.monotonic() < deadline:
        time.sleep(0.05)
    for pid in daemon_pids(world.tmp):
        os.kill(pid, signal.SIGKILL)


def list_slices(ls_json):
    """The slices of `gpuslice ls --json`, flattened."""
    return [s for g in ls_json.get("gpus", []) for s in g.get("slices", [])]


def process_memory(smi_json, pid):
    """Device memory simgpu says live process pid holds (all devices)."""
    return sum(int(p.get("used_bytes", 0)) for p in smi_json.get("processes", [])
               if p.get("pid") == pid and p.get("alive", True))
