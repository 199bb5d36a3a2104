# SPDX-License-Identifier: Apache-2.0
"""gpuslice render: the manifests parse as YAML and are the expected objects."""
import os
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
    print("PASS render")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
