# SPDX-License-Identifier: Apache-2.0
"""Test doubles for the kubelet side of the device plugin protocol.

Plays the kubelet with grpcio's generic APIs and message classes generated
by Debian's protoc: the Registration server on kubelet.sock (which dials the
plugin back and asks GetDevicePluginOptions inside Register, as current
kubelets do), a PodResources server, and a client of the plugin's socket.
"""
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc

import deviceplugin_v1beta1_pb2 as dp
import podresources_v1_pb2 as pr

RESOURCE = "gpuslice.io/gpu-milli"
GIB = 1 << 30


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def wait_for(pred, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    fail("timed out waiting for " + what)


def unary(channel, path, req_cls, resp_cls):
    return channel.unary_unary(path, request_serializer=req_cls.SerializeToString,
                               response_deserializer=resp_cls.FromString)


class Kubelet:
    """Registration server on <dir>/kubelet.sock."""

    def __init__(self, plugin_dir):
        self.dir = plugin_dir
        self.registrations = queue.Queue()
        self.server = None
        self.on_register = None  # called inside Register, before it answers

    def start(self):
        # A (re)started kubelet waits for registrations to its new socket:
        # ones the last instance took are not this one's.
        self.registrations = queue.Queue()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        h = grpc.method_handlers_generic_handler("v1beta1.Registration", {
            "Register": grpc.unary_unary_rpc_method_handler(
                self._register, request_deserializer=dp.RegisterRequest.FromString,
                response_serializer=dp.Empty.SerializeToString)})
        self.server.add_generic_rpc_handlers((h,))
        self.server.add_insecure_port("unix:" + os.path.join(self.dir, "kubelet.sock"))
        self.server.start()

    def _register(self, req, ctx):
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported version")
        # Dial back while Register is in flight, as the kubelet does.
        ch = grpc.insecure_channel("unix:" + os.path.join(self.dir, req.endpoint))
        try:
            grpc.channel_ready_future(ch).result(timeout=10)
            opts = unary(ch, "/v1beta1.DevicePlugin/GetDevicePluginOptions", dp.Empty,
                         dp.DevicePluginOptions)(dp.Empty(), timeout=10)
        except Exception as e:  # noqa: BLE001
            ctx.abort(grpc.StatusCode.UNAVAILABLE, "dial back failed: %s" % e)
        finally:
            ch.close()
        if self.on_register:
            self.on_register()
        self.registrations.put((req, opts))
        return dp.Empty()

    def wait_registration(self, timeout=15):
        try:
            return self.registrations.get(timeout=timeout)
        except queue.Empty:
            fail("the plugin did not register within %ds" % timeout)

    def stop(self):
        if self.server:
            self.server.stop(0).wait()
            self.server = None


class PodResources:
    """PodResourcesLister server; `pods` is a list of (ns, pod, container, ids)."""

    def __init__(self, path):
        self.path = path
        self.pods = []
        self.lock = threading.Lock()
        self.calls = 0
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        h = grpc.method_handlers_generic_handler("v1.PodResourcesLister", {
            "List": grpc.unary_unary_rpc_method_handler(
                self._list, request_deserializer=pr.ListPodResourcesRequest.FromString,
                response_serializer=pr.ListPodResourcesResponse.SerializeToString)})
        self.server.add_generic_rpc_handlers((h,))
        self.server.add_insecure_port("unix:" + path)
        self.server.start()

    def set(self, pods):
        with self.lock:
            self.pods = list(pods)

    def _list(self, req, ctx):
        resp = pr.ListPodResourcesResponse()
        with self.lock:
            self.calls += 1
            for ns, pod, container, ids in self.pods:
                p = resp.pod_resources.add(name=pod, namespace=ns)
                c = p.containers.add(name=container)
                c.devices.add(resource_name=RESOURCE, device_ids=list(ids))
                c.devices.add(resource_name="example.com/other", device_ids=["x1"])
        return resp

    def stop(self):
        self.server.stop(0).wait()


class PluginClient:
    """The kubelet as a client of the plugin's socket."""

    def __init__(self, sock):
        self.channel = grpc.insecure_channel(
            "unix:" + sock, options=[("grpc.max_receive_message_length", 16 << 20)])
        grpc.channel_ready_future(self.channel).result(timeout=10)
        self.streams = []

    def options(self):
        return unary(self.channel, "/v1beta1.DevicePlugin/GetDevicePluginOptions", dp.Empty,
                     dp.DevicePluginOptions)(dp.Empty(), timeout=10)

    def allocate(self, *containers):
        req = dp.AllocateRequest()
        for ids in containers:
            req.container_requests.add(devices_ids=list(ids))
        return unary(self.channel, "/v1beta1.DevicePlugin/Allocate", dp.AllocateRequest,
                     dp.AllocateResponse)(req, timeout=10)

    def allocate_error(self, *containers):
        try:
            self.allocate(*containers)
        except grpc.RpcError as e:
            return e
        fail("Allocate %s succeeded but should fail" % [len(c) for c in containers])

    def raw(self, path, data):
        return self.channel.unary_unary(path, request_serializer=lambda b: b,
                                        response_deserializer=lambda b: b)(data, timeout=10)

    def preferred(self, available, must=(), size=1):
        req = dp.PreferredAllocationRequest()
        req.container_requests.add(available_deviceIDs=list(available),
                                   must_include_deviceIDs=list(must), allocation_size=size)
        return unary(self.channel, "/v1beta1.DevicePlugin/GetPreferredAllocation",
                     dp.PreferredAllocationRequest, dp.PreferredAllocationResponse)(
                         req, timeout=10)

    def watch(self):
        """Open ListAndWatch; returns a queue that receives every message."""
        q = queue.Queue()
        call = self.channel.unary_stream(
            "/v1beta1.DevicePlugin/ListAndWatch", request_serializer=dp.Empty.SerializeToString,
            response_deserializer=dp.ListAndWatchResponse.FromString)(dp.Empty())

        def pump():
            try:
                for m in call:
                    q.put(m)
            except grpc.RpcError as e:
                q.put(e)
        threading.Thread(target=pump, daemon=True).start()
        self.streams.append(call)
        return q

    def close(self):
        for c in self.streams:
            c.cancel()
        self.channel.close()


def envs(resp, i=0):
    return dict(resp.container_responses[i].envs)


def mounts(resp, i=0):
    return {m.container_path: (m.host_path, m.read_only) for m in resp.container_responses[i].mounts}


def ids(gpu, start, count):
    return ["gpu%d-u%d" % (gpu, u) for u in range(start, start + count)]


def read_conf(path):
    conf = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#"):
                k, v = line.split("=", 1)
                conf[k.strip()] = v.strip()
    return conf


class Node:
    """A scratch node: plugin dir, state dir and the device plugin process.

    With GS_KUBE_DAEMON set (the tests) the plugin is the real daemon,
    `gpusliced --sim --kubelet`, on simgpu (GPUs and health from its NVML,
    GS_SIM_LIBDIR / GS_SIM_SMI); otherwise (the benchmark) it is the
    standalone gpuslice-kubelet-plugin (GS_KUBE_PLUGIN) reading an inventory
    file with the GPUs given here."""

    def __init__(self, gpus=(("GPU-aaaa-0000", 16 * GIB), ("GPU-bbbb-1111", 16 * GIB)),
                 extra_args=()):
        self.tmp = tempfile.mkdtemp(prefix="gs-kube-")
        self.plugin_dir = os.path.join(self.tmp, "device-plugins")
        os.mkdir(self.plugin_dir)
        self.state_dir = os.path.join(self.tmp, "state")
        self.inventory = os.path.join(self.tmp, "inventory")
        self.pr_sock = os.path.join(self.tmp, "pod-resources.sock")
        self.shim = os.path.join(self.tmp, "libgpuslice.so")
        open(self.shim, "w").close()
        self.gpus = list(gpus)
        self.health = ["healthy"] * len(self.gpus)
        self.extra_args = list(extra_args)
        self.proc = None
        self.log = os.path.join(self.tmp, "plugin.log")
        self.kubelet = Kubelet(self.plugin_dir)
        self.pods = None
        self.daemon = os.environ.get("GS_KUBE_DAEMON")
        self.env = dict(os.environ)
        # uuids[i]: GPU i's uuid (simgpu's are known once the daemon runs).
        self.uuids = []
        if self.daemon:
            lib = os.environ.get("GS_SIM_LIBDIR", "")
            if not lib or not os.path.exists(os.path.join(lib, "libnvidia-ml.so.1")):
                print("SKIP: simgpu not built")
                sys.exit(77)
            self.smi_bin = os.environ.get("GS_SIM_SMI") or os.path.join(lib, "simgpu-smi")
            # The socket in a directory of its own: pods mount that directory.
            self.daemon_sock = os.path.join(self.tmp, "run", "gpusliced.sock")
            self.env.update({
                "SIMGPU_DIR": os.path.join(self.tmp, "simgpu"),
                "SIMGPU_DEVICES": str(len(self.gpus)),
                "SIMGPU_MEMORY": str(self.gpus[0][1]),
                "GPUSLICE_SIM_LIBDIR": lib,
                "GPUSLICE_SOCKET": self.daemon_sock,
                "GPUSLICE_STATE_DIR": self.state_dir,
                "GPUSLICE_LOG_DIR": os.path.join(self.tmp, "logs"),  # slices' logs, not /var/log
            })
            os.mkdir(self.env["SIMGPU_DIR"])
        else:
            self.uuids[:] = [g[0] for g in self.gpus]
            self.write_inventory()

    @property
    def sock(self):
        return os.path.join(self.plugin_dir, "gpuslice.sock")

    def write_inventory(self):
        tmp = self.inventory + ".tmp"
        with open(tmp, "w") as f:
            for (uuid, mem), h in zip(self.gpus, self.health):
                f.write("%s %d %s\n" % (uuid, mem, h))
        os.rename(tmp, self.inventory)

    def smi(self, *args):
        return subprocess.run([self.smi_bin] + list(args), env=self.env, capture_output=True,
                              text=True, check=True, timeout=10).stdout

    def set_health(self, i, state):
        """GPU i becomes "healthy" or "lost" (simgpu-smi, or the inventory file)."""
        self.health[i] = state
        if self.daemon:
            self.smi("--set-lost" if state == "lost" else "--clear-lost", str(i))
        else:
            self.write_inventory()

    def start_plugin(self, wait_registered=True):
        common = ["--kubelet-dir", self.plugin_dir, "--pod-resources", self.pr_sock,
                  "--shim", self.shim, "--health-poll-ms", "100"]
        if self.daemon:
            cmd = [self.daemon, "--sim", "--kubelet", "--state-dir", self.state_dir,
                   "--socket", self.daemon_sock] + common + self.extra_args
        else:
            cmd = [os.environ["GS_KUBE_PLUGIN"], "--state-dir", self.state_dir,
                   "--inventory", self.inventory] + common + self.extra_args
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                     stderr=open(self.log, "a"), env=self.env)
        reg = self.kubelet.wait_registration() if wait_registered else None
        if self.daemon and not self.uuids:
            import json
            devs = json.loads(self.smi("--json"))["devices"]
            self.uuids[:] = [d["uuid"] for d in sorted(devs, key=lambda d: d["index"])]
            check(len(self.uuids) == len(self.gpus), "simgpu has %d GPUs" % len(self.uuids))
        return reg

    def stop_plugin(self):
        if self.proc:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                fail("the plugin did not stop on SIGTERM")
            self.proc = None
            return rc
        return None

    def client(self):
        return PluginClient(self.sock)

    def close(self, ok=True):
        rc = self.stop_plugin()
        self.kubelet.stop()
        if self.pods:
            self.pods.stop()
        if rc not in (None, 0):
            ok = False
            print("plugin exited with", rc)
        log = open(self.log).read() if os.path.exists(self.log) else ""
        sanitizer = "ERROR: AddressSanitizer" in log or "runtime error:" in log or \
            "ERROR: LeakSanitizer" in log
        if not ok or sanitizer or os.environ.get("GS_KUBE_KEEP"):
            print("---- plugin log ----")
            print(log)
        shutil.rmtree(self.tmp, ignore_errors=True)
        if rc not in (None, 0):
            fail("the plugin exited with status %s" % rc)
        if sanitizer:
            fail("sanitizer report in the plugin's log")
