# SPDX-License-Identifier: Apache-2.0
"""gpuslice-extender against a real node: gpusliced --sim --kubelet
--report-node on two simulated GPUs writes its report to the stand-in API
server (tests/kube/apiserver_sim.py), the kubelet's device manager
(tests/kube/device_manager.py) admits the pods the extender sends there,
and the extender reads the Node object as the API server stores it. Pods
are decided one after the other without waiting for reports (the record
covers the gap): every pod the extender accepts is admitted by the node
(no Allocate fails), and the one that needs 700 units when the node's free
units are split 100 + 500 is refused with the largest free share.

Skips (77) where the stand-in API server cannot run (no openssl, Node or
kubernetes-models), as the kube tests do."""
import copy
import json
import os
import sys

from device_manager import DeviceManager, Pod
from kubelet_sim import GIB, Node, check, wait_for
from test_kubelet import FAST, start, with_api

from k8s_fixtures import args, container, pod
from test_extender import Extender, passed

SIZES = [300, 600, 500, 700, 400, 100, 100, 100]
# What the node's binpack makes of them on 2 x 1000: 300 and 600 on GPU 0,
# 500 on GPU 1; 700 fits neither (100, 500 free); 400 on GPU 1; 100 on each.
ACCEPTED = [True, True, True, False, True, True, True, False]


def node_object(api):
    with api.lock:
        return copy.deepcopy(api.store["nodes"][(None, "node-a")])


def report_of(api):
    a = node_object(api)["metadata"].get("annotations") or {}
    return json.loads(a["gpuslice.io/gpus"]) if "gpuslice.io/gpus" in a else None


def scenario(node, dm):
    api = with_api(node)
    node.extra_args += ["--report-node", "--node-name", "node-a"]
    ext = None
    try:
        start(node, dm)
        wait_for(lambda: report_of(api), 15, "the first report")
        ext = Extender()
        got, failed = [], []
        for k, size in enumerate(SIZES):
            p = pod("e2e-%d" % k, containers=[container("api", size)])
            st, res = ext.post("filter", args(p, [node_object(api)]))
            check(st == 200, "filter: %s %s" % (st, res))
            if not passed(res):
                got.append(False)
                why = res["FailedNodes"].get("node-a", "")
                print("pod %d (%dm) refused: %s" % (k, size, why))
                if size == 700:
                    check(why.startswith("largest free share 500m on one GPU; the pod needs "
                                         "700m"), why)
                continue
            st, prio = ext.post("prioritize", args(p, [node_object(api)]))
            check(prio == [{"Host": "node-a", "Score": 10}], "prioritize: %s" % prio)
            got.append(True)
            try:
                dm.admit(Pod(p["metadata"]["uid"], app=[("api", size)], name=p["metadata"]["name"]))
            except Exception as e:  # an Allocate refused: the over-commit
                failed.append((k, size, repr(e)))
        check(not failed, "the node refused pods the extender accepted: %s" % failed)
        check(got == ACCEPTED, "accepted %s, expected %s" % (got, ACCEPTED))
        wait_for(lambda: [g["milli_free"] for g in report_of(api)["gpus"]] == [0, 0], 15,
                 "the node full in its report")
    finally:
        if ext:
            ext.stop()
        api.stop()


def main():
    if not os.environ.get("GS_KUBE_DAEMON"):
        print("SKIP: needs gpusliced (GS_KUBE_DAEMON)")
        sys.exit(77)
    node = Node(gpus=(("GPU-sim-0", 16 * GIB), ("GPU-sim-1", 16 * GIB)), extra_args=list(FAST))
    node.kubelet.start()
    ok = False
    try:
        scenario(node, DeviceManager(node))
        ok = True
        print("PASS node")
    finally:
        node.close(ok)


if __name__ == "__main__":
    main()
