# SPDX-License-Identifier: Apache-2.0
"""Helpers for the watchdog's tests: slice processes that go around the
shim, forged books, the daemon's events (GS_MSG_EVENTS)."""
import json
import os
import re
import struct
import subprocess
import time

from gstest import *  # noqa

EVENTS = 6
MIB = 1 << 20
GIB = 1 << 30


class Holder:
    """A slice's first process: `sh` that waits for its slice (the config,
    the GPU and the preload on stdin, exported), then runs `script`: so the
    slice exists before its processes start."""

    def __init__(self, w, script, extra=None):
        env = dict(w.env)
        env.update(extra or {})
        env.update({"HOLD": hold_bin(w), "DIR": w.dir, "LD_LIBRARY_PATH": w.simlib})
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        self.w = w
        self.p = subprocess.Popen(
            ["/bin/sh", "-c", "read GPUSLICE_CONFIG; read CUDA_VISIBLE_DEVICES; read LD_PRELOAD; "
             "read GPUSLICE_SLICE; export GPUSLICE_CONFIG CUDA_VISIBLE_DEVICES LD_PRELOAD "
             "GPUSLICE_SLICE; " + script], stdin=subprocess.PIPE, env=env)
        w.children.append(self.p)

    def go(self, items):
        sid = get(items, "slice")
        lines = [get(items, "slice_config"), get(items, "slice_gpu").split(",", 1)[1],
                 preload(self.w.shim), sid]
        self.p.stdin.write(("\n".join(lines) + "\n").encode())
        self.p.stdin.flush()


def outliving_holder(w, nbytes):
    """A Holder whose script leaves a setsid'd grandchild holding nbytes of
    GPU memory (its output in DIR/g.out) and exits once that one is ready:
    a process of the slice that outlives the slice's first process."""
    return Holder(w, 'setsid /bin/sh -c \'"$HOLD" %d > "$DIR/g.out" &\'; '
                     'while ! grep -q ready "$DIR/g.out" 2>/dev/null; do sleep 0.05; done; '
                     'exit 0' % nbytes)


def preload(shim):
    ldd = subprocess.run(["ldd", shim], capture_output=True, text=True).stdout
    m = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
    return m.group(2) + ":" + shim if m else shim


def hold_bin(w):
    return os.path.join(w.build, "tests/daemon/gs_alloc_hold")


def events(w):
    t, items = w.call(EVENTS)
    check(t == REPLY | EVENTS, "events failed: %r" % (items,))
    out = []
    for k, v in items:
        if k != "event":
            continue
        head, _, msg = v.partition(" msg=")
        e = dict(kv.split("=", 1) for kv in head.split(" "))
        e["msg"] = msg
        e["pid"] = int(e["pid"])
        out.append(e)
    return out


def wait_event(w, pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in events(w):
            if pred(e):
                return e
        time.sleep(0.05)
    fail("no event %s within %.1f s; events: %r; log: %s" % (what, timeout, events(w),
                                                            w.log_text()[-3000:]))


def smi_used(w, pid):
    """simgpu's ground truth: bytes pid holds (all devices), None if none."""
    total = None
    for p in w.smi()["processes"]:
        if p["pid"] == pid and p.get("alive", True):
            total = (total or 0) + p["used_bytes"]
    return total


def wait_ready(path, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path) as f:
                text = f.read()
            if text.strip():
                return text.strip()
        except OSError:
            pass
        time.sleep(0.02)
    fail("%s did not say ready" % path)


STRAYS = []


def kill_strays():
    """SIGKILL the grandchildren the tests started (World kills children)."""
    for pid in STRAYS:
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def ls_slice(w, sid, missing_ok=False):
    """Slice sid as `gpuslice ls --json` shows it; a slice not listed fails
    the test, or is None with missing_ok."""
    r = w.cli("ls", "--json")
    check(r.returncode == 0, "gpuslice ls --json: %d %s" % (r.returncode, r.stderr))
    for g in json.loads(r.stdout)["gpus"]:
        for s in g["slices"]:
            if s["id"] == sid:
                return s
    if missing_ok:
        return None
    fail("slice %s not in ls: %s" % (sid, r.stdout))


def cleanup_world(w):
    """A watchdog test's end, pass or fail: SIGKILL every child's whole tree
    and the strays, then w.cleanup()."""
    for p in w.children:
        kill_tree(p.pid)
    kill_strays()
    w.cleanup()


def kill_tree(pid):
    """SIGKILL pid and all its descendants (children first seen, then killed)."""
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        kids = []
    try:
        os.kill(pid, 9)
    except OSError:
        pass
    for k in kids:
        kill_tree(k)


def _children(pid):
    with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
        return [int(x) for x in f.read().split()]


def _through_shepherd(kids):
    """`gpuslice run` runs its command below a shepherd (src/cli/shepherd.h):
    the command is the shepherd's child. None until every command has run
    (a forked gpuslice not yet exec'd is not the command)."""
    out = []
    for k in kids:
        try:
            with open("/proc/%d/comm" % k) as f:
                comm = f.read().strip()
        except OSError:
            comm = ""
        if comm in ("gpuslice-shep", "gpuslice"):
            below = _children(k)
            if not below:
                return None
            out.extend(below)
        else:
            out.append(k)
    return out


def pid_of_child(parent, nth=0, timeout=5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = _through_shepherd(_children(parent))
            if kids is not None and len(kids) > nth:
                STRAYS.extend(kids)
                return kids
        except OSError:
            pass
        time.sleep(0.02)
    fail("children of %d did not start" % parent)


def forge_books(sdir, pid):
    """Write the books of slice directory sdir to say that pid holds
    nothing (slice_state.h: slots after the header, 32 bytes each)."""
    path = os.path.join(sdir, "memory")
    with open(path, "r+b") as f:
        data = f.read()
        file_size = struct.unpack_from("<Q", data, 16)[0]
        n_slots = struct.unpack_from("<I", data, 12)[0]
        base = file_size - 32 * n_slots
        hit = False
        for i in range(n_slots):
            owner, = struct.unpack_from("<Q", data, base + 32 * i)
            if owner and ((owner >> 2) & 0x3FFFFF) == pid:
                f.seek(base + 32 * i + 8)
                f.write(struct.pack("<Q", 0))
                hit = True
        f.seek(32)
        f.write(struct.pack("<Q", 0))  # used
    check(hit, "no books slot for pid %d" % pid)
