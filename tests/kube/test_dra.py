# SPDX-License-Identifier: Apache-2.0
"""gpusliced --dra end to end on simgpu: the stand-in API server
(apiserver_sim.py: strict validation of every object the driver writes),
the kubelet's plugin watcher and DRA manager (dra_kubelet_sim.py), and
processes run with a prepared claim's CDI edits applied in a mount
namespace, as a container runtime does. One scenario per ctest:
python3 test_dra.py NAME."""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../node"))

import container_sim  # noqa: E402
from apiserver_sim import ApiServerSim, Unavailable  # noqa: E402
from dra_kubelet_sim import Kubelet  # noqa: E402
from kubelet_sim import check, fail, wait_for  # noqa: E402

DRIVER = "gpu.gpuslice.io"
NODE = "node-a"
GIB = 1 << 30
BUILD = os.environ.get("GS_BUILD_DIR", "")
SIMLIB = os.environ.get("GS_SIM_LIBDIR", "")
SMI = os.environ.get("GS_SIM_SMI") or os.path.join(SIMLIB, "simgpu-smi")

class Node:
    def __init__(self, gpus=1, extra=()):
        self.tmp = tempfile.mkdtemp(prefix="gs-dra-")
        self.state = os.path.join(self.tmp, "state")
        self.sock = os.path.join(self.tmp, "run", "gpusliced.sock")
        self.cdi = os.path.join(self.tmp, "cdi")
        self.registry = os.path.join(self.tmp, "plugins_registry")
        self.plugin_dir = os.path.join(self.tmp, "plugins", DRIVER)
        os.makedirs(self.registry)
        self.log = os.path.join(self.tmp, "gpusliced.log")
        self.env = dict(os.environ, SIMGPU_DIR=os.path.join(self.tmp, "simgpu"),
                        SIMGPU_DEVICES=str(gpus), SIMGPU_MEMORY=str(16 * GIB),
                        GPUSLICE_SIM_LIBDIR=SIMLIB, GPUSLICE_SOCKET=self.sock,
                        GPUSLICE_STATE_DIR=self.state,
                        GPUSLICE_LOG_DIR=os.path.join(self.tmp, "logs"))  # slices' logs
        os.makedirs(self.env["SIMGPU_DIR"])
        self.extra = list(extra)
        self.api = ApiServerSim(os.path.join(self.tmp, "api"), os.environ["GS_NPM_DIR"])
        os.makedirs(self.api.workdir)
        self.proc = None
        self.kubelet = None

    def start(self):
        self.api.start()
        self.api.put_node(NODE)
        self.kubeconfig = self.api.kubeconfig(os.path.join(self.tmp, "kubeconfig"),
                                              token_file=self.api.token_file)
        self.kubelet = Kubelet(self.registry, DRIVER)
        self.kubelet.start()
        self.start_daemon()

    def start_daemon(self, wait=True):
        shim = os.path.join(BUILD, "src/shim/libgpuslice.so")
        cmd = [os.environ["GS_KUBE_DAEMON"], "--sim", "--dra", "--node-name", NODE,
               "--kubeconfig", self.kubeconfig, "--state-dir", self.state, "--socket", self.sock,
               "--cdi-dir", self.cdi, "--dra-registry-dir", self.registry, "--dra-plugin-dir",
               self.plugin_dir, "--shim", shim] + self.extra
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log, "a"),
                                     env=self.env)
        if wait:
            self.kubelet.wait_registration()
            wait_for(lambda: self.slice(), 15, "the ResourceSlice")

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def slice(self):
        items = [o for o in self.api.objects("resourceslices")
                 if o["spec"].get("nodeName") == NODE]
        return items[0] if items else None

    def device(self, i=0):
        return self.slice()["spec"]["devices"][i]

    def claim(self, name, milli, memory=None, policy=None, device=None, share=True,
              subrequest=None, reserved_for=None, overuse=None):
        """A claim the stand-in scheduler allocated on this node's GPU (with
        subrequest: from a firstAvailable list, that subrequest chosen)."""
        dev = device or self.device()["name"]
        cap = {"milli": str(milli)}
        if memory is not None:
            cap["memory"] = str(memory)
        res = {"request": "gpu/" + subrequest if subrequest else "gpu", "driver": DRIVER,
               "pool": NODE, "device": dev,
               "consumedCapacity": dict(cap, **({} if memory is not None else {"memory": "0"}))}
        if share:
            res["shareID"] = str(uuid.uuid4())
        config = None
        if policy or overuse:
            params = {"apiVersion": "gpu.gpuslice.io/v1alpha1", "kind": "SliceConfig"}
            params.update({k: v for k, v in (("policy", policy), ("overuse", overuse)) if v})
            config = [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": params}}]
        req = {"name": "gpu", "deviceClassName": DRIVER, "capacity": cap}
        if subrequest:
            req["subrequests"] = ["large", subrequest]
        obj = self.api.put_claim("ml", name, [req], results=[res], config=config,
                                 reserved_for=reserved_for)
        return ("ml", obj["metadata"]["uid"], name)

    def ledger(self):
        path = os.path.join(self.state, "ledger")
        out = {}
        for line in open(path) if os.path.exists(path) else []:
            if line.startswith("slice ") and "kind=dra" in line:
                f = dict(t.split("=", 1) for t in line.split()[1:])
                out[f["id"]] = f
        return out

    def spec_of(self, cdi_id):
        name = cdi_id.split("=", 1)[1]
        with open(os.path.join(self.cdi, "gpuslice.io-%s.json" % name)) as f:
            return json.load(f)

    def run_in(self, spec, argv, shim=True):
        """Run argv with the spec's container edits (env, mounts under
        /run/gpuslice) and the shim preloaded (shim=False: a container whose
        processes never load it)."""
        edits = spec["devices"][0]["containerEdits"]
        mounts = [(m["hostPath"], m["containerPath"], "ro" in m["options"])
                  for m in edits.get("mounts", [])]
        env = dict(self.env)
        env.update(e.split("=", 1) for e in edits.get("env", []))
        env.update(LD_PRELOAD=container_sim.preload_of(os.path.join(BUILD,
                                                                    "src/shim/libgpuslice.so"))
                   if shim else "",
                   LD_LIBRARY_PATH=SIMLIB, GS_KERNELS_PTX=os.path.join(SIMLIB, "gs_kernels.ptx"))
        return container_sim.run(self.tmp, mounts, env, argv)

    def smi(self):
        out = subprocess.run([SMI, "--json"], env=self.env, capture_output=True, text=True,
                             timeout=10).stdout
        return json.loads(out)

    def close(self, ok):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        if self.kubelet:
            self.kubelet.stop()
        self.api.stop()
        log = open(self.log).read() if os.path.exists(self.log) else ""
        if not ok or "ERROR: AddressSanitizer" in log or "runtime error:" in log:
            print("---- gpusliced log ----\n" + log)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if "ERROR: AddressSanitizer" in log or "runtime error:" in log:
            fail("sanitizer report in the daemon's log")


def prepared(node, claims):
    devs, errors = node.kubelet.prepare_pod(claims)
    check(not errors, "prepare failed: %s" % errors)
    return devs


def t_slice(node):
    """The ResourceSlice: one device per GPU with consumable milli and
    memory, validated strictly by the stand-in; a local slice lowers it."""
    s = node.slice()
    check(s["spec"]["driver"] == DRIVER and s["spec"]["pool"]["name"] == NODE, str(s["spec"]))
    d = node.device()
    check(d["allowMultipleAllocations"] is True, str(d))
    check(d["capacity"]["milli"]["value"] == "1000", str(d["capacity"]))
    check(int(d["capacity"]["memory"]["value"]) == 16 * GIB, str(d["capacity"]))
    gen = s["spec"]["pool"]["generation"]
    local = subprocess.Popen([os.path.join(BUILD, "src/cli/gpuslice"), "run", "--sim", "--gpu",
                              "300m", "--", "sleep", "30"], env=node.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: node.device()["capacity"]["milli"]["value"] == "700", 15,
                 "the slice to offer 700 milli beside a local 300m")
        check(node.slice()["spec"]["pool"]["generation"] > gen, "a new pool generation")
    finally:
        local.terminate()
        local.wait(timeout=10)
    wait_for(lambda: node.device()["capacity"]["milli"]["value"] == "1000", 15,
             "all 1000 milli offered again")
    # A lost GPU is withdrawn (the scheduler sends no claim there), and
    # offered again once NVML answers.
    subprocess.run([SMI, "--set-lost", "0"], env=node.env, check=True, capture_output=True)
    wait_for(lambda: not node.slice()["spec"]["devices"], 15, "the lost GPU withdrawn")
    subprocess.run([SMI, "--clear-lost", "0"], env=node.env, check=True, capture_output=True)
    wait_for(lambda: node.slice()["spec"]["devices"], 15, "the GPU offered again")
    # Someone deletes the ResourceSlice: the driver notices (it reads it
    # back every 10 s) and publishes it again.
    check(node.api.delete_object("resourceslices", node.slice()["metadata"]["name"]), "deleted")
    wait_for(lambda: node.slice() and node.slice()["spec"]["devices"], 25,
             "the deleted ResourceSlice published again")


def t_three_claims(node):
    """Three claims prepared on one GPU, each held to its memory cap (by
    simgpu's ground truth) and its compute share; CDI specs valid."""
    import check_cdi_schema as cdi
    claims = [node.claim("small", 100, GIB), node.claim("capped", 300, 3 * GIB, policy="cap"),
              node.claim("big", 600, 6 * GIB)]
    devs = prepared(node, claims)
    check(len(node.ledger()) == 3, "three DRA slices: %s" % node.ledger())
    schema = os.environ.get("GS_CDI_SCHEMA", "")
    import pathlib
    validator = cdi.validator_for(__import__("jsonschema"), pathlib.Path(schema)) \
        if os.path.exists(schema) else None
    specs = {}
    for ns, uid, name in claims:
        d = devs[uid][0]
        check(d.pool_name == NODE and d.device_name == node.device()["name"], str(d))
        ids = list(d.cdi_device_ids)
        check(ids and ids[0].startswith("gpuslice.io/slice="), str(ids))
        spec = node.spec_of(ids[0])
        if validator:
            errs = cdi.schema_errors(validator, spec) + cdi.rule_errors(spec)
            check(not errs, "CDI spec of %s: %s" % (name, errs))
        env = dict(e.split("=", 1) for e in spec["devices"][0]["containerEdits"]["env"])
        check(env.get("GPUSLICE_CONFIG") == "/run/gpuslice/slice.conf", str(env))
        # The shim is preloaded in the container with no --kubelet beside.
        mnt = {m["containerPath"]: m for m in spec["devices"][0]["containerEdits"]["mounts"]}
        pre = mnt.get("/etc/ld.so.preload")
        check(pre and "ro" in pre["options"] and os.path.exists(pre["hostPath"]) and
              open(pre["hostPath"]).read() == "/usr/lib/gpuslice/libgpuslice.so\n",
              "ld.so.preload of %s: %s" % (name, pre))
        specs[name] = spec
    conf = {l["claim"]: l for l in node.ledger().values()}
    check(conf[claims[1][1]]["policy"] == "cap", "the claim's policy reached the node: %s" % conf)
    # Memory: each claim's cap holds (ground truth: simgpu's per-process
    # memory), and half of it is granted.
    hold = os.path.join(BUILD, "tests/daemon/gs_alloc_hold")
    for name, cap in (("small", GIB), ("capped", 3 * GIB), ("big", 6 * GIB)):
        p = node.run_in(specs[name], [hold, str(cap + cap // 2)])
        out, _ = p.communicate(timeout=60)
        check(out.strip() == "oom", "%s: 1.5x its cap allocated: %r" % (name, out))
        p = node.run_in(specs[name], [hold, str(cap // 2)])
        line = p.stdout.readline().strip()
        check(line == "ready", "%s: half its cap refused: %r" % (name, line))
        used = sum(q["used_bytes"] for q in node.smi()["processes"]
                   if q["pid"] == p.pid and q["alive"])
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=10)
        check(cap // 2 <= used <= cap, "%s: ground truth %d bytes, cap %d" % (name, used, cap))
    # Compute: all three saturating for 3 s get about 10/30/60%.
    burn = os.path.join(BUILD, "bench/compute/gs-burn")
    runs = {n: node.run_in(specs[n], [burn, "--kernel", "1ms", "--duration", "3000ms"])
            for n in ("small", "capped", "big")}
    share = {}
    for n, p in runs.items():
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0, "%s: %s %s" % (n, out, err))
        f = dict(kv.split("=", 1) for kv in out.split() if "=" in kv)
        share[n] = int(f["kernels"]) * int(f["kernel_ns"]) / (float(f["seconds"]) * 1e9)
    print("measured shares: %s" % {k: round(v, 3) for k, v in share.items()})
    # Coarse on purpose (a loaded machine starves launchers; accuracy is
    # bench/run-compute.sh's): the cap holds, the shares are ordered, and
    # each slice gets at least half its share.
    check(share["capped"] <= 0.35, "a 300m cap slice got %.1f%%" % (100 * share["capped"]))
    check(share["small"] < share["capped"] < share["big"], "ordered like 100m/300m/600m")
    for n, want in (("small", 0.1), ("capped", 0.3), ("big", 0.6)):
        check(share[n] >= want / 2, "%s got %.1f%%, share %.0f%%" % (n, 100 * share[n],
                                                                      100 * want))
    # Unprepare frees every slice and spec.
    check(not node.kubelet.unprepare_pod(claims), "unprepared")
    check(not node.ledger(), "the ledger is empty again: %s" % node.ledger())
    check(not [f for f in os.listdir(node.cdi) if f.startswith("gpuslice.io-")], "specs removed")
    # A firstAvailable claim: its result is for "gpu/small"; the kubelet
    # matches request names to containers' claims[].request, the base name.
    sub = node.claim("first-available", 200, GIB, policy="cap", subrequest="small")
    d = prepared(node, [sub])[sub[1]][0]
    check(list(d.request_names) == ["gpu"], "request names: %s" % list(d.request_names))
    l = list(node.ledger().values())
    check(len(l) == 1 and l[0]["request"] == "gpu" and l[0]["policy"] == "cap",
          "the subrequest's slice: %s" % l)
    check(not node.kubelet.unprepare_pod([sub]), "unprepared")


def t_restart(node):
    """kill -9 and a new daemon with claims prepared: nothing lost; prepare
    again answers the same; unprepare works from the uid alone."""
    claims = [node.claim("a", 300, 3 * GIB), node.claim("b", 200)]
    devs = prepared(node, claims)
    before = node.ledger()
    node.kill9()
    node.start_daemon()
    check(node.ledger().keys() == before.keys(), "the ledger survives kill -9")
    node.kubelet.prepared.clear()  # the kubelet asks again after its own restart
    again = prepared(node, claims)
    for _, uid, _ in claims:
        check([list(d.cdi_device_ids) for d in again[uid]] ==
              [list(d.cdi_device_ids) for d in devs[uid]], "the same answer for %s" % uid)
        check(all(os.path.exists(os.path.join(node.cdi, "gpuslice.io-%s.json" %
                                              i.split("=", 1)[1]))
                  for d in again[uid] for i in d.cdi_device_ids[:1]), "specs in place")
    # The claims are gone from the API server: unprepare still works.
    for ns, uid, name in claims:
        node.api.store["resourceclaims"].pop((ns, name), None)
    check(not node.kubelet.unprepare_pod(claims), "unprepared from the uid alone")
    check(not node.ledger(), "nothing left")


def t_overcommit(node):
    """A claim the scheduler placed where a local slice took the room
    meanwhile is refused naming the GPU, and prepared once room exists."""
    local = subprocess.Popen([os.path.join(BUILD, "src/cli/gpuslice"), "run", "--sim", "--gpu",
                              "600m", "--", "sleep", "60"], env=node.env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: node.device()["capacity"]["milli"]["value"] == "400", 15, "the local")
        c = node.claim("late", 600, 6 * GIB)
        errors = node.kubelet.prepare_once([c])
        check(c[1] in errors and "GPU 0" in errors[c[1]], "refused naming the GPU: %s" % errors)
        check(not node.ledger(), "nothing recorded")
    finally:
        local.terminate()
        local.wait(timeout=10)
    time.sleep(1)
    devs, errors = node.kubelet.prepare_pod([c], attempts=10, backoff_s=0.2)
    check(not errors and c[1] in devs, "prepared once the local slice ended: %s" % errors)


def t_bad_input(node):
    """Claims the driver must refuse, per claim, without disturbing others
    or the node; a slow API server does not block it forever."""
    good = node.claim("good", 100)
    pending = ("ml", node.api.put_claim("ml", "pending", [{"name": "gpu",
                                                          "deviceClassName": DRIVER}])
               ["metadata"]["uid"], "pending")
    other = node.claim("other-dev", 100, device="gpu-not-here")
    stale = ("ml", str(uuid.uuid4()), "good")
    missing = ("ml", str(uuid.uuid4()), "no-such-claim")
    errors = node.kubelet.prepare_once([good, pending, other, stale, missing])
    check(good[1] not in errors, "the good claim is prepared: %s" % errors)
    for c, why in ((pending, "not allocated"), (other, "not one of this node"),
                   (stale, "uid"), (missing, "404")):
        check(c[1] in errors and why in errors[c[1]], "%s: %s" % (c[2], errors.get(c[1])))
    # The API server answers 500 twice, then: the driver retries.
    c = node.claim("flaky", 100)
    node.api.inject("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/flaky", count=2,
                    status=500)
    check(not node.kubelet.prepare_once([c]), "prepared after two 500s")
    # A hung API server: the call ends within its timeout; the daemon serves.
    c = node.claim("slow", 100)
    node.api.inject("/apis/resource.k8s.io/v1/namespaces/ml/resourceclaims/slow", kind="hang",
                    seconds=20)
    t0 = time.monotonic()
    errors = node.kubelet.prepare_once([c])
    check(c[1] in errors and time.monotonic() - t0 < 15, "bounded: %s" % errors)
    ls = subprocess.run([os.path.join(BUILD, "src/cli/gpuslice"), "ls", "--json"], env=node.env,
                        capture_output=True, text=True, timeout=20)
    check(ls.returncode == 0, "the local API answers meanwhile: %s" % ls.stderr)


def events(node):
    out = subprocess.run([os.path.join(BUILD, "src/cli/gpuslice"), "events", "--json"],
                         env=node.env, capture_output=True, text=True, timeout=20)
    check(out.returncode == 0, "gpuslice events: %s" % out.stderr)
    return json.loads(out.stdout)


def hold(node, spec, nbytes, shim=True):
    """A process of the claim's container holding nbytes of GPU memory."""
    p = node.run_in(spec, [os.path.join(BUILD, "tests/daemon/gs_alloc_hold"), str(nbytes)],
                    shim=shim)
    line = p.stdout.readline().strip()
    check(line == "ready", "the holder allocated: %r %s" % (line, p.poll()))
    return p


def t_evict(node):
    """--overuse-policy evict: a pod whose container goes around the shim
    (no preload) and holds 3 GiB on a 1 GiB claim is evicted through the
    Eviction API (the stand-in answers 429 twice first, as a disruption
    budget would, and the client retries); a neighbour on the same GPU is
    never touched; a pod that a budget protects for good is not evictable,
    so its processes are killed instead."""
    pods = {n: node.api.put_pod("ml", n)["metadata"]["uid"]
            for n in ("hog", "good", "kept", "late")}

    def claim_for(name, pod, milli, memory):
        return node.claim(name, milli, memory,
                          reserved_for=[{"resource": "pods", "name": pod, "uid": pods[pod]}])

    def spec(c):
        d = prepared(node, [c])[c[1]][0]
        return node.spec_of(d.cdi_device_ids[0])

    good = claim_for("good-claim", "good", 300, 2 * GIB)
    hog = claim_for("hog-claim", "hog", 200, GIB)
    neighbour = hold(node, spec(good), GIB)
    node.api.protect_pod("ml", "hog", times=2)
    t0 = time.monotonic()
    hog_p = hold(node, spec(hog), 3 * GIB, shim=False)
    wait_for(lambda: ("ml", "hog") in node.api.evictions, 20, "the hog pod evicted")
    latency = time.monotonic() - t0
    path = "/api/v1/namespaces/ml/pods/hog/eviction"
    posts = node.api.count(path)
    print("eviction %.2f s after the over-use started, %d POSTs (two 429s)" % (latency, posts))
    check(node.api.count(path, status=429) == 2 and node.api.count(path, status=201) == 1,
          "429, 429, then 201: %d eviction POSTs" % posts)
    check(node.api.evictions == [("ml", "hog")], "only the hog: %s" % node.api.evictions)
    # The eviction was accepted: the kubelet stops the pod in its grace
    # period; the watchdog does not kill it meanwhile.
    time.sleep(2)
    check(hog_p.poll() is None, "not killed while its eviction runs: %s" % hog_p.poll())
    ev = [e for e in events(node) if e.get("action") in ("evicting", "evicted")]
    check({e["action"] for e in ev} == {"evicting", "evicted"}, "events: %s" % ev)
    check(all("hog" in e["msg"] for e in ev), "the events name the pod: %s" % ev)
    # The kubelet's part: the container is stopped, the claim unprepared.
    hog_p.kill()
    hog_p.wait()
    check(not node.kubelet.unprepare_pod([hog]), "hog unprepared")
    check(neighbour.poll() is None, "the neighbour still runs")
    used = sum(q["used_bytes"] for q in node.smi()["processes"]
               if q["pid"] == neighbour.pid and q["alive"])
    check(used >= GIB, "the neighbour keeps its memory (ground truth): %d bytes" % used)
    # A budget that never allows it: the eviction is asked again every 5 s
    # for 30 s, then the processes die.
    kept = claim_for("kept-claim", "kept", 200, GIB)
    node.api.protect_pod("ml", "kept")
    kept_p = hold(node, spec(kept), 3 * GIB, shim=False)
    t0 = time.monotonic()
    try:
        kept_p.wait(timeout=90)
    except subprocess.TimeoutExpired:
        fail("a pod its budget protects was neither evicted nor killed")
    check(kept_p.returncode in (-9, 137), "SIGKILL: %s" % kept_p.returncode)
    asks = node.api.count("/api/v1/namespaces/ml/pods/kept/eviction", status=429)
    print("a protected pod killed %.1f s after its over-use, %d refused evictions" %
          (time.monotonic() - t0, asks))
    check(time.monotonic() - t0 >= 30 and asks >= 6, "asked again for 30 s: %d" % asks)
    check(("ml", "kept") not in node.api.evictions, "not evicted")
    acts = [e["action"] for e in events(node) if "kept" in e.get("msg", "") or
            e.get("action") == "killed"]
    check("evict_failed" in acts and "killed" in acts, "events: %s" % acts)
    check(neighbour.poll() is None, "the neighbour still runs")
    neighbour.kill()
    neighbour.wait()
    # After a restart the driver knows a claim (the ledger keeps its
    # namespace and name) but not its pod: it finds the pod through the
    # claim's reservedFor.
    late = claim_for("late-claim", "late", 200, GIB)
    prepared(node, [late])
    node.kill9()
    node.start_daemon()
    node.kubelet.prepared.clear()
    late_p = hold(node, spec(late), 3 * GIB, shim=False)
    wait_for(lambda: ("ml", "late") in node.api.evictions, 20, "the late pod evicted")
    msgs = [e["msg"] for e in events(node) if e.get("action") == "evicting"]
    check(any("claim ml/late-claim" in m for m in msgs), "through its claim: %s" % msgs)
    late_p.kill()
    late_p.wait()
    # A claim whose config says overuse: kill is killed, not evicted, under
    # the daemon's evict.
    pods["own"] = node.api.put_pod("ml", "own")["metadata"]["uid"]
    own = node.claim("own-claim", 200, GIB, overuse="kill",
                     reserved_for=[{"resource": "pods", "name": "own", "uid": pods["own"]}])
    own_p = hold(node, spec(own), 3 * GIB, shim=False)
    try:
        own_p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        fail("the claim's own policy kill was not applied")
    check(own_p.returncode in (-9, 137), "SIGKILL: %s" % own_p.returncode)
    check(("ml", "own") not in node.api.evictions, "its own policy, not the daemon's evict")


SCENARIOS = {"slice": t_slice, "three_claims": t_three_claims, "restart": t_restart,
             "overcommit": t_overcommit, "bad_input": t_bad_input, "evict": t_evict}
EXTRA = {"evict": ["--overuse-policy", "evict", "--overuse-grace", "1000"]}


def main():
    for need in ("GS_KUBE_DAEMON", "GS_NPM_DIR"):
        if not os.environ.get(need):
            print("SKIP: %s not set" % need)
            sys.exit(77)
    if not container_sim.can_unshare():
        print("SKIP: unshare -m is not permitted here")
        sys.exit(77)
    node = Node(extra=EXTRA.get(sys.argv[1], ()))
    ok = False
    try:
        try:
            node.start()
        except Unavailable as e:
            print("SKIP: %s" % e)
            sys.exit(77)
        SCENARIOS[sys.argv[1]](node)
        ok = True
        print("PASS", sys.argv[1])
    finally:
        node.close(ok)


if __name__ == "__main__":
    main()
