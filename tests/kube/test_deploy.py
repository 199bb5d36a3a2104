"""deploy/: the DaemonSet mounts every host path the device plugin hands to
the kubelet in Allocate answers, and asks for no more privilege than it needs."""
import os
import sys

import yaml

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../..")


def main():
    ds = yaml.safe_load(open(os.path.join(ROOT, "deploy/gpusliced-daemonset.yaml")))
    assert ds["kind"] == "DaemonSet"
    spec = ds["spec"]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    c = spec["containers"][0]
    mounted = {host[m["name"]]: m for m in c["volumeMounts"]}
    for path in ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources",
                 "/run/gpuslice"):
        assert path in mounted, "%s not mounted" % path
        assert mounted[path]["mountPath"] == path, "%s mounted elsewhere" % path
    # Defaults of the plugin (kube_plugin.h): state dir and shim on the host.
    for p in ("/run/gpuslice/kube", "/usr/local/lib/gpuslice/libgpuslice.so"):
        assert any(p.startswith(h + "/") for h in host.values()), "%s not on a hostPath" % p
    sc = c["securityContext"]
    assert sc.get("privileged") is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    # Pods' processes are identified through /proc/<pid>/root (arbiter).
    assert "SYS_PTRACE" in sc["capabilities"]["add"], "SYS_PTRACE not added"
    assert spec["hostPID"] is True
    assert spec["automountServiceAccountToken"] is False
    assert "--kubelet" in c["args"]
    pod = yaml.safe_load(open(os.path.join(ROOT, "deploy/example-pod.yaml")))
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert isinstance(limits["gpuslice.io/gpu-milli"], int), "extended resources are integers"
    print("PASS deploy")


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, KeyError) as e:
        print("FAIL:", repr(e))
        sys.exit(1)
