# SPDX-License-Identifier: Apache-2.0
"""The API-server client (src/kube/apiserver.h), through its test program
apiserver_client_test.c, against the stand-in API server (apiserver_sim.py):
a node GET; a ResourceSlice created, read, listed, replaced, patched and
deleted; objects the server refuses (422 and 400, with its message in the
client's error); 409 on a stale resourceVersion; token rotation (seen by
the file's change, and by a 401 when the file looks unchanged); retries on
429 (Retry-After honoured), 500, dropped connections, and none on 4xx; a
hung server (the call ends within its timeout, plus one second of slack);
oversized answers (with and without Content-Length); a refused connection;
a CA that does not match; kubeconfig files (certificate-authority-data,
a relative certificate-authority, tokenFile, and the unsupported kinds of
user); the in-cluster config; a claim allocated as the scheduler writes it;
evictions.

Skips (77) without openssl, Node 20+ or kubernetes-models (npm)."""
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from apiserver_sim import ApiServerSim, Unavailable  # noqa: E402

CLIENT = os.environ["GS_APISERVER_CLIENT"]
NPM_DIR = os.environ["GS_NPM_DIR"]
NODE_PATH = "/api/v1/nodes/node-a"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def env():
    e = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    e["NO_PROXY"] = "127.0.0.1,localhost"
    return e


class Suite:
    def __init__(self, sim, d):
        self.sim, self.d = sim, d

    def direct(self, timeout_ms=None, token_file=None, ca=None, server=None):
        args = ["--server", server or self.sim.url, "--ca", ca or self.sim.ca_file,
                "--token-file", token_file or self.sim.token_file]
        return args + (["--timeout-ms", str(timeout_ms)] if timeout_ms else [])

    def run(self, args, timeout=60, **kw):
        r = subprocess.run([CLIENT, *args], capture_output=True, text=True, timeout=timeout,
                           env=env(), **kw)
        sys.stdout.write("$ %s\n%s" % (" ".join(args[-4:]), r.stdout))
        if r.stderr:
            sys.stdout.write("  stderr: " + r.stderr.replace("\n", "\n  stderr: ").rstrip() + "\n")
        return r

    def call(self, method, path, body=None, config=None):
        args = (config or self.direct()) + ["call", method, path]
        if body is not None:
            args.append(json.dumps(body))
        r = self.run(args)
        assert r.returncode == 0, "call exited %d" % r.returncode
        return json.loads(r.stdout.strip().splitlines()[-1])

    def scenario(self, name):
        r = self.run(self.direct() + [name, "node-a"])
        assert r.returncode == 0 and "FAIL" not in r.stdout, "%s failed" % name
        return r.stdout

    # --- the scenarios ---

    def test_get_node(self):
        out = self.call("GET", NODE_PATH)
        assert out["rc"] == 0 and out["status"] == 200, out
        assert out["body"]["metadata"]["uid"] == self.sim.get_object("nodes", "node-a")["metadata"]["uid"]
        out = self.call("GET", "/api/v1/nodes/nope")
        assert out["errno"] == "ENOENT" and out["status"] == 404, out
        assert out["error"] == 'GET /api/v1/nodes/nope: 404 Not Found: nodes "nope" not found', out
        assert self.sim.count("/api/v1/nodes/nope") == 1, "a 404 is not retried"

    def test_crud(self):
        out = self.scenario("crud")
        assert 'already exists' in out and "409 Conflict" in out, out
        writes = [w for w in self.sim.writes if w["path"].startswith(SLICES)]
        created = [w for w in writes if w["method"] == "POST" and w["status"] == 201]
        assert created and created[0]["body"]["spec"]["devices"][0]["allowMultipleAllocations"] is True
        helpers = [w for w in writes if w["method"] != "DELETE" and w["status"] < 300]
        assert helpers and all("fieldValidation=Strict" in w["query"] for w in helpers), helpers
        assert not self.sim.objects("resourceslices"), "deleted at the end"

    def test_invalid(self):
        posts = self.sim.count(SLICES, "POST")
        out = self.scenario("invalid")
        want = {
            "missing-driver": "422 Unprocessable Entity: ResourceSlice.resource.k8s.io "
                              '"node-a-bad-0" is invalid: spec.driver: Required value',
            "policy-without-multi": "spec.devices[0].capacity[milli].requestPolicy: Forbidden: "
                                    "allowMultipleAllocations must be true",
            "unknown-field": '400 Bad Request: strict decoding error: unknown field '
                             '"spec.devices[0].sharable"',
            "wrong-type": "400 Bad Request: ResourceSlice in version \"v1\" cannot be handled as a "
                          "ResourceSlice: spec.pool.generation: must be integer",
            "two-node-selections": "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                                   "`perDeviceNodeSelection` is required, but multiple fields are set",
            "bad-step": "value is not a multiple of a given step (5Mi) from (2Mi)",
        }
        for what, text in want.items():
            line = [x for x in out.splitlines() if x.startswith(what + ":")]
            assert line and text in line[0], "%s: want %r in %r" % (what, text, line)
            assert line[0].split("error: ")[1].startswith("POST %s?fieldValidation=Strict: " % SLICES)
        assert self.sim.count(SLICES, "POST") == posts + 6, "4xx answers are not retried"

    def test_conflict(self):
        out = self.scenario("conflict")
        assert "409 Conflict: Operation cannot be fulfilled on resourceslices.resource.k8s.io " \
               '"node-a-conflict": the object has been modified' in out, out

    def rotate(self, in_place):
        before = self.sim.count(NODE_PATH, status=401)
        p = subprocess.Popen([CLIENT, *self.direct(), "rotate", NODE_PATH], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        assert p.stdout.readline().startswith("ok: GET before")
        assert p.stdout.readline().strip() == "ready"
        self.sim.rotate_token(in_place=in_place)
        out, err = p.communicate("go\n", timeout=30)
        sys.stdout.write(out + err)
        assert p.returncode == 0 and "ok: GET after the rotation" in out, out
        return self.sim.count(NODE_PATH, status=401) - before

    def test_rotate_new_file(self):
        assert self.rotate(False) == 0, "a rotated file is re-read before the request: no 401"

    def test_rotate_in_place(self):
        assert self.rotate(True) == 1, "an unchanged-looking file is re-read after one 401"

    def test_wrong_token(self):
        bad = os.path.join(self.d, "bad-token")
        with open(bad, "w") as f:
            f.write("not-the-token\n")
        out = self.call("GET", NODE_PATH, config=self.direct(token_file=bad))
        assert out["errno"] == "EACCES" and out["status"] == 401, out
        assert "401 Unauthorized: Unauthorized" in out["error"], out

    def test_429(self):
        self.sim.inject(NODE_PATH, status=429, retry_after=1)
        n = self.sim.count(NODE_PATH)
        out = self.call("GET", NODE_PATH)
        assert out["rc"] == 0 and self.sim.count(NODE_PATH) == n + 2, out
        assert out["ms"] >= 950, "Retry-After: 1 was honoured (%d ms)" % out["ms"]
        self.sim.inject(NODE_PATH, status=429, retry_after=0, count=5)
        out = self.call("GET", NODE_PATH)
        self.sim.clear_faults()
        assert out["errno"] == "EBUSY" and out["status"] == 429, out
        assert "429 Too Many Requests: Too many requests" in out["error"] and "(3 tries)" in out["error"]
        assert self.sim.count(NODE_PATH) == n + 2 + 3, "at most 3 tries"

    def test_500(self):
        n = self.sim.count(NODE_PATH)
        self.sim.inject(NODE_PATH, status=500, count=2)
        out = self.call("GET", NODE_PATH)
        assert out["rc"] == 0 and self.sim.count(NODE_PATH) == n + 3, out
        self.sim.inject(NODE_PATH, status=503, count=3, message="etcd is unavailable")
        out = self.call("GET", NODE_PATH)
        assert out["errno"] == "EIO" and out["status"] == 503, out
        assert out["error"] == ("GET %s: 503 Service Unavailable: etcd is unavailable (3 tries)"
                                % NODE_PATH), out
        self.sim.inject(NODE_PATH, status=403, count=2, message='nodes "node-a" is forbidden')
        n = self.sim.count(NODE_PATH)
        out = self.call("GET", NODE_PATH)
        self.sim.clear_faults()
        assert out["errno"] == "EPERM" and self.sim.count(NODE_PATH) == n + 1, "403 not retried"

    def test_drop(self):
        n = self.sim.count(NODE_PATH)
        self.sim.inject(NODE_PATH, kind="drop")
        out = self.call("GET", NODE_PATH)
        assert out["rc"] == 0 and self.sim.count(NODE_PATH) == n + 2, out

    def test_hang(self):
        self.sim.inject(NODE_PATH, kind="hang", seconds=10)
        out = self.call("GET", NODE_PATH, config=self.direct(timeout_ms=2000))
        self.sim.clear_faults()
        assert out["errno"] == "ETIMEDOUT" and out["status"] == 0, out
        assert "no answer from %s within 2000 ms" % self.sim.url in out["error"], out
        assert out["ms"] <= 3000, "the call ended within its timeout + 1 s (%d ms)" % out["ms"]

    def test_oversize(self):
        for chunked in (False, True):
            self.sim.inject(SLICES, kind="oversize", size=9 << 20, chunked=chunked)
            out = self.call("GET", SLICES)
            assert out["errno"] == "EFBIG", out
            assert "larger than the limit of 8388608 bytes (8 MiB)" in out["error"], out

    def test_refused(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        out = self.call("GET", NODE_PATH, config=self.direct(server="https://127.0.0.1:%d" % port))
        assert out["errno"] == "ECONNREFUSED" and "(3 tries)" in out["error"], out

    def test_bad_ca(self):
        n, before = len(self.sim.tls_failures), self.sim.count(NODE_PATH)
        out = self.call("GET", NODE_PATH, config=self.direct(ca=self.sim.other_ca()))
        assert out["errno"] == "EPROTO" and "TLS with" in out["error"], out
        deadline = time.monotonic() + 10  # the server's thread may note it after the client left
        while len(self.sim.tls_failures) <= n and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.sim.tls_failures) > n, "the server saw the handshake fail"
        assert self.sim.count(NODE_PATH) == before, "no request got through"

    def test_kubeconfig(self):
        kc = self.sim.kubeconfig(os.path.join(self.d, "kubeconfig"), token_file=self.sim.token_file)
        out = self.call("GET", NODE_PATH, config=["--kubeconfig", kc])
        assert out["rc"] == 0, out
        sub = os.path.join(self.d, "kc")
        os.makedirs(sub, exist_ok=True)
        kc = self.sim.kubeconfig(os.path.join(sub, "config"), token=self.sim.token(), ca_data=False)
        out = self.call("GET", NODE_PATH, config=["--kubeconfig", kc])
        assert out["rc"] == 0, "relative certificate-authority, fixed token: %s" % out
        r = self.run(["--kubeconfig", kc, "--context", "nope", "call", "GET", NODE_PATH])
        assert r.returncode == 3 and 'no entry named "nope" in contexts' in r.stdout, r.stdout
        kc = self.sim.kubeconfig(os.path.join(self.d, "kc-cert"), extra_user={
            "client-certificate-data": "LS0t", "client-key-data": "LS0t"})
        r = self.run(["--kubeconfig", kc, "call", "GET", NODE_PATH])
        assert r.returncode == 3 and 'user "driver" authenticates with client certificates, which ' \
            'gpuslice does not support' in r.stdout, r.stdout

    def test_in_cluster(self):
        sa = os.path.join(self.d, "serviceaccount")
        os.makedirs(sa, exist_ok=True)
        for name, target in (("ca.crt", self.sim.ca_file), ("token", self.sim.token_file)):
            if not os.path.lexists(os.path.join(sa, name)):
                os.symlink(target, os.path.join(sa, name))  # a projected volume's links
        e = dict(env(), KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(self.sim.port))
        r = subprocess.run([CLIENT, "--in-cluster", sa, "call", "GET", NODE_PATH], capture_output=True,
                           text=True, timeout=60, env=e)
        print(r.stdout, end="")
        assert r.returncode == 0 and json.loads(r.stdout)["rc"] == 0, r.stdout + r.stderr
        r = subprocess.run([CLIENT, "--in-cluster", sa, "call", "GET", NODE_PATH], capture_output=True,
                           text=True, timeout=60, env=env())
        assert r.returncode == 3 and "KUBERNETES_SERVICE_HOST" in r.stdout, r.stdout

    def test_claim(self):
        share = "6b1c0c1e-0d7f-4b0e-9a53-2f4f6f0c1a11"
        params = {"apiVersion": "gpu.gpuslice.io/v1", "kind": "SliceConfig", "policy": "cap"}
        self.sim.put_claim(
            "default", "iris", [{"name": "gpu", "deviceClassName": "gpu.gpuslice.io",
                                 "capacity": {"milli": "300", "memory": "3Gi"}}],
            results=[{"request": "gpu", "driver": "gpu.gpuslice.io", "pool": "node-a",
                      "device": "gpu-0", "shareID": share,
                      "consumedCapacity": {"milli": "300", "memory": "3Gi"}}],
            config=[{"requests": ["gpu"], "opaque": {"driver": "gpu.gpuslice.io", "parameters": params}}])
        out = self.call("GET", "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims/iris")
        res = out["body"]["status"]["allocation"]["devices"]["results"][0]
        assert res["shareID"] == share and res["consumedCapacity"]["milli"] == "300", out

    def test_eviction(self):
        self.sim.put_pod("default", "iris-0")
        path = "/api/v1/namespaces/default/pods/iris-0/eviction"
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": "iris-0", "namespace": "default"},
                "deleteOptions": {"gracePeriodSeconds": 5}}
        out = self.call("POST", path, body)
        assert out["rc"] == 0 and out["status"] == 201, out
        assert self.sim.evictions[-1] == ("default", "iris-0")
        out = self.call("POST", path, body)
        assert out["errno"] == "ENOENT" and 'pods "iris-0" not found' in out["error"], out
        self.sim.put_pod("default", "iris-1")
        self.sim.protect_pod("default", "iris-1")
        body["metadata"]["name"] = "iris-1"
        out = self.call("POST", "/api/v1/namespaces/default/pods/iris-1/eviction", body)
        assert out["errno"] == "EBUSY" and "disruption budget" in out["error"], out


def main():
    only = sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="gs-apiserver-") as d:
        try:
            sim = ApiServerSim(d, NPM_DIR).start()
        except Unavailable as e:
            print("SKIP:", e)
            return 77
        try:
            sim.put_node("node-a", {"gpuslice.io/enabled": "true"})
            suite = Suite(sim, d)
            names = [n for n in dir(suite) if n.startswith("test_") and (not only or n[5:] in only)]
            failed = []
            for n in sorted(names, key=lambda x: Suite.__dict__[x].__code__.co_firstlineno):
                print("=== %s" % n, flush=True)
                try:
                    getattr(suite, n)()
                    print("--- %s: passed" % n)
                except Exception:
                    traceback.print_exc(file=sys.stdout)
                    print("--- %s: FAILED" % n)
                    failed.append(n)
                sim.clear_faults()
            if sim.internal_errors:
                print("the stand-in failed itself:\n" + "\n".join(sim.internal_errors))
                failed.append("apiserver_sim")
            print("test_apiserver: %d scenarios, %d failed%s" % (
                len(names), len(failed), (": " + ", ".join(failed)) if failed else ""))
            return 1 if failed else 0
        finally:
            sim.stop()


if __name__ == "__main__":
    sys.exit(main())
