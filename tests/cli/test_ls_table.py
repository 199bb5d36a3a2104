# SPDX-License-Identifier: Apache-2.0
"""gpuslice ls as a table: a slice's name of 40 characters is printed whole
and the columns stay aligned (each sized to its longest cell); -o wide adds
the kind, uid, creation time, config and slice directory (the paths
ls --json gives); -o json is --json; another -o is a usage error (2)."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

LONG = "a-slice-name-that-is-forty-characters-xx"
assert len(LONG) == 40

w = World("ls-table", devices=1, memory="8Gi")
try:
    w.start_daemon()
    sl, sl2 = w.spawn_sleeper(), w.spawn_sleeper()
    t, items = w.create(sl.pid, 300, name=LONG)
    check(t == REPLY | CREATE, "create: %r" % (items,))
    t, items = w.create(sl2.pid, 200, name="b")
    check(t == REPLY | CREATE, "create: %r" % (items,))

    r = w.cli("ls")
    check(r.returncode == 0, "ls: %d %s" % (r.returncode, r.stderr))
    lines = r.stdout.splitlines()
    head = [l for l in lines if l.lstrip().startswith("SLICE")]
    rows = [l for l in lines if LONG in l or " b " in l]
    check(len(head) == 1 and len(rows) == 2, "ls table:\n" + r.stdout)
    col = head[0].index("NAME")
    for row in rows:
        name = row[col:].split()[0]
        check(name in (LONG, "b"), "NAME column misaligned or cut: %r in\n%s" % (name, r.stdout))
    share = head[0].index("SHARE") + len("SHARE")
    check(all(row[:share].rstrip().endswith(("300m", "200m")) for row in rows),
          "SHARE column misaligned:\n" + r.stdout)
    check(not any(l != l.rstrip() for l in lines), "trailing spaces:\n" + r.stdout)

    doc = json.loads(w.cli("ls", "--json").stdout)
    s = [s for g in doc["gpus"] for s in g["slices"] if s["name"] == LONG][0]
    r = w.cli("ls", "-o", "wide")
    check(r.returncode == 0, "ls -o wide: %d %s" % (r.returncode, r.stderr))
    for title in ("KIND", "UID", "CREATED", "CONFIG", "SLICE DIR"):
        check(title in r.stdout, "ls -o wide has no %s column:\n%s" % (title, r.stdout))
    row = [l for l in r.stdout.splitlines() if LONG in l][0]
    check(s["config_path"] in row and s["slice_dir_path"] in row and " local " in row,
          "ls -o wide row %r lacks %s, %s" % (row, s["config_path"], s["slice_dir_path"]))
    check(r.stdout.count(LONG) == 1, "wide: %s" % r.stdout)

    r = w.cli("ls", "-o", "json")
    check(r.returncode == 0 and set(json.loads(r.stdout)) == {"gpus"}, "ls -o json: %r" % (r,))
    r = w.cli("ls", "--output=tall")
    check(r.returncode == 2 and "'tall' is not wide or json" in r.stderr, "-o tall: %r" % (r,))
    print("ok")
finally:
    w.cleanup()
