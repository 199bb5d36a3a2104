# SPDX-License-Identifier: Apache-2.0
"""Every Kubernetes object gpuslice ships or prints is valid against the
upstream OpenAPI schemas: the kustomize base deploy/ (rendered by kubectl
kustomize, alone, in an overlay with the RuntimeClass component and a
retagged image, in one without runtimeClassName, and in one with the DRA
component deploy/components/dra, and the evict and extender components),
deploy/example-pod.yaml, deploy/components/extender/scheduler-config.yaml (a
KubeSchedulerConfiguration, checked against upstream's field names), and what
`gpuslice render` prints (with and without --dra) for examples/apis.yaml and
for the render test's specs. The schemas are those
of the npm package kubernetes-models 5.1.x, run by tests/kube/validate_k8s.js
in Node; validate_k8s.js also rejects fields the schemas do not define, and
its self-check (run first) proves that broken objects are refused.

Skips (exit 77) without kubectl, without Node 20 or later, or when
kubernetes-models cannot be installed (npm, from the configured registry,
into GS_NPM_DIR; a no-op once installed)."""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

from k8s_models import Unavailable, find_node, node_modules

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "../.."))
VALIDATOR = os.path.join(HERE, "validate_k8s.js")
RENDER = os.environ["GS_RENDER"]
NPM_DIR = os.environ["GS_NPM_DIR"]


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def kubectl():
    for k in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/bin/kubectl"):
        if os.access(k, os.X_OK):
            return k
    skip("no kubectl")


def node():
    try:
        return find_node()
    except Unavailable as e:
        skip(str(e))


def models():
    """node_modules holding kubernetes-models 5.1.x, installed once."""
    try:
        return node_modules(NPM_DIR)
    except Unavailable as e:
        skip(str(e))


def docs(text):
    return [d for d in yaml.safe_load_all(text) if d is not None]


def kustomize(k, path):
    r = subprocess.run([k, "kustomize", path], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, "kubectl kustomize %s: %s" % (path, r.stderr)
    return docs(r.stdout)


def render(*args):
    r = subprocess.run([RENDER, *args], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, "render %s: %s" % (" ".join(args), r.stderr)
    return docs(r.stdout)


def validate(nodejs, modules, items, d, name):
    path = os.path.join(d, name + ".json")
    with open(path, "w") as f:
        json.dump([{"source": s, "object": o} for s, o in items], f)
    return subprocess.run([nodejs, VALIDATOR, "--modules", modules, path],
                          capture_output=True, text=True, timeout=120)


def kinds(objs):
    return sorted(o["kind"] for o in objs)


CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", "DeviceClass", "RuntimeClass",
                  "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def overlay(d, name, body):
    """An overlay in d/name whose kustomization is `body`, with {deploy}
    standing for the (relative) path of deploy/."""
    ov = os.path.join(d, name)
    os.mkdir(ov)
    with open(os.path.join(ov, "kustomization.yaml"), "w") as f:
        f.write(body.format(deploy=os.path.relpath(os.path.join(ROOT, "deploy"), ov)))
    return ov


def check_evict_overlay(objs):
    """components/evict: a token, the right to create pods/eviction and get
    claims for the base's ServiceAccount, and --overuse-policy evict."""
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True, "evictions need the token"
    args = spec["containers"][0]["args"]
    assert args[-2:] == ["--overuse-policy", "evict"], args
    role = next(o for o in objs if o["kind"] == "ClusterRole"
                and o["metadata"]["name"] == "gpusliced-evict")
    rules = {(g, r): rule["verbs"] for rule in role["rules"] for g in rule["apiGroups"]
             for r in rule["resources"]}
    assert rules == {("", "pods/eviction"): ["create"],
                     ("resource.k8s.io", "resourceclaims"): ["get"]}, rules
    crb = next(o for o in objs if o["kind"] == "ClusterRoleBinding"
               and o["metadata"]["name"] == "gpusliced-evict")
    sa = next(o for o in objs if o["kind"] == "ServiceAccount")
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"],
                                "namespace": sa["metadata"]["namespace"]}], crb["subjects"]


def check_node_report_overlay(objs):
    """components/node-report: a token, NODE_NAME, --report-node, nodes get
    and patch for the base's ServiceAccount, and the admission policy that
    narrows it to its own Node's annotation."""
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    spec = ds["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is True, "the report needs the token"
    c = spec["containers"][0]
    assert "--report-node" in c["args"], c["args"]
    env = [e for e in c["env"] if e["name"] == "NODE_NAME"]
    assert env == [{"name": "NODE_NAME",
                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}], env
    role = next(o for o in objs if o["kind"] == "ClusterRole"
                and o["metadata"]["name"] == "gpusliced-node-report")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"],
                              "verbs": ["get", "patch"]}], role["rules"]
    vap = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicy"
               and o["metadata"]["name"] == "gpusliced-node-report")
    rules = vap["spec"]["matchConstraints"]["resourceRules"]
    assert rules == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"],
                      "resources": ["nodes"]}], rules
    assert vap["spec"]["failurePolicy"] == "Fail"
    exprs = " ".join(v["expression"] for v in vap["spec"]["validations"])
    assert "object.metadata.name == variables.userNodeName" in exprs, exprs
    assert "object.spec == oldObject.spec" in exprs, exprs
    binding = next(o for o in objs if o["kind"] == "ValidatingAdmissionPolicyBinding"
                   and o["metadata"]["name"] == "gpusliced-node-report")
    assert binding["spec"] == {"policyName": "gpusliced-node-report",
                               "validationActions": ["Deny"]}, binding["spec"]


def check_dra_overlay(objs):
    """The base with components/dra, as kubectl kustomize renders it: the
    DaemonSet is the DRA variant (both paths, token, NODE_NAME, host paths),
    and the cluster-scoped objects come along without a namespace."""
    assert kinds(objs) == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass",
                           "ServiceAccount", "ValidatingAdmissionPolicy",
                           "ValidatingAdmissionPolicyBinding"], kinds(objs)
    for o in objs:
        if o["kind"] in CLUSTER_SCOPED:
            assert "namespace" not in o["metadata"], "%s is cluster-scoped" % o["kind"]
        else:
            assert o["metadata"]["namespace"] == "kube-system", o["metadata"]
    by = {o["kind"]: o for o in objs}
    pod = by["DaemonSet"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is True, "the DRA driver needs its token"
    c = next(x for x in pod["containers"] if x["name"] == "gpusliced")
    assert c["args"][0] == "--kubelet" and c["args"].count("--dra") == 1, c["args"]
    assert c["args"].count("--kubelet") == 1 and "--state-dir" in c["args"], c["args"]
    env = {e["name"]: e for e in c["env"]}
    assert env["NODE_NAME"] == {"name": "NODE_NAME",
                                "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}, env
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all", "the base's env is kept"
    host = {v["name"]: v["hostPath"] for v in pod["volumes"] if "hostPath" in v}
    mounts = {host[m["name"]]["path"]: m["mountPath"] for m in c["volumeMounts"]}
    for p in ("/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins/gpu.gpuslice.io",
              "/var/run/cdi", "/var/lib/kubelet/device-plugins", "/var/lib/gpuslice",
              "/run/gpuslice"):
        assert mounts.get(p) == p, "%s not mounted at its own path: %s" % (p, mounts)
    assert len(pod["volumes"]) == len({v["name"] for v in pod["volumes"]}) == 7, pod["volumes"]
    sa = by["ServiceAccount"]["metadata"]
    crb = by["ClusterRoleBinding"]
    assert crb["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"],
                                "namespace": sa["namespace"]}], crb["subjects"]
    assert crb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                              "name": by["ClusterRole"]["metadata"]["name"]}, crb["roleRef"]
    user = "system:serviceaccount:%s:%s" % (sa["namespace"], sa["name"])
    vap = by["ValidatingAdmissionPolicy"]
    assert any(user in m["expression"] for m in vap["spec"]["matchConditions"]), vap["spec"]
    assert by["ValidatingAdmissionPolicyBinding"]["spec"] == {
        "policyName": vap["metadata"]["name"], "validationActions": ["Deny"]}
    assert by["DeviceClass"]["metadata"]["name"] == "gpu.gpuslice.io"


# KubeSchedulerConfiguration is not an API object (kubernetes-models has no
# schema for it): its shape is checked against the field names of
# k8s.io/kube-scheduler/config/v1 (types.go: KubeSchedulerConfiguration,
# Extender, ExtenderManagedResource, ExtenderTLSConfig).
KSC_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
              "enableProfiling", "enableContentionProfiling", "percentageOfNodesToScore",
              "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders",
              "delayCacheUntilActive"}
EXTENDER_FIELDS = {"urlPrefix": str, "filterVerb": str, "preemptVerb": str,
                   "prioritizeVerb": str, "weight": int, "bindVerb": str, "enableHTTPS": bool,
                   "tlsConfig": dict, "httpTimeout": str, "nodeCacheCapable": bool,
                   "managedResources": list, "ignorable": bool}
CLIENT_FIELDS = {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}


def check_scheduler_config(path):
    """deploy/components/extender/scheduler-config.yaml: upstream names and
    types only, and the extender wired as docs/scheduling.md says."""
    with open(path) as f:
        cfgs = docs(f.read())
    assert len(cfgs) == 1, "one KubeSchedulerConfiguration"
    c = cfgs[0]
    assert c["apiVersion"] == "kubescheduler.config.k8s.io/v1", c["apiVersion"]
    assert c["kind"] == "KubeSchedulerConfiguration", c["kind"]
    assert set(c) <= KSC_FIELDS, "unknown fields %s" % sorted(set(c) - KSC_FIELDS)
    assert set(c.get("clientConnection", {})) <= CLIENT_FIELDS, c["clientConnection"]
    assert c["percentageOfNodesToScore"] == 100, "the extender must see every candidate"
    assert len(c["extenders"]) == 1, c["extenders"]
    e = c["extenders"][0]
    for k, v in e.items():
        assert k in EXTENDER_FIELDS, "unknown extender field %s" % k
        assert isinstance(v, EXTENDER_FIELDS[k]) and not (
            EXTENDER_FIELDS[k] is int and isinstance(v, bool)), "%s: %r" % (k, v)
    assert e["urlPrefix"].startswith("http://") and not e["urlPrefix"].endswith("/"), e
    assert e["filterVerb"] == "filter" and e["prioritizeVerb"] == "prioritize", e
    assert "bindVerb" not in e, "the scheduler binds"
    assert e["weight"] > 0 and e["nodeCacheCapable"] is False and e["enableHTTPS"] is False, e
    assert re.fullmatch(r"\d+(ms|s|m)", e["httpTimeout"]), e["httpTimeout"]
    assert e["managedResources"] == [{"name": "gpuslice.io/gpu-milli",
                                      "ignoredByScheduler": False}], e["managedResources"]


def check_extender_overlay(objs, base):
    """The base with components/extender: its Deployment and Service added in
    kube-system, one replica, no token, the verbs' port behind the Service's
    NodePort that scheduler-config.yaml names; and the nodes' report
    (components/node-report, which it includes)."""
    report = ["ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy",
              "ValidatingAdmissionPolicyBinding"]
    extra = [k for k in report if not any(o["kind"] == k and o["metadata"]["name"] ==
                                          "gpusliced-node-report" for o in base)]
    assert kinds(objs) == sorted(kinds(base) + ["Deployment", "Service"] + extra), kinds(objs)
    check_node_report_overlay(objs)
    by = {o["kind"]: o for o in objs if o["kind"] in ("Deployment", "Service")}
    dep, svc = by["Deployment"], by["Service"]
    for o in (dep, svc):
        assert o["metadata"]["namespace"] == "kube-system", o["metadata"]
        assert o["metadata"]["name"] == "gpuslice-extender", o["metadata"]
    spec = dep["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}, \
        "one extender at a time: its record is in memory"
    pod = spec["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False, "the extender talks to no API server"
    c = pod["containers"][0]
    assert c["command"] == ["/usr/bin/gpuslice-extender"], c["command"]
    listen = c["args"][c["args"].index("--listen") + 1]
    assert listen.endswith(":%d" % c["ports"][0]["containerPort"]), (listen, c["ports"])
    assert c["readinessProbe"]["httpGet"]["path"] == "/healthz", c["readinessProbe"]
    sel = svc["spec"]["selector"]
    assert all(spec["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items()), sel
    port = svc["spec"]["ports"][0]
    assert port["targetPort"] == c["ports"][0]["name"], port
    with open(os.path.join(ROOT, "deploy/components/extender/scheduler-config.yaml")) as f:
        url = docs(f.read())[0]["extenders"][0]["urlPrefix"]
    assert url == "http://127.0.0.1:%d" % port["nodePort"], (url, port)


def main():
    k = kubectl()
    nodejs = node()
    modules = models()

    # The validator must be able to fail: broken objects are refused.
    r = subprocess.run([nodejs, VALIDATOR, "--modules", modules, "--self-check"],
                       capture_output=True, text=True, timeout=120)
    sys.stdout.write(r.stdout + r.stderr)
    assert r.returncode == 0 and "self-check passed" in r.stdout, "validator self-check failed"

    items = []
    with tempfile.TemporaryDirectory() as d:
        # The base, as `kubectl apply -k deploy/` sends it.
        base = kustomize(k, os.path.join(ROOT, "deploy"))
        assert kinds(base) == ["DaemonSet", "ServiceAccount"], kinds(base)
        assert all(o["metadata"].get("namespace") == "kube-system" for o in base), \
            "the base's objects are in kube-system"
        items += [("kustomize deploy/", o) for o in base]

        # An overlay as a user writes one: the RuntimeClass component and the
        # image retagged. kustomize wants relative paths to bases.
        ov = os.path.join(d, "overlay")
        os.mkdir(ov)
        rel = os.path.relpath(os.path.join(ROOT, "deploy"), ov)
        with open(os.path.join(ov, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources:\n- %s\ncomponents:\n- %s/components/nvidia-runtimeclass\n"
                    "images:\n- name: gpuslice\n  newName: registry.example/gpuslice\n"
                    "  newTag: 0.1.0-test\n" % (rel, rel))
        over = kustomize(k, ov)
        assert kinds(over) == ["DaemonSet", "RuntimeClass", "ServiceAccount"], kinds(over)
        rc = next(o for o in over if o["kind"] == "RuntimeClass")
        assert rc["metadata"]["name"] == "nvidia" and rc["handler"] == "nvidia", rc
        assert "namespace" not in rc["metadata"], "RuntimeClass is cluster-scoped"
        ds = next(o for o in over if o["kind"] == "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        images = {c["image"] for c in pod["containers"] + pod["initContainers"]}
        assert images == {"registry.example/gpuslice:0.1.0-test"}, images
        items += [("overlay with components/nvidia-runtimeclass", o) for o in over]

        # Where NVIDIA's runtime is the nodes' default and no RuntimeClass
        # nvidia exists, an overlay removes the field (docs/kubernetes.md).
        ov2 = os.path.join(d, "default-runtime")
        os.mkdir(ov2)
        with open(os.path.join(ov2, "kustomization.yaml"), "w") as f:
            f.write("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                    "resources:\n- %s\npatches:\n- target: {kind: DaemonSet, name: gpusliced}\n"
                    "  patch: |\n    - op: remove\n      path: /spec/template/spec/runtimeClassName\n"
                    % os.path.relpath(os.path.join(ROOT, "deploy"), ov2))
        plain = kustomize(k, ov2)
        ds = next(o for o in plain if o["kind"] == "DaemonSet")
        assert "runtimeClassName" not in ds["spec"]["template"]["spec"], "patched out"
        items += [("overlay without runtimeClassName", o) for o in plain]

        # The DRA variant: the component alone, and with the RuntimeClass
        # component and a retagged image.
        dra = kustomize(k, overlay(d, "dra", "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                   "kind: Kustomization\nresources:\n- {deploy}\n"
                                   "components:\n- {deploy}/components/dra\n"))
        check_dra_overlay(dra)
        items += [("overlay with components/dra", o) for o in dra]
        both = kustomize(k, overlay(d, "dra-runtimeclass",
                                    "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                    "kind: Kustomization\nresources:\n- {deploy}\ncomponents:\n"
                                    "- {deploy}/components/dra\n"
                                    "- {deploy}/components/nvidia-runtimeclass\n"
                                    "images:\n- name: gpuslice\n"
                                    "  newName: registry.example/gpuslice\n"
                                    "  newTag: 0.1.0-test\n"))
        assert kinds(both) == sorted(kinds(dra) + ["RuntimeClass"]), kinds(both)
        ds = next(o for o in both if o["kind"] == "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        images = {c["image"] for c in pod["containers"] + pod["initContainers"]}
        assert images == {"registry.example/gpuslice:0.1.0-test"}, images
        items += [("overlay with components/dra and nvidia-runtimeclass", o) for o in both]
        # DRA alone, with the patch docs/kubernetes.md gives: --kubelet removed.
        alone = kustomize(k, overlay(d, "dra-alone",
                                     "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                     "kind: Kustomization\nresources:\n- {deploy}\ncomponents:\n"
                                     "- {deploy}/components/dra\npatches:\n"
                                     "- target: {{kind: DaemonSet, name: gpusliced}}\n"
                                     "  patch: |\n"
                                     "    - op: test\n"
                                     "      path: /spec/template/spec/containers/0/args/0\n"
                                     "      value: --kubelet\n"
                                     "    - op: remove\n"
                                     "      path: /spec/template/spec/containers/0/args/0\n"))
        ds = next(o for o in alone if o["kind"] == "DaemonSet")
        args = ds["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--kubelet" not in args and args[-1] == "--dra", args
        items += [("overlay with components/dra, no --kubelet", o) for o in alone]
        # The evict policy and the node report: alone (device plugin only)
        # and with DRA.
        for name, comps in (("evict", ["evict"]), ("dra-evict", ["dra", "evict"]),
                            ("node-report", ["node-report"]),
                            ("dra-node-report", ["dra", "node-report"])):
            ev = kustomize(k, overlay(d, name, "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                      "kind: Kustomization\nresources:\n- {deploy}\n"
                                      "components:\n" + "".join(
                                          "- {deploy}/components/%s\n" % c for c in comps)))
            (check_evict_overlay if "evict" in comps else check_node_report_overlay)(ev)
            items += [("overlay with components/%s" % ", ".join(comps), o) for o in ev]

        # The scheduler extender (device-plugin path), alone and with DRA.
        for name, comps in (("extender", ["extender"]), ("dra-extender", ["dra", "extender"])):
            ex = kustomize(k, overlay(d, name, "apiVersion: kustomize.config.k8s.io/v1beta1\n"
                                      "kind: Kustomization\nresources:\n- {deploy}\n"
                                      "components:\n" + "".join(
                                          "- {deploy}/components/%s\n" % c for c in comps)))
            check_extender_overlay(ex, base if name == "extender" else dra)
            items += [("overlay with components/%s" % ", ".join(comps), o) for o in ex]
        check_scheduler_config(os.path.join(ROOT, "deploy/components/extender/"
                                            "scheduler-config.yaml"))

        with open(os.path.join(ROOT, "deploy/example-pod.yaml")) as f:
            items += [("deploy/example-pod.yaml", o) for o in docs(f.read())]

        # gpuslice render: examples/apis.yaml is for local mode (commands, no
        # images); Kubernetes needs an image per API, so give each one.
        with open(os.path.join(ROOT, "examples/apis.yaml")) as f:
            apis = yaml.safe_load(f)
        for a in apis:
            a["image"] = "registry.example/%s:1.0" % a["name"]
        spec = os.path.join(d, "apis.yaml")
        with open(spec, "w") as f:
            yaml.safe_dump(apis, f)
        sys.path.insert(0, HERE)
        from test_render import SPEC, DRA_SPEC  # noqa: E402 (env, cpu, mem, replicas, whole GPUs)
        spec2 = os.path.join(d, "render-test.yaml")
        with open(spec2, "w") as f:
            f.write(SPEC)
        spec3 = os.path.join(d, "render-dra.yaml")
        with open(spec3, "w") as f:
            f.write(DRA_SPEC)
        templates = []
        for s, label in ((spec, "examples/apis.yaml"), (spec2, "test_render SPEC"),
                         (spec3, "test_render DRA_SPEC")):
            for extra in ([], ["--runtime-class", "nvidia", "--namespace", "ml"], ["--dra"],
                          ["--dra", "--runtime-class", "nvidia", "--namespace", "ml"]):
                objs = render(*extra, s)
                per_api = ["ResourceClaimTemplate", "Deployment", "Service"] if "--dra" in extra \
                    else ["Deployment", "Service"]
                assert objs and [o["kind"] for o in objs] == \
                    per_api * (len(objs) // len(per_api)), "%s per API" % ", ".join(per_api)
                if "--runtime-class" in extra:
                    deps = [o for o in objs if o["kind"] == "Deployment"]
                    assert deps and all(o["spec"]["template"]["spec"]["runtimeClassName"] ==
                                        "nvidia" for o in deps), "--runtime-class nvidia"
                templates += [o for o in objs if o["kind"] == "ResourceClaimTemplate"]
                items += [("render %s%s" % (" ".join(extra) + " " if extra else "", label), o)
                          for o in objs]
        assert len(templates) == 2 * (len(apis) + 2 + 4), len(templates)

        r = validate(nodejs, modules, items, d, "all")
        sys.stdout.write(r.stdout + r.stderr)
        assert r.returncode == 0, "invalid objects (above)"
        assert "validate_k8s: %d objects, 0 failed" % len(items) in r.stdout, \
            "every object validated"

        # And on the real objects: the DaemonSet with a misplaced field, a
        # mistyped one and a fractional limit is refused, each by name.
        bad = copy.deepcopy(next(o for o in base if o["kind"] == "DaemonSet"))
        bad["spec"]["template"]["spec"]["containers"][0]["volumeMount"] = []
        bad["spec"]["template"]["spec"]["hostPID"] = "true"
        r = validate(nodejs, modules, [("broken DaemonSet", bad)], d, "bad")
        assert r.returncode == 1, r.stdout + r.stderr
        for want in ("unknown field spec.template.spec.containers[0].volumeMount",
                     "hostPID must be boolean"):
            assert want in r.stdout, "%r not reported:\n%s" % (want, r.stdout)
        pod = yaml.safe_load(open(os.path.join(ROOT, "deploy/example-pod.yaml")))
        pod["spec"]["containers"][0]["resources"]["limits"]["gpuslice.io/gpu-milli"] = "300m"
        r = validate(nodejs, modules, [("pod asking 300m", pod)], d, "bad2")
        assert r.returncode == 1 and "must be an integer" in r.stdout, r.stdout + r.stderr
        # A rendered claim template with its claim spec one level too high and
        # a count as a string; a rendered Deployment whose container claims a
        # claim its pod lacks.
        t = copy.deepcopy(templates[0])
        t["spec"]["devices"] = t["spec"]["spec"]["devices"]
        t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["count"] = "2"
        dep = copy.deepcopy(next(o for o in items if o[1]["kind"] == "Deployment" and
                                 "resourceClaims" in o[1]["spec"]["template"]["spec"])[1])
        dep["spec"]["template"]["spec"]["resourceClaims"][0]["name"] = "gpus"
        r = validate(nodejs, modules, [("broken claim template", t), ("broken claim", dep)],
                     d, "bad3")
        assert r.returncode == 1, r.stdout + r.stderr
        for want in ("unknown field spec.devices", "count must be integer",
                     "gpu is not one of the pod's resourceClaims"):
            assert want in r.stdout, "%r not reported:\n%s" % (want, r.stdout)
        assert "validate_k8s: 2 objects, 2 failed" in r.stdout, r.stdout
    print("PASS manifests: %d objects valid" % len(items))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
