# SPDX-License-Identifier: Apache-2.0
"""Every Kubernetes object gpuslice ships or prints is valid against the
upstream OpenAPI schemas: the kustomize base deploy/ (rendered by kubectl
kustomize, alone, in an overlay with the RuntimeClass component and a
retagged image, and in one without runtimeClassName), deploy/example-pod.yaml, and what `gpuslice render` prints
for examples/apis.yaml and for the render test's spec. The schemas are those
of the npm package kubernetes-models 5.1.x, run by tests/kube/validate_k8s.js
in Node; validate_k8s.js also rejects fields the schemas do not define, and
its self-check (run first) proves that broken objects are refused.

Skips (exit 77) without kubectl, without Node 20 or later, or when
kubernetes-models cannot be installed (npm, from the configured registry,
into GS_NPM_DIR; a no-op once installed)."""
import copy
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "../.."))
VALIDATOR = os.path.join(HERE, "validate_k8s.js")
RENDER = os.environ["GS_RENDER"]
NPM_DIR = os.environ["GS_NPM_DIR"]
MODELS = "kubernetes-models@~5.1.0"


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def kubectl():
    for k in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.33", "/usr/bin/kubectl"):
        if os.access(k, os.X_OK):
            return k
    skip("no kubectl")


def node():
    n = shutil.which("node") or "/usr/bin/node"
    try:
        v = subprocess.run([n, "--version"], capture_output=True, text=True, timeout=20).stdout
        major = int(v.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        skip("no node")
    if major < 20:
        skip("node %s: 20 or later needed" % v.strip())
    return n


def installed_version(modules):
    try:
        with open(os.path.join(modules, "kubernetes-models", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return None


def models():
    """node_modules holding kubernetes-models 5.1.x, installed once."""
    os.makedirs(NPM_DIR, exist_ok=True)
    modules = os.path.join(NPM_DIR, "node_modules")
    with open(os.path.join(NPM_DIR, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        v = installed_version(modules)
        if v and v.startswith("5.1."):
            return modules
        npm = shutil.which("npm")
        if not npm:
            skip("no npm to install %s" % MODELS)
        print("installing %s into %s" % (MODELS, NPM_DIR), flush=True)
        try:
            r = subprocess.run([npm, "install", "--prefix", NPM_DIR, "--no-audit", "--no-fund",
                                "--engine-strict=false", "--loglevel=error", MODELS],
                               capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            skip("npm install %s timed out" % MODELS)
        v = installed_version(modules)
        if r.returncode != 0 or not v or not v.startswith("5.1."):
            sys.stdout.write(r.stdout + r.stderr)
            skip("cannot install %s (npm exit %d)" % (MODELS, r.returncode))
    return modules


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
        from test_render import SPEC  # noqa: E402 (env, cpu, mem, replicas, whole GPUs)
        spec2 = os.path.join(d, "render-test.yaml")
        with open(spec2, "w") as f:
            f.write(SPEC)
        for s, label in ((spec, "examples/apis.yaml"), (spec2, "test_render SPEC")):
            for extra in ([], ["--runtime-class", "nvidia", "--namespace", "ml"]):
                objs = render(*extra, s)
                assert objs and len(objs) % 2 == 0, "a Deployment and a Service per API"
                if extra:
                    deps = [o for o in objs if o["kind"] == "Deployment"]
                    assert deps and all(o["spec"]["template"]["spec"]["runtimeClassName"] ==
                                        "nvidia" for o in deps), "--runtime-class nvidia"
                items += [("render %s%s" % (" ".join(extra) + " " if extra else "", label), o)
                          for o in objs]

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
    print("PASS manifests: %d objects valid" % len(items))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
