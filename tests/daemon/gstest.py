# SPDX-License-Identifier: Apache-2.0
"""Helpers for gpusliced/gpuslice integration tests: a private world (state
dir, socket, SIMGPU_DIR) per test, a daemon, and a raw local-API client."""
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

MAGIC = 0x47534C50
CREATE, LIST, RELEASE, STATUS, PLAN = 1, 2, 3, 4, 5
REPLY, ERROR = 0x8000, 0xFFFF
SKIP = 77


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def frame(mtype, items=(), magic=MAGIC, version=1, length=None):
    payload = "".join("%s=%s\n" % kv for kv in items).encode()
    if length is None:
        length = len(payload)
    return struct.pack(">IHHI", magic, version, mtype, length) + payload


def read_frame(sock):
    hdr = b""
    while len(hdr) < 12:
        chunk = sock.recv(12 - len(hdr))
        if not chunk:
            return None
        hdr += chunk
    magic, version, mtype, length = struct.unpack(">IHHI", hdr)
    assert magic == MAGIC and version == 1, "bad reply header"
    payload = b""
    while len(payload) < length:
        chunk = sock.recv(length - len(payload))
        if not chunk:
            return None
        payload += chunk
    items = []
    for line in payload.decode().splitlines():
        k, _, v = line.partition("=")
        items.append((k, v))
    return mtype, items


def get(items, key, default=None):
    for k, v in items:
        if k == key:
            return v
    return default


class World:
    def __init__(self, name, devices=2, memory="16Gi", ctx_overhead="256Mi"):
        self.build = os.environ["GS_BUILD_DIR"]
        self.simlib = os.environ.get("GS_SIM_LIBDIR", "")
        if not self.simlib or not os.path.exists(os.path.join(self.simlib, "libnvidia-ml.so.1")):
            print("SKIP: simgpu libraries not built (%r)" % self.simlib)
            sys.exit(SKIP)
        self.daemon_bin = os.path.join(self.build, "src/daemon/gpusliced")
        self.cli_bin = os.path.join(self.build, "src/cli/gpuslice")
        self.shim = os.path.join(self.build, "src/shim/libgpuslice.so")
        self.dir = tempfile.mkdtemp(prefix="gs-%s-" % name, dir="/tmp")
        self.state = os.path.join(self.dir, "state")
        self.sock = os.path.join(self.dir, "d.sock")
        self.log = os.path.join(self.dir, "daemon.log")
        env = dict(os.environ)
        env.update({
            "SIMGPU_DIR": os.path.join(self.dir, "sim"),
            "SIMGPU_DEVICES": str(devices),
            "SIMGPU_MEMORY": memory,
            "SIMGPU_CTX_OVERHEAD": ctx_overhead,
            "GPUSLICE_SOCKET": self.sock,
            "GPUSLICE_STATE_DIR": self.state,
            "GPUSLICE_SIM_LIBDIR": self.simlib,
            "GPUSLICE_LOG_DIR": os.path.join(self.dir, "logs"),  # slices' logs (gpuslice logs)
        })
        os.makedirs(env["SIMGPU_DIR"])
        self.env = env
        self.daemon = None
        self.children = []

    def start_daemon_on_tmpfs(self, size):
        """The daemon with its state directory on a tmpfs of `size` (e.g.
        "256k") in a mount namespace of its own (root and unshare(1); see
        skip_unless_tmpfs_namespace), so a test can fill it or bind parts of
        it read-only from inside (in_daemon_ns) without touching the host."""
        os.makedirs(self.state, mode=0o700)
        logf = open(self.log, "ab")
        script = ('mount --make-rprivate / && mount -t tmpfs -o size=%s,mode=0700 gs-state "$1" '
                  '&& shift && exec "$@"' % size)
        self.daemon = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", script, "sh", self.state, self.daemon_bin, "--sim",
             "--state-dir", self.state, "--socket", self.sock], env=self.env, stdout=logf,
            stderr=logf)
        logf.close()
        self.wait_for(lambda: os.path.exists(self.sock), timeout=15, what="the daemon's socket")
        return self.daemon

    def in_daemon_ns(self, cmd, check_rc=False):
        """A shell command in the daemon's mount namespace (its view of the
        state directory)."""
        return subprocess.run(["nsenter", "-t", str(self.daemon.pid), "-m", "sh", "-c", cmd],
                              capture_output=True, text=True, timeout=10, check=check_rc)

    def start_daemon(self, *args, wait=True):
        logf = open(self.log, "ab")
        self.daemon = subprocess.Popen(
            [self.daemon_bin, "--sim", "--state-dir", self.state, "--socket", self.sock] + list(args),
            env=self.env, stdout=logf, stderr=logf)
        logf.close()
        if wait:
            deadline = time.time() + 15
            while time.time() < deadline:
                if self.daemon.poll() is not None:
                    fail("daemon exited early (%d): %s" % (self.daemon.returncode, self.log_text()))
                try:
                    self.connect().close()
                    return self.daemon
                except OSError:
                    time.sleep(0.02)
            fail("daemon did not answer within 15 s: " + self.log_text())
        return self.daemon

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except OSError:
            return ""

    def connect(self):
        # A unix socket's listen backlog answers EAGAIN when it is full (a
        # burst of connections on a loaded machine): retry, bounded.
        deadline = time.monotonic() + 20
        while True:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(20)
            try:
                s.connect(self.sock)
                return s
            except BlockingIOError:
                s.close()
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)

    def call(self, mtype, items=()):
        with self.connect() as s:
            s.sendall(frame(mtype, items))
            return read_frame(s)

    def spawn_sleeper(self, seconds=60):
        p = subprocess.Popen(["sleep", str(seconds)])
        self.children.append(p)
        return p

    def create(self, pid, milli, memory=None, name=None):
        items = [("gpu_milli", milli), ("pid", pid)]
        if memory:
            items.append(("memory", memory))
        if name:
            items.append(("name", name))
        return self.call(CREATE, items)

    def slices(self):
        t, items = self.call(LIST)
        check(t == REPLY | LIST, "list failed: %r" % (items,))
        out, cur = [], None
        for k, v in items:
            if k == "slice":
                cur = {"id": v, "gpus": []}
                out.append(cur)
            elif k.startswith("slice_") and cur is not None:
                if k == "slice_gpu":
                    cur["gpus"].append(v.split(",", 1)[1])
                else:
                    cur[k[6:]] = v
            else:
                cur = None
        return out

    def wait_for(self, pred, timeout=10, what="condition"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if pred():
                return
            time.sleep(0.05)
        fail("timed out waiting for " + what)

    def cli(self, *args, **kw):
        return subprocess.run([self.cli_bin] + list(args), env=self.env, capture_output=True,
                              text=True, timeout=kw.get("timeout", 30))

    def smi(self):
        out = subprocess.run([os.path.join(self.simlib, "simgpu-smi"), "--json"], env=self.env,
                             capture_output=True, text=True, timeout=10)
        check(out.returncode == 0, "simgpu-smi failed: " + out.stderr)
        return json.loads(out.stdout)

    def cleanup(self):
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait()
        if self.daemon and self.daemon.poll() is None:
            self.daemon.send_signal(signal.SIGTERM)
            try:
                self.daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.daemon.kill()
                self.daemon.wait()
        logs = self.log_text()
        for name in ("gpusliced.log",):
            try:
                with open(os.path.join(self.state, name)) as f:
                    logs += f.read()
            except OSError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        if "ERROR: AddressSanitizer" in logs or "runtime error:" in logs or \
                "ERROR: LeakSanitizer" in logs:
            print(logs, file=sys.stderr)
            fail("sanitizer report in the daemon's log")


def spawn_with_pid(pid, uid=None):
    """A sleeper (of user uid, when given) with pid `pid` (root: through
    ns_last_pid), or None when the pid cannot be had."""
    for _ in range(50):
        try:
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(pid - 1))
        except OSError:
            return None
        p = subprocess.Popen(["sleep", "60"], user=uid)
        if p.pid == pid:
            return p
        p.kill()
        p.wait()
    return None


def need_hold(w):
    """The path of gs_alloc_hold (a process that holds GPU memory through
    the shim); exits SKIP when it or the shim is not built."""
    hold = os.path.join(w.build, "tests/daemon/gs_alloc_hold")
    if not os.path.exists(hold) or not os.path.exists(w.shim):
        print("SKIP: gs_alloc_hold or the shim is not built")
        sys.exit(SKIP)
    return hold


def skip_unless_tmpfs_namespace():
    """Exit SKIP unless this test may mount a tmpfs in a mount namespace of
    its own and enter the daemon's (root, unshare(1), nsenter(1))."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        print("SKIP: needs root, unshare and nsenter")
        sys.exit(SKIP)
    probe = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=64k none /mnt"],
                           capture_output=True)
    if probe.returncode != 0:
        print("SKIP: cannot mount a tmpfs in a mount namespace: %r" % probe.stderr)
        sys.exit(SKIP)
