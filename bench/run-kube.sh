#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Device plugin benchmark: ListAndWatch size and Allocate latency, 8 GPUs x
# 1000 units. Usage: bench/run-kube.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
if [ ! -x "$build/src/kube/gpuslice-kubelet-plugin" ] || [ ! -e "$build/tests/kube/py/deviceplugin_v1beta1_pb2.py" ]; then
  cmake --build "$build" --target gpuslice-kubelet-plugin kube_test_proto >/dev/null
fi
exec /usr/bin/python3 "$here/bench_kube.py" "$build"
