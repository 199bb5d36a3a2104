# SPDX-License-Identifier: Apache-2.0
"""--json of the read commands carries its units in the key names: every
number of `gpuslice events --json`, `top --json` and `ls --json` is a count
or id (pid, seq, index...) or has a unit in its name (_bytes, _milli,
_ratio, _ms, _seconds...); ls's figures are the slice's (share, cap, its
config and directory) and the GPU's; a slice (cap 1 GiB)
whose child holds 1.5 GiB without the shim gives a memory_over_cap event
whose memory_used_bytes is simgpu-smi's figure for that process and whose
memory_limit_bytes is the cap; time_unix_ms is now; gpu_uuid the slice's GPU."""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from wdtest import *  # noqa

GIB = 1 << 30
# Numbers without a unit: identities and counts.
UNITLESS = {"index", "gpu_index", "pid", "uid", "seq", "slices", "memory_refusals"}
UNIT = re.compile(r"(^|_)(bytes|milli|ratio|ms|seconds)(_|$)")


def numbers(doc, path=""):
    """(key path, key, value) of every number in a JSON document."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            if isinstance(v, bool):
                continue
            if isinstance(v, (int, float)) or (v is None and not k.endswith(("name", "id"))):
                yield path + "." + k, k, v
            else:
                yield from numbers(v, path + "." + k)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from numbers(v, "%s[%d]" % (path, i))


def check_units(what, doc):
    for where, k, v in numbers(doc):
        if v is None:
            continue
        check(k in UNITLESS or UNIT.search(k),
              "%s: %s = %r has no unit in its name" % (what, where, v))


w = World("json-units", devices=2, memory="8Gi")
a = None
try:
    hold = need_hold(w)
    w.start_daemon("--overuse-grace", "60000", "--watch-interval", "250")
    a = Holder(w, 'env -u LD_PRELOAD -u GPUSLICE_CONFIG "$HOLD" 1610612736 > "$DIR/bad.out" & '
                  'wait')
    t, items = w.create(a.p.pid, 300, memory=GIB, name="units")
    check(t == REPLY | CREATE, "create: %r" % (items,))
    sid, gpu = get(items, "slice"), get(items, "slice_gpu").split(",", 1)[1]
    a.go(items)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not os.path.exists(os.path.join(w.dir, "bad.out")):
        time.sleep(0.05)
    raw = wait_event(w, lambda e: e["reason"] == "memory_over_cap" and e["slice"] == sid, 5,
                     "memory_over_cap")
    truth = smi_used(w, raw["pid"])
    check(truth and truth > GIB, "simgpu-smi: pid %d holds %r" % (raw["pid"], truth))

    r = w.cli("events", "--json")
    check(r.returncode == 0, "events --json: %d %s" % (r.returncode, r.stderr))
    evs = json.loads(r.stdout)
    check_units("events --json", evs)
    e = [e for e in evs if e["reason"] == "memory_over_cap" and e["slice"] == sid][0]
    want = {"seq", "time_unix_ms", "reason", "action", "pid", "slice", "gpu_uuid",
            "memory_used_bytes", "memory_limit_bytes", "memory_books_bytes", "gpu_time_ratio",
            "gpu_milli", "msg"}
    check(set(e) == want, "event keys %r, want %r" % (sorted(e), sorted(want)))
    check(e["memory_used_bytes"] == truth and e["memory_limit_bytes"] == GIB and
          e["pid"] == raw["pid"] and e["gpu_uuid"] == gpu,
          "event figures %r (simgpu-smi: %d bytes)" % (e, truth))
    check(abs(e["time_unix_ms"] / 1000 - time.time()) < 600, "time_unix_ms: %r" % e)
    check(e["gpu_time_ratio"] is None or 0 <= e["gpu_time_ratio"] <= 1, "ratio: %r" % e)

    r = w.cli("top", "--json")
    check(r.returncode == 0, "top --json: %d %s" % (r.returncode, r.stderr))
    top = json.loads(r.stdout)
    check_units("top --json", top)
    s = [s for s in top["slices"] if s["id"] == sid][0]
    check(s["memory_limit_bytes"] == GIB and s["share_configured_milli"] == 300,
          "top figures: %r" % s)

    r = w.cli("ls", "--json")
    check(r.returncode == 0, "ls --json: %d %s" % (r.returncode, r.stderr))
    ls = json.loads(r.stdout)
    check_units("ls --json", ls)
    g = [g for g in ls["gpus"] if g["uuid"] == gpu][0]
    check(set(g) >= {"index", "uuid", "name", "healthy", "memory_total_bytes",
                     "memory_free_bytes", "context_overhead_bytes", "share_free_milli", "slices"},
          "ls gpu keys: %r" % sorted(g))
    check(g["memory_total_bytes"] == 8 * GIB and g["context_overhead_bytes"] == 256 << 20 and
          g["share_free_milli"] == 700, "ls gpu figures: %r" % g)
    s = [s for s in g["slices"] if s["id"] == sid][0]
    check(set(s) >= {"id", "name", "gpu_milli", "whole_gpus", "memory_limit_bytes",
                     "memory_used_bytes", "policy", "overuse", "gpu_time_ratio", "kind", "pid",
                     "uid", "created_unix_seconds", "config_path", "slice_dir_path"},
          "ls slice keys: %r" % sorted(s))
    check(s["gpu_milli"] == 300 and s["memory_limit_bytes"] == GIB and s["name"] == "units" and
          s["whole_gpus"] is False and abs(s["created_unix_seconds"] - time.time()) < 600 and
          os.path.isdir(s["slice_dir_path"]) and os.path.isfile(s["config_path"]),
          "ls slice figures: %r" % s)
    check(s["gpu_time_ratio"] is None or 0 <= s["gpu_time_ratio"] <= 1, "ratio: %r" % s)
    print("ok")
finally:
    if a:
        kill_tree(a.p.pid)
    w.cleanup()
