# SPDX-License-Identifier: Apache-2.0
"""gpuslice top: a clear error and no daemon started when none runs; --json
and --once with two slices, figures checked against `gpuslice ls --json`;
the live view in a real terminal (tmux, fixed size): header and slice lines
on screen, `q` and Ctrl-C quit with status 0 and the terminal restored
(stty shows icanon and echo again), long names cut with an ellipsis only in
a narrow terminal. Skips (77) the tmux part when tmux is missing."""
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

    # --json against ls --json.
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
        check(tg["memory_total_bytes"] == lg["memory"] and tg["memory_free_bytes"] == lg["free_memory"]
              and tg["share_free_milli"] == lg["free_milli"]
              and abs(tg["share_free_ratio"] - lg["free_milli"] / 1000) < 1e-9
              and tg["slices"] == len(lg["slices"]), "gpu figures: %r vs %r" % (tg, lg))
        used = sum(s["memory_used"] or 0 for s in lg["slices"])
        check(tg["memory_used_bytes"] == used, "gpu used: %r vs %r" % (tg, used))
        for s in lg["slices"]:
            ls_slices[s["id"]] = dict(s, gpu_index=lg["index"], gpu_uuid=lg["uuid"])
    check(len(top["slices"]) == 2 and {s["id"] for s in top["slices"]} == set(ls_slices),
          "slices: %r vs %r" % (top["slices"], ls_slices))
    for ts in top["slices"]:
        s = ls_slices[ts["id"]]
        for tk, lk in (("name", "name"), ("kind", "kind"), ("policy", "policy"), ("pid", "pid"),
                       ("share_configured_milli", "milli"), ("memory_cap_bytes", "memory_cap"),
                       ("memory_used_bytes", "memory_used"), ("gpu_index", "gpu_index"),
                       ("gpu_uuid", "gpu_uuid")):
            check(ts[tk] == s[lk], "slice %s %s: %r vs ls %s %r" % (ts["id"], tk, ts[tk], lk, s[lk]))
        check(abs(ts["share_configured_ratio"] - s["milli"] / 1000) < 1e-9, "ratio: %r" % ts)
        # Measured over the last second: both known or both unknown, and close.
        check((ts["share_measured_ratio"] is None) == (s["gpu_time"] is None), "measured: %r %r"
              % (ts, s))
        if s["gpu_time"] is not None:
            check(abs(ts["share_measured_milli"] - s["gpu_time"]) <= 100
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
    check(any("FREE SHARE" in ln for ln in lines) and "2 GPUs, 2 slices" in text,
          "wide: header: %r" % text)
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
