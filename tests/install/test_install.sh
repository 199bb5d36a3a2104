#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# make install DESTDIR=$tmp PREFIX=... puts the programs, the shim, the
# systemd unit (its paths under PREFIX) and the docs where expected, and
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
             share/doc/gpuslice/README.md; do
        [ -f "$dest$prefix/$f" ] || fail "PREFIX=$prefix: $prefix/$f not installed"
    done
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
