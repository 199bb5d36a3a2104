# SPDX-License-Identifier: Apache-2.0
"""gpuslice render: the manifests parse as YAML and are the expected objects,
with gpuslice.io/gpu-milli limits or, with --dra, a ResourceClaimTemplate per
API for the DRA driver gpu.gpuslice.io that the pod claims."""
import copy
import os
import re
import subprocess
import sys
import tempfile

import yaml

RENDER = os.environ["GS_RENDER"]

SPEC = """\
- name: iris-classifier
  image: registry.example/iris:1.0
  command: ["./serve", "--port", "8080", "say \\"hi\\""]
  env: {MODEL: iris}
  compute:
    gpu: 300m
    cpu: 500m
    mem: 2Gi
- name: big-llm
  image: registry.example/llm:2
  port: 9000
  replicas: 2
  compute:
    gpu: 2
"""


# Memory and policies reach the node only through DRA: a slice with all
# three, one without an over-use policy, one with none, a whole GPU with an
# over-use policy (a SliceConfig for it alone).
DRA_SPEC = """\
- name: sentiment
  image: registry.example/sentiment:3
  compute:
    gpu: 300m
    gpu_memory: 6Gi
    policy: cap
    overuse: evict
- name: embedder
  image: registry.example/embed:1
  compute:
    gpu: 0.6
    gpu_memory: 1536Mi
    policy: share
    mem: 1Gi
- name: tiny
  image: registry.example/tiny:1
  compute: {gpu: 1m}
- name: whole
  image: registry.example/whole:1
  compute: {gpu: 1, overuse: kill}
"""

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
DRIVER = "gpu.gpuslice.io"
CONFIG_API = "gpu.gpuslice.io/v1alpha1"


def labels(name):
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/managed-by": "gpuslice"}


def expected(ns, runtime_class=None):
    def meta(name):
        m = {"name": name, "labels": labels(name)}
        if ns:
            m["namespace"] = ns
        return m

    def deployment(name, replicas, container, gpu):
        pod = {"containers": [container]}
        if runtime_class:
            pod["runtimeClassName"] = runtime_class
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name),
                "spec": {"replicas": replicas, "selector": {"matchLabels": labels(name)},
                         "template": {"metadata": {"labels": labels(name),
                                                   "annotations": {"gpuslice.io/gpu": gpu}},
                                      "spec": pod}}}

    def service(name, port):
        return {"apiVersion": "v1", "kind": "Service", "metadata": meta(name),
                "spec": {"selector": labels(name),
                         "ports": [{"name": "http", "port": port, "targetPort": port}]}}

    iris = {"name": "iris-classifier", "image": "registry.example/iris:1.0",
            "command": ["./serve", "--port", "8080", 'say "hi"'],
            "ports": [{"name": "http", "containerPort": 8080}],
            "env": [{"name": "MODEL", "value": "iris"}],
            "resources": {"limits": {"gpuslice.io/gpu-milli": "300", "cpu": "500m",
                                     "memory": "2Gi"},
                          "requests": {"cpu": "500m", "memory": "2Gi"}}}
    llm = {"name": "big-llm", "image": "registry.example/llm:2",
           "ports": [{"name": "http", "containerPort": 9000}],
           "resources": {"limits": {"gpuslice.io/gpu-milli": "2000"}}}
    return [deployment("iris-classifier", 1, iris, "300m"), service("iris-classifier", 8080),
            deployment("big-llm", 2, llm, "2"), service("big-llm", 9000)]


def claim_template(name, ns, milli, memory=None, policy=None, count=None, overuse=None):
    """What render --dra prints for an API: `count` whole GPUs, or a slice of
    `milli` with its memory, policy and over-use policy."""
    meta = {"name": name + "-gpu", "labels": labels(name)}
    if ns:
        meta["namespace"] = ns
    exactly = {"deviceClassName": DRIVER, "capacity": {"requests": {"milli": str(milli)}}}
    if count is not None:
        exactly["count"] = count
    if memory is not None:
        exactly["capacity"]["requests"]["memory"] = memory
    devices = {"requests": [{"name": "gpu", "exactly": exactly}]}
    params = {"apiVersion": CONFIG_API, "kind": "SliceConfig"}
    if policy is not None:
        params["policy"] = policy
    if overuse is not None:
        params["overuse"] = overuse
    if policy is not None or overuse is not None:
        devices["config"] = [{"requests": ["gpu"], "opaque": {
            "driver": DRIVER, "parameters": params}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": meta, "spec": {"spec": {"devices": devices}}}


def to_dra(objs):
    """The device-plugin objects of expected() as render --dra prints them:
    the pod claims its API's template instead of gpuslice.io/gpu-milli."""
    out = []
    for o in copy.deepcopy(objs):
        if o["kind"] == "Deployment":
            name = o["metadata"]["name"]
            pod = o["spec"]["template"]["spec"]
            pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": name + "-gpu"}]
            res = pod["containers"][0]["resources"]
            del res["limits"]["gpuslice.io/gpu-milli"]
            if not res["limits"]:
                del res["limits"]
            res["claims"] = [{"name": "gpu"}]
        out.append(o)
    return out


def expected_dra(ns, runtime_class=None):
    """SPEC under --dra: each API's template, then its Deployment and Service."""
    dp = to_dra(expected(ns, runtime_class))
    return [claim_template("iris-classifier", ns, 300, policy="share"), dp[0], dp[1],
            claim_template("big-llm", ns, 1000, count=2), dp[2], dp[3]]


def driver_names():
    """The names the DRA driver itself uses (src/kube), which render must match."""
    names = {}
    for header, macro in (("src/kube/dra_plugin.h", "DRA_DRIVER_NAME"),
                          ("src/kube/dra_claim.h", "DRA_CONFIG_API"),
                          ("src/kube/dra_claim.h", "DRA_CONFIG_KIND")):
        try:
            with open(os.path.join(ROOT, header)) as f:
                m = re.search(r'^#define %s "([^"]+)"' % macro, f.read(), re.M)
        except OSError:
            continue
        if m:
            names[macro] = m.group(1)
    return names


def check_dra(d, spec):
    for ns, rc, extra in ((None, None, []), ("ml", "nvidia", ["--namespace", "ml",
                                                                "--runtime-class", "nvidia"])):
        r = run("--dra", *extra, spec)
        assert r.returncode == 0, r.stderr
        assert "gpu_memory" not in r.stderr, "no device-plugin note under --dra: %s" % r.stderr
        docs = [x for x in yaml.safe_load_all(r.stdout) if x is not None]
        want = expected_dra(ns, rc)
        for got, exp in zip(docs, want):
            assert got == exp, "got:\n%s\nwant:\n%s" % (got, exp)
        assert len(docs) == len(want), "%d objects" % len(docs)
        assert "gpuslice.io/gpu-milli" not in r.stdout, "no device-plugin resource under --dra"

    # gpu_memory, policy and overuse reach the claim; whole GPUs are counted
    # devices of milli 1000 with no policy (a SliceConfig only for overuse).
    dspec = os.path.join(d, "dra.yaml")
    with open(dspec, "w") as f:
        f.write(DRA_SPEC)
    r = run("--dra", dspec)
    assert r.returncode == 0, r.stderr
    docs = [x for x in yaml.safe_load_all(r.stdout) if x is not None]
    assert [o["kind"] for o in docs] == ["ResourceClaimTemplate", "Deployment", "Service"] * 4, \
        [o["kind"] for o in docs]
    templates = {o["metadata"]["name"]: o for o in docs if o["kind"] == "ResourceClaimTemplate"}
    assert templates == {
        "sentiment-gpu": claim_template("sentiment", None, 300, "6Gi", "cap", overuse="evict"),
        "embedder-gpu": claim_template("embedder", None, 600, "1536Mi", "share"),
        "tiny-gpu": claim_template("tiny", None, 1, policy="share"),
        "whole-gpu": claim_template("whole", None, 1000, count=1, overuse="kill"),
    }, templates
    for o in docs:
        if o["kind"] != "Deployment":
            continue
        name = o["metadata"]["name"]
        pod = o["spec"]["template"]["spec"]
        assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName":
                                          name + "-gpu"}], pod
        res = pod["containers"][0]["resources"]
        assert res["claims"] == [{"name": "gpu"}], res
        assert "gpuslice.io/gpu-milli" not in res.get("limits", {}), res
    emb = next(o for o in docs if o["kind"] == "Deployment" and o["metadata"]["name"] == "embedder")
    assert emb["spec"]["template"]["spec"]["containers"][0]["resources"] == {
        "claims": [{"name": "gpu"}], "limits": {"memory": "1Gi"}, "requests": {"memory": "1Gi"}}
    # Without --dra the memory is not passed, and render says so.
    r = run(dspec)
    assert r.returncode == 0 and "gpu_memory is not passed" in r.stderr, r.stderr
    assert "API sentiment: overuse is not passed" in r.stderr, r.stderr
    assert "ResourceClaimTemplate" not in r.stdout

    # The driver's own names.
    names = driver_names()
    assert names.get("DRA_DRIVER_NAME", DRIVER) == DRIVER, names
    assert names.get("DRA_CONFIG_API", CONFIG_API) == CONFIG_API, names
    assert names.get("DRA_CONFIG_KIND", "SliceConfig") == "SliceConfig", names
    r = run("--help")
    assert r.returncode == 0 and "--dra" in r.stdout, r.stdout


def run(*args):
    return subprocess.run([RENDER, *args], capture_output=True, text=True, timeout=20)


def main():
    with tempfile.TemporaryDirectory() as d:
        spec = os.path.join(d, "apis.yaml")
        with open(spec, "w") as f:
            f.write(SPEC)
        # --runtime-class sets every Deployment's pod runtimeClassName
        # (default: none, for nodes whose default runtime is NVIDIA's).
        for ns, rc, extra in ((None, None, []), ("ml", None, ["--namespace", "ml"]),
                              (None, "nvidia", ["--runtime-class", "nvidia"]),
                              ("ml", "nvidia.example.com",
                               ["--runtime-class", "nvidia.example.com", "--namespace", "ml"])):
            r = run(*extra, spec)
            assert r.returncode == 0, r.stderr
            docs = [x for x in yaml.safe_load_all(r.stdout) if x is not None]
            want = expected(ns, rc)
            for got, exp in zip(docs, want):
                assert got == exp, "got:\n%s\nwant:\n%s" % (got, exp)
            assert len(docs) == len(want), "%d objects" % len(docs)
        # Kubernetes needs an image: a command-only API is refused by name.
        bad = os.path.join(d, "bad.yaml")
        with open(bad, "w") as f:
            f.write("- name: local-only\n  command: [./serve]\n  compute: {gpu: 100m}\n")
        r = run(bad)
        assert r.returncode != 0 and "local-only" in r.stderr and "image" in r.stderr, r.stderr
        assert r.stdout == "", "nothing printed for a refused spec"
        # A bad spec is reported with the spec loader's message.
        with open(bad, "w") as f:
            f.write("- name: x\n  image: i\n  compute: {gpu: 1500m}\n")
        r = run(bad)
        assert r.returncode != 0 and "1500m" in r.stderr, r.stderr
        # A runtime class name is a DNS subdomain; anything else is a usage
        # error, with nothing printed.
        for name in ("NVIDIA", "nvidia_runtime", "-nvidia", "nvidia-", "a..b", "", "x" * 64):
            r = run("--runtime-class", name, spec)
            assert r.returncode == 2 and "--runtime-class" in r.stderr, (name, r.stderr)
            assert r.stdout == "", "nothing printed for a bad --runtime-class"
        r = run("--runtime-class", "a" * 63 + "." + "b" * 63, spec)
        assert r.returncode == 0, r.stderr
        r = run()
        assert r.returncode == 2, "usage error"
        check_dra(d, spec)
    print("PASS render")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
