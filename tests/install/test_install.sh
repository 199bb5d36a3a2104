#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make install DESTDIR=$tmp PREFIX=... puts the programs, the shim, the
# systemd unit (its paths under PREFIX), the docs, the bash completion and
# the man pages (one per command, as the option tables say) where expected, and
# make uninstall with the same DESTDIR and PREFIX removes every file again.
# Usage: test_install.sh SOURCE_DIR BUILD_DIR
set -eu
src=$1
build=$2
tmp=$(mktemp -d /tmp/gs-install-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for prefix in /usr /opt/gpuslice; do
    dest=$tmp/root$(echo "$prefix" | tr / _)
    make -s -C "$src" install BUILD="$build" NOBUILD=1 DESTDIR="$dest" PREFIX="$prefix" \
        >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; fail "make install PREFIX=$prefix"; }
    for f in bin/gpuslice bin/gpusliced lib/gpuslice/libgpuslice.so \
             lib/systemd/system/gpusliced.service share/doc/gpuslice/daemon.md \
             share/doc/gpuslice/README.md share/bash-completion/completions/gpuslice \
             share/man/man1/gpuslice.1 share/man/man1/gpuslice-run.1; do
        [ -f "$dest$prefix/$f" ] || fail "PREFIX=$prefix: $prefix/$f not installed"
    done
    for c in $("$build/src/cli/gpuslice" __dump-options |
               /usr/bin/python3 -c 'import json, sys
print(" ".join(c["name"] for c in json.load(sys.stdin)["commands"] if not c["hidden"]))'); do
        [ -f "$dest$prefix/share/man/man1/gpuslice-$c.1" ] ||
            fail "PREFIX=$prefix: no man page for gpuslice $c"
    done
    grep -q '^complete -F _gpuslice gpuslice$' "$dest$prefix/share/bash-completion/completions/gpuslice" ||
        fail "PREFIX=$prefix: the installed completion does not complete gpuslice"
    [ -x "$dest$prefix/bin/gpuslice" ] && [ -x "$dest$prefix/bin/gpusliced" ] ||
        fail "programs not executable"
    unit=$dest$prefix/lib/systemd/system/gpusliced.service
    grep -q "^ExecStart=$prefix/bin/gpusliced --state-dir /run/gpuslice\$" "$unit" ||
        fail "PREFIX=$prefix: the unit does not start $prefix/bin/gpusliced: $(grep ExecStart= "$unit")"
    "$dest$prefix/bin/gpuslice" --version >/dev/null || fail "installed gpuslice does not run"
    "$dest$prefix/bin/gpusliced" --version >/dev/null || fail "installed gpusliced does not run"
    make -s -C "$src" uninstall BUILD="$build" DESTDIR="$dest" PREFIX="$prefix" \
        >"$tmp/uninstall.log" 2>&1 || { cat "$tmp/uninstall.log"; fail "make uninstall"; }
    left=$(find "$dest" ! -type d)
    [ -z "$left" ] || fail "PREFIX=$prefix: uninstall left $left"
    [ ! -d "$dest$prefix/lib/gpuslice" ] || fail "uninstall left $prefix/lib/gpuslice"
done
echo PASS
