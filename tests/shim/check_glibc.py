#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""libgpuslice.so is named in /etc/ld.so.preload of every container of a
slice: if it requires a glibc symbol version the container's glibc lacks,
EVERY process of the container fails to start. It must require nothing newer
than GLIBC_2.17 (the manylinux2014 baseline; src/shim/shim_glibc.h pins the
symbols whose default version is newer). The dynamic linker refuses a library
when a version it references (objdump -p, "Version References") is not
defined by the named file, and binds each undefined symbol (objdump -T) to a
definition of exactly its version: both lists must stop at 2.17.

Before glibc 2.34, dl* lived in libdl.so.2, pthread_* and sem_* in
libpthread.so.0, shm_*, timer_*, mq_*, aio_* in librt.so.1 (see MOVED): a
library that uses them must have those files in DT_NEEDED, or under an old
glibc its pinned references find no definition (linked against glibc >=
2.34, every version reference names libc.so.6, which defines every version
number; the dynamic linker then looks the symbol up by name and version in
all loaded objects).

Usage: check_glibc.py LIB SANITIZE   (SANITIZE: 1 for an ASan build, which
is exempt: the sanitizer runtimes need a new glibc). Exit 77: skipped."""
import re
import shutil
import subprocess
import sys

MAX = (2, 17)
SKIP = 77
# Symbols in libc only since glibc 2.34 (2.32 for pthread_sigmask), with the
# file that held them before; those of librt only up to the version given
# (clock_gettime & co. are libc's at GLIBC_2.17).
MOVED = [
    ("libdl.so.2", r"dl(open|mopen|close|sym|vsym|error|addr1?|info|iterate_phdr_?)", None),
    ("libpthread.so.0", r"(__)?pthread_\w+|sem_\w+", None),
    ("librt.so.1", r"shm_(open|unlink)|timer_\w+|mq_\w+|aio_\w+|lio_listio(64)?", None),
    ("librt.so.1", r"clock_(getres|gettime|settime|nanosleep|getcpuclockid)", (2, 17)),
    ("libutil.so.1", r"openpty|forkpty|login(_tty)?|logout|logwtmp", None),
    ("libanl.so.1", r"getaddrinfo_a|gai_(cancel|error|suspend)", None),
]

lib, sanitize = sys.argv[1], sys.argv[2]
if sanitize.upper() in ("1", "ON", "TRUE", "YES"):
    print("skipped: an ASan build (GS_SANITIZE=ON) needs the sanitizer "
          "runtimes' newer glibc anyway; the check applies to the normal build")
    sys.exit(SKIP)
if not shutil.which("objdump"):
    print("skipped: objdump (binutils) is not installed")
    sys.exit(SKIP)


def objdump(flag):
    return subprocess.run(["objdump", flag, lib], check=True,
                          capture_output=True, text=True).stdout


def number(ver):
    """(x, y[, z]) of GLIBC_x.y[.z]; None for GLIBC_PRIVATE and the like."""
    m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)*)", ver)
    return tuple(int(x) for x in m.group(1).split(".")) if m else None


def too_new(ver):
    """True when ver is newer than MAX, or is not a numbered release
    (GLIBC_PRIVATE: no stable ABI at all)."""
    n = number(ver)
    return n is None or n > MAX


# Undefined dynamic symbols and the version each one requires, e.g.
# "0000000000000000      DF *UND*  0000000000000000 (GLIBC_2.34) dlopen".
bad_syms, used = [], {}
for line in objdump("-T").splitlines():
    if "*UND*" not in line:
        continue
    m = re.search(r"\(?(GLIBC_[A-Za-z0-9_.]+)\)?\s+(\S+)$", line)
    if not m:
        continue
    ver, sym = m.group(1), m.group(2)
    used[sym] = ver
    if too_new(ver):
        bad_syms.append(f"{sym}@{ver}")

# The version needs (Verneed): "required from libc.so.6:" then one line per
# version, "0x06969194 0x00 10 GLIBC_2.14".
bad_refs, needed, refs, frm = [], [], 0, None
in_refs = False
for line in objdump("-p").splitlines():
    m = re.match(r"\s*NEEDED\s+(\S+)", line)
    if m:
        needed.append(m.group(1))
    if line.startswith("Version References:"):
        in_refs = True
        continue
    if not in_refs:
        continue
    m = re.match(r"\s*required from (\S+):", line)
    if m:
        frm = m.group(1)
        continue
    m = re.match(r"\s*0x[0-9a-f]+\s+0x[0-9a-f]+\s+\d+\s+(\S+)", line)
    if m:
        refs += 1
        if m.group(1).startswith("GLIBC_") and too_new(m.group(1)):
            bad_refs.append(f"{m.group(1)} (from {frm})")
    elif line.strip() and not line.startswith(" "):
        in_refs = False

missing = {}
for file, pattern, below in MOVED:
    for sym, ver in sorted(used.items()):
        n = number(ver)
        if re.fullmatch(pattern, sym) and (below is None or (n and n < below)) \
                and file not in needed:
            missing.setdefault(file, []).append(sym)

if not used or not refs:
    sys.exit(f"{lib}: no versioned glibc symbols or version references read: "
             "objdump output not understood?")
if bad_syms or bad_refs or missing:
    limit = "GLIBC_%d.%d" % MAX
    for s in sorted(bad_syms):
        print(f"symbol needs a glibc newer than {limit}: {s}")
    for r in bad_refs:
        print(f"version reference newer than {limit}: {r}")
    for file, syms in missing.items():
        print(f"not in DT_NEEDED: {file}, which held {', '.join(syms)} before glibc 2.34 "
              "(link it without --as-needed: src/shim/CMakeLists.txt)")
    if bad_syms or bad_refs:
        print("pin each symbol to its oldest version in src/shim/shim_glibc.h "
              "(objdump -T /lib/*/libc.so.6 lists them), or avoid it")
    sys.exit(1)
print(f"{lib}: {len(used)} glibc symbols, {refs} version references, "
      f"none newer than GLIBC_{MAX[0]}.{MAX[1]}; needs {', '.join(needed)}")
