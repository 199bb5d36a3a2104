# SPDX-License-Identifier: Apache-2.0
"""deploy/, a kustomize base: the DaemonSet mounts every host path the device
plugin hands to the kubelet in Allocate answers (at the host's own paths),
keeps its state on disk, installs the shim there, runs on labelled nodes
under the NVIDIA runtime, and asks for no more privilege than it needs. The
DRA component (deploy/components/dra) adds --dra, a token, NODE_NAME and the
kubelet's plugin and CDI directories at their own paths, RBAC with only the
verbs the driver uses, bound to the base's ServiceAccount, and a policy that
keeps that account to its own node's ResourceSlices.
Read from the files themselves (no kubectl: kube_manifests renders and
validates them)."""
import os
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")
DEPLOY = os.path.join(ROOT, "deploy")

STATE = "/var/lib/gpuslice"
RUN = "/run/gpuslice"
IMAGE = "gpuslice:0.1.0"


def load_all(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def arg(args, flag):
    assert flag in args, "%s not in the daemon's args" % flag
    return args[args.index(flag) + 1]


def under(path, d):
    return path == d or path.startswith(d.rstrip("/") + "/")


def check_security(c):
    sc = c["securityContext"]
    assert sc.get("privileged") is False and sc["allowPrivilegeEscalation"] is False, c["name"]
    assert sc["readOnlyRootFilesystem"] is True, c["name"]
    assert sc["capabilities"]["drop"] == ["ALL"], c["name"]
    return sc


def main():
    kust = yaml.safe_load(open(os.path.join(DEPLOY, "kustomization.yaml")))
    assert kust["kind"] == "Kustomization" and kust["namespace"] == "kube-system"
    objs = [o for r in kust["resources"] for o in load_all(os.path.join(DEPLOY, r))]
    assert "example-pod.yaml" not in kust["resources"], "the example is not part of the base"
    by_kind = {o["kind"]: o for o in objs}
    assert sorted(by_kind) == ["DaemonSet", "ServiceAccount"], sorted(by_kind)
    assert "Namespace" not in by_kind, "kube-system is never created or deleted by the base"

    ds = by_kind["DaemonSet"]
    spec = ds["spec"]["template"]["spec"]
    vols = {v["name"]: v["hostPath"] for v in spec["volumes"] if "hostPath" in v}
    host = {n: hp["path"] for n, hp in vols.items()}
    c = next(x for x in spec["containers"] if x["name"] == "gpusliced")
    mounted = {host[m["name"]]: m for m in c["volumeMounts"] if m["name"] in host}
    for path in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", STATE, RUN):
        assert path in mounted, "%s not mounted" % path
        assert mounted[path]["mountPath"] == path, "%s mounted elsewhere" % path
    for name, hp in vols.items():
        if hp["path"] in (STATE, RUN):
            assert hp["type"] == "DirectoryOrCreate", "%s: %s" % (hp["path"], hp["type"])
    assert not mounted[STATE].get("readOnly") and not mounted[RUN].get("readOnly")

    # The daemon: its state on disk (the ledger survives a node reboot), its
    # socket alone under /run, the shim in the state directory. Every path
    # it hands the kubelet is a host path mounted at the same place.
    assert c["image"] == IMAGE and c["command"] == ["/usr/bin/gpusliced"], c["command"]
    args = c["args"]
    assert "--kubelet" in args
    state = arg(args, "--state-dir")
    assert state == STATE and not under(state, "/run"), "state dir %s is not on disk" % state
    sock = arg(args, "--socket")
    assert os.path.dirname(sock) == RUN, "socket %s is not in %s" % (sock, RUN)
    shim = arg(args, "--shim")
    assert shim == STATE + "/lib/libgpuslice.so", shim
    for p in (state, os.path.dirname(sock), shim):
        assert any(under(p, h) and mounted[h]["mountPath"] == h for h in mounted), \
            "%s not on a hostPath mounted at the same path" % p

    # The init container copies the image's shim to the host's state dir.
    init = spec["initContainers"]
    assert [i["name"] for i in init] == ["install-shim"], init
    i = init[0]
    assert i["image"] == IMAGE
    cmd = i.get("command", []) + i.get("args", [])
    assert cmd == ["/usr/bin/gpusliced", "install-shim",
                   "/host/var/lib/gpuslice/lib/libgpuslice.so"], cmd
    imounts = {m["mountPath"]: host[m["name"]] for m in i["volumeMounts"]}
    assert imounts == {"/host" + STATE: STATE}, imounts
    target = cmd[-1]
    (mp, hp), = imounts.items()
    assert under(target, mp) and hp + target[len(mp):] == shim, \
        "the init container installs %s, the daemon hands out %s" % (hp + target[len(mp):], shim)
    isc = check_security(i)
    assert not isc["capabilities"].get("add"), "the init container needs no capability"

    # Nodes: the user's label, not GPU Feature Discovery's; NVML through the
    # NVIDIA runtime.
    assert spec["nodeSelector"] == {"gpuslice.io/enabled": "true"}, spec["nodeSelector"]
    assert spec["runtimeClassName"] == "nvidia"
    env = {e["name"]: e["value"] for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "utility", env

    sc = check_security(c)
    # Pods' processes are identified through /proc/<pid>/root (arbiter).
    assert "SYS_PTRACE" in sc["capabilities"]["add"], "SYS_PTRACE not added"
    assert set(sc["capabilities"]["add"]) <= {"SYS_PTRACE", "KILL"}, sc["capabilities"]["add"]
    assert spec["hostPID"] is True
    assert not spec.get("hostNetwork") and not spec.get("hostIPC")
    assert spec["automountServiceAccountToken"] is False
    sa = by_kind["ServiceAccount"]
    assert spec["serviceAccountName"] == sa["metadata"]["name"]
    assert sa["automountServiceAccountToken"] is False

    # The workload example.
    pod = yaml.safe_load(open(os.path.join(DEPLOY, "example-pod.yaml")))
    assert pod["spec"]["runtimeClassName"] == "nvidia"
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits["gpuslice.io/gpu-milli"] == 300, "extended resources are integers"

    # The optional RuntimeClass, outside the base.
    comp = os.path.join(DEPLOY, "components/nvidia-runtimeclass")
    ck = yaml.safe_load(open(os.path.join(comp, "kustomization.yaml")))
    assert ck["kind"] == "Component"
    rcs = [o for r in ck["resources"] for o in load_all(os.path.join(comp, r))]
    assert [(o["kind"], o["metadata"]["name"], o["handler"]) for o in rcs] == \
        [("RuntimeClass", "nvidia", "nvidia")], rcs
    assert not any(o["kind"] == "RuntimeClass" for o in objs), "no RuntimeClass in the base"

    check_dra(kust, ds, sa)
    check_extender()
    print("PASS deploy")


def check_extender():
    """deploy/components/extender: the extender needs nothing of the node
    or the API server: no token, no host paths or host network, not root,
    no capability, and one replica (its record is in memory)."""
    comp = os.path.join(DEPLOY, "components/extender")
    ck = yaml.safe_load(open(os.path.join(comp, "kustomization.yaml")))
    assert ck["kind"] == "Component", ck
    objs = [o for r in ck["resources"] for o in load_all(os.path.join(comp, r))]
    by = {o["kind"]: o for o in objs}
    assert sorted(by) == ["Deployment", "Service"], sorted(by)
    dep = by["Deployment"]["spec"]
    assert dep["replicas"] == 1 and dep["strategy"]["type"] == "Recreate", dep
    pod = dep["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False, "no API access"
    for k in ("hostNetwork", "hostPID", "hostIPC", "volumes"):
        assert k not in pod, k
    (c,) = pod["containers"]
    sc = check_security(c)
    assert sc["runAsNonRoot"] is True and sc["runAsUser"] != 0, sc
    assert "add" not in sc["capabilities"], sc
    assert arg(c["args"], "--listen") == "0.0.0.0:%d" % c["ports"][0]["containerPort"], c
    assert c["resources"]["limits"]["memory"], "bounded memory"
    assert not os.path.exists(os.path.join(comp, "scheduler-config.yaml")) or \
        "scheduler-config.yaml" not in ck.get("resources", []), "not an API object"


def check_dra(kust, ds, sa):
    """deploy/components/dra against the base it patches."""
    comp = os.path.join(DEPLOY, "components/dra")
    ck = yaml.safe_load(open(os.path.join(comp, "kustomization.yaml")))
    assert ck["kind"] == "Component", ck["kind"]
    objs = [o for r in ck["resources"] for o in load_all(os.path.join(comp, r))]
    by = {o["kind"]: o for o in objs}
    assert sorted(by) == ["ClusterRole", "ClusterRoleBinding", "DeviceClass",
                          "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"], sorted(by)
    assert len(by) == len(objs), "one object of each kind"
    assert not any("namespace" in o["metadata"] for o in objs), "all cluster-scoped"

    # The DaemonSet patches: the merge patch names the base's DaemonSet and
    # container; the JSON patch checks the container before appending --dra.
    smp = [p for p in ck["patches"] if "path" in p]
    jp = [p for p in ck["patches"] if "patch" in p]
    assert len(smp) == 1 and len(jp) == 1, ck["patches"]
    patch = yaml.safe_load(open(os.path.join(comp, smp[0]["path"])))
    assert (patch["kind"], patch["metadata"]["name"]) == ("DaemonSet", ds["metadata"]["name"])
    pspec = patch["spec"]["template"]["spec"]
    assert pspec["automountServiceAccountToken"] is True, "the driver needs its token"
    assert [c["name"] for c in pspec["containers"]] == ["gpusliced"], pspec["containers"]
    base_c = ds["spec"]["template"]["spec"]["containers"]
    assert base_c[0]["name"] == "gpusliced", "the JSON patch addresses containers/0"
    ops = yaml.safe_load(jp[0]["patch"])
    assert jp[0]["target"] == {"group": "apps", "version": "v1", "kind": "DaemonSet",
                               "name": ds["metadata"]["name"]}, jp[0]["target"]
    assert ops == [{"op": "test", "path": "/spec/template/spec/containers/0/name",
                    "value": "gpusliced"},
                   {"op": "add", "path": "/spec/template/spec/containers/0/args/-",
                    "value": "--dra"}], ops
    assert "--kubelet" in base_c[0]["args"], "both paths over one ledger: --kubelet stays"
    c = pspec["containers"][0]
    assert c["env"] == [{"name": "NODE_NAME",
                         "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}], c["env"]
    base_vols = {v["name"] for v in ds["spec"]["template"]["spec"]["volumes"]}
    vols = {v["name"]: v["hostPath"] for v in pspec["volumes"]}
    assert not base_vols & set(vols), "new volume names only: %s" % (base_vols & set(vols))
    mounts = {vols[m["name"]]["path"]: m for m in c["volumeMounts"]}
    assert sorted(mounts) == ["/var/lib/kubelet/plugins/gpu.gpuslice.io",
                              "/var/lib/kubelet/plugins_registry", "/var/run/cdi"], sorted(mounts)
    for path, m in mounts.items():
        assert m["mountPath"] == path and not m.get("readOnly"), m
    types = {hp["path"]: hp["type"] for hp in vols.values()}
    assert types == {"/var/lib/kubelet/plugins_registry": "Directory",
                     "/var/lib/kubelet/plugins/gpu.gpuslice.io": "DirectoryOrCreate",
                     "/var/run/cdi": "DirectoryOrCreate"}, types

    # RBAC: exactly the driver's verbs (no eviction yet), for the base's
    # ServiceAccount in the base's namespace.
    rules = {(g, r): sorted(rule["verbs"]) for rule in by["ClusterRole"]["rules"]
             for g in rule["apiGroups"] for r in rule["resources"]}
    assert rules == {
        ("resource.k8s.io", "resourceslices"): sorted(["get", "list", "watch", "create",
                                                       "update", "patch", "delete"]),
        ("resource.k8s.io", "resourceclaims"): ["get"],
        ("", "nodes"): ["get"],
    }, rules
    crb = by["ClusterRoleBinding"]
    assert crb["roleRef"]["name"] == by["ClusterRole"]["metadata"]["name"], crb["roleRef"]
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                "namespace": kust["namespace"]}], crb["subjects"]

    # The admission policy: the same account, its own node, only this driver.
    vap = by["ValidatingAdmissionPolicy"]["spec"]
    user = "system:serviceaccount:%s:%s" % (kust["namespace"], sa["metadata"]["name"])
    assert [m["expression"] for m in vap["matchConditions"]] == \
        ['request.userInfo.username == "%s"' % user], vap["matchConditions"]
    assert vap["failurePolicy"] == "Fail"
    rr = vap["matchConstraints"]["resourceRules"]
    assert rr == [{"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                   "operations": ["CREATE", "UPDATE", "DELETE"],
                   "resources": ["resourceslices"]}], rr
    exprs = " ".join(v["expression"] for v in vap["variables"] + vap["validations"])
    for want in ("authentication.kubernetes.io/node-name", "oldObject", "nodeName",
                 's.spec.driver == "gpu.gpuslice.io"'):
        assert want in exprs, "%r not in the policy" % want
    vb = by["ValidatingAdmissionPolicyBinding"]["spec"]
    assert vb == {"policyName": by["ValidatingAdmissionPolicy"]["metadata"]["name"],
                  "validationActions": ["Deny"]}, vb

    dc = by["DeviceClass"]
    assert dc["apiVersion"] == "resource.k8s.io/v1" and dc["metadata"]["name"] == "gpu.gpuslice.io"
    assert dc["spec"] == {"selectors": [{"cel": {"expression":
                                                 'device.driver == "gpu.gpuslice.io"'}}]}, dc


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, KeyError, StopIteration, ValueError) as e:
        print("FAIL:", repr(e))
        sys.exit(1)
