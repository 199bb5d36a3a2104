# SPDX-License-Identifier: Apache-2.0
"""The DRA plugin layer (src/kube/dra_plugin.c) against the kubelet stand-in
(dra_kubelet_sim.py), one scenario per ctest:

    python3 test_dra_plugin.py NAME

The plugin is tests/kube/dra_plugin_main.c (GS_DRA_PLUGIN): fake driver
operations over the real gRPC services and registration.
"""
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

import grpc

import dra_v1_pb2 as dra_v1
import dra_v1beta1_pb2 as dra_v1beta1
from dra_kubelet_sim import Kubelet
from kubelet_sim import check, fail, wait_for

DRIVER = "gpu.gpuslice.io"
V1 = "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
V1BETA1 = "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"


class DraNode:
    """Scratch kubelet directories and the plugin process."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="gs-dra-")
        self.registry = os.path.join(self.tmp, "plugins_registry")
        os.mkdir(self.registry)
        self.plugin_dir = os.path.join(self.tmp, "plugins", DRIVER)  # the plugin makes it
        self.prepared_log = os.path.join(self.tmp, "prepared")
        self.unprepared_log = os.path.join(self.tmp, "unprepared")
        self.log = os.path.join(self.tmp, "plugin.log")
        self.proc = None
        self.kubelets = []

    @property
    def dra_sock(self):
        return os.path.join(self.plugin_dir, "dra.sock")

    @property
    def reg_sock(self):
        return os.path.join(self.registry, DRIVER + "-reg.sock")

    def start(self):
        cmd = [os.environ["GS_DRA_PLUGIN"], "--registry", self.registry, "--plugin-dir",
               self.plugin_dir, "--driver", DRIVER, "--check-ms", "100",
               "--prepared", self.prepared_log, "--unprepared", self.unprepared_log]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.log, "a"))
        wait_for(lambda: is_socket(self.reg_sock) or self.proc.poll() is not None, 10,
                 "the registration socket")
        check(self.proc.poll() is None, "the plugin exited at start: " + self.log_text())

    def kubelet(self, **kw):
        k = Kubelet(self.registry, DRIVER, **kw)
        self.kubelets.append(k)
        k.start()
        return k

    def log_text(self):
        return open(self.log).read() if os.path.exists(self.log) else ""

    def wait_log(self, text, timeout=10):
        wait_for(lambda: text in self.log_text(), timeout, "%r in the plugin's log" % text)

    def lines(self, path):
        return open(path).read().split() if os.path.exists(path) else []

    def alive(self):
        check(self.proc.poll() is None, "the plugin died: " + self.log_text()[-2000:])

    def stop(self):
        if not self.proc:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("the plugin did not stop on SIGTERM")
        self.proc = None
        return rc

    def close(self, ok):
        for k in self.kubelets:
            k.stop()
        rc = self.stop()
        log = self.log_text()
        sanitizer = any(s in log for s in ("ERROR: AddressSanitizer", "runtime error:",
                                           "ERROR: LeakSanitizer"))
        if not ok or sanitizer or rc not in (None, 0) or os.environ.get("GS_KUBE_KEEP"):
            print("---- plugin log ----")
            print(log)
        if rc == 0:
            check(not is_socket(self.reg_sock) and not is_socket(self.dra_sock),
                  "both sockets removed on stop")
        shutil.rmtree(self.tmp, ignore_errors=True)
        if rc not in (None, 0):
            fail("the plugin exited with status %s" % rc)
        if sanitizer:
            fail("sanitizer report in the plugin's log")


def is_socket(path):
    try:
        return stat.S_ISSOCK(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def rpc_error(fn):
    try:
        fn()
    except grpc.RpcError as e:
        return e
    fail("the call succeeded but should fail")


def check_device(devs, uid, v1=True):
    check(len(devs) == 1, "claim %s: one device, got %d" % (uid, len(devs)))
    d = devs[0]
    check(d.device_name == "gpu-0" and d.pool_name == "node-a", "device %s" % d)
    check(list(d.cdi_device_ids) == ["gpuslice.io/slice=claim-" + uid], "cdi ids %s" % d)
    check(list(d.request_names) == [], "no request names: %s" % d)
    if v1:
        check(d.share_id == uid, "share_id %r" % d.share_id)
    else:
        check(not hasattr(d, "share_id"), "v1beta1 has no share_id")


# ---- scenarios ----

def t_registration(node):
    node.start()
    k = node.kubelet()
    reg = k.wait_registration()
    check(reg.error is None, "registered: %s" % reg.error)
    check(reg.socket == node.reg_sock, "registration socket %s" % reg.socket)
    info = reg.info
    check(info.type == "DRAPlugin", "type %r" % info.type)
    check(info.name == DRIVER, "name %r" % info.name)
    check(info.endpoint == node.dra_sock, "endpoint %r, expected %r" % (info.endpoint, node.dra_sock))
    check(is_socket(info.endpoint), "the endpoint is a socket")
    check(list(info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"],
          "versions %s" % list(info.supported_versions))
    check(reg.service == "v1.DRAPlugin", "a current kubelet uses v1")
    check(stat.S_IMODE(os.stat(node.plugin_dir).st_mode) == 0o750, "plugin dir made 0750")
    node.wait_log("the kubelet registered driver %s (endpoint %s)" % (DRIVER, node.dra_sock))
    # Recent kubelets poll GetInfo (pluginwatcher/monitor.go): same answer.
    again = k.raw("/pluginregistration.Registration/GetInfo", b"", socket=node.reg_sock)
    check(again == info.SerializeToString(), "GetInfo answers the same every time")
    # A kubelet that refuses the registration: logged as an error.
    k.stop()
    k2 = Kubelet(node.registry, DRIVER)
    k2.reject_next = "kubelet says no"
    node.kubelets.append(k2)
    k2.start()
    reg = k2.wait_registration()
    check(reg.error == "kubelet says no", "refused: %s" % reg.error)
    node.wait_log("error: DRA: the kubelet refused to register driver %s: " % DRIVER)
    node.wait_log("kubelet says no")
    node.alive()


def t_prepare_v1(node):
    node.start()
    k = node.kubelet()
    check(k.wait_registration().service == "v1.DRAPlugin", "v1 chosen")
    claims = [("default", "uid-a1", "claim-a")]
    devs, errors = k.prepare_pod(claims)
    check(not errors, "no errors: %s" % errors)
    check_device(devs["uid-a1"], "uid-a1")
    node.wait_log("DRA v1: claim default/claim-a (uid-a1) prepared: 1 device")
    check(k.unprepare_pod(claims) == {}, "unprepared")
    check(node.lines(node.unprepared_log) == ["uid-a1"], "driver unprepared uid-a1")
    node.wait_log("DRA v1: claim default/claim-a (uid-a1) unprepared")


def t_prepare_v1beta1(node):
    node.start()
    # A kubelet that speaks only v1beta1 (1.32, 1.33) falls back to it.
    k = node.kubelet(services=["v1beta1.DRAPlugin"])
    check(k.wait_registration().service == "v1beta1.DRAPlugin", "v1beta1 chosen")
    claims = [("team-b", "uid-b1", "claim-b")]
    devs, errors = k.prepare_pod(claims)
    check(not errors, "no errors: %s" % errors)
    check_device(devs["uid-b1"], "uid-b1", v1=False)
    node.wait_log("DRA v1beta1: claim team-b/claim-b (uid-b1) prepared")
    # The v1beta1 answer carries no share_id on the wire: read it as v1.
    req = dra_v1beta1.NodePrepareResourcesRequest()
    req.claims.add(namespace="team-b", uid="uid-b1", name="claim-b")
    raw = k.raw(V1BETA1 + "NodePrepareResources", req.SerializeToString())
    as_v1 = dra_v1.NodePrepareResourcesResponse.FromString(raw)
    check(as_v1.claims["uid-b1"].devices[0].share_id == "", "no share_id in a v1beta1 answer")
    check(k.unprepare_pod(claims) == {}, "unprepared")
    node.wait_log("DRA v1beta1: claim team-b/claim-b (uid-b1) unprepared")
    check(node.lines(node.unprepared_log) == ["uid-b1"], "driver unprepared uid-b1")


def t_multi_claims(node):
    node.start()
    k = node.kubelet()
    k.wait_registration()
    claims = [("default", "uid-m1", "claim-one"), ("default", "uid-m2", "bad-claim"),
              ("other", "uid-m3", "claim-three"), ("default", "uid-m4", "broken-claim"),
              ("default", "uid-m5", "stuck-claim")]
    # One call: per-claim answers, one claim's error fails no other.
    _, resp = k.call("Prepare", claims)
    check(set(resp.claims) == {c[1] for c in claims}, "every uid answered")
    for uid in ("uid-m1", "uid-m3", "uid-m5"):
        check(resp.claims[uid].error == "", "%s prepared: %s" % (uid, resp.claims[uid].error))
        check_device(resp.claims[uid].devices, uid)
    bad = resp.claims["uid-m2"]
    check("default/bad-claim refused by the test driver" in bad.error, "error %r" % bad.error)
    check(len(bad.devices) == 0, "no devices for a failed claim")
    broken = resp.claims["uid-m4"]
    check("no pool or device name" in broken.error, "a device without pool: %r" % broken.error)
    # The pod worker retries only the claims not prepared.
    devs, errors = k.prepare_pod(claims, attempts=3, backoff_s=0.05)
    check(set(errors) == {"uid-m2", "uid-m4"}, "still failing: %s" % errors)
    check(set(devs) == {"uid-m1", "uid-m3", "uid-m5"}, "prepared: %s" % sorted(devs))
    prepared = node.lines(node.prepared_log)
    check(prepared.count("uid-m1") == 2, "uid-m1 once per call, not retried: %s" % prepared)
    check(prepared.count("uid-m2") == 4, "uid-m2 retried 3 times: %s" % prepared)
    node.wait_log("claim default/bad-claim (uid-m2) not prepared: ")
    # Unprepare: the stuck claim fails alone.
    errors = k.unprepare_pod(claims)
    check(set(errors) == {"uid-m5"} and "cannot unprepare" in errors["uid-m5"],
          "unprepare errors %s" % errors)
    check(sorted(node.lines(node.unprepared_log)) == ["uid-m1", "uid-m3", "uid-m5"],
          "unprepare calls %s" % node.lines(node.unprepared_log))


def t_idempotent(node):
    node.start()
    k = node.kubelet()
    k.wait_registration()
    claims = [("default", "uid-i1", "claim-i")]
    _, first = k.call("Prepare", claims)
    _, second = k.call("Prepare", claims)
    check(first == second, "the same answer twice: %s / %s" % (first, second))
    check(first.claims["uid-i1"].error == "", "prepared")
    check(node.lines(node.prepared_log) == ["uid-i1", "uid-i1"], "the driver asked twice")
    for _ in range(2):
        _, r = k.call("Unprepare", claims)
        check(r.claims["uid-i1"].error == "", "unprepare is idempotent")
    _, third = k.call("Prepare", claims)
    check(third == first, "prepared again after unprepare")
    # The same claim through both versions.
    k.services = ["v1beta1.DRAPlugin"]
    k.plugins[DRIVER].service = "v1beta1.DRAPlugin"
    _, b1 = k.call("Prepare", claims)
    check(b1.claims["uid-i1"].devices[0].device_name == "gpu-0", "v1beta1 too")


def t_malformed(node):
    node.start()
    k = node.kubelet()
    k.wait_registration()
    for path in (V1 + "NodePrepareResources", V1 + "NodeUnprepareResources",
                 V1BETA1 + "NodePrepareResources", V1BETA1 + "NodeUnprepareResources"):
        e = rpc_error(lambda: k.raw(path, b"\xff\xff\xff\xff"))
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "%s: %s" % (path, e.code()))
        check("not a valid message" in e.details(), "details %r" % e.details())
    bad_claims = [
        ("default", "", "claim"),             # no uid
        ("", "uid-x", "claim"),               # no namespace
        ("default", "uid-x", ""),             # no name
        ("../etc", "uid-x", "claim"),         # not a DNS label
        ("default", "uid/../x", "claim"),     # a uid that is no file name
        ("default", "uid-x", "Claim"),        # upper case name
        ("default", "u" * 129, "claim"),      # uid too long
        ("n" * 64, "uid-x", "claim"),         # namespace too long
    ]
    for ns, uid, name in bad_claims:
        req = dra_v1.NodePrepareResourcesRequest()
        req.claims.add(namespace=ns, uid=uid, name=name)
        e = rpc_error(lambda: k.raw(V1 + "NodePrepareResources", req.SerializeToString()))
        check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "claim %r: %s" % ((ns, uid, name),
                                                                            e.code()))
    req = dra_v1.NodeUnprepareResourcesRequest()
    for i in range(129):
        req.claims.add(namespace="default", uid="uid-%d" % i, name="claim-%d" % i)
    e = rpc_error(lambda: k.raw(V1 + "NodeUnprepareResources", req.SerializeToString()))
    check(e.code() == grpc.StatusCode.INVALID_ARGUMENT and "too many claims" in e.details(),
          "129 claims: %s %s" % (e.code(), e.details()))
    e = rpc_error(lambda: k.raw("/pluginregistration.Registration/GetInfo", b"\xff\xff",
                                socket=node.reg_sock))
    check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "GetInfo garbage: %s" % e.code())
    e = rpc_error(lambda: k.raw("/pluginregistration.Registration/NotifyRegistrationStatus",
                                b"\x08", socket=node.reg_sock))
    check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, "truncated status: %s" % e.code())
    e = rpc_error(lambda: k.raw(V1 + "NodeWatchResources", b""))
    check(e.code() == grpc.StatusCode.UNIMPLEMENTED, "unknown method: %s" % e.code())
    check(node.lines(node.prepared_log) == [], "the driver saw none of it")
    # An empty request is valid: an empty answer.
    r = dra_v1.NodePrepareResourcesResponse.FromString(k.raw(V1 + "NodePrepareResources", b""))
    check(len(r.claims) == 0, "empty answer")
    # Still serving.
    node.alive()
    devs, errors = k.prepare_pod([("default", "uid-ok", "claim-ok")])
    check(not errors and "uid-ok" in devs, "serves after bad input: %s" % errors)


def t_kubelet_restart(node):
    node.start()
    k = node.kubelet()
    check(k.wait_registration().error is None, "first registration")
    devs, errors = k.prepare_pod([("default", "uid-r1", "claim-r1")])
    check(not errors, "prepared before the restart")
    # 1. A kubelet restart that keeps the sockets: the new watcher rescans.
    k.stop()
    k2 = Kubelet(node.registry, DRIVER)
    k2.prepared = dict(k.prepared)  # the kubelet's checkpoint
    node.kubelets.append(k2)
    k2.start()
    check(k2.wait_registration().error is None, "registered again by the rescan")
    # 2. A restart with the registry cleaned (sockets removed while it is
    #    down): the plugin serves both again and the new kubelet finds them.
    k2.stop()
    os.unlink(node.reg_sock)
    os.unlink(node.dra_sock)
    wait_for(lambda: is_socket(node.reg_sock) and is_socket(node.dra_sock), 10,
             "both sockets recreated")
    node.wait_log("removed: serving it again")
    k3 = Kubelet(node.registry, DRIVER)
    k3.prepared = dict(k2.prepared)
    node.kubelets.append(k3)
    k3.start()
    check(k3.wait_registration().error is None, "registered after the cleanup")
    devs, errors = k3.prepare_pod([("default", "uid-r2", "claim-r2")])
    check(not errors and "uid-r2" in devs, "dra.sock answers again: %s" % errors)
    # 3. Only the registration socket goes while the kubelet runs: its
    #    watcher sees the new one and registers again.
    os.unlink(node.reg_sock)
    check(k3.wait_registration().error is None, "registered after reg socket removal")
    # 4. The plugin directory goes (dra.sock with it): recreated, and the
    #    registration socket with it, so the kubelet registers again.
    shutil.rmtree(node.plugin_dir)
    check(k3.wait_registration().error is None, "registered after plugin dir removal")
    check(is_socket(node.dra_sock), "dra.sock recreated with its directory")
    check(k3.unprepare_pod([("default", "uid-r1", "claim-r1"),
                            ("default", "uid-r2", "claim-r2")]) == {}, "unprepared both")
    check(sorted(node.lines(node.unprepared_log)) == ["uid-r1", "uid-r2"], "driver unprepared")
    node.alive()


def t_retry(node):
    node.start()
    k = node.kubelet()
    k.wait_registration()
    claims = [("default", "uid-f1", "flaky-claim")]
    errors = k.prepare_once(claims)
    check("not ready yet" in errors.get("uid-f1", ""), "first attempt fails: %s" % errors)
    devs, errors = k.prepare_pod(claims, attempts=3, backoff_s=0.05)
    check(not errors and "uid-f1" in devs, "the retry succeeds: %s" % errors)
    check_device(devs["uid-f1"], "uid-f1")
    check(node.lines(node.prepared_log) == ["uid-f1", "uid-f1"], "asked twice")


class FakePlugin:
    """A deliberately wrong plugin in Python, to show the stand-in is strict."""

    def __init__(self, node, info, prepare_answer):
        from concurrent import futures
        import pluginregistration_v1_pb2 as regapi
        self.servers = []
        os.makedirs(node.plugin_dir, exist_ok=True)
        dra = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        dra.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin", {
                "NodePrepareResources": grpc.unary_unary_rpc_method_handler(
                    lambda req, ctx: prepare_answer(req),
                    request_deserializer=dra_v1.NodePrepareResourcesRequest.FromString,
                    response_serializer=dra_v1.NodePrepareResourcesResponse.SerializeToString)}),))
        dra.add_insecure_port("unix:" + node.dra_sock)
        dra.start()
        reg = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        reg.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "pluginregistration.Registration", {
                "GetInfo": grpc.unary_unary_rpc_method_handler(
                    lambda req, ctx: info,
                    request_deserializer=regapi.InfoRequest.FromString,
                    response_serializer=regapi.PluginInfo.SerializeToString),
                "NotifyRegistrationStatus": grpc.unary_unary_rpc_method_handler(
                    lambda req, ctx: regapi.RegistrationStatusResponse(),
                    request_deserializer=regapi.RegistrationStatus.FromString,
                    response_serializer=regapi.RegistrationStatusResponse.SerializeToString)}),))
        reg.add_insecure_port("unix:" + node.reg_sock)
        reg.start()
        self.servers = [reg, dra]

    def stop(self):
        for srv in self.servers:
            srv.stop(0).wait()


def t_sim_strict(node):
    """The stand-in records what a real kubelet would trip over."""
    import pluginregistration_v1_pb2 as regapi

    def good_answer(req):
        resp = dra_v1.NodePrepareResourcesResponse()
        for c in req.claims:
            resp.claims[c.uid].devices.add(pool_name="p", device_name="d",
                                           cdi_device_ids=["gpuslice.io/slice=x"])
        return resp

    def missing_uid(req):
        resp = good_answer(req)
        del resp.claims[req.claims[0].uid]
        resp.claims["not-asked"].error = "x"
        return resp

    def bad_devices(req):
        resp = dra_v1.NodePrepareResourcesResponse()
        for c in req.claims:
            resp.claims[c.uid].devices.add(pool_name="", device_name="d",
                                           cdi_device_ids=["claim-without-kind"])
        return resp

    def info(**kw):
        base = dict(type="DRAPlugin", name=DRIVER, endpoint=node.dra_sock,
                    supported_versions=["v1.DRAPlugin"])
        base.update(kw)
        return regapi.PluginInfo(**base)

    cases = [
        (info(type="CSIPlugin"), good_answer, "type 'CSIPlugin'"),
        (info(endpoint=""), good_answer, "no endpoint"),
        (info(supported_versions=["v2.DRAPlugin", "v1.DRAPlugin"]), good_answer,
         "unknown versions ['v2.DRAPlugin']"),
        (info(name="other.example.com"), good_answer, "name 'other.example.com'"),
        (info(), missing_uid, "left out claim uid-s1"),
        (info(), missing_uid, "claim not-asked, not asked"),
        (info(), bad_devices, "device without pool or device name"),
        (info(), bad_devices, "'claim-without-kind' is not fully qualified"),
    ]
    for pinfo, answer, expected in cases:
        fake = FakePlugin(node, pinfo, answer)
        k = Kubelet(node.registry, DRIVER)
        k.start()
        try:
            reg = k.registrations.get(timeout=10)
            if reg.error is None and answer is not good_answer:
                k.call("Prepare", [("default", "uid-s1", "claim-s")])
            with k.lock:
                found = [v for v in k.violations if expected in v]
            check(found, "expected a violation with %r, got %s" % (expected, k.violations))
        finally:
            k.stop()
            fake.stop()
    # And a correct plugin leaves none.
    fake = FakePlugin(node, info(), good_answer)
    k = Kubelet(node.registry, DRIVER)
    k.start()
    try:
        check(k.registrations.get(timeout=10).error is None, "good fake registers")
        k.call("Prepare", [("default", "uid-s1", "claim-s")])
        check(not k.violations, "no violations for a correct answer: %s" % k.violations)
    finally:
        k.stop()
        fake.stop()


TESTS = {n[2:]: f for n, f in list(globals().items()) if n.startswith("t_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in TESTS:
        print("usage: test_dra_plugin.py {%s}" % ",".join(sorted(TESTS)))
        return 2
    node = DraNode()
    ok = False
    try:
        start = time.monotonic()
        TESTS[sys.argv[1]](node)
        for k in node.kubelets:
            k.check_ok()
        ok = True
        print("PASS %s (%.1fs)" % (sys.argv[1], time.monotonic() - start))
    finally:
        node.close(ok)
    return 0


if __name__ == "__main__":
    sys.exit(main())
