# SPDX-License-Identifier: Apache-2.0
"""The device plugin under the kubelet's real behaviour (device_manager.py):
init containers, kubelet restarts, node reboots, daemon restarts, local
slices, a lost ListAndWatch stream. One scenario per ctest:
python3 test_kubelet.py NAME. Needs gpusliced on simgpu (GS_KUBE_DAEMON)."""
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request

import container_sim
from apiserver_sim import ApiServerSim, Unavailable
from device_manager import DeviceManager, Pod, answer_envs, answer_mounts
from kubelet_sim import GIB, Node, PodResources, check, fail, read_conf, wait_for

FAST = ["--pod-poll-ms", "100", "--release-grace", "1"]


def ledger_kube(node):
    """Kubernetes slices of the ledger on disk: id -> fields."""
    out = {}
    path = os.path.join(node.state_dir, "ledger")
    if not os.path.exists(path):
        return out
    for line in open(path):
        if line.startswith("slice ") and " kind=k8s" in line:
            f = dict(t.split("=", 1) for t in line.split()[1:])
            out[f["id"]] = f
    return out


def polls(node, n=6):
    calls = node.pods.calls
    wait_for(lambda: node.pods.calls >= calls + n, 15, "%d PodResources polls" % n)


def start(node, dm):
    node.pods = PodResources(node.pr_sock)
    node.start_plugin()
    dm.connect()


def t_init_same(node, dm):
    """An init container and the app container after it, same size: the
    kubelet hands the init container's units to the app container. Both get
    the one slice; nothing is freed before the init container runs, and
    the slice stays while only the app container is listed."""
    start(node, dm)
    out = dm.admit(Pod("pod-a", init=[("setup", 300)], app=[("serve", 300)]))
    ids_i, ans_i = out["setup"]
    ids_a, ans_a = out["serve"]
    check(set(ids_i) == set(ids_a), "the kubelet reused the init container's units")
    s_i, s_a = answer_envs(ans_i)["GPUSLICE_SLICE"], answer_envs(ans_a)["GPUSLICE_SLICE"]
    check(s_i == s_a, "one slice for both containers: %s, %s" % (s_i, s_a))
    conf = answer_mounts(ans_i)["/run/gpuslice/slice.conf"][0]
    check(os.path.isfile(conf), "the init container's config is still there: %s" % conf)
    polls(node)
    time.sleep(1.2)  # past the grace period
    polls(node)
    check(os.path.isfile(conf) and list(ledger_kube(node)) == [s_i], "kept while the pod runs")
    dm.remove("pod-a")
    wait_for(lambda: not ledger_kube(node), 10, "the pod's slice to be freed once it is gone")
    check(not os.path.exists(conf), "its config removed")


def t_init_bigger(node, dm):
    """The init container asks for more than the app container: the pod's
    effective request is the init container's; the app container shares
    its slice."""
    start(node, dm)
    out = dm.admit(Pod("pod-b", init=[("warmup", 500)], app=[("serve", 300)]))
    s_i = answer_envs(out["warmup"][1])["GPUSLICE_SLICE"]
    s_a = answer_envs(out["serve"][1])["GPUSLICE_SLICE"]
    check(s_i == s_a, "the app container shares the init container's slice")
    ks = ledger_kube(node)
    check(list(ks) == [s_i] and ks[s_i]["milli"] == "500", "one 500m slice: %s" % ks)
    polls(node)
    time.sleep(1.2)
    polls(node)
    check(list(ledger_kube(node)) == [s_i], "kept: the app container holds units of it")


def t_init_smaller(node, dm):
    """The app container asks for more than the init container before it:
    the kubelet reuses the init container's units and adds more; the pod's
    slice grows in place (same id, same config path) before anything runs."""
    start(node, dm)
    out = dm.admit(Pod("pod-c", init=[("setup", 300)], app=[("serve", 500)]))
    s_i = answer_envs(out["setup"][1])["GPUSLICE_SLICE"]
    s_a = answer_envs(out["serve"][1])["GPUSLICE_SLICE"]
    check(s_i == s_a, "grown, not replaced: %s, %s" % (s_i, s_a))
    conf = answer_mounts(out["setup"][1])["/run/gpuslice/slice.conf"][0]
    check(read_conf(conf)["compute_milli"] == "500", "the config says 500m: %s" % read_conf(conf))
    check(ledger_kube(node)[s_i]["milli"] == "500", "the ledger says 500m")
    # A sidecar (restartable init container) keeps its own units.
    out = dm.admit(Pod("pod-d", init=[("proxy", 100, True)], app=[("serve", 200)]))
    s_p = answer_envs(out["proxy"][1])["GPUSLICE_SLICE"]
    s_s = answer_envs(out["serve"][1])["GPUSLICE_SLICE"]
    check(s_p != s_s, "a sidecar and the app container: two slices")


def t_kubelet_restart(node, dm):
    """After a kubelet restart PodResources lists none of the running pods
    until the kubelet's sources are ready; the checkpoint still lists them,
    so no slice is freed. Once the pod is gone for real, it is."""
    start(node, dm)
    dm.admit(Pod("pod-e", app=[("serve", 300)]))
    dm.admit(Pod("pod-f", init=[("setup", 200)], app=[("serve", 200)]))
    before = ledger_kube(node)
    check(len(before) == 2, "two pod slices: %s" % before)
    polls(node)  # the pods run: PodResources has listed them
    dm.restart(listed=())
    node.kubelet.wait_registration()
    dm.connect()
    polls(node)
    time.sleep(1.5)
    polls(node, 10)
    check(ledger_kube(node).keys() == before.keys(), "nothing freed on an incomplete List")
    dm.sources_ready()
    dm.remove("pod-e")
    dm.admit(Pod("pod-g", app=[("serve", 100)]))  # the kubelet writes its checkpoint again
    wait_for(lambda: len(ledger_kube(node)) == 2 and
             any(v["milli"] == "100" for v in ledger_kube(node).values()), 10,
             "pod-e's slice freed, pod-f's and pod-g's kept: %s" % ledger_kube(node))
    # A stale checkpoint (one the kubelet wrote before pod-z ended, as
    # after a crash of both) lists a slice the plugin freed: it stays freed
    # across a daemon restart, its id being one the node had handed out.
    dm.admit(Pod("pod-z", app=[("serve", 400)]))
    zid = [k for k, v in ledger_kube(node).items() if v["milli"] == "400"]
    check(len(zid) == 1, "pod-z's slice: %s" % ledger_kube(node))
    stale = open(dm.checkpoint).read()
    check(any(e["PodUID"] == "pod-z" for e in json.loads(stale)["Data"]["PodDeviceEntries"]),
          "the checkpoint lists pod-z")
    dm.remove("pod-z")
    wait_for(lambda: zid[0] not in ledger_kube(node), 10, "pod-z's slice freed")
    kept = ledger_kube(node).keys()
    reboot(node, dm, lose_state=False)
    with open(dm.checkpoint, "w") as f:
        f.write(stale)
    node.kubelet.start()
    node.start_plugin()
    check(ledger_kube(node).keys() == kept,
          "after a restart: %s, want %s (pod-z's %s not back)" % (ledger_kube(node).keys(),
                                                                  kept, zid[0]))


def reboot(node, dm, lose_state):
    """Power off: every process dies, /run is empty again; the kubelet's
    checkpoint (and, unless lose_state, the daemon's state on disk) stays."""
    dm.client.close()
    dm.client = None
    node.proc.kill()
    node.proc.wait()
    node.proc = None
    node.kubelet.stop()
    shutil.rmtree(os.path.dirname(node.daemon_sock), ignore_errors=True)
    for f in os.listdir(node.plugin_dir):
        p = os.path.join(node.plugin_dir, f)
        if not f.startswith("kubelet_internal_checkpoint"):
            os.unlink(p)
    if lose_state:
        shutil.rmtree(node.state_dir)
    subprocess.run([node.smi_bin, "--reset"], env=node.env, capture_output=True)


def t_reboot(node, dm):
    """After a node reboot the kubelet re-admits its running pods from its
    checkpoint without calling Allocate, with the mounts it cached. Every
    such pod must have its slice, files and ledger entry back before the
    plugin registers; new slices never reuse an old id."""
    start(node, dm)
    out = dm.admit(Pod("pod-h", init=[("setup", 300)], app=[("serve", 300)]))
    dm.admit(Pod("pod-i", app=[("serve", 1000)]))
    ans = out["serve"][1]
    sid = answer_envs(ans)["GPUSLICE_SLICE"]
    cached = answer_mounts(ans)
    for lose in (False, True):
        reboot(node, dm, lose_state=lose)
        seen = {}

        def at_register():
            seen["ledger"] = ledger_kube(node)
            seen["files"] = all(os.path.exists(h) for c, (h, _) in cached.items()
                                if c != "/usr/lib/gpuslice/libgpuslice.so")
        node.kubelet.on_register = at_register
        node.kubelet.start()
        node.start_plugin()
        check(sid in seen["ledger"] and seen["ledger"][sid]["milli"] == "300",
              "lose_state=%s: slice %s back before registering: %s" % (lose, sid, seen))
        check(any(v["milli"] == "1000" for v in seen["ledger"].values()),
              "the whole-GPU pod's slice too: %s" % seen["ledger"])
        check(seen["files"], "lose_state=%s: every cached mount's host path exists" % lose)
        dm.connect()
        new = dm.admit(Pod("pod-new-%d" % lose, app=[("serve", 100)]))
        nid = answer_envs(new["serve"][1])["GPUSLICE_SLICE"]
        check(nid not in (sid,) and nid not in seen["ledger"], "a new id: %s" % nid)
        dm.remove("pod-new-%d" % lose)


def t_local_advertised(node, dm):
    """Units that local `gpuslice run` slices hold are not advertised as
    available: the kubelet's allocatable drops by them."""
    start(node, dm)
    check(len(dm.healthy) == 1000, "1000 healthy units at first: %d" % len(dm.healthy))
    local = subprocess.Popen([os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice"), "run",
                              "--sim", "--gpu", "600m", "--", "sleep", "30"], env=node.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(dm.healthy) == 400, 15,
                 "the advertised list to drop to 400 healthy units")
        out = dm.admit(Pod("pod-j", app=[("serve", 300)]))
        check(len(out["serve"][0]) == 300, "a pod fits beside the local slice")
    finally:
        local.terminate()
        local.wait(timeout=10)
    wait_for(lambda: len(dm.healthy) == 1000, 15,
             "all 1000 units again once the local slice is gone")


def t_stream_end(node, dm):
    """The kubelet's ListAndWatch stream ends while kubelet.sock stays: the
    plugin registers again (else the resource disappears after 5 minutes)."""
    start(node, dm)
    dm.client.close()
    dm.client = None
    req, _ = node.kubelet.wait_registration(timeout=10)
    check(req.resource_name == "gpuslice.io/gpu-milli", "registered again")


def t_topology(node, dm):
    """Device.topology names each GPU's NUMA node, read from sysfs for the
    GPU's PCI address (simgpu's GPU i is at 0000:(0x10+i):00.0); a device
    with no NUMA node (-1) carries no topology."""
    start(node, dm)
    check(dm.numa.get("gpu0-u0") == 1 and dm.numa.get("gpu0-u999") == 1, "GPU 0 on node 1")
    check(dm.numa.get("gpu1-u5") == -1, "GPU 1 has no NUMA node: %s" % dm.numa.get("gpu1-u5"))


def t_evict(node, dm):
    """--overuse-policy evict on the device-plugin path: a container that
    goes around the shim and holds 8 GiB on a 200m slice (cap 3.2 GiB) is
    evicted through the Eviction API, its pod found through PodResources;
    nothing is killed meanwhile."""
    if not container_sim.can_unshare():
        print("SKIP: unshare -m is not permitted here")
        sys.exit(77)
    api = with_api(node)
    try:
        uid = api.put_pod("serving", "embedder-5d8")["metadata"]["uid"]
        start(node, dm)
        out = dm.admit(Pod(uid, app=[("model", 200)], ns="serving", name="embedder-5d8"))
        ans = out["model"][1]
        polls(node, 3)  # PodResources has listed the container
        env = dict(node.env)
        env.update(answer_envs(ans))
        env.update(LD_PRELOAD="", LD_LIBRARY_PATH=os.environ["GS_SIM_LIBDIR"])
        mounts = [(h, c, ro) for c, (h, ro) in answer_mounts(ans).items()]
        hog = container_sim.run(node.tmp, mounts, env, [os.path.join(
            os.environ["GS_BUILD_DIR"], "tests/daemon/gs_alloc_hold"), str(8 * GIB)])
        try:
            check(hog.stdout.readline().strip() == "ready", "the hog allocated")
            wait_for(lambda: api.evictions, 20, "an eviction")
            check(api.evictions == [("serving", "embedder-5d8")], "the pod: %s" % api.evictions)
            time.sleep(1)
            check(hog.poll() is None, "not killed while its eviction runs")
        finally:
            hog.kill()
            hog.wait()
        log = open(node.log).read()
        check("pod serving/embedder-5d8 evicted" in log, "the daemon says so")
        # /metrics names the pod of the slice (learnt from PodResources).
        port = re.search(r"metrics: listening on 127\.0\.0\.1:(\d+)", log).group(1)
        text = urllib.request.urlopen("http://127.0.0.1:%s/metrics" % port, timeout=10).read()
        line = [ln for ln in text.decode().splitlines()
                if ln.startswith("gpuslice_slice_info{")]
        check(line and 'namespace="serving"' in line[0] and 'pod="embedder-5d8"' in line[0] and
              'container="model"' in line[0], "the pod's labels: %s" % line)
    finally:
        api.stop()


def with_api(node):
    """The stand-in API server with this node's Node, and the daemon's
    --kubeconfig for it; skips the test where it cannot run."""
    api = ApiServerSim(os.path.join(node.tmp, "api"), os.environ["GS_NPM_DIR"])
    os.makedirs(api.workdir)
    try:
        api.start()
    except Unavailable as e:
        print("SKIP: %s" % e)
        sys.exit(77)
    api.put_node("node-a")
    kc = api.kubeconfig(os.path.join(node.tmp, "kubeconfig"), token_file=api.token_file)
    node.extra_args += ["--kubeconfig", kc]
    return api


def t_report(node, dm):
    """--report-node: the GPUs' free share and memory after every slice
    (device plugin and local) as the Node's annotation gpuslice.io/gpus,
    validated by the stand-in; the generation moves with the content; a
    failing API server is retried."""
    api = with_api(node)
    node.extra_args += ["--report-node", "--node-name", "node-a"]
    try:
        start(node, dm)

        def report():
            a = (api.store["nodes"][(None, "node-a")]["metadata"].get("annotations") or {})
            return json.loads(a["gpuslice.io/gpus"]) if "gpuslice.io/gpus" in a else None

        wait_for(report, 15, "the first report")
        r0 = report()
        check([g["milli_free"] for g in r0["gpus"]] == [1000, 1000], "all free: %s" % r0)
        g0 = r0["gpus"][0]
        check(g0["uuid"] == node.uuids[0] and g0["healthy"] is True and
              g0["memory_free"] == g0["memory_total"] == 16 * GIB, "GPU 0: %s" % g0)
        check(re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", r0["time"]), r0["time"])
        dm.admit(Pod("pod-r", app=[("serve", 300)]))
        wait_for(lambda: sorted(g["milli_free"] for g in report()["gpus"]) == [700, 1000], 15,
                 "the pod's 300 units in the report")
        # The pod is listed by uid (the kubelet's checkpoint names it) once
        # PodResources has shown its container.
        wait_for(lambda: report().get("pods") == ["pod-r"], 15,
                 "the pod's uid in the report (%s)" % report())
        check(r0.get("pods") == [], "no pod at first: %s" % r0.get("pods"))
        r1 = report()
        check(r1["generation"] > r0["generation"], "the generation moved: %s" % r1)
        # The API server fails for a while: the report is written once it works.
        api.inject("/api/v1/nodes/node-a", count=6, method="PATCH", status=503)
        local = subprocess.Popen([os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice"),
                                  "run", "--sim", "--gpu", "200m", "--", "sleep", "60"],
                                 env=node.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: sum(g["milli_free"] for g in report()["gpus"]) == 1500, 40,
                     "the local slice in the report after the failures")
            check(report()["generation"] > r1["generation"], "moved again")
        finally:
            local.terminate()
            local.wait(timeout=10)
        check("(retrying)" in open(node.log).read(), "the failure was logged")
    finally:
        api.stop()


def fake_sysfs(node):
    root = os.path.join(node.tmp, "sys")
    for bus, numa in ((0x10, "1"), (0x11, "-1")):
        d = os.path.join(root, "bus/pci/devices/0000:%02x:00.0" % bus)
        os.makedirs(d)
        with open(os.path.join(d, "numa_node"), "w") as f:
            f.write(numa + "\n")
    return root


SCENARIOS = {
    "init_same": (t_init_same, ((("GPU-sim-0", 16 * GIB),), FAST)),
    "init_bigger": (t_init_bigger, ((("GPU-sim-0", 16 * GIB),), FAST)),
    "init_smaller": (t_init_smaller, ((("GPU-sim-0", 16 * GIB),), FAST)),
    "kubelet_restart": (t_kubelet_restart, ((("GPU-sim-0", 16 * GIB),), FAST)),
    "reboot": (t_reboot, ((("GPU-sim-0", 16 * GIB), ("GPU-sim-1", 16 * GIB)), [])),
    "local_advertised": (t_local_advertised, ((("GPU-sim-0", 16 * GIB),), [])),
    "stream_end": (t_stream_end, ((("GPU-sim-0", 16 * GIB),), [])),
    "report": (t_report, ((("GPU-sim-0", 16 * GIB), ("GPU-sim-1", 16 * GIB)), FAST)),
    "evict": (t_evict, ((("GPU-sim-0", 16 * GIB),),
                        FAST + ["--overuse-policy", "evict", "--overuse-grace", "1000",
                                "--metrics-listen", "127.0.0.1:0"])),
    "topology": (t_topology, ((("GPU-sim-0", 16 * GIB), ("GPU-sim-1", 16 * GIB)), None)),
}


def main():
    if not os.environ.get("GS_KUBE_DAEMON"):
        print("SKIP: needs gpusliced (GS_KUBE_DAEMON)")
        sys.exit(77)
    fn, (gpus, args) = SCENARIOS[sys.argv[1]]
    node = Node(gpus=gpus, extra_args=args or [])
    if args is None:
        node.extra_args = ["--sysfs", fake_sysfs(node)]
    node.kubelet.start()
    ok = False
    try:
        fn(node, DeviceManager(node))
        ok = True
        print("PASS", sys.argv[1])
    finally:
        node.close(ok)


if __name__ == "__main__":
    main()
