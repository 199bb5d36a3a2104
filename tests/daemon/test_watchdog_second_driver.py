# SPDX-License-Identifier: Apache-2.0
"""A second copy of the driver library, loaded by path: a tenant in a slice
(`gpuslice run`, the shim preloaded) first behaves, through the shim, then
copies simgpu's libcuda.so.1 to a private path, loads the copy (dlopen by
path; in the second half, but for sanitizer builds, dlmopen(LM_ID_NEWLM)
through glibc's own dlmopen, read from libc's symbol table: the shim's
refuses a driver in a new namespace), takes cuMemAlloc_v2 & co. from the
copy's dynamic symbol table read in memory (the shim answers dlsym and
dlvsym on the copy with its wrappers: docs/shim.md, "Routes around the
shim") and allocates three times its slice's cap. The shim never sees it;
simgpu's state, shared by every copy through $SIMGPU_DIR/state, does.

Judged by simgpu's ground truth (simgpu-smi): the memory really is held.
The reasons expected, by src/core/watchdog.c: the tenant loaded the shim,
so it has a slot in its slice's books and is not no_shim; its books say
what it took through the shim while NVML says that plus the copy's context
and allocation, so books_disagree; and its slice's processes hold more
than the cap by NVML, the tenant's use not covered by the books, so
memory_over_cap names it. Both are expected, and nothing else for it.

Under --overuse-policy kill the tenant is SIGKILLed (its `gpuslice run`
exits 137) within interval + grace + 1 s of the start of its over-use,
measured from the moment it is told to go around the shim (an upper bound
of that start); a well-behaved slice on the same GPU is untouched: no
event, its memory held until it exits by itself, exit status 0. Under
report nothing is killed: the tenant keeps its memory and exits 0 when told.
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wdtest import *  # noqa

INTERVAL, GRACE = 0.5, 1.0
CAP, OVER = 2 * GIB, 6 * GIB
EXPECTED = {"memory_over_cap", "books_disagree"}
w = World("wdsecond", devices=1, memory="16Gi", ctx_overhead="256Mi")


def helper():
    return os.path.join(w.build, "tests/daemon/gs_second_driver")


class Tenant:
    """`gpuslice run` of gs_second_driver MODE in a slice of its own, told
    what to do through a FIFO; its output in a file."""

    def __init__(self, name, mode, milli, cap, copy_bytes):
        self.name, self.fifo = name, os.path.join(w.dir, name + ".go")
        self.out = os.path.join(w.dir, name + ".out")
        os.mkfifo(self.fifo)
        env = dict(w.env)
        env.update({"LD_LIBRARY_PATH": w.simlib, "TMPDIR": w.dir})
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
        with open(self.out, "w") as f:
            self.run = subprocess.Popen(
                [w.cli_bin, "run", "--sim", "--gpu", "%dm" % milli, "--gpu-memory", str(cap),
                 "--name", name, "--", helper(), mode, str(256 * MIB), str(copy_bytes),
                 self.fifo], env=env, stdout=f, stderr=subprocess.STDOUT)
        w.children.append(self.run)
        self.wait_for("shim-ready")
        self.pid = pid_of_child(self.run.pid, 0)[0]
        self.slice = [s["id"] for s in w.slices() if s.get("name") == name][0]

    def wait_for(self, word, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(self.out) as f:
                lines = f.read().splitlines()
            if any(l.split(" ", 1)[0] == word for l in lines):
                return
            if self.run.poll() is not None:
                break
            time.sleep(0.02)
        fail("%s did not say %s (exit %r): %r" % (self.name, word, self.run.poll(),
                                                  open(self.out).read()))

    def tell(self):
        with open(self.fifo, "w") as f:
            f.write("go\n")

    def gone(self):
        """Killed or exited, and simgpu no longer counts its memory."""
        try:
            with open("/proc/%d/stat" % self.pid) as f:
                st = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            st = "X"
        return st in ("Z", "X") and not smi_used(w, self.pid)


def mine(pid):
    return [e for e in events(w) if e["pid"] == pid]


def go_around(t):
    """Tells t to allocate through the copy; checks the ground truth and the
    watchdog's detection. Returns the time it was told."""
    before = smi_used(w, t.pid)
    check(before and before <= CAP, "%s before: %r bytes by simgpu" % (t.name, before))
    check(not mine(t.pid), "verdicts while %s behaved: %r" % (t.name, mine(t.pid)))
    t_go = time.monotonic()
    t.tell()
    t.wait_for("ready")
    used = smi_used(w, t.pid)
    # Its own context and bytes, the copy's context (256Mi) and allocation.
    check(used and used >= before + OVER + 256 * MIB,
          "%s after the copy: simgpu says %r bytes (before %r)" % (t.name, used, before))
    e = wait_event(w, lambda e: e["pid"] == t.pid and e["reason"] == "memory_over_cap", 3,
                   "memory_over_cap for %s" % t.name)
    check(e["slice"] == t.slice and int(e["cap"]) == CAP and int(e["used"]) >= OVER,
          "memory_over_cap evidence: %r" % e)
    e = wait_event(w, lambda e: e["pid"] == t.pid and e["reason"] == "books_disagree", 3,
                   "books_disagree for %s" % t.name)
    check(e["slice"] == t.slice and int(e["books"]) <= before and int(e["used"]) >= OVER,
          "books_disagree evidence: %r" % e)
    return t_go


try:
    if not os.path.exists(helper()) or not os.path.exists(w.shim):
        print("SKIP: gs_second_driver or the shim is not built")
        sys.exit(SKIP)

    # kill: the tenant goes, the neighbour stays.
    w.start_daemon("--overuse-policy", "kill", "--overuse-grace", str(int(GRACE * 1000)),
                   "--watch-interval", str(int(INTERVAL * 1000)))
    good = Tenant("good", "good", 200, GIB, 0)
    bad = Tenant("around", "path", 300, CAP, OVER)
    check(w.slices()[0]["gpus"] == w.slices()[1]["gpus"], "the slices are on different GPUs")
    good_used = smi_used(w, good.pid)
    time.sleep(2 * INTERVAL)
    t_go = go_around(bad)
    bound = INTERVAL + GRACE + 1.0
    while not bad.gone() and time.monotonic() - t_go < bound:
        time.sleep(0.02)
    latency = time.monotonic() - t_go
    check(bad.gone(), "the tenant with the second driver still runs (or holds memory) %.2f s "
          "after it was told to go around the shim: %r" % (latency, mine(bad.pid)))
    print("killed %.2f s after it was told to go around the shim (bound %.1f s)" %
          (latency, bound))
    check(bad.run.wait(timeout=10) == 128 + 9, "gpuslice run of the tenant: exit %r" %
          bad.run.returncode)
    e = wait_event(w, lambda e: e["pid"] == bad.pid and e["action"] == "killed", 2, "the kill")
    check(e["reason"] in EXPECTED and e["slice"] == bad.slice, "kill evidence: %r" % e)
    check({e["reason"] for e in mine(bad.pid)} == EXPECTED,
          "reasons for the tenant: %r" % mine(bad.pid))

    time.sleep(INTERVAL + GRACE)
    check(good.run.poll() is None and smi_used(w, good.pid) == good_used,
          "the neighbour was touched: exit %r, %r bytes by simgpu (had %r)" %
          (good.run.poll(), smi_used(w, good.pid), good_used))
    check(not mine(good.pid), "verdicts on the neighbour: %r" % mine(good.pid))
    good.tell()
    check(good.run.wait(timeout=10) == 0, "the neighbour's exit status: %r" % good.run.returncode)
    w.wait_for(lambda: not smi_used(w, good.pid), timeout=5, what="the neighbour's memory freed")

    # report: the same route through dlmopen(LM_ID_NEWLM); nothing is killed.
    # Under AddressSanitizer simgpu's libcuda needs the ASan runtime, which a
    # new link map would load a second time (ASan refuses): dlopen by path.
    mode = "newlm"
    if preload(w.shim) != w.shim:
        mode = "path"
        print("sanitizer build: the report half loads the copy with dlopen, not dlmopen")
    w.daemon.terminate()
    w.daemon.wait(timeout=10)
    w.start_daemon("--overuse-policy", "report", "--overuse-grace", str(int(GRACE * 1000)),
                   "--watch-interval", str(int(INTERVAL * 1000)))
    seen = {(e["pid"], e["seq"]) for e in events(w)}
    good = Tenant("good2", "good", 200, GIB, 0)
    bad = Tenant("around2", mode, 300, CAP, OVER)
    good_used = smi_used(w, good.pid)
    time.sleep(2 * INTERVAL)
    t_go = go_around(bad)
    for reason in sorted(EXPECTED):
        wait_event(w, lambda e: e["pid"] == bad.pid and e["reason"] == reason and
                   e["action"] == "reported", INTERVAL + GRACE + 1.0, reason + " reported")
    held = smi_used(w, bad.pid)
    while time.monotonic() - t_go < INTERVAL + GRACE + 2.0:
        time.sleep(0.1)
    check(bad.run.poll() is None and smi_used(w, bad.pid) == held,
          "report: the tenant was stopped (exit %r, %r bytes)" % (bad.run.poll(),
                                                                  smi_used(w, bad.pid)))
    check(not [e for e in events(w) if e["action"] in ("killed", "kill_failed") and
               (e["pid"], e["seq"]) not in seen], "report killed: %r" % events(w))
    check(good.run.poll() is None and smi_used(w, good.pid) == good_used and
          not mine(good.pid), "report: the neighbour was touched")
    for t in (bad, good):
        t.tell()
        check(t.run.wait(timeout=10) == 0, "%s's exit status: %r" % (t.name, t.run.returncode))
    print("PASS")
finally:
    cleanup_world(w)
