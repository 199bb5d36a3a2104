#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Stand-in for the user's own program that the docs' examples name
(./serve-model, ./serve, ./my-driver-api-program, ./my-program): a small
driver-API program. It initialises CUDA, makes the primary context current,
allocates 64 MiB and reads cuMemGetInfo. In a slice (GPUSLICE_CONFIG set) it
also checks that the memory it is shown is the slice's cap, not the GPU's, so
an example whose shim is not really loaded (a wrong LD_PRELOAD path) fails.
Exit status: 0 ok, 3 no driver, 4 a CUDA call failed, 5 not capped."""
import ctypes
import os
import sys

name = os.path.basename(sys.argv[0])


def die(code, msg):
    print("%s: %s" % (name, msg), file=sys.stderr)
    sys.exit(code)


try:
    cu = ctypes.CDLL("libcuda.so.1")
except OSError as e:
    die(3, "no CUDA driver: %s" % e)


def ck(r, what):
    if r != 0:
        die(4, "%s failed: CUDA error %d" % (what, r))


ck(cu.cuInit(0), "cuInit")
dev = ctypes.c_int(0)
ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
ctx = ctypes.c_void_p()
ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
ck(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
ptr = ctypes.c_uint64(0)
ck(cu.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(64 << 20)), "cuMemAlloc (64 MiB)")
free, total = ctypes.c_size_t(0), ctypes.c_size_t(0)
ck(cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
conf = os.environ.get("GPUSLICE_CONFIG")
if conf:
    limit = None
    try:
        with open(conf) as f:
            for line in f:
                k, _, v = line.partition("=")
                if k.strip() == "memory_limit":
                    limit = int(v.strip())
    except OSError as e:
        die(5, "cannot read the slice config %s: %s" % (conf, e))
    if limit is None or total.value > limit:
        die(5, "in a slice (%s, memory_limit %s) but shown %d bytes of device memory: "
            "the shim is not in effect" % (conf, limit, total.value))
ck(cu.cuMemFree_v2(ptr), "cuMemFree")
print("%s %s: CUDA ok, device memory %d bytes, %d free" % (name, " ".join(sys.argv[1:]),
                                                           total.value, free.value))
