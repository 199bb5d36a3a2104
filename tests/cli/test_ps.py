# SPDX-License-Identifier: Apache-2.0
"""gpuslice ps: one line per slice (name never cut, id, share, memory cap and
use, GPU, pid, status), -o wide, --json with units in its keys (memory used
as simgpu counts it), and it never starts a daemon."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

GIB = 1 << 30
NAME = "a-slice-name-long-enough-to-be-cut-by-any-fixed-width-column-63"
assert len(NAME) == 63

w = World("ps", devices=2, memory="8Gi")
try:
    hold_bin = need_hold(w)

    # No daemon: ps says so, exits 1, and starts none.
    r = w.cli("ps")
    check(r.returncode == 1 and r.stderr.strip(), "ps without a daemon: %d %r" % (r.returncode,
                                                                                r.stderr))
    check(not os.path.exists(w.sock) and not os.path.exists(w.state),
          "ps started a daemon (%s or %s exists)" % (w.sock, w.state))

    w.start_daemon()
    hold = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "300m", "--gpu-memory", "1Gi",
                             "--name", NAME, "--", hold_bin, str(100 << 20)],
                            env=w.env, stdout=subprocess.PIPE, text=True)
    w.children.append(hold)
    check(hold.stdout.readline().strip() == "ready", "the holder did not allocate")
    anon = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "200m", "--", "sleep", "60"],
                            env=w.env)
    w.children.append(anon)
    w.wait_for(lambda: len(w.slices()) == 2, what="two slices")
    by_name = {s.get("name", ""): s for s in w.slices()}
    named, unnamed = by_name[NAME], by_name[""]
    smi_used = sum(p["used_bytes"] for p in w.smi()["processes"]
                   if p["pid"] == int(named["pid"]) and p.get("alive", True))
    check(smi_used > 100 << 20, "simgpu shows %d bytes for the holder" % smi_used)

    # The table: its header, and one line per slice with the whole name.
    r = w.cli("ps")
    check(r.returncode == 0, "ps: %d %r" % (r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    check(lines[0].split() == ["NAME", "ID", "SHARE", "MEMORY", "USED", "GPU", "PID", "STATUS"],
          "header: %r" % lines[0])
    check(len(lines) == 3, "one line per slice: %r" % r.stdout)
    row = [line for line in lines if line.startswith(NAME + " ")]
    check(len(row) == 1, "the 63-character name is cut or missing: %r" % r.stdout)
    f = row[0].split()
    check(f[:8] == [NAME, named["id"], "300m", "1.0Gi", f[4], "0" if named["gpus"] else "?",
                    named["pid"], "up"] and f[4] != "-",
          "the named slice's line: %r (slice %r)" % (row[0], named))
    other = [line for line in lines[1:] if not line.startswith(NAME)][0].split()
    check(other[:3] == ["-", unnamed["id"], "200m"] and other[3].endswith("Gi") and other[6] == unnamed["pid"],
          "the unnamed slice's line: %r" % other)
    # Columns line up: every line has its ID where the header has it.
    col = lines[0].index("ID")
    check(all(line[col:].startswith(s["id"]) for line, s in
              zip(sorted(lines[1:]), sorted([unnamed, named], key=lambda s: s.get("name") or "-"))),
          "the ID column is not aligned: %r" % r.stdout)

    # -o wide: policy, over-use policy, uid, up, log.
    r = w.cli("ps", "-o", "wide")
    head = r.stdout.splitlines()[0].split()
    check(r.returncode == 0 and head[8:] == ["POLICY", "OVERUSE", "UID", "UP", "LOG"],
          "ps -o wide header: %r" % head)
    wide = [line for line in r.stdout.splitlines() if line.startswith(NAME + " ")][0]
    check(wide.endswith(os.path.join(w.env["GPUSLICE_LOG_DIR"], NAME + ".log")),
          "ps -o wide names the log: %r" % wide)
    r = w.cli("ps", "-o", "tall")
    check(r.returncode == 2 and "-o tall" in r.stderr, "ps -o tall: %d %r" % (r.returncode,
                                                                             r.stderr))

    # --json: units in the keys; memory used as simgpu counts it.
    r = w.cli("ps", "--json")
    check(r.returncode == 0, "ps --json: %r" % r.stderr)
    doc = json.loads(r.stdout)
    js = {s["id"]: s for s in doc["slices"]}
    check(set(js) == {named["id"], unnamed["id"]}, "ps --json slices: %r" % doc)
    n = js[named["id"]]
    check(n["name"] == NAME and n["gpu_milli"] == 300 and n["memory_limit_bytes"] == GIB and
          n["pid"] == int(named["pid"]) and n["status"] == "running" and n["kind"] == "local"
          and n["gpus"][0]["uuid"] == named["gpus"][0] and n["age_seconds"] >= 0,
          "ps --json, the named slice: %r" % n)
    check(n["memory_used_bytes"] == smi_used,
          "memory_used_bytes %r, simgpu says %d" % (n["memory_used_bytes"], smi_used))
    check(n["log_path"] == os.path.join(w.env["GPUSLICE_LOG_DIR"], NAME + ".log"),
          "log_path: %r" % n["log_path"])
    u = js[unnamed["id"]]
    check(u["name"] is None and u["gpu_milli"] == 200 and u["up_pid"] is None,
          "ps --json, the unnamed slice: %r" % u)
    print("PASS")
finally:
    w.cleanup()
