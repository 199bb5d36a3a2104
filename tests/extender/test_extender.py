# SPDX-License-Identifier: Apache-2.0
"""gpuslice-extender against a stand-in kube-scheduler: real HTTP (http.client,
as the scheduler's Go client: POST <urlPrefix>/<verb>, Content-Type
application/json, keep-alive), ExtenderArgs shaped as the scheduler writes
them (k8s_fixtures.py). One scenario per ctest:

  filter        the 700-on-2x600 node fails with its largest free share; a
                node with room passes (its full object echoed); whole GPUs
                ("1k"); GPU memory; a node without the annotation fails;
                init and sidecar containers counted as the kubelet does
  prioritize    HostPriorityList: Score int in 0..10, one unique 10, the
                others at most 5
  burst         100 pods against 10 nodes through filter -> prioritize ->
                pick the max (ties at random, as selectHost) -> bind; the
                fake nodes report only every 10 pods (no pod list: the
                generation rule): no GPU is ever over-committed
  burst_pods    the same with reports that list their pods' uids
  record        the record's rules: a newer generation in the same second,
                a pod list without the pod, a refiltered pod, a pod list
                with it, the TTL, a newer generation written later
  stale         a report older than --stale-after fails the node
  malformed     not JSON, not an ExtenderArgs, bad quantities, the
                NodeNames form: 400 with Error, or reasons; never a crash
  oversized     a body over --max-body: 413 (declared and chunked)
  slow_client   a client that sends headers and no body is dropped within
                the server's timeout while others are served"""
import datetime
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import time

from k8s_fixtures import GiB, args, args_names, container, node, pod, report, rfc3339

EXTENDER = os.environ["GS_EXTENDER"]


class Extender:
    def __init__(self, *flags):
        self.proc = subprocess.Popen([EXTENDER, "--listen", "127.0.0.1:0", *flags],
                                     stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 10
        self.port = None
        self.log = []
        while time.time() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        assert self.port, "extender did not start: %s" % "".join(self.log)
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)

    def post(self, verb, obj=None, raw=None):
        body = raw if raw is not None else json.dumps(obj).encode()
        for attempt in (0, 1):
            try:
                self.conn.request("POST", "/" + verb, body=body,
                                  headers={"Content-Type": "application/json"})
                r = self.conn.getresponse()
                data = r.read()
                return r.status, (json.loads(data) if data[:1] in (b"{", b"[") else data)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.conn.close()  # the server closed an idle keep-alive connection
                if attempt:
                    raise

    def stop(self):
        self.conn.close()
        self.proc.terminate()
        rc = self.proc.wait(timeout=10)
        assert rc == 0, "extender exited %d" % rc


def check_filter_shape(res):
    assert set(res) == {"Nodes", "NodeNames", "FailedNodes", "FailedAndUnresolvableNodes",
                        "Error"}, sorted(res)
    assert res["Error"] == "", res["Error"]


def passed(res):
    return [n["metadata"]["name"] for n in res["Nodes"]["items"]]


def t_filter(ext):
    gen = 1764600000000000
    n600 = node("gpu-a", report([(600, 90 * GiB, 141 * GiB), (600, 90 * GiB, 141 * GiB)], gen))
    n1000 = node("gpu-b", report([(1000, 141 * GiB, 141 * GiB), (200, 9 * GiB, 141 * GiB)], gen))
    bare = node("cpu-only")
    st, res = ext.post("filter", args(pod("llm-0", 700), [n600, n1000, bare]))
    assert st == 200, st
    check_filter_shape(res)
    assert passed(res) == ["gpu-b"], passed(res)
    assert res["Nodes"]["items"][0] == n1000, "the node object is echoed as it came"
    assert res["FailedNodes"]["gpu-a"] == \
        "largest free share 600m on one GPU; the pod needs 700m", res["FailedNodes"]
    assert "annotation gpuslice.io/gpus is missing" in res["FailedNodes"]["cpu-only"]
    assert res["FailedAndUnresolvableNodes"] == {}
    # Whole GPUs: "1k" is how the API server writes 1000.
    st, res = ext.post("filter", args(pod("train-0", containers=[container("t", "1k")]),
                                      [n600, n1000]))
    assert passed(res) == ["gpu-b"], res
    assert res["FailedNodes"]["gpu-a"] == "0 of 2 GPUs fully free; the pod needs 1 whole GPU"
    st, res = ext.post("filter", args(pod("train-1", containers=[container("t", "3k")]),
                                      [n600, n1000]))
    assert set(res["FailedAndUnresolvableNodes"]) == {"gpu-a", "gpu-b"}, res
    # GPU memory: 300m fits gpu-a's share but not 100Gi.
    p = pod("mem-0", 300, annotations={"gpuslice.io/gpu-memory": "100Gi"})
    st, res = ext.post("filter", args(p, [n600, n1000]))
    assert passed(res) == ["gpu-b"], res
    assert res["FailedNodes"]["gpu-a"] == ("no GPU has both 300m and 100Gi free: the most "
                                           "memory free on a GPU with 300m free is 90.0Gi"), res
    # Without the annotation a share needs its default cap free (share x the
    # GPU's memory), as the node's placement does: 500m of 141Gi is 70.5Gi.
    tight = node("gpu-c", report([(600, 60 * GiB, 141 * GiB)], gen))
    st, res = ext.post("filter", args(pod("cap-0", 500), [tight]))
    assert res["FailedNodes"]["gpu-c"] == (
        "no GPU with 500m free has the slice's memory cap free (500m of the GPU's memory): the "
        "most memory free on one is 60.0Gi"), res
    st, res = ext.post("filter", args(pod("cap-1", 400), [tight]))
    assert passed(res) == ["gpu-c"], res
    p = pod("mem-1", 300, annotations={"gpuslice.io/gpu-memory": "200Gi"})
    st, res = ext.post("filter", args(p, [n600]))
    assert "more than any GPU here has" in res["FailedAndUnresolvableNodes"]["gpu-a"], res
    # Init containers: max(400 + 300 app, 900 init) = 900; a sidecar adds.
    p = pod("init-0", containers=[container("a", 400), container("b", 300)],
            init=[container("warm", 900)])
    st, res = ext.post("filter", args(p, [n600, n1000]))
    assert res["FailedNodes"]["gpu-a"].endswith("the pod needs 900m"), res
    p = pod("side-0", containers=[container("a", 400)],
            init=[container("proxy", 300, restart_policy="Always"), container("warm", 500)])
    st, res = ext.post("filter", args(p, [n600]))
    assert res["FailedNodes"]["gpu-a"].endswith("the pod needs 800m"), res  # 500 + sidecar 300
    # Each container is a slice of its own (the node makes one per container):
    # 600 + 600 fits 2x600, one per GPU; 700 + 600 does not.
    p = pod("two-0", containers=[container("a", 600), container("b", 600)])
    st, res = ext.post("filter", args(p, [n600]))
    assert passed(res) == ["gpu-a"], res
    p = pod("two-1", containers=[container("a", 700), container("b", 600)])
    st, res = ext.post("filter", args(p, [n600]))
    assert res["FailedNodes"]["gpu-a"] == (
        "the pod's 2 slices (700m, 600m, one per container) do not fit together; free shares "
        "per GPU: 600m, 600m"), res
    # The node's own choice decides (gs_place with the reported policy): a
    # 10m share of a 16Gi GPU (164Mi) cannot hold a 256Mi context, which the
    # node refuses, so the extender does too; with spread the node takes the
    # emptier GPU: a pod of 300m, 700m and 700m fits a (1000, 700) node under
    # spread (300 and 700 on the first, 700 on the second) and not under
    # binpack (300 on the second leaves no GPU for the second 700).
    small = node("gpu-s", json.dumps({
        "generation": gen, "time": rfc3339(), "gpus": [
            {"index": 0, "uuid": "GPU-s0", "model": "m", "healthy": True, "milli_free": 1000,
             "slices": 0, "memory_free": 16 * GiB, "memory_total": 16 * GiB,
             "context_overhead": 256 << 20}]}))
    st, res = ext.post("filter", args(pod("tiny-0", 10), [small]))
    assert "gpu-s" in res["FailedNodes"], res
    st, res = ext.post("filter", args(pod("tiny-1", 20), [small]))
    assert passed(res) == ["gpu-s"], res
    for placement, fits in (("binpack", False), ("spread", True)):
        two = node("gpu-p", json.dumps({
            "generation": gen, "time": rfc3339(), "placement": placement, "gpus": [
                {"index": i, "uuid": "GPU-p%d" % i, "model": "m", "healthy": True,
                 "milli_free": m, "slices": int(m < 1000), "memory_free": 141 * GiB,
                 "memory_total": 141 * GiB} for i, m in enumerate((1000, 700))]}))
        p = pod("pl-" + placement, containers=[container("a", 300), container("b", 700),
                                               container("c", 700)])
        st, res = ext.post("filter", args(p, [two]))
        assert (passed(res) == ["gpu-p"]) == fits, (placement, res)
    # A pod that asks nothing passes everywhere.
    st, res = ext.post("filter", args(pod("web-0", containers=[container("w")]), [n600, bare]))
    assert passed(res) == ["gpu-a", "cpu-only"], res


def t_prioritize(ext):
    gen = 1764600000000001
    nodes = [node("n%d" % i, report([(1000 - 100 * i, 141 * GiB, 141 * GiB)] * 2, gen))
             for i in range(6)]
    st, res = ext.post("prioritize", args(pod("api-0", 300), nodes))
    assert st == 200 and isinstance(res, list), res
    assert [h["Host"] for h in res] == ["n%d" % i for i in range(6)], res
    for h in res:
        assert set(h) == {"Host", "Score"} and isinstance(h["Score"], int), h
        assert 0 <= h["Score"] <= 10, h
    assert [h["Score"] for h in res].count(10) == 1, res
    assert sorted(h["Score"] for h in res)[-2] <= 5, "the top leads by 5 points at least"
    # A pod that fits nowhere is scored 0 everywhere and recorded nowhere.
    st, res = ext.post("prioritize", args(pod("big-0", containers=[container("t", "3k")]), nodes))
    assert [h["Score"] for h in res] == [0] * 6, res


class FakeNode:
    """A node as gpusliced sees it: GPUs with their true free share; pods
    bound to it are placed (best fit, as gs_place's binpack) only when it
    next reports, as the kubelet's Allocate does after the bind."""

    def __init__(self, name, n_gpus, list_pods):
        self.name, self.free = name, [1000] * n_gpus
        self.pending, self.pods, self.list_pods = [], [], list_pods
        self.generation = 1764600000000000 + hash(name) % 1000
        self.annotation = self.report()

    def report(self):
        gpus = [(f, int(141 * GiB * f / 1000), 141 * GiB) for f in self.free]
        return report(gpus, self.generation, pods=self.pods if self.list_pods else None)

    def admit(self):
        """The kubelet admits each pending pod: False if one fits no GPU."""
        ok = True
        for uid, slices in self.pending:
            for milli in slices:  # one Allocate per container
                ok &= self.allocate(milli)
            self.pods.append(uid)
        self.pending = []
        self.generation += 1
        self.annotation = self.report()
        return ok

    def allocate(self, milli):
        if milli >= 1000:
            idle = [i for i, f in enumerate(self.free) if f == 1000][:milli // 1000]
            if len(idle) < milli // 1000:
                return False
            for i in idle:
                self.free[i] = 0
            return True
        fit = [(f, i) for i, f in enumerate(self.free) if f >= milli]
        if not fit:
            return False
        self.free[min(fit)[1]] -= milli
        return True

    def obj(self):
        return node(self.name, self.annotation, n_gpus=len(self.free))


def burst(ext, list_pods):
    rng = random.Random(7)
    nodes = [FakeNode("gpu-%02d" % i, 2, list_pods) for i in range(10)]
    sizes = [100, 200, 250, 300, 500, 700, "1k"]
    bound, unschedulable, overcommits, charged = 0, 0, [], 0
    for k in range(100):
        if k and k % 10 == 0:
            if not list_pods:
                time.sleep(1.05)  # a report written after the decisions it covers
            for n in nodes:
                if not n.admit():
                    overcommits.append(n.name)
        size = rng.choice(sizes)
        if k % 7 == 3:  # now and then a pod with two containers: two slices
            size = (rng.choice([100, 300, 500]), rng.choice([200, 400]))
            p = pod("burst-%03d" % k, containers=[container("api", size[0]),
                                                  container("side", size[1])])
        else:
            p = pod("burst-%03d" % k, containers=[container("api", size)])
        st, res = ext.post("filter", args(p, [n.obj() for n in nodes]))
        assert st == 200, (st, res)
        ok = passed(res)
        charged += sum("not reported yet" in why for why in res["FailedNodes"].values())
        if not ok:
            unschedulable += 1
            continue
        st, prio = ext.post("prioritize", args(p, [n.obj() for n in nodes if n.name in ok]))
        assert st == 200, (st, prio)
        top = max(h["Score"] for h in prio)
        host = rng.choice([h["Host"] for h in prio if h["Score"] == top])  # selectHost
        target = next(n for n in nodes if n.name == host)
        slices = size if isinstance(size, tuple) else (1000 if size == "1k" else size,)
        target.pending.append((p["metadata"]["uid"], slices))
        bound += 1
    for n in nodes:
        if not n.admit():
            overcommits.append(n.name)
    assert not overcommits, "over-committed: %s" % overcommits
    used = sum(1000 - f for n in nodes for f in n.free)
    print("burst: %d bound, %d unschedulable, %d of 20000 milli used, %d refusals counted "
          "unreported pods" % (bound, unschedulable, used, charged))
    assert charged, "the record took part"
    assert bound >= 40 and used >= 15000, "the record should not starve the burst"


def t_burst(ext):
    burst(ext, list_pods=False)


def t_burst_pods(ext):
    burst(ext, list_pods=True)


def t_record(ext):
    """The admitted-pods record's rules, one by one (--admitted-ttl 3s)."""
    gen = 1764600000000100
    one = [(1000, 141 * GiB, 141 * GiB)]
    n = node("solo", report(one, gen))
    a, b = pod("rec-a", 600), pod("rec-b", 600)
    st, res = ext.post("prioritize", args(a, [n]))
    assert res == [{"Host": "solo", "Score": 10}], res
    st, res = ext.post("filter", args(b, [n]))
    assert res["FailedNodes"]["solo"] == (
        "largest free share 400m on one GPU; the pod needs 600m (counting 1 pod sent here that "
        "the node has not reported yet)"), res
    # A newer generation written before the decision does not show it; a
    # report listing other pods does not either.
    before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=2)
    for ann in (report(one, gen + 1, when=before), report(one, gen + 2, pods=["someone-else"])):
        st, res = ext.post("filter", args(b, [node("solo", ann)]))
        assert passed(res) == [], (ann, res)
    # A pod filtered again is not bound: its entry goes.
    ext.post("filter", args(a, [n]))
    st, res = ext.post("filter", args(b, [n]))
    assert passed(res) == ["solo"], res
    # A report that lists the pod clears it (its share is in the report now).
    ext.post("prioritize", args(a, [n]))
    full = [(400, 141 * GiB * 2 // 5 + GiB, 141 * GiB)]
    shown = node("solo", report(full, gen + 3, pods=[a["metadata"]["uid"]]))
    st, res = ext.post("filter", args(pod("rec-c", 400), [shown]))
    assert passed(res) == ["solo"], res
    # The TTL: a pod sent here and never reported stops counting.
    ext.post("prioritize", args(a, [n]))
    st, res = ext.post("filter", args(b, [n]))
    assert passed(res) == [], res
    time.sleep(4.2)
    st, res = ext.post("filter", args(b, [n]))
    assert passed(res) == ["solo"], res
    # Without a pod list: a newer generation written after the decision.
    ext.post("prioritize", args(a, [n]))
    time.sleep(1.1)
    st, res = ext.post("filter", args(b, [node("solo", report(one, gen + 9))]))
    assert passed(res) == ["solo"], res


def t_stale(ext):
    old = time.time() - 600
    when = datetime.datetime.fromtimestamp(old, datetime.timezone.utc)
    n_old = node("old", report([(1000, 80 * GiB, 80 * GiB)], 5, when=when))
    n_new = node("new", report([(1000, 80 * GiB, 80 * GiB)], 5))
    st, res = ext.post("filter", args(pod("s-0", 100), [n_old, n_new]))
    assert passed(res) == ["new"], res
    why = res["FailedNodes"]["old"]
    assert why.startswith("per-GPU state is stale") and "over --stale-after 30s" in why, why
    assert res["FailedAndUnresolvableNodes"] == {}


def t_malformed(ext):
    for raw in (b"", b"not json", b"[1,2]", b'{"Pod": 3}', b'{"Pod": {"metadata": {}}}',
                b'{"Pod": {"metadata": {"name": "x"}}, "Nodes": {"items": 5}}',
                b'{"Pod": {"metadata": {"name": "x"}}, "Nodes": null, "NodeNames": null}',
                b'{"Pod": {"metadata": {"name": "x"}}, "NodeNames": [1]}',
                b'{"Pod": {"metadata": {"name": "x"}}, "Pod": {}}', b"\xff\xfe{}",
                json.dumps({"Pod": {"metadata": {"name": "x" * 300}}, "NodeNames": []}).encode()):
        st, res = ext.post("filter", raw=raw)
        assert st == 400 and res["Error"], (raw, st, res)
        assert res["Nodes"] is None and res["FailedNodes"] == {}, res
        st, res = ext.post("prioritize", raw=raw)
        assert st == 400 and res["Error"], (raw, st, res)
    ok = node("ok", report([(1000, 80 * GiB, 80 * GiB)], 9))
    for bad in ("300m", "1.5", "-1", "1500", "1e9", "", "99999999999999999999999"):
        st, res = ext.post("filter", args(pod("q-0", containers=[container("a", bad)]), [ok]))
        assert st == 200 and passed(res) == [], (bad, res)
        assert "cannot be placed" in res["FailedAndUnresolvableNodes"]["ok"], (bad, res)
    p = pod("q-1", 100, annotations={"gpuslice.io/gpu-memory": "lots"})
    st, res = ext.post("filter", args(p, [ok]))
    assert "gpuslice.io/gpu-memory" in res["FailedAndUnresolvableNodes"]["ok"], res
    # A plain number is bytes: below 64Mi refused, naming the unit (issue 15).
    p = pod("q-2", 100, annotations={"gpuslice.io/gpu-memory": "3000"})
    st, res = ext.post("filter", args(p, [ok]))
    assert "3000 is 3000 bytes, below the 64Mi minimum; did you mean 3000Mi?" in \
        res["FailedAndUnresolvableNodes"]["ok"], res
    for ann in ("{", "[]", '{"generation": -1}', report([(1001, 1, 1)], 1),
                report([(10, 5, 1)], 1), '{"generation": 1, "time": "yesterday", "gpus": []}'):
        st, res = ext.post("filter", args(pod("a-0", 100), [node("bad", ann)]))
        assert st == 200 and "is malformed" in res["FailedNodes"]["bad"], (ann, res)
    # nodeCacheCapable: true sends names only; gpuslice-extender needs the objects.
    st, res = ext.post("filter", args_names(pod("n-0", 100), ["a", "b"]))
    assert st == 200 and res["Nodes"] is None and res["NodeNames"] == [], res
    assert "nodeCacheCapable must be false" in res["FailedNodes"]["a"], res
    st, _ = ext.post("filter", args(pod("after", 100), [ok]))
    assert st == 200, "still serving"


def raw_post(port, head, chunks):
    """Send a request's head and body chunks as far as the server reads
    them; the status line of its answer."""
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head)
    try:
        for c in chunks:
            s.sendall(c)
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered and closed before the rest was read, as intended
    try:
        reply = s.recv(4096)
    except ConnectionResetError:
        reply = b""
    s.close()
    return reply.split(b"\r\n", 1)[0]


def t_oversized(ext):
    # A declared length over --max-body is refused before the body is read.
    head = (b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (2 << 20))
    assert raw_post(ext.port, head, []).startswith(b"HTTP/1.1 413"), "declared"
    assert raw_post(ext.port, head, [b"x" * 65536] * 32).startswith(b"HTTP/1.1 413"), "sent"
    # Chunked, no Content-Length: what passes the bound is read and dropped,
    # not kept, and the request is answered 413.
    head = (b"POST /prioritize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
            b"Content-Type: application/json\r\n\r\n")
    chunk = b"y" * 65536
    status = raw_post(ext.port, head, [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 40 + [b"0\r\n\r\n"])
    assert status.startswith(b"HTTP/1.1 413"), status
    # Just under the bound is read and answered (400: not an ExtenderArgs).
    st, res = ext.post("filter", raw=b" " * ((1 << 20) - 10) + b"[]")
    assert st == 400 and res["Error"], st
    st, _ = ext.post("filter", args(pod("after", 100), [node("x")]))
    assert st == 200, "still serving"


def t_slow_client(ext):
    s = socket.create_connection(("127.0.0.1", ext.port), timeout=30)
    s.sendall(b"POST /filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: 1000\r\n\r\n{")
    t0 = time.time()
    st, _ = ext.post("filter", args(pod("meanwhile", 100), [node("x")]))
    assert st == 200, "served while a client stalls"
    data = s.recv(4096)  # the server drops the stalled connection
    waited = time.time() - t0
    s.close()
    assert waited < 15, "stalled connection held %.1fs" % waited
    print("slow client dropped after %.1fs (%r)" % (waited, data[:40]))


SCENARIOS = {"filter": (t_filter, []), "prioritize": (t_prioritize, []),
             "burst": (t_burst, []), "burst_pods": (t_burst_pods, []),
             "record": (t_record, ["--admitted-ttl", "3s"]),
             "stale": (t_stale, ["--stale-after", "30s"]), "malformed": (t_malformed, []),
             "oversized": (t_oversized, ["--max-body", "1Mi"]),
             "slow_client": (t_slow_client, [])}


def main():
    fn, flags = SCENARIOS[sys.argv[1]]
    ext = Extender(*flags)
    try:
        fn(ext)
    finally:
        ext.stop()
    print("PASS", sys.argv[1])


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("FAIL:", e)
        sys.exit(1)
