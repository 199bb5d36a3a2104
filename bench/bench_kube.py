# SPDX-License-Identifier: Apache-2.0
"""Device plugin benchmark: ListAndWatch message size and Allocate latency
for a node of 8 GPUs x 1000 units, against the real plugin binary over its
unix socket (a grpcio client plays the kubelet). Figures, then verdicts."""
import os
import statistics
import sys
import time

BUILD = sys.argv[1]
sys.path[:0] = [os.path.join(BUILD, "tests/kube/py"),
                os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/kube")]
os.environ.setdefault("GS_KUBE_PLUGIN", os.path.join(BUILD, "src/kube/gpuslice-kubelet-plugin"))

from kubelet_sim import GIB, Node, ids  # noqa: E402

LIMIT = 4 * 1024 * 1024


def main():
    gpus = [("GPU-%08x-bench-0000-0000-%012d" % (i, i), 80 * GIB) for i in range(8)]
    node = Node(gpus=gpus)
    node.kubelet.start()
    try:
        t0 = time.monotonic()
        node.start_plugin()
        c = node.client()
        q = c.watch()
        m = q.get(timeout=10)
        first = time.monotonic() - t0
        size = m.ByteSize() + 5  # gRPC frame: flag + length
        print("ListAndWatch: %d devices, %d bytes per message (%.1f%% of the kubelet's 4 MiB), "
              "%.0f ms from start to first list" % (len(m.devices), size, 100.0 * size / LIMIT,
                                                     first * 1000))
        lat = []
        for k in range(400):  # 400 slices of 10 units over 8 GPUs
            g, start = divmod(k * 10, 1000)
            t = time.perf_counter()
            c.allocate(ids(g % 8, start, 10))
            lat.append(time.perf_counter() - t)
        lat.sort()
        p50 = statistics.median(lat) * 1000
        p99 = lat[int(len(lat) * 0.99) - 1] * 1000
        t = time.perf_counter()
        c.allocate(ids(7, 0, 1000))  # a whole GPU: 1000 ids in one call
        whole = (time.perf_counter() - t) * 1000
        print("Allocate (10 units, 400 calls, record fsync'ed each time): p50 %.2f ms, "
              "p99 %.2f ms; whole GPU (1000 ids): %.2f ms" % (p50, p99, whole))
        c.close()
    finally:
        node.close(True)
    print("VERDICT listandwatch_size: %d bytes (target < 1 MiB, limit 4 MiB): %s"
          % (size, "PASS" if size < (1 << 20) else "FAIL"))
    print("VERDICT allocate_p99: %.2f ms (target < 50 ms): %s"
          % (p99, "PASS" if p99 < 50 else "FAIL"))


if __name__ == "__main__":
    main()
