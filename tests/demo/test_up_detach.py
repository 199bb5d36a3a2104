#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`gpuslice up -d` on simgpu: it returns once both APIs are started; they
outlive the session that started them (its leader killed, SIGHUP sent to
its group); each API's output is in its log (gpuslice logs), also in the foreground; `gpuslice stop`
ends one API for good (up does not restart it); `gpuslice down SPEC` from
another process stops the rest and the supervisor: no process of theirs is
left (/proc), no slice (the daemon), no memory (simgpu). A foreground `up`
is stopped by `down` as well (exit status 0)."""
import json
import os
import signal
import subprocess
import time

from gsenv import World, fail, ok, pid_alive, stop_session

API = ("import sys, time\nprint('%s is up', flush=True)\n"
       "print('%s to stderr', file=sys.stderr, flush=True)\ntime.sleep(300)\n")
SPEC = """
- name: alpha
  command: [/usr/bin/python3, -c, "{alpha}"]
  compute: {{gpu: 300m, gpu_memory: 1Gi}}
- name: beta
  command: [/usr/bin/python3, -c, "{beta}"]
  compute: {{gpu: 200m, gpu_memory: 1Gi}}
"""


def descendants(root):
    """root and every process below it (by /proc's ppid)."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def ps(w):
    r = w.cli("ps", "--json")
    if r.returncode != 0:
        fail(f"gpuslice ps --json: {r.returncode}", r.stderr)
    return json.loads(r.stdout)["slices"]


def wait_for(pred, what, bound=20, *logs):
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.1)
    fail(f"timed out waiting for {what}", *logs)


def quote(py):
    return py.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def main():
    with World() as w:
        spec = w.spec(SPEC.format(alpha=quote(API % ("alpha", "alpha")),
                                  beta=quote(API % ("beta", "beta"))))
        logdir = w.env["GPUSLICE_LOG_DIR"]
        up_log = os.path.join(logdir, "up-apis.yaml.log")

        def read(path):
            try:
                with open(path) as f:
                    return f.read()
            except OSError:
                return ""

        # A "terminal": a session whose leader runs up -d, then waits.
        terms = []
        try:
            run_all(w, spec, up_log, read, terms)
        finally:
            for term in terms:
                if term.poll() is None:
                    os.killpg(term.pid, signal.SIGKILL)
                    term.wait()
            w.cli("down", timeout=60)  # a failed test leaves no supervisor behind


def run_all(w, spec, up_log, read, terms):
    term = subprocess.Popen(
        ["/bin/sh", "-c", '"$0" up -d --sim "$1" > "$2" 2>&1; echo "rc=$?" >> "$2"; '
         'exec sleep 300', w.gpuslice, spec, os.path.join(w.tmp, "term.out")],
        env=w.env, start_new_session=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL)
    terms.append(term)
    out = os.path.join(w.tmp, "term.out")
    wait_for(lambda: "rc=" in read(out), "up -d to return", 30, read(out), read(up_log))
    said = read(out)
    if "rc=0" not in said or "alpha started" not in said or "beta started" not in said:
        fail("up -d did not report both APIs started (status 0)", said, read(up_log))
    ok("up -d returns once both APIs are started, status 0")
    slices = ps(w)
    sup = {s["up_pid"] for s in slices}
    if len(slices) != 2 or len(sup) != 1 or None in sup:
        fail(f"ps after up -d: {slices}", read(up_log))
    sup = sup.pop()
    procs = descendants(sup)
    api_pids = {s["name"]: s["pid"] for s in slices}
    if not all(p in procs for p in api_pids.values()):
        fail(f"the APIs {api_pids} are not below the supervisor {sup}: {procs}")

    # The terminal goes away: SIGHUP to its group, its leader killed.
    os.killpg(term.pid, signal.SIGHUP)
    term.wait(timeout=10)
    time.sleep(0.5)  # not a measurement: what would die of the hangup has had the time
    alive = [p for p in procs if pid_alive(p)]
    if alive != procs or len(ps(w)) != 2:
        fail(f"after the terminal's hangup: alive {alive} of {procs}; slices {ps(w)}",
             read(up_log))
    ok("the supervisor and both APIs outlive their terminal")

    r = w.cli("logs", "alpha")
    if r.returncode != 0 or "alpha is up" not in r.stdout or "alpha to stderr" not in r.stdout:
        fail(f"gpuslice logs alpha: {r.returncode}", r.stdout, r.stderr)
    ok("each API's output is in its log (gpuslice logs)")

    # stop one API: it stays stopped.
    r = w.cli("stop", "beta")
    if r.returncode != 0:
        fail(f"gpuslice stop beta: {r.returncode}", r.stdout, r.stderr, read(up_log))
    wait_for(lambda: "beta: stopped (gpuslice stop" in read(up_log), "up to see the stop",
             20, read(up_log))
    if "not restarted" not in read(up_log) or pid_alive(api_pids["beta"]):
        fail("the stopped API was restarted or still runs", read(up_log))
    names = [s["name"] for s in ps(w)]
    if names != ["alpha"]:
        fail(f"slices after stop beta: {names}", read(up_log))
    ok("gpuslice stop beta: stopped, slice freed, not restarted")

    # down, from another process: everything goes.
    procs = descendants(sup)
    r = w.cli("down", spec, timeout=60)
    if r.returncode != 0 or f"pid {sup}" not in r.stdout:
        fail(f"gpuslice down: {r.returncode}", r.stdout, r.stderr, read(up_log))
    left = [p for p in procs if pid_alive(p)]
    if left:
        fail(f"processes left after down: {left}", read(up_log))
    if ps(w):
        fail(f"slices left after down: {ps(w)}", read(up_log))
    smi = [p for p in w.smi().get("processes", []) if p.get("alive", True)
           and p["pid"] in procs]
    if smi:
        fail(f"simgpu still shows processes of theirs: {smi}")
    ok("gpuslice down: the supervisor and every API gone, every slice freed")
    r = w.cli("down", spec)
    if r.returncode != 0 or "nothing to stop" not in r.stderr:
        fail(f"a second down: {r.returncode}", r.stderr)

    # A foreground up, downed from elsewhere, exits 0.
    p = w.up(spec)
    wait_for(lambda: len(ps(w)) == 2, "the foreground up's slices", 20, w.log())
    wait_for(lambda: w.cli("logs", "alpha").stdout.count("alpha is up") == 2,
             "the foreground API's output in its log", 20, w.log())
    r = w.cli("down", timeout=60)
    rc = p.wait(timeout=30) if r.returncode == 0 else stop_session(p)
    if r.returncode != 0 or rc != 0 or ps(w):
        fail(f"down of a foreground up: down {r.returncode}, up {rc}, slices {ps(w)}",
             r.stderr, w.log())
    ok("gpuslice down stops a foreground up too (its status 0)")


if __name__ == "__main__":
    main()
