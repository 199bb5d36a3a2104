# SPDX-License-Identifier: Apache-2.0
"""Device plugin scenarios, one per ctest: python3 test_device_plugin.py NAME."""
import json
import os
import signal
import subprocess
import sys
import time

import grpc

import deviceplugin_v1beta1_pb2 as dp
from kubelet_sim import (GIB, Node, PodResources, check, envs, fail, ids, mounts, read_conf,
                         wait_for)

# U[i]: GPU i's uuid, filled in when the plugin starts (simgpu's uuids).
U = []


def next_list(q, timeout=10):
    m = q.get(timeout=timeout)
    if isinstance(m, Exception):
        fail("ListAndWatch ended: %s" % m)
    return m


def t_register(node):
    req, opts = node.start_plugin()
    check(req.version == "v1beta1", "version %r" % req.version)
    check(req.endpoint == "gpuslice.sock", "endpoint %r" % req.endpoint)
    check(req.resource_name == "gpuslice.io/gpu-milli", "resource %r" % req.resource_name)
    check(req.options.get_preferred_allocation_available, "RegisterRequest.options")
    check(opts.get_preferred_allocation_available and not opts.pre_start_required,
          "GetDevicePluginOptions answered during Register: %s" % opts)
    c = node.client()
    check(c.options().get_preferred_allocation_available, "options on a later call")
    c.close()


def t_list_health(node):
    node.start_plugin()
    c = node.client()
    q = c.watch()
    m = next_list(q)
    devs = {d.ID: d.health for d in m.devices}
    check(len(m.devices) == 2000, "2 GPUs x 1000 units, got %d" % len(m.devices))
    check(set(devs) == set(ids(0, 0, 1000) + ids(1, 0, 1000)), "unit ids")
    check(set(devs.values()) == {"Healthy"}, "all healthy at start")
    print("ListAndWatch message for 2 GPUs: %d bytes" % m.ByteSize())
    node.set_health(1, "lost")
    m = next_list(q)
    devs = {d.ID: d.health for d in m.devices}
    check(len(devs) == 2000, "the full list again")
    check(all(devs[i] == "Unhealthy" for i in ids(1, 0, 1000)), "gpu1 units unhealthy")
    check(all(devs[i] == "Healthy" for i in ids(0, 0, 1000)), "gpu0 units healthy")
    # An allocation never lands on the lost GPU.
    r = c.allocate(ids(1, 0, 300))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "slice placed on the healthy GPU")
    node.set_health(1, "healthy")
    m = next_list(q)
    check(all(d.health == "Healthy" for d in m.devices), "gpu1 healthy again")
    c.close()


def t_preferred(node):
    node.start_plugin()
    c = node.client()
    c.allocate(ids(1, 0, 300))  # gpu1 now has 700 free, gpu0 1000
    avail = ids(0, 0, 1000) + ids(1, 300, 700)
    r = c.preferred(avail, size=200).container_responses[0].deviceIDs
    check(len(r) == 200 and len(set(r)) == 200, "200 distinct ids")
    check(all(i.startswith("gpu1-") for i in r), "packed on the fuller GPU: %s" % r[:5])
    check(set(r) <= set(avail), "only available ids")
    r = c.preferred(avail, must=["gpu0-u5"], size=50).container_responses[0].deviceIDs
    check(len(r) == 50 and "gpu0-u5" in r and all(i.startswith("gpu0-") for i in r),
          "must-include kept and the rest on its GPU")
    r = c.preferred(avail, size=1000).container_responses[0].deviceIDs
    check(sorted(r) == sorted(ids(0, 0, 1000)), "a whole GPU gets the free GPU's units")
    # gpu1 too full for 800: the answer moves to gpu0.
    r = c.preferred(avail, size=800).container_responses[0].deviceIDs
    check(all(i.startswith("gpu0-") for i in r), "800 goes where it fits")
    c.close()


def t_allocate(node):
    node.start_plugin()
    c = node.client()
    r = c.allocate(ids(0, 0, 300))
    e, m = envs(r), mounts(r)
    check(e["NVIDIA_VISIBLE_DEVICES"] == U[0] and e["CUDA_VISIBLE_DEVICES"] == U[0], str(e))
    check(e["GPUSLICE_CONFIG"] == "/run/gpuslice/slice.conf", str(e))
    host_conf, ro = m["/run/gpuslice/slice.conf"]
    check(ro, "config mounted read-only")
    conf = read_conf(host_conf)
    check(conf["gpu_uuid"] == U[0], str(conf))
    check(conf["compute_milli"] == "300", str(conf))
    want = (16 * GIB * 300 // 1000) // (2 << 20) * (2 << 20)
    check(int(conf["memory_limit"]) == want, "memory_limit %s, want %d" % (conf["memory_limit"], want))
    check(conf["slice"] == e["GPUSLICE_SLICE"], "slice id in env and config")
    check(conf["slice_dir"] == "/run/gpuslice/slice", str(conf))
    slice_dir, ro = m["/run/gpuslice/slice"]
    check(os.path.isdir(slice_dir) and not ro, "slice dir mounted read-write")
    # With a daemon, the lease page's directory is the daemon's, mounted
    # read-only; the config names the page there, never in the slice
    # directory. Without one there are no leases and no page.
    if conf.get("daemon_socket"):
        page_dir, page_ro = m["/run/gpuslice/lease"]
        st = os.stat(page_dir)
        check(page_ro and st.st_mode & 0o777 == 0o755 and st.st_uid == os.geteuid(),
              "page directory %s: read-only mount, the daemon's, 0755 (%o)" % (page_dir, st.st_mode))
        check(conf.get("lease_page") == "/run/gpuslice/lease/compute", str(conf))
    else:
        check("/run/gpuslice/lease" not in m and "lease_page" not in conf,
              "a lease page without a daemon: %s %s" % (m, conf))
    # The config is the node's, out of the tenant's reach: read-only, and
    # not inside the (world-writable) slice directory the pod can write.
    check(os.stat(host_conf).st_mode & 0o777 == 0o444, "config mode 0444")
    check(not os.path.realpath(host_conf).startswith(os.path.realpath(slice_dir) + os.sep),
          "config outside the slice directory: %s in %s" % (host_conf, slice_dir))
    if node.daemon:
        # A pod's memory cap includes its CUDA context, as a local slice's
        # does: the node's measured overhead (simgpu: 256 MiB) is in it.
        check(int(conf["context_overhead"]) == 256 << 20, "context overhead %s" % conf)
    check(m["/usr/lib/gpuslice/libgpuslice.so"] == (node.shim, True), "shim mounted read-only")
    preload, ro = m["/etc/ld.so.preload"]
    check(ro and open(preload).read().strip() == "/usr/lib/gpuslice/libgpuslice.so",
          "ld.so.preload names the shim")
    check(len(r.container_responses[0].cdi_devices) == 1 and
          r.container_responses[0].cdi_devices[0].name == "nvidia.com/gpu=" + U[0],
          "CDI device name")
    # Two containers in one call get one slice each.
    r = c.allocate(ids(0, 300, 100), ids(0, 400, 200))
    check(len(r.container_responses) == 2, "two answers")
    check(envs(r, 0)["GPUSLICE_SLICE"] != envs(r, 1)["GPUSLICE_SLICE"], "two slices")
    check(envs(r, 1)["NVIDIA_VISIBLE_DEVICES"] == U[0], "packed with the first slice")
    # Whole GPU: exclusive, no shim; it takes the GPU nobody uses even
    # though most of its ids are gpu0's.
    r = c.allocate(ids(0, 600, 400) + ids(1, 0, 600))
    e, m = envs(r), mounts(r)
    check(e["NVIDIA_VISIBLE_DEVICES"] == U[1], "whole GPU on the free GPU: %s" % e)
    check(not m and "GPUSLICE_CONFIG" not in e, "no shim for whole GPUs")
    # gpu1 is exclusive now: a slice named by gpu1's ids lands on gpu0.
    r = c.allocate(ids(1, 600, 400))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "nothing shares an exclusive GPU")
    c.close()


def t_remap(node):
    node.start_plugin()
    c = node.client()
    c.allocate(ids(0, 0, 800))
    # The kubelet picks gpu0's last units plus some of gpu1: gpu0 cannot
    # hold 300 more, so the slice goes to gpu1 whatever the ids say.
    r = c.allocate(ids(0, 800, 200) + ids(1, 0, 100))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[1], "remapped to gpu1: %s" % envs(r))
    check(read_conf(mounts(r)["/run/gpuslice/slice.conf"][0])["gpu_uuid"] == U[1], "config")
    c.allocate(ids(1, 100, 600))  # gpu0 200 free, gpu1 100 free
    err = c.allocate_error(ids(1, 700, 300))
    check(err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, str(err.code()))
    check("no single GPU" in err.details() and "gpu0 200" in err.details() and
          "gpu1 100" in err.details(), "message names the free units: %s" % err.details())
    c.close()


def t_release(node):
    node.pods = PodResources(node.pr_sock)
    node.start_plugin()
    c = node.client()
    a = ids(0, 0, 300)
    b = ids(0, 300, 200)
    ra, rb = c.allocate(a), c.allocate(b)
    conf_a = mounts(ra)["/run/gpuslice/slice.conf"][0]
    conf_b = mounts(rb)["/run/gpuslice/slice.conf"][0]
    node.pods.set([("default", "pod-a", "main", a), ("default", "pod-b", "main", b)])
    calls = node.pods.calls
    wait_for(lambda: node.pods.calls >= calls + 6, 10, "PodResources polls")
    check(os.path.exists(conf_a) and os.path.exists(conf_b), "held slices are kept")
    # A fresh allocation no pod lists yet stays during the grace period.
    rc = c.allocate(ids(1, 0, 100))
    conf_c = mounts(rc)["/run/gpuslice/slice.conf"][0]
    node.pods.set([("default", "pod-b", "main", b)])
    wait_for(lambda: not os.path.exists(conf_a), 10, "pod-a's slice to be freed")
    check(os.path.exists(conf_b), "pod-b's slice kept")
    check(os.path.exists(conf_c), "a new allocation is kept within the grace period")
    # gpu0 has 800 free again: 800 fits there.
    r = c.allocate(ids(0, 500, 500) + ids(0, 0, 300))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "freed units reused")
    # Without PodResources nothing is freed.
    node.pods.stop()
    node.pods = None
    time.sleep(1.5)
    check(os.path.exists(conf_b), "no release while PodResources is unreachable")
    c.close()


def t_kubelet_restart(node):
    node.start_plugin()
    c = node.client()
    c.allocate(ids(0, 0, 400))
    c.close()
    # A kubelet restart: it goes away, removes every socket in the
    # directory, and listens on a new kubelet.sock.
    node.kubelet.stop()
    for f in os.listdir(node.plugin_dir):
        os.unlink(os.path.join(node.plugin_dir, f))
    node.kubelet.start()
    req, opts = node.kubelet.wait_registration()
    check(req.resource_name == "gpuslice.io/gpu-milli" and opts.get_preferred_allocation_available,
          "registered again")
    c = node.client()
    m = next_list(c.watch())
    check(len(m.devices) == 2000, "serving again")
    r = c.allocate(ids(0, 400, 600) + ids(1, 0, 100))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[1], "earlier allocation still counted")
    c.close()


def t_plugin_restart(node):
    node.start_plugin()
    c = node.client()
    r = c.allocate(ids(0, 0, 600))
    conf = mounts(r)["/run/gpuslice/slice.conf"][0]
    c.close()
    slice_id = envs(r)["GPUSLICE_SLICE"]
    if node.daemon:
        check(list(kube_slices(node)) == [slice_id], "the ledger holds the pod's slice")
    check(node.stop_plugin() == 0, "clean exit on SIGTERM")
    check(not os.path.exists(node.sock), "socket removed on shutdown")
    check(os.path.exists(conf), "slice config survives the plugin")
    node.start_plugin()
    c = node.client()
    if node.daemon:
        # The ledger's reconcile (pid liveness) leaves pod slices alone.
        check(list(kube_slices(node)) == [slice_id], "the pod's slice survives a daemon restart")
    r = c.allocate(ids(0, 600, 400) + ids(1, 0, 200))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[1], "600 on gpu0 remembered: %s" % envs(r))
    check(envs(r)["GPUSLICE_SLICE"] != slice_id, "slice ids are not reused")
    c.close()
    if node.daemon:
        # A daemon killed with -9 loses nothing either.
        node.proc.kill()
        node.proc.wait()
        node.proc = None
        if os.path.exists(node.sock):
            os.unlink(node.sock)  # a killed plugin leaves its socket
        node.start_plugin()
        check(len(kube_slices(node)) == 2, "both pod slices survive kill -9")
        c = node.client()
        # 600 units on each GPU now; ids no pod holds yet.
        err = c.allocate_error(ids(1, 200, 800))
        check(err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "800 fits nowhere: %s" % err)
        c.close()


def t_malformed(node):
    node.start_plugin()
    c = node.client()
    A = "/v1beta1.DevicePlugin/Allocate"
    for data, what in ((b"\xff\xff\xff", "garbage"), (b"\x0a\x05\x0a\x03abc\x99", "truncated")):
        try:
            c.raw(A, data)
            fail("%s accepted" % what)
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "%s: %s" % (what, e.code()))
    for containers, what in (([["nope"]], "unknown id"), ([["gpu7-u1"]], "GPU not on node"),
                             ([["gpu0-u01"]], "non-canonical id"), ([[]], "empty container"),
                             ([], "no containers"), ([ids(0, 0, 2) + ["gpu0-u0"]], "duplicate"),
                             ([ids(0, 0, 1000) + ids(1, 0, 500)], "1500 units"),
                             ([["x" * 200]], "over-long id")):
        e = c.allocate_error(*containers)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "%s: %s %s" % (what, e.code(), e.details()))
    e = c.allocate_error(ids(0, 0, 1000) + ids(1, 0, 500))
    check("1500" in e.details() and "whole GPUs" in e.details(), e.details())
    # Oversized: past the 4 MiB limit gRPC refuses it before the plugin.
    big = dp.AllocateRequest()
    big.container_requests.add(devices_ids=["gpu0-u%d" % (i % 1000) for i in range(400000)])
    try:
        c.raw(A, big.SerializeToString())
        fail("oversized accepted")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "oversized: %s" % e.code())
    try:
        c.preferred(ids(0, 0, 10), size=20)
        fail("preferred with size > available accepted")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, str(e.code()))
    try:
        c.raw("/v1beta1.DevicePlugin/Nope", b"")
        fail("unknown method accepted")
    except grpc.RpcError as e:
        check(e.code() == grpc.StatusCode.UNIMPLEMENTED, str(e.code()))
    # Nothing of that disturbed the plugin or leaked units.
    r = c.allocate(ids(0, 0, 999))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] in (U[0], U[1]), "still serving")
    c.close()


def t_shared_ids(node):
    """A unit named by two containers of one Allocate is refused before
    anything changes: no allocation made, none of anyone else's freed."""
    node.start_plugin()
    c = node.client()
    ra = c.allocate(ids(0, 0, 300))  # someone else's pod
    conf_a = mounts(ra)["/run/gpuslice/slice.conf"][0]
    c.allocate(ids(1, 0, 500))
    for containers in (([ids(0, 300, 100), ["gpu0-u300"] + ids(0, 400, 10)]),
                       ([ids(0, 300, 100), ids(1, 600, 10), ids(0, 350, 1)])):
        e = c.allocate_error(*containers)
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "%s %s" % (e.code(), e.details()))
        check("both container" in e.details() and "gpu0-u3" in e.details(),
              "message names the unit and containers: %s" % e.details())
    check(os.path.exists(conf_a), "the other pod's slice kept")
    # Free units are as before: gpu0 700, gpu1 500 (800 fits nowhere).
    e = c.allocate_error(ids(0, 300, 700) + ids(1, 500, 100))
    check(e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, "%s %s" % (e.code(), e.details()))
    check("gpu0 700" in e.details() and "gpu1 500" in e.details(),
          "nothing leaked or freed: %s" % e.details())
    c.close()


def t_policy(node):
    """gpusliced --compute-policy applies to pods' slices as to local ones."""
    if not node.daemon:
        print("SKIP: needs gpusliced")
        sys.exit(77)
    node.start_plugin()
    c = node.client()
    r = c.allocate(ids(0, 0, 300))
    conf = read_conf(mounts(r)["/run/gpuslice/slice.conf"][0])
    check(conf["policy"] == "cap", "the daemon's default policy in the pod's config: %s" % conf)
    ks = kube_slices(node)
    check(ks[envs(r)["GPUSLICE_SLICE"]]["policy"] == "cap", "ls shows it: %s" % ks)
    c.close()


def t_simgpu(node):
    """GPUs and health from NVML: simgpu's libnvidia-ml.so.1 (the daemon's
    own inventory), a GPU marked lost with simgpu-smi --set-lost."""
    if not node.daemon:
        print("SKIP: needs gpusliced")
        sys.exit(77)
    node.start_plugin()
    c = node.client()
    q = c.watch()
    m = next_list(q)
    check(len(m.devices) == 2000 and all(d.health == "Healthy" for d in m.devices),
          "2 simulated GPUs, healthy")
    r = c.allocate(ids(1, 0, 500))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[1], "the simulated GPU's uuid")
    conf = read_conf(mounts(r)["/run/gpuslice/slice.conf"][0])
    check(int(conf["memory_limit"]) == 8 * GIB, "half of 16 GiB: %s" % conf)
    # Containers reach this daemon through its socket's directory, mounted.
    check(conf["daemon_socket"] == "/run/gpuslice/daemon/" + os.path.basename(node.daemon_sock),
          "slices talk to this daemon: %s" % conf)
    check(mounts(r)["/run/gpuslice/daemon"] == (os.path.dirname(node.daemon_sock), True),
          "the socket's directory is mounted: %s" % mounts(r))
    node.set_health(1, "lost")
    m = next_list(q)
    devs = {d.ID: d.health for d in m.devices}
    check(all(devs[i] == "Unhealthy" for i in ids(1, 0, 1000)) and
          all(devs[i] == "Healthy" for i in ids(0, 0, 1000)), "lost GPU's units unhealthy")
    r = c.allocate(ids(1, 500, 300))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "nothing placed on a lost GPU")
    # The daemon's own placement sees the loss too: a local slice avoids gpu1.
    ls = ls_json(node)
    check(not ls["gpus"][1]["healthy"], "gpuslice ls shows GPU 1 unhealthy: %s" % ls["gpus"][1])
    node.set_health(1, "healthy")
    m = next_list(q)
    check(all(d.health == "Healthy" for d in m.devices), "healthy again")
    c.close()


def cli(node, *args, timeout=30):
    build = os.environ["GS_BUILD_DIR"]
    return subprocess.run([os.path.join(build, "src/cli/gpuslice")] + list(args), env=node.env,
                          capture_output=True, text=True, timeout=timeout)


def ls_json(node):
    out = cli(node, "ls", "--json")
    check(out.returncode == 0, "gpuslice ls --json: %s %s" % (out.stdout, out.stderr))
    return json.loads(out.stdout)


def kube_slices(node):
    """The Kubernetes slices gpuslice ls --json shows, by id."""
    return {s["id"]: s for g in ls_json(node)["gpus"] for s in g["slices"]
            if s["kind"] == "kubernetes"}


def t_shared_ledger(node):
    """One GPU, one ledger: a local 600m slice and a pod's 600 units cannot
    both hold it, whichever comes first; gpuslice ls lists both kinds."""
    if not node.daemon:
        print("SKIP: needs gpusliced")
        sys.exit(77)
    node.start_plugin()
    c = node.client()
    # Local first: the pod is refused, and the message says why.
    local = subprocess.Popen([os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice"),
                              "run", "--sim", "--gpu", "600m", "--name", "local-api", "--",
                              "sleep", "60"], env=node.env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: any(s["name"] == "local-api" for g in ls_json(node)["gpus"]
                             for s in g["slices"]), 15, "the local slice")
        err = c.allocate_error(ids(0, 0, 600))
        check(err.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, str(err.code()))
        check("no single GPU" in err.details() and "gpu0 400" in err.details() and
              "600 held by other gpuslice slices" in err.details(),
              "the pod's event names the local slice's hold: %s" % err.details())
        check(not kube_slices(node), "a refused Allocate leaves nothing in the ledger")
        # A pod that fits beside it is fine.
        r = c.allocate(ids(0, 0, 300))
        check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "300 fits beside 600m")
        ks = kube_slices(node)
        check(list(ks) == [envs(r)["GPUSLICE_SLICE"]], "ls lists the pod's slice: %s" % ks)
        s = list(ks.values())[0]
        check(s["gpu_milli"] == 300 and s["pid"] is None and
              s["config_path"] == mounts(r)["/run/gpuslice/slice.conf"][0],
              "the pod's slice as ls shows it: %s" % s)
    finally:
        local.terminate()
        local.wait(timeout=10)
    wait_for(lambda: not any(s["name"] == "local-api" for g in ls_json(node)["gpus"]
                             for s in g["slices"]), 10, "the local slice to be freed")
    # Kubernetes first: now 300 + 600 units are the pods'; a local 600m is refused.
    r = c.allocate(ids(0, 300, 600))
    check(envs(r)["NVIDIA_VISIBLE_DEVICES"] == U[0], "600 fits once the local slice is gone")
    out = cli(node, "run", "--sim", "--gpu", "600m", "--", "true")
    check(out.returncode == 125, "local 600m refused beside 900 pod units: %d %s" %
          (out.returncode, out.stderr))
    check("100m" in out.stderr and "GPU 0" in out.stderr,
          "the refusal shows GPU 0's free share: %s" % out.stderr)
    check(len(kube_slices(node)) == 2, "both pod slices listed")
    out = cli(node, "ls")
    check(out.returncode == 0 and "k8s" in out.stdout, "the table shows pod slices: %s" % out.stdout)
    c.close()


TESTS = {
    "simgpu": (t_simgpu, []),
    "register": (t_register, []),
    "list_health": (t_list_health, []),
    "preferred": (t_preferred, []),
    "allocate": (t_allocate, ["--cdi-kind", "nvidia.com/gpu"]),
    "remap": (t_remap, []),
    "release": (t_release, ["--pod-poll-ms", "100", "--release-grace", "2"]),
    "kubelet_restart": (t_kubelet_restart, []),
    "plugin_restart": (t_plugin_restart, []),
    "malformed": (t_malformed, []),
    "shared_ids": (t_shared_ids, []),
    "shared_ledger": (t_shared_ledger, []),
    "policy": (t_policy, ["--compute-policy", "cap"]),
}


def main():
    fn, args = TESTS[sys.argv[1]]
    gpus = ((("GPU-aaaa-0000", 16 * GIB),) if sys.argv[1] == "shared_ledger"
            else (("GPU-aaaa-0000", 16 * GIB), ("GPU-bbbb-1111", 16 * GIB)))
    node = Node(gpus=gpus, extra_args=args)
    U[:] = node.uuids  # the standalone plugin's; the daemon's are read at start
    node.uuids = U
    node.kubelet.start()
    ok = False
    try:
        fn(node)
        ok = True
    finally:
        node.close(ok)
    print("PASS", sys.argv[1])


if __name__ == "__main__":
    main()
