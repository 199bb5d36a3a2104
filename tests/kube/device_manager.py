# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the kubelet's device manager, strict about the behaviour
the device plugin meets on a real node (no kubelet can run here).

Written from pkg/kubelet/cm/devicemanager/manager.go (kubernetes/kubernetes):
  - Allocate(pod, container): init containers first; the units of a plain
    (non-restartable) init container go to the pod's devicesToReuse and are
    handed to the next containers (addContainerAllocatedResources), an app
    container's units are taken out of it (removeContainerAllocatedResources);
  - devicesToAllocate: units reused first, then GetPreferredAllocation over
    available + chosen with must_include = chosen, then any available unit;
    available = healthy - allocated (allocated: every unit of podDevices);
  - allocateContainerResources: updateAllocatedDevices (pods no longer
    active leave podDevices, in memory) before allocating, one Allocate RPC
    per container, then writeCheckpoint;
  - writeCheckpoint also after every ListAndWatch message
    (genericDeviceUpdateCallback), from podDevices as it is in memory;
    UpdateAllocatedDevices (the kubelet's housekeeping) drops pods that are
    no longer active from podDevices without writing it;
  - the checkpoint (pkg/kubelet/cm/devicemanager/checkpoint/checkpoint.go):
    {"Data": {"PodDeviceEntries": [{"PodUID", "ContainerName",
    "ResourceName", "DeviceIDs": {"<numa>": [...]}, "AllocResp": base64}],
    "RegisteredDevices": {resource: [healthy ids]}}, "Checksum": n}
and pkg/kubelet/apis/podresources/server_v1.go (List): app containers and
restartable init containers (sidecars) only, never plain init containers;
after a kubelet restart only the pods its sources have reported so far.
"""
import base64
import json
import os
import threading

import deviceplugin_v1beta1_pb2 as dp
from kubelet_sim import RESOURCE, check


class Pod:
    """A pod: (name, units[, restartable]) init containers, (name, units) app ones."""

    def __init__(self, uid, init=(), app=(), ns="default", name=None):
        self.uid = uid
        self.ns = ns
        self.name = name or uid
        self.init = [(c[0], c[1], c[2] if len(c) > 2 else False) for c in init]
        self.app = list(app)


class DeviceManager:
    def __init__(self, node):
        self.node = node
        self.checkpoint = os.path.join(node.plugin_dir, "kubelet_internal_checkpoint")
        self.healthy = set()        # from ListAndWatch
        self.numa = {}              # id -> NUMA node
        self.pod_devices = {}       # uid -> {container: (ids, AllocResp bytes)}
        self.active = {}            # uid -> Pod (the pods the kubelet runs)
        self.reuse = {}             # uid -> set of reusable ids
        self.listed = None          # uids PodResources may report; None: all active
        self.lock = threading.Lock()
        self.client = None
        self.queue = None

    # ---- the plugin's side ----
    def connect(self):
        """Dial the plugin and open ListAndWatch; every message is applied
        as the kubelet does (health, then the checkpoint written)."""
        self.client = self.node.client()
        self.queue = self.client.watch()
        self.messages = 0
        first = threading.Event()

        def pump(q):
            while True:
                m = q.get()
                if isinstance(m, Exception):
                    return
                with self.lock:
                    self.healthy = {d.ID for d in m.devices if d.health == "Healthy"}
                    self.numa = {d.ID: (d.topology.nodes[0].ID if d.topology.nodes else -1)
                                 for d in m.devices}
                    self.update_allocated()
                    self.write_checkpoint()
                    self.messages += 1
                first.set()
        threading.Thread(target=pump, args=(self.queue,), daemon=True).start()
        check(first.wait(10), "no ListAndWatch message within 10 s")

    # ---- admission ----
    def allocated(self):
        return {i for conts in self.pod_devices.values() for ids, _ in conts.values()
                for i in ids}

    def update_allocated(self):
        """updateAllocatedDevices: pods that are not active leave podDevices."""
        for uid in list(self.pod_devices):
            if uid not in self.active:
                del self.pod_devices[uid]

    def devices_to_allocate(self, uid, need):
        chosen = []
        for i in sorted(self.reuse.get(uid, ())):
            if len(chosen) == need:
                break
            chosen.append(i)
        if len(chosen) == need:
            return chosen
        available = self.healthy - self.allocated() - set(chosen)
        check(len(available) >= need - len(chosen),
              "requested number of devices unavailable: %d of %d" % (len(available), need))
        pref = self.client.preferred(sorted(available | set(chosen)), must=chosen, size=need)
        for i in pref.container_responses[0].deviceIDs:
            if i in available and len(chosen) < need:
                chosen.append(i)
                available.discard(i)
        for i in sorted(available):
            if len(chosen) == need:
                break
            chosen.append(i)
        return chosen

    def allocate_container(self, pod, cname, need):
        with self.lock:
            self.update_allocated()
            ids = self.devices_to_allocate(pod.uid, need)
        resp = self.client.allocate(ids)
        answer = resp.container_responses[0]
        with self.lock:
            self.pod_devices.setdefault(pod.uid, {})[cname] = (ids, answer.SerializeToString())
            self.write_checkpoint()
        return ids, answer

    def admit(self, pod):
        """Admit a pod: every container in the kubelet's order. Returns
        {container: (ids, ContainerAllocateResponse)}."""
        self.reuse = {pod.uid: set()}  # entries of other pods are dropped
        self.active[pod.uid] = pod
        out = {}
        for name, need, restartable in pod.init:
            ids, ans = self.allocate_container(pod, name, need)
            if restartable:
                self.reuse[pod.uid] -= set(ids)
            else:
                self.reuse[pod.uid] |= set(ids)
            out[name] = (ids, ans)
        for name, need in pod.app:
            ids, ans = self.allocate_container(pod, name, need)
            self.reuse[pod.uid] -= set(ids)
            out[name] = (ids, ans)
        self.publish()
        return out

    def remove(self, uid):
        """The pod ended: PodResources stops listing it at once; podDevices
        forgets it at the kubelet's next housekeeping, the checkpoint at
        the next write (an allocation or a ListAndWatch message)."""
        with self.lock:
            self.active.pop(uid, None)
            self.update_allocated()
        self.publish()

    # ---- what the plugin can read ----
    def write_checkpoint(self):
        entries = []
        for uid, conts in self.pod_devices.items():
            for cname, (ids, resp) in conts.items():
                by_numa = {}
                for i in ids:
                    by_numa.setdefault(str(self.numa.get(i, -1)), []).append(i)
                entries.append({"PodUID": uid, "ContainerName": cname,
                                "ResourceName": RESOURCE, "DeviceIDs": by_numa,
                                "AllocResp": base64.b64encode(resp).decode()})
        data = {"Data": {"PodDeviceEntries": entries,
                         "RegisteredDevices": {RESOURCE: sorted(self.healthy)}},
                "Checksum": 0}
        tmp = self.checkpoint + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.rename(tmp, self.checkpoint)

    def publish(self):
        """What PodResources List reports now."""
        if not self.node.pods:
            return
        rows = []
        for uid, pod in self.active.items():
            if self.listed is not None and uid not in self.listed:
                continue
            conts = self.pod_devices.get(uid, {})
            listed = [n for n, _, r in pod.init if r] + [n for n, _ in pod.app]
            for name in listed:
                if name in conts:
                    rows.append((pod.ns, pod.name, name, conts[name][0]))
        self.node.pods.set(rows)

    def restart(self, listed=()):
        """A kubelet restart: it removes every socket of the plugin dir and
        listens again; until its sources are ready PodResources lists only
        `listed` of the running pods. podDevices comes back from the
        checkpoint; no Allocate is repeated for running containers."""
        if self.client:
            self.client.close()
            self.client = None
        self.node.kubelet.stop()
        for f in os.listdir(self.node.plugin_dir):
            p = os.path.join(self.node.plugin_dir, f)
            if f != os.path.basename(self.checkpoint) and not os.path.isdir(p):
                os.unlink(p)
        self.listed = set(listed)
        self.publish()
        self.node.kubelet.start()

    def sources_ready(self):
        self.listed = None
        self.publish()


def answer_envs(ans):
    return dict(ans.envs)


def answer_mounts(ans):
    return {m.container_path: (m.host_path, m.read_only) for m in ans.mounts}


def decode_answer(raw):
    return dp.ContainerAllocateResponse.FromString(raw)
