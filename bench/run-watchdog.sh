#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The watchdog's detection latency (p50/p99) and CPU cost per sample with 8
# GPUs x 64 processes on simgpu (512 idle processes, each with a context and
# memory on one GPU). Not a test: `make bench` (scripts/bench) runs it.
# Usage: bench/run-watchdog.sh BUILD_DIR [trials]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec /usr/bin/python3 "$here/bench_watchdog.py" "${1:-build}" "${2:-30}"
