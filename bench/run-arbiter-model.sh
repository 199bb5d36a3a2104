#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Compute-share accuracy of the arbiter in its simulated-device model (model
# figures, not end-to-end): bench/run-arbiter-model.sh BUILD_DIR
set -eu
build=${1:?usage: run-arbiter-model.sh BUILD_DIR}
exec "$build/bench/bench_arbiter_model"
