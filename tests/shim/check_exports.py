#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The shim must export exactly the hooks of hooks.def plus dlsym, dlvsym,
dlopen and dlmopen (src/shim/shim_dlsym.c): a build
that exports nothing enforces nothing, and internals must not leak into the
host process. Reads the built library's dynamic symbol table (nm -D)."""
import re
import subprocess
import sys

lib, hooks_def = sys.argv[1], sys.argv[2]
want = {"dlsym", "dlvsym", "dlopen", "dlmopen"}
with open(hooks_def) as f:
    for line in f:
        m = re.match(r"^(CU|NVML)\(([A-Za-z0-9_]+),", line)
        if m:
            want.add(m.group(2))
if len(want) < 40:
    sys.exit(f"hooks.def lists only {len(want)} symbols: parse error?")

out = subprocess.run(["nm", "-D", "--defined-only", lib], check=True,
                     capture_output=True, text=True).stdout
got = {}
for line in out.splitlines():
    parts = line.split()
    if len(parts) >= 3:
        got[parts[2].split("@")[0]] = parts[1]

missing = sorted(want - set(got))
extra = sorted(set(got) - want)
not_func = sorted(s for s in want & set(got) if got[s] not in ("T", "i"))
if missing or extra or not_func:
    print(f"missing exports: {missing}")
    print(f"unexpected exports: {extra}")
    print(f"exports that are not functions: {not_func}")
    sys.exit(1)
print(f"libgpuslice.so exports exactly {len(want)} symbols")
