# SPDX-License-Identifier: Apache-2.0
"""gpuslice top: a clear error and no daemon started when none runs; --json
and --once with two slices, figures checked against `gpuslice ls --json`;
then a 200m `cap` slice saturating its GPU through the shim (gs-burn) shows
a waiting time (WAIT, gate_wait_*) that, with its device time by simgpu-smi,
covers most of a second, while an idle slice shows 0; a slice whose process
never loaded the shim gets the watchdog's no_shim flag (FLAGS N, `overuse`
in --json); the live view in a real terminal (tmux, fixed size): header and
slice lines on screen with the WAIT and FLAGS columns, `q` and Ctrl-C quit
with status 0 and the terminal restored (stty shows icanon and echo again),
long names cut with an ellipsis only in a narrow terminal. Skips (77) the
tmux part when tmux is missing."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

LONG = "a-rather-long-slice-name-for-top"

w = World("top", devices=2, memory="8Gi")
try:
    # No daemon: a clear error, exit 1, and none is started.
    for args in (["--once"], ["--json"]):
        r = w.cli("top", *args)
        check(r.returncode == 1 and "cannot reach gpusliced" in r.stderr
              and "never starts" in r.stderr, "no daemon %r: %d %r" % (args, r.returncode, r.stderr))
    check(not os.path.exists(w.sock) and not os.path.exists(os.path.join(w.state, "gpusliced.log")),
          "top started a daemon")
    r = w.cli("top", "--interval", "5")
    check(r.returncode == 2 and "--interval" in r.stderr, "bad interval: %r" % r.stderr)

    w.start_daemon()
    a, b = w.spawn_sleeper(), w.spawn_sleeper()
    t, rep = w.call(CREATE, [("gpu_milli", 300), ("pid", a.pid), ("name", "alpha")])
    check(t == REPLY | CREATE, "create alpha: %r" % (rep,))
    t, rep = w.call(CREATE, [("gpu_milli", 200), ("pid", b.pid), ("name", LONG),
                             ("memory", 1 << 30), ("policy", "cap")])
    check(t == REPLY | CREATE, "create long: %r" % (rep,))

    # --json against ls --json, once the arbiter has a second of samples of both
    # (before, one could be measured and the other not yet).
    w.wait_for(lambda: all(s.get("gpu_time") is not None for s in w.slices()), timeout=10,
               what="both slices measured")
    r = w.cli("top", "--json")
    check(r.returncode == 0, "top --json: %d %r" % (r.returncode, r.stderr))
    top = json.loads(r.stdout)
    r = w.cli("ls", "--json")
    check(r.returncode == 0, "ls --json: %r" % r.stderr)
    ls = json.loads(r.stdout)
    check(len(top["gpus"]) == len(ls["gpus"]) == 2, "gpus: %r" % top["gpus"])
    ls_slices = {}
    for lg, tg in zip(ls["gpus"], top["gpus"]):
        check(tg["index"] == lg["index"] and tg["uuid"] == lg["uuid"] and tg["name"] == lg["name"],
              "gpu identity: %r vs %r" % (tg, lg))
        check(tg["memory_total_bytes"] == lg["memory_total_bytes"]
              and tg["memory_free_bytes"] == lg["memory_free_bytes"]
              and tg["share_free_milli"] == lg["share_free_milli"]
              and abs(tg["share_free_ratio"] - lg["share_free_milli"] / 1000) < 1e-9
              and tg["slices"] == len(lg["slices"]), "gpu figures: %r vs %r" % (tg, lg))
        used = sum(s["memory_used_bytes"] or 0 for s in lg["slices"])
        check(tg["memory_used_bytes"] == used, "gpu used: %r vs %r" % (tg, used))
        for s in lg["slices"]:
            ls_slices[s["id"]] = dict(s, gpu_index=lg["index"], gpu_uuid=lg["uuid"])
    check(len(top["slices"]) == 2 and {s["id"] for s in top["slices"]} == set(ls_slices),
          "slices: %r vs %r" % (top["slices"], ls_slices))
    for ts in top["slices"]:
        s = ls_slices[ts["id"]]
        for tk, lk in (("name", "name"), ("kind", "kind"), ("policy", "policy"), ("pid", "pid"),
                       ("share_configured_milli", "gpu_milli"),
                       ("memory_limit_bytes", "memory_limit_bytes"),
                       ("memory_used_bytes", "memory_used_bytes"), ("gpu_index", "gpu_index"),
                       ("gpu_uuid", "gpu_uuid")):
            check(ts[tk] == s[lk], "slice %s %s: %r vs ls %s %r" % (ts["id"], tk, ts[tk], lk, s[lk]))
        check(abs(ts["share_configured_ratio"] - s["gpu_milli"] / 1000) < 1e-9, "ratio: %r" % ts)
        # Measured over the last second: both known or both unknown, and close.
        check((ts["share_measured_ratio"] is None) == (s["gpu_time_ratio"] is None),
              "measured: %r %r" % (ts, s))
        if s["gpu_time_ratio"] is not None:
            check(abs(ts["share_measured_milli"] - 1000 * s["gpu_time_ratio"]) <= 100
                  and abs(ts["share_measured_ratio"] - ts["share_measured_milli"] / 1000) < 1e-9,
                  "measured: %r vs %r" % (ts, s))
    names = {s["id"]: s["name"] for s in top["slices"]}
    check(sorted(names.values()) == sorted(["alpha", LONG]), "names: %r" % names)
    key = [(s["gpu_index"], -(s["share_measured_milli"] or -1), s["id"]) for s in top["slices"]]
    check(key == sorted(key), "not sorted by GPU then measured share: %r" % key)

    # --once: plain text, no terminal control, names whole at the default width.
    r = w.cli("top", "--once")
    check(r.returncode == 0 and "\033" not in r.stdout, "top --once: %d %r" % (r.returncode, r.stdout))
    lines = r.stdout.splitlines()
    check(lines[0].startswith("GPU") and "FREE SHARE" in lines[0], "GPU header: %r" % lines[0])
    check(any(ln.startswith("GPU") and "SLICE" in ln and "MEASURED" in ln for ln in lines),
          "slice header: %r" % r.stdout)
    for ts in top["slices"]:
        ln = [x for x in lines if re.search(r"\s%s\s" % re.escape(ts["id"]), x)]
        conf = "%.1f%%" % (ts["share_configured_milli"] / 10)
        check(len(ln) == 1 and ts["name"] in ln[0] and conf in ln[0] and ts["policy"] in ln[0],
              "slice line of %s (%s): %r" % (ts["id"], conf, ln))
    check("1.0Gi" in r.stdout and "8.0Gi" in r.stdout, "memory figures: %r" % r.stdout)
    check(all(len(ln) <= 120 for ln in lines), "--once wider than 120: %r" % r.stdout)
    check(any("WAIT" in ln and "FLAGS" in ln for ln in lines), "no WAIT/FLAGS header: %r"
          % r.stdout)
    for ts in top["slices"]:
        # Members of the arbiter that never asked for the GPU: no wait.
        check(ts["gate_wait_seconds_total"] == 0 and ts["gate_wait_milli"] in (0, None)
              and ts["overuse"] == [], "idle slice %s: %r" % (ts["id"], ts))

    # A cap slice that saturates its GPU waits for the gate most of the time;
    # a slice process without the shim is flagged by the watchdog.
    burn = os.path.join(w.build, "bench/compute/gs-burn")
    hold = os.path.join(w.build, "tests/daemon/gs_alloc_hold")
    ptx = os.path.join(w.simlib, "gs_kernels.ptx")
    for f in (burn, hold, ptx, w.shim):
        check(os.path.exists(f), "not built: " + f)
    benv = dict(w.env, GS_KERNELS_PTX=ptx)
    w.children.append(subprocess.Popen(
        [w.cli_bin, "run", "--sim", "--gpu", "200m", "--policy", "cap", "--name", "throttled",
         "--", burn, "--kernel", "1ms", "--duration", "60s"], env=benv,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    hout = open(os.path.join(w.dir, "hold.out"), "w")
    hp = subprocess.Popen([hold, str(64 << 20)], stdout=hout, text=True,
                          env=dict(w.env, LD_LIBRARY_PATH=w.simlib, CUDA_VISIBLE_DEVICES="0"))
    hout.close()
    w.children.append(hp)
    w.wait_for(lambda: open(os.path.join(w.dir, "hold.out")).read().startswith("ready"),
               timeout=15, what="the shimless holder")
    t, rep = w.call(CREATE, [("gpu_milli", 100), ("pid", hp.pid), ("name", "noshim")])
    check(t == REPLY | CREATE, "create noshim: %r" % (rep,))

    def top_json():
        r = w.cli("top", "--json")
        check(r.returncode == 0, "top --json: %d %r" % (r.returncode, r.stderr))
        return {s["name"]: s for s in json.loads(r.stdout)["slices"]}

    def busy(pid):
        return sum(p["busy_ns"] for p in w.smi()["processes"] if p["pid"] == pid) / 1e9

    got = {}

    def settled():
        got.update(top_json())
        th, ns = got.get("throttled"), got.get("noshim")
        return th and (th["gate_wait_milli"] or 0) >= 300 and ns and \
            any(o["reason"] == "no_shim" and o["acted"] for o in ns["overuse"] or [])

    deadline = time.time() + 20
    while not settled():
        check(time.time() < deadline, "timed out waiting for the throttled slice's wait and "
              "noshim's flag: %r" % got)
        time.sleep(0.2)
    th = got["throttled"]
    b0, t0 = busy(th["pid"]), time.monotonic()
    time.sleep(1.0)
    th = top_json()["throttled"]
    ran = (busy(th["pid"]) - b0) / (time.monotonic() - t0)
    waited = th["gate_wait_milli"] / 1000
    print("throttled: waited %.2f, ran %.2f of the last second (simgpu-smi)" % (waited, ran))
    check(ran <= 0.35 and waited >= 0.5 and 0.7 <= waited + ran <= 1.1,
          "throttled: waited %.2f and ran %.2f of a second: %r" % (waited, ran, th))
    check(abs(th["gate_wait_ratio"] - th["gate_wait_milli"] / 1000) < 1e-9
          and th["gate_wait_seconds_total"] > 1.0 and th["overuse"] == [],
          "throttled figures: %r" % th)
    check(got["alpha"]["gate_wait_milli"] in (0, None), "alpha waits: %r" % got["alpha"])
    r = w.cli("top", "--once")
    lines = r.stdout.splitlines()
    th_line = [ln for ln in lines if " throttled " in ln]
    m = re.search(r"\s(\d+)ms\s", th_line[0]) if th_line else None
    check(m and int(m.group(1)) >= 300, "--once: no WAIT for throttled: %r" % r.stdout)
    ns_line = [ln for ln in lines if " noshim " in ln]
    check(ns_line and "N" in ns_line[0].split()[-1], "--once: noshim not flagged N: %r"
          % r.stdout)
    check(all(ln.split()[-1] == "-" for ln in lines if " alpha " in ln or " throttled " in ln),
          "--once: flags on good slices: %r" % r.stdout)
    top = json.loads(w.cli("top", "--json").stdout)

    # The live view in tmux.
    tmux = shutil.which("tmux")
    if not tmux:
        print("SKIP: tmux is not installed (the --once and --json checks passed)")
        sys.exit(SKIP)
    tsock = os.path.join(w.dir, "tmux.sock")
    tenv = dict(w.env, TERM="xterm-256color")
    tenv.pop("TMUX", None)

    def tm(*args):
        return subprocess.run([tmux, "-S", tsock] + list(args), env=tenv, capture_output=True,
                              text=True, timeout=10)

    def pane(name):
        return tm("capture-pane", "-p", "-t", name).stdout

    def wait_pane(name, pred, what, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            text = pane(name)
            if pred(text):
                return text
            time.sleep(0.1)
        fail("tmux %s: timed out waiting for %s; the pane:\n%s" % (name, what, pane(name)))

    def restored(text):
        # stty -a after top: canonical mode and echo on again.
        words = text.split()
        return "icanon" in words and "echo" in words and "-icanon" not in words \
            and "-echo" not in words

    def session(name, cols, key, interval):
        r = tm("new-session", "-d", "-s", name, "-x", str(cols), "-y", "30",
               "-e", "GPUSLICE_SOCKET=" + w.sock, "-e", "GPUSLICE_STATE_DIR=" + w.state, "sh")
        check(r.returncode == 0, "tmux new-session: %r" % r.stderr)
        tm("send-keys", "-t", name, "clear; %s top --interval %d; echo TOP-EXIT=$?; stty -a; echo STTY-""DONE"
           % (w.cli_bin, interval), "Enter")
        time.sleep(2)
        text = wait_pane(name, lambda t: "gpuslice top" in t and "MEASURED" in t,
                         "the live view")
        tm("send-keys", "-t", name, key)
        # The marker is split in the command line so that only its output matches:
        # the pane is read once stty has printed all of its settings.
        after = wait_pane(name, lambda t: "TOP-EXIT=" in t and "STTY-DONE" in t, "top to exit")
        check("TOP-EXIT=0" in after, "%s: exit status: %r" % (key, after))
        check(restored(after), "%s: terminal not restored: %r" % (key, after))
        check("MEASURED" not in after, "%s: the live view was left on screen: %r" % (key, after))
        return text

    text = session("wide", 130, "q", 500)
    lines = text.splitlines()
    check(any("FREE SHARE" in ln for ln in lines) and "2 GPUs, 4 slices" in text,
          "wide: header: %r" % text)
    check(any("WAIT" in ln and "FLAGS" in ln for ln in lines), "wide: no WAIT/FLAGS: %r" % text)
    th_line = [ln for ln in lines if " throttled " in ln]
    m = re.search(r"\s(\d+)ms\s", th_line[0]) if th_line else None
    check(m and int(m.group(1)) > 0, "wide: no waiting time for throttled: %r" % text)
    for ts in top["slices"]:
        check(any(ts["id"] in ln and ts["name"] in ln and ts["policy"] in ln for ln in lines),
              "wide: no line for %s: %r" % (ts["id"], text))
    check("\u2026" not in text, "wide: a name was cut at 130 columns: %r" % text)

    text = session("narrow", 80, "C-c", 1000)
    lines = text.splitlines()
    check(all(len(ln) <= 80 for ln in lines), "narrow: a line is wider than 80: %r" % text)
    check(LONG not in text and any("alpha" in ln and "\u2026" not in ln for ln in lines)
          and any(LONG[:6] in ln and "\u2026" in ln for ln in lines),
          "narrow: the long name is not cut with an ellipsis: %r" % text)
    tm("kill-server")
    print("PASS")
finally:
    if "tsock" in globals() and shutil.which("tmux"):
        subprocess.run(["tmux", "-S", tsock, "kill-server"], capture_output=True)
    w.cleanup()
