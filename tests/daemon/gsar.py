# SPDX-License-Identifier: Apache-2.0
"""GSAR (compute-grant protocol) helpers for gpusliced tests: frames, the
lease page (mapped read-only, as a shim does) and slice agents, processes
that own a slice and hand the test connections they made themselves (so the
daemon's SO_PEERCRED sees a process of the slice)."""
import mmap
import os
import signal
import socket
import struct
import time

MAGIC = 0x52415347
VERSION = 1
HELLO, WELCOME, WANT, IDLE, DONE, ERROR = 1, 2, 3, 4, 5, 6
F_PENDING = 1
PAGE_MAGIC = 0x3150524142534750
PAGE_SIZE = 280


def msg(mtype, gen=0, value=0, flags=0, magic=MAGIC, version=VERSION, reserved=0):
    return struct.pack("<IHHQQII", magic, version, mtype, gen, value, flags, reserved)


def read_msg(sock, timeout=5.0):
    """One 32-byte frame as (type, gen, value, flags), or None at EOF."""
    sock.settimeout(timeout)
    buf = b""
    while len(buf) < 32:
        try:
            chunk = sock.recv(32 - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    magic, version, mtype, gen, value, flags, _ = struct.unpack("<IHHQQII", buf)
    assert magic == MAGIC and version == VERSION, "bad frame from the daemon"
    return mtype, gen, value, flags


def now_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


class Page:
    """A slice's lease page, mapped read-only."""

    def __init__(self, path):
        self.path = path
        fd = os.open(path, os.O_RDONLY)
        try:
            self.m = mmap.mmap(fd, PAGE_SIZE, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)

    def u64(self, off):
        return struct.unpack_from("<Q", self.m, off)[0]

    def header(self):
        magic, version, size = struct.unpack_from("<QII", self.m, 0)
        slice_id = bytes(self.m[16:80]).split(b"\0", 1)[0].decode()
        milli, policy, quantum = struct.unpack_from("<IIQ", self.m, 80)
        return {"magic": magic, "version": version, "size": size, "slice": slice_id,
                "milli": milli, "policy": policy, "quantum": quantum}

    def epoch(self):
        return self.u64(96)

    def heartbeat(self):
        return self.u64(104)

    def futex(self):
        return struct.unpack_from("<I", self.m, 144)[0]

    def lease(self):
        """(gen, start, until), read under the seqlock."""
        while True:
            s1 = self.u64(112)
            if s1 & 1:
                continue
            gen, start, until = struct.unpack_from("<QQQ", self.m, 120)
            if self.u64(112) == s1:
                return gen, start, until

    def close(self):
        self.m.close()


def _agent_main(ctl, sock_path):
    """Owns a slice; connects to the daemon on request, passing the fd up.
    'c': connect here; 'g': connect from a new child (which stays alive)."""
    while True:
        try:
            cmd = ctl.recv(1)
        except OSError:
            os._exit(0)
        if not cmd:
            os._exit(0)
        if cmd == b"g":
            pid = os.fork()
            if pid == 0:
                devnull = os.open(os.devnull, os.O_RDWR)
                os.dup2(devnull, 1)
                os.dup2(devnull, 2)
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(sock_path)
                socket.send_fds(ctl, [b"f"], [s.fileno()])
                time.sleep(30)
                os._exit(0)
            continue
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(sock_path)
            socket.send_fds(ctl, [b"f"], [s.fileno()])
        except OSError:
            ctl.send(b"e")
        s.close()


class Agent:
    """A forked process that owns a slice (its pid goes into the create
    request) and makes daemon connections for the test."""

    def __init__(self, sock_path):
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock_path = sock_path
        pid = os.fork()
        if pid == 0:
            # Hold no other descriptor of the test (its connections).
            keep = b.fileno()
            os.closerange(3, keep)
            os.closerange(keep + 1, 65536)
            try:
                _agent_main(b, sock_path)
            finally:
                os._exit(0)
        b.close()
        self.ctl = a
        self.pid = pid
        self.returncode = None

    def connect(self, from_child=False):
        self.ctl.sendall(b"g" if from_child else b"c")
        data, fds, _, _ = socket.recv_fds(self.ctl, 1, 1)
        if not fds:
            raise OSError("agent could not connect")
        return socket.socket(fileno=fds[0])

    def hello(self, from_child=False):
        s = self.connect(from_child)
        s.sendall(msg(HELLO, value=VERSION))
        return s, read_msg(s)

    # subprocess.Popen's interface, for World.cleanup
    def poll(self):
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = status
        return self.returncode

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def wait(self):
        if self.returncode is None:
            _, self.returncode = os.waitpid(self.pid, 0)
        return self.returncode


class Holder:
    """Plays one shim process over a GSAR connection: wants the GPU, uses
    every lease to its end, reports DONE with the lease time as busy time,
    and counts the granted time it saw on the page."""

    def __init__(self, sock, page):
        self.sock = sock
        self.page = page
        # gen -> (start, until): the latest the page showed for that lease.
        # A renewal extends `until`; a pipelined lease's start may be moved
        # up (its predecessor drained sooner than predicted): either way the
        # page describes the whole lease, so it replaces, never adds.
        self.segments = {}
        self.hold = None    # gen of the hold being used
        self.hold_busy = 0
        self.sock.setblocking(False)

    def want(self):
        self.sock.sendall(msg(WANT))

    def step(self, pending=True):
        gen, start, until = self.page.lease()
        now = now_ns()
        if gen and until > now and until > start:
            if self.hold is not None and gen != self.hold:
                self.done(pending)
            self.hold = gen
            self.segments[gen] = (start, until)
            return True
        if self.hold is not None:
            self.done(pending)
        return False

    def done(self, pending):
        s, u = self.segments.get(self.hold, (0, 0))
        busy = u - s
        self.sock.sendall(msg(DONE, gen=self.hold, value=max(busy, 0),
                              flags=F_PENDING if pending else 0))
        self.hold = None

    def granted(self, since=0):
        return sum(max(0, u - max(s, since)) for s, u in self.segments.values() if u > since)
