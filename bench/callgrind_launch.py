#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Instructions the shim adds to one cuLaunchKernel, from a callgrind profile.

usage: callgrind_launch.py CALLGRIND_OUT SHIM_LIB DRIVER_LIB [HOOK]

Reads a callgrind output file (positions: line, events: Ir) of a program
that launched through libgpuslice.so (SHIM_LIB) into the driver
(DRIVER_LIB, simgpu's libcuda.so.1) by HOOK (default cuLaunchKernel; also
cuLaunchKernelEx, cuGraphLaunch, ...) and prints one line:

  launches=N added=A fast=F gate_calls=G gate_each=E

  added  (the shim's HOOK and everything it ran, minus the driver's HOOK
         it called) / launches: the whole host cost
         the shim adds per launch in this run;
  fast   the same without the launches that took the hook's slow twin
         (slow_<HOOK>: into the gate proper, shim_gate_enter, when a
         lease changed, the queue was full or a wait for the next lease was
         due; the probe; start-up): what a launch under a held lease costs;
  gate_calls, gate_each  how many launches called those, and their mean
         instructions.

Under callgrind a program runs ~50x slower, so a lease (a few ms of real
time) covers ~50x fewer launches than natively and `added` overstates what
the gate proper costs per launch; `fast` does not depend on it. Exit status
1 with a message when the profile holds no such launch.
"""
import re
import sys

NAMED = re.compile(r"^\((\d+)\)(?: (.*))?$")
SLOW = {"shim_gate_enter", "shim_gate_after", "shim_init"}


def name(table, value):
    m = NAMED.match(value)
    if not m:
        return value
    if m.group(2) is not None:
        table[m.group(1)] = m.group(2)
    return table.get(m.group(1), value)


def parse(path):
    """Self cost per (object, function) and calls as (caller, callee, count, inclusive)."""
    obs, fns = {}, {}
    self_cost, calls = {}, []
    ob = fn = cob = cfn = None
    pending = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            key, _, value = line.partition("=")
            if line[0].isalpha() and _:
                if key == "ob":
                    ob = name(obs, value)
                elif key == "fn":
                    fn = name(fns, value)
                elif key == "cob":
                    cob = name(obs, value)
                elif key == "cfn":
                    cfn = name(fns, value)
                elif key == "calls":
                    pending = int(value.split()[0])
                continue
            if not (line[0].isdigit() or line[0] in "+-*"):
                continue
            parts = line.split()
            cost = int(parts[1]) if len(parts) > 1 else 0
            if pending is not None:
                calls.append(((ob, fn), (cob or ob, cfn), pending, cost))
                pending, cob = None, None
            else:
                self_cost[(ob, fn)] = self_cost.get((ob, fn), 0) + cost
    return self_cost, calls


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit("usage: callgrind_launch.py CALLGRIND_OUT SHIM_LIB DRIVER_LIB [HOOK]")
    path, shim, driver = sys.argv[1:4]
    hook = sys.argv[4] if len(sys.argv) == 5 else "cuLaunchKernel"
    self_cost, calls = parse(path)
    entry = (shim, hook)
    launches = sum(n for _, callee, n, _ in calls if callee == entry)
    if not launches:
        sys.exit(f"callgrind_launch: no call of {hook} in {shim} in {path}")
    # The hook and the parts the compiler split off it (.cold).
    mine = {(shim, hook), (shim, hook + ".cold")}
    slow_twin = (shim, "slow_" + hook)
    total = sum(self_cost.get(k, 0) for k in mine)
    real = slow = slow_calls = 0
    for caller, callee, n, cost in calls:
        if caller == slow_twin and callee == (driver, hook):
            real += cost  # inside the slow twin's inclusive cost, counted there
            slow -= cost
            continue
        if caller not in mine or callee in mine:
            continue  # a jump between the hook's own functions: their self costs count
        total += cost
        if callee == (driver, hook):
            real += cost
        elif callee == slow_twin or (callee[0] == shim and callee[1] in SLOW):
            slow += cost
            slow_calls += n
    added = (total - real) / launches
    fast = (total - real - slow) / launches
    each = slow / slow_calls if slow_calls else 0.0
    print(f"launches={launches} added={added:.1f} fast={fast:.1f} gate_calls={slow_calls} "
          f"gate_each={each:.0f}")


if __name__ == "__main__":
    main()
