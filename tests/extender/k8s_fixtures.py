# SPDX-License-Identifier: Apache-2.0
"""Node and Pod objects as the kube-scheduler serialises them into
ExtenderArgs (k8s.io/kube-scheduler/extender/v1, nodeCacheCapable: false):
Go's encoding/json of the informer's v1.Node and v1.Pod (no TypeMeta, so no
apiVersion/kind on the items; omitempty fields left out, empty structs as
{}), inside {"Pod": ..., "Nodes": {"metadata": {}, "items": [...]},
"NodeNames": null}. Field names are upstream's (k8s.io/api/core/v1)."""
import datetime
import json
import uuid

GPUS_ANNOTATION = "gpuslice.io/gpus"
RESOURCE = "gpuslice.io/gpu-milli"
GiB = 1 << 30


def rfc3339(t=None):
    t = t if t is not None else datetime.datetime.now(datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def report(gpus, generation, when=None, pods=None):
    """The value gpusliced --report-node writes (src/kube/node_report.h);
    gpus: [(milli_free, memory_free, memory_total)] or dicts."""
    out = []
    for i, g in enumerate(gpus):
        if isinstance(g, dict):
            out.append(g)
            continue
        free, mfree, mtotal = g
        out.append({"index": i, "uuid": "GPU-%08x-0000-0000-0000-%012d" % (i, generation % 10**12),
                    "model": "NVIDIA H200", "healthy": True, "milli_free": free,
                    "memory_free": mfree, "memory_total": mtotal})
    r = {"generation": generation, "time": rfc3339(when), "gpus": out}
    if pods is not None:
        r["pods"] = list(pods)
    return json.dumps(r, separators=(",", ":"))


def node(name, annotation=None, n_gpus=2):
    """A v1.Node as the scheduler's informer holds it."""
    ann = {"node.alpha.kubernetes.io/ttl": "0",
           "volumes.kubernetes.io/controller-managed-attach-detach": "true",
           "kubeadm.alpha.kubernetes.io/cri-socket": "unix:///run/containerd/containerd.sock"}
    if annotation is not None:
        ann[GPUS_ANNOTATION] = annotation
    milli = str(1000 * n_gpus)
    if int(milli) % 1000 == 0 and int(milli) >= 1000:
        milli = "%dk" % (int(milli) // 1000)  # Quantity.String() of 2000 is "2k"
    return {
        "metadata": {
            "name": name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "81234",
            "creationTimestamp": "2026-11-30T08:00:00Z",
            "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                       "kubernetes.io/os": "linux", "gpuslice.io/enabled": "true"},
            "annotations": ann,
        },
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"]},
        "status": {
            "capacity": {"cpu": "64", "memory": "528276380Ki", "pods": "110",
                         "ephemeral-storage": "1967292124Ki", RESOURCE: milli},
            "allocatable": {"cpu": "63500m", "memory": "527149980Ki", "pods": "110",
                            "ephemeral-storage": "1813081090942", RESOURCE: milli},
            "conditions": [
                {"type": "MemoryPressure", "status": "False",
                 "lastHeartbeatTime": "2026-12-01T14:00:00Z",
                 "lastTransitionTime": "2026-11-30T08:00:00Z",
                 "reason": "KubeletHasSufficientMemory",
                 "message": "kubelet has sufficient memory available"},
                {"type": "Ready", "status": "True",
                 "lastHeartbeatTime": "2026-12-01T14:00:00Z",
                 "lastTransitionTime": "2026-11-30T08:01:00Z",
                 "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.%d" % (hash(name) % 200 + 2)},
                          {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "0" * 32, "systemUUID": str(uuid.uuid4()),
                         "bootID": str(uuid.uuid4()), "kernelVersion": "6.1.0-27-amd64",
                         "osImage": "Debian GNU/Linux 12 (bookworm)",
                         "containerRuntimeVersion": "containerd://1.7.24",
                         "kubeletVersion": "v1.33.2", "kubeProxyVersion": "",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": ["registry.k8s.io/pause@sha256:" + "a" * 64,
                                  "registry.k8s.io/pause:3.10"], "sizeBytes": 320368}],
        },
    }


def container(name, milli=None, requests_too=True, restart_policy=None):
    c = {"name": name, "image": "registry.example/serve:1.0",
         "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
         "resources": {},
         "terminationMessagePath": "/dev/termination-log",
         "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
    if milli is not None:
        c["resources"]["limits"] = {RESOURCE: str(milli), "cpu": "1", "memory": "4Gi"}
        if requests_too:  # the API server defaults requests to the limits
            c["resources"]["requests"] = dict(c["resources"]["limits"])
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def pod(name, milli=None, containers=None, init=None, annotations=None, ns="default"):
    """A pending v1.Pod as the scheduler sees it (defaults applied by the
    API server, status Pending with no conditions yet)."""
    cs = containers if containers is not None else [container("api", milli)]
    p = {
        "metadata": {
            "name": name, "generateName": name.rsplit("-", 1)[0] + "-", "namespace": ns,
            "uid": str(uuid.uuid4()), "resourceVersion": "90001",
            "creationTimestamp": rfc3339(),
            "labels": {"app": name.rsplit("-", 1)[0], "pod-template-hash": "5d8f7c9b6"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": name.rsplit("-", 1)[0] + "-5d8f7c9b6",
                                 "uid": str(uuid.uuid4()), "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "volumes": [{"name": "kube-api-access-x7k2p", "projected": {
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}}],
                "defaultMode": 420}}],
            "containers": cs,
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
            "serviceAccount": "default", "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }
    if init:
        p["spec"]["initContainers"] = init
    if annotations:
        p["metadata"]["annotations"] = annotations
    return p


def args(p, nodes):
    """ExtenderArgs with full Node objects (nodeCacheCapable: false)."""
    return {"Pod": p, "Nodes": {"metadata": {}, "items": nodes}, "NodeNames": None}


def args_names(p, names):
    """ExtenderArgs in the nodeCacheCapable: true form."""
    return {"Pod": p, "Nodes": None, "NodeNames": names}
