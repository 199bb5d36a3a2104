# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the Kubernetes API server, for tests: HTTPS on 127.0.0.1
(a throwaway CA and server certificate made with openssl), bearer tokens,
the REST paths a DRA driver and its watchdog use, and the semantics of the
real server for them (modelled on Kubernetes 1.34-1.37):

  GET    /api/v1/nodes/{name}
  GET    /api/v1/namespaces/{ns}/pods/{name}
  POST   /api/v1/namespaces/{ns}/pods/{name}/eviction        (policy/v1 Eviction)
  GET    /apis/resource.k8s.io/v1/resourceslices             (labelSelector, fieldSelector)
  POST   /apis/resource.k8s.io/v1/resourceslices
  GET|PUT|PATCH|DELETE /apis/resource.k8s.io/v1/resourceslices/{name}
  GET    /apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims[/{name}]

What the real server does and the stand-in models:

  * Authentication: every request needs `Authorization: Bearer <token>`
    equal to the token file's current content, else 401 with the Status
    {"message": "Unauthorized", "reason": "Unauthorized"} (the bearer-token
    authenticator of k8s.io/apiserver; a rotated projected token is a new
    file content). Authentication comes before everything else, as in the
    real handler chain; request bodies over 3 MiB answer 413
    (apiserver's MaxRequestBodyBytes).
  * Decoding, before validation, answers 400 BadRequest: malformed JSON,
    a wrong type ("cannot be handled as a ResourceSlice"), an unparseable
    quantity, an apiVersion or kind not matching the URL (missing ones are
    taken from the URL, as the server's decoder defaults them), and, with
    fieldValidation=Strict, unknown and duplicate fields ("strict decoding
    error: unknown field ..."; server-side field validation, KEP-2885, GA
    in 1.27). The real default for a request without fieldValidation is
    Warn (dropped with a `Warning: 299` header); the stand-in defaults to
    Strict so a client bug cannot pass unseen (ApiServerSim(field_validation=
    "Warn") models the real default); Warn and Ignore asked for explicitly
    behave as upstream.
  * Validation answers 422 Invalid with a Status naming every field
    (details.causes): the upstream OpenAPI schemas (required fields, enums,
    via tests/kube/validate_k8s.js and the npm package kubernetes-models
    5.1, generated from the upstream OpenAPI), object names, and for
    ResourceSlices the rules of pkg/apis/resource/validation
    (apiserver_sim_rules.py).
  * Object metadata as the registry (k8s.io/apiserver pkg/registry/rest)
    sets it: uid, creationTimestamp, generation 1 on create, generateName,
    and one resourceVersion counter for all objects (the etcd revision). A
    create with a resourceVersion answers 400; a create of an existing name
    409 AlreadyExists. PUT with a stale metadata.resourceVersion (or
    another uid) answers 409 Conflict ("the object has been modified");
    PUT without one is an unconditional update (ResourceSlice's strategy
    allows it). generation is bumped when the spec changes (the
    ResourceSlice strategy's PrepareForUpdate). DELETE answers 200 with
    the object, 404 when missing, 409 on failed preconditions. PATCH takes
    application/merge-patch+json (RFC 7386); other patch types answer 415
    (not modelled). Lists carry metadata.resourceVersion and items without
    apiVersion and kind, as the real server sends them.
  * Eviction: 201 with a Success Status and the pod deleted; 404 for a
    missing pod; 429 TooManyRequests for a pod a test marks as protected by
    a PodDisruptionBudget (pkg/registry/core/pod/storage/eviction.go).

Test helpers: put_node, put_pod, put_claim (with status.allocation as the
scheduler writes it), fault injection (the next N requests on a path answer
a status such as 429 with Retry-After or 500, hang for S seconds, drop the
connection, or send an oversized body), rotate_token, the writes and the
objects stored, and request counts per path.

Needs openssl, Node 20+ and kubernetes-models (installed with npm into
npm_dir, as tests/kube/test_manifests.py does); without them the stand-in
refuses to start with Unavailable, and tests exit 77."""
import base64
import http.server
import json
import os
import re
import secrets
import shutil
import socket
import ssl
import subprocess
import threading
import time
import traceback
import uuid
from urllib.parse import parse_qs, urlsplit

from k8s_models import Unavailable, find_node, node_modules  # noqa: F401 (Unavailable: re-exported)
from apiserver_sim_rules import (STALE, ApiError, FieldErrors, already_exists, bad_quantities,
                                 FieldErrors, bad_request, check_annotations, check_resourceslice, conflict, field_selector,
                                 label_selector, merge_patch, not_found)

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATOR = os.path.join(HERE, "validate_k8s.js")
MAX_BODY = 3 << 20  # k8s.io/apiserver MaxRequestBodyBytes


# --- tools ------------------------------------------------------------------


def openssl(*args, cwd):
    exe = shutil.which("openssl")
    if not exe:
        raise Unavailable("no openssl to make the test CA")
    r = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(args), r.stderr))


def make_ca(d, name):
    """A throwaway CA in d: (name.crt, name.key)."""
    cfg = os.path.join(d, name + ".cnf")
    with open(cfg, "w") as f:
        f.write("[req]\ndistinguished_name=dn\nx509_extensions=ca\nprompt=no\n[dn]\nCN=%s\n"
                "[ca]\nbasicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n"
                "subjectKeyIdentifier=hash\n" % name)
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", name + ".key", "-out", name + ".crt", "-days", "2", "-config", cfg, cwd=d)
    return os.path.join(d, name + ".crt"), os.path.join(d, name + ".key")


def make_server_cert(d, ca_crt, ca_key):
    """server.crt/server.key for 127.0.0.1 and localhost, signed by the CA."""
    ext = os.path.join(d, "server.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n")
    openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", ca_crt, "-CAkey", ca_key,
            "-CAcreateserial", "-out", "server.crt", "-days", "2", "-extfile", ext, cwd=d)
    return os.path.join(d, "server.crt"), os.path.join(d, "server.key")


# --- validation through validate_k8s.js ------------------------------------------

AJV_PATH = re.compile(r"^data((?:/[^ ]*)?) (.*)$")
TYPE_ERROR = re.compile(r"^must be (integer|string|boolean|number|array|object|null)"
                        r"(,(integer|string|boolean|number|array|object|null))*$")
# RawExtension (opaque parameters, device status data) holds any fields; the
# validator's unknown-field walk cannot know them, the real server keeps them.
RAW = re.compile(r"(^|\.)(opaque\.parameters|data)(\.|\[|$)")


def ajv_field(p):
    out = ""
    for part in [x for x in p.split("/") if x]:
        out += "[%s]" % part if part.isdigit() else ("." if out else "") + part
    return out


class Validator:
    """Runs tests/kube/validate_k8s.js (schema, unknown fields, API rules)."""

    def __init__(self, node, modules, workdir):
        self.node, self.modules, self.workdir = node, modules, workdir
        self.lock = threading.Lock()

    def check(self, obj):
        """The validator's reasons for obj ([] when valid)."""
        with self.lock:
            path = os.path.join(self.workdir, "validate.json")
            with open(path, "w") as f:
                json.dump([{"source": "apiserver-sim", "object": obj}], f)
            r = subprocess.run([self.node, VALIDATOR, "--modules", self.modules, path],
                               capture_output=True, text=True, timeout=60)
        if r.returncode not in (0, 1):
            raise RuntimeError("validate_k8s.js: exit %d: %s" % (r.returncode, r.stdout + r.stderr))
        return [line[2:] for line in r.stdout.splitlines() if line.startswith("  ")]

    def probe(self):
        good = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "probe"}}
        bad = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "probe"}, "spek": {}}
        if self.check(good) or "unknown field spek" not in self.check(bad):
            raise Unavailable("validate_k8s.js does not validate (node %s, %s)" % (self.node, self.modules))

    def classify(self, reasons):
        """(type errors, unknown fields, FieldErrors) of the reasons."""
        types, unknown, invalid = [], [], FieldErrors()
        for r in reasons:
            if r.startswith("unknown field "):
                f = r[len("unknown field "):]
                if not RAW.search(f):
                    unknown.append(f)
            elif r.startswith("schema: "):
                for item in re.split(r", (?=data[/ ])", r[len("schema: "):]):
                    m = AJV_PATH.match(item)
                    field, msg = (ajv_field(m.group(1)), m.group(2)) if m else ("", item)
                    req = re.match(r"^must have required property '?([^']+)'?$", msg)
                    if TYPE_ERROR.match(msg):
                        types.append("%s: %s" % (field or "<root>", msg))
                    elif req:
                        invalid.required((field + "." if field else "") + req.group(1))
                    elif "allowed values" in msg:
                        invalid.unsupported(field, msg)
                    else:
                        invalid.add("FieldValueInvalid", field, "Invalid value: " + msg)
            elif r.startswith("api: "):
                m = re.match(r"^api: ([\w.\[\]-]+) (.*)$", r)
                invalid.add("FieldValueInvalid", m.group(1) if m else "", "Invalid value: " + r[5:])
            else:
                invalid.add("FieldValueInvalid", "", r)
        return types, unknown, invalid


# --- the resources ----------------------------------------------------------------


class Kind:
    def __init__(self, resource, group, version, kind, namespaced):
        self.resource, self.group, self.version, self.kind = resource, group, version, kind
        self.namespaced = namespaced
        self.api_version = "%s/%s" % (group, version) if group else version


NODES = Kind("nodes", "", "v1", "Node", False)
PODS = Kind("pods", "", "v1", "Pod", True)
SLICES = Kind("resourceslices", "resource.k8s.io", "v1", "ResourceSlice", False)
CLAIMS = Kind("resourceclaims", "resource.k8s.io", "v1", "ResourceClaim", True)
EVICTION = Kind("eviction", "policy", "v1", "Eviction", True)

SLICE_FIELDS = {"metadata.name": lambda o: o["metadata"]["name"],
                "spec.nodeName": lambda o: o["spec"].get("nodeName", ""),
                "spec.driver": lambda o: o["spec"].get("driver", "")}


NODE_INFO = {"machineID": "0" * 32, "systemUUID": str(uuid.UUID(int=1)), "bootID": str(uuid.UUID(int=2)),
             "kernelVersion": "6.1.0", "osImage": "Debian GNU/Linux 12 (bookworm)",
             "containerRuntimeVersion": "containerd://2.0.0", "kubeletVersion": "v1.36.0",
             "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64"}


def now_rfc3339():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class DuplicateField(ValueError):
    pass


def no_duplicates(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise DuplicateField(k)
        d[k] = v
    return d


def drop_field(obj, path):
    """Delete the field at a validator path such as spec.devices[0].foo."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    cur = obj
    for p in parts[:-1]:
        cur = cur[int(p[1:-1])] if p.startswith("[") else cur.get(p)
        if cur is None:
            return
    if isinstance(cur, dict):
        cur.pop(parts[-1], None)


class Fault:
    def __init__(self, method, path, count, kind, status=None, retry_after=None, seconds=0.0,
                 size=0, chunked=False, message=None):
        self.method, self.path, self.count, self.kind = method, path, count, kind
        self.status, self.retry_after, self.seconds = status, retry_after, seconds
        self.size, self.chunked, self.message = size, chunked, message


# --- HTTP -------------------------------------------------------------------------


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the real server
    server_version = "apiserver-sim"
    timeout = 60

    def setup(self):
        super().setup()
        try:
            self.request.do_handshake()  # here, not in the accept loop
        except (ssl.SSLError, OSError) as e:
            self.server.sim.tls_failures.append(str(e))
            self.close_connection = True
            raise

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.server.sim.handle(self, "GET")

    def do_POST(self):
        self.server.sim.handle(self, "POST")

    def do_PUT(self):
        self.server.sim.handle(self, "PUT")

    def do_PATCH(self):
        self.server.sim.handle(self, "PATCH")

    def do_DELETE(self):
        self.server.sim.handle(self, "DELETE")


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hung handler must not hold up stop()

    def __init__(self, sim, ctx):
        self.sim, self.ctx = sim, ctx
        super().__init__(("127.0.0.1", 0), Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        return self.ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        pass  # clients that give up (timeouts, aborted transfers) are expected


class ApiServerSim:
    """The stand-in. Use as a context manager, or start() and stop()."""

    def __init__(self, workdir, npm_dir, field_validation="Strict"):
        self.workdir = workdir
        self.npm_dir = npm_dir
        self.default_field_validation = field_validation
        self.lock = threading.RLock()
        self.store = {k.resource: {} for k in (NODES, PODS, SLICES, CLAIMS)}
        self.rv = 100
        self.faults = []
        self.log = []            # every request: method, path, query, status
        self.writes = []         # every write: method, path, body, status
        self.evictions = []      # (namespace, pod)
        self.pdb_protected = {}  # (namespace, pod) -> evictions still refused (None: all)
        self.tls_failures = []
        self.internal_errors = []  # tracebacks of the stand-in's own failures
        self.token_file = os.path.join(workdir, "token")
        self.httpd = None

    # --- life ---

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        node = find_node()
        modules = node_modules(self.npm_dir)
        self.validator = Validator(node, modules, self.workdir)
        self.validator.probe()
        self.ca_file, ca_key = make_ca(self.workdir, "ca")
        cert, key = make_server_cert(self.workdir, self.ca_file, ca_key)
        with open(self.ca_file, "rb") as f:
            self.ca_pem = f.read()
        self.rotate_token()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["http/1.1"])
        self.httpd = Server(self, ctx)
        self.port = self.httpd.server_address[1]
        self.url = "https://127.0.0.1:%d" % self.port
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def stop(self):
        if self.httpd:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # --- test helpers ---

    def token(self):
        with open(self.token_file) as f:
            return f.read().strip()

    def rotate_token(self, in_place=False):
        """A new token. By default written as kubelet's atomic writer does
        (a new file renamed over the old: a new inode and mtime). in_place
        rewrites the same file keeping its size and mtime, so only a 401
        tells a client the token changed."""
        tok = secrets.token_urlsafe(32)
        if in_place and os.path.exists(self.token_file):
            st = os.stat(self.token_file)
            with open(self.token_file, "r+") as f:
                f.write(tok + "\n")  # the same size as before
                f.truncate()
            os.utime(self.token_file, ns=(st.st_atime_ns, st.st_mtime_ns))
        else:
            tmp = self.token_file + ".tmp"
            with open(tmp, "w") as f:
                f.write(tok + "\n")
            os.replace(tmp, self.token_file)
        return tok

    def other_ca(self):
        """A CA that did not sign the server's certificate."""
        return make_ca(self.workdir, "other-ca")[0]

    def kubeconfig(self, path, token_file=None, token=None, ca_data=True, extra_user=None):
        """Write a kubeconfig for this server (certificate-authority-data
        base64, or certificate-authority as a path) and return its path."""
        cluster = {"server": self.url}
        if ca_data:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        else:
            cluster["certificate-authority"] = os.path.relpath(self.ca_file, os.path.dirname(path))
        user = dict(extra_user or {})
        if token_file:
            user["tokenFile"] = token_file
        if token:
            user["token"] = token
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "sim",
               "clusters": [{"name": "other", "cluster": {"server": "https://192.0.2.1:1"}},
                            {"name": "sim", "cluster": cluster}],
               "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "driver"}}],
               "users": [{"name": "driver", "user": user}]}
        with open(path, "w") as f:
            json.dump(cfg, f, indent=1)  # JSON is YAML
        return path

    def inject(self, path, kind="status", count=1, method=None, status=500, retry_after=None,
               seconds=0.0, size=9 << 20, chunked=False, message=None):
        """The next `count` requests on `path` (exact, without the query;
        and `method` when given) fail: kind "status" answers `status` with
        a Status (and Retry-After seconds when given), "hang" waits
        `seconds` before answering normally, "drop" closes the connection
        without an answer, "oversize" answers 200 with `size` bytes of JSON
        (with Content-Length, or chunked)."""
        with self.lock:
            self.faults.append(Fault(method, path, count, kind, status, retry_after, seconds,
                                     size, chunked, message))

    def clear_faults(self):
        with self.lock:
            self.faults = []

    def count(self, path, method=None, status=None):
        with self.lock:
            return sum(1 for e in self.log if e["path"] == path
                       and (method is None or e["method"] == method)
                       and (status is None or e["status"] == status))

    def objects(self, resource):
        with self.lock:
            return [json.loads(json.dumps(o)) for o in self.store[resource].values()]

    def get_object(self, resource, name, namespace=None):
        with self.lock:
            o = self.store[resource].get((namespace, name))
            return json.loads(json.dumps(o)) if o else None

    def delete_object(self, resource, name, namespace=None):
        """Delete as another client would (kubectl delete): True if it was there."""
        with self.lock:
            return self.store[resource].pop((namespace, name), None) is not None

    def put_node(self, name, labels=None):
        labels = dict(labels or {}, **{"kubernetes.io/hostname": name})
        return self._put_fixture(NODES, None, {"metadata": {"name": name, "labels": labels},
                                               "spec": {}, "status": {"nodeInfo": NODE_INFO}})

    def put_pod(self, namespace, name, node="node-a"):
        return self._put_fixture(PODS, namespace, {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "serve:1"}]}})

    def put_claim(self, namespace, name, requests, results=None, config=None, node="node-a",
                  reserved_for=None):
        """A ResourceClaim; with results, allocated as kube-scheduler writes
        status.allocation (results with shareID and consumedCapacity, the
        claim's config copied with source FromClaim, a node selector on the
        node's name). requests: [{"name", "deviceClassName", "capacity"}],
        with "subrequests": [names] a firstAvailable list of those (each
        result's request is then "<name>/<subrequest>")."""
        def exact(r):
            return {"deviceClassName": r["deviceClassName"], "allocationMode": "ExactCount",
                    "count": 1, "capacity": {"requests": r.get("capacity", {})}}
        spec = {"devices": {"requests": [
            {"name": r["name"], "firstAvailable": [dict(exact(r), name=sub)
                                                   for sub in r["subrequests"]]}
            if r.get("subrequests") else {"name": r["name"], "exactly": exact(r)}
            for r in requests]}}
        if config:
            spec["devices"]["config"] = config
        obj = {"metadata": {"name": name, "namespace": namespace}, "spec": spec}
        if results is not None:
            obj["status"] = {"allocation": {
                "devices": {"results": results,
                            "config": [dict(c, source="FromClaim") for c in config or []]},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                    {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                "allocationTimestamp": now_rfc3339()}}
            if reserved_for:
                obj["status"]["reservedFor"] = reserved_for
        return self._put_fixture(CLAIMS, namespace, obj)

    def protect_pod(self, namespace, name, times=None):
        """Evicting this pod answers 429, as a PodDisruptionBudget that
        allows no disruption now would: the next `times` attempts, or every
        attempt when None."""
        with self.lock:
            self.pdb_protected[(namespace, name)] = times

    def _put_fixture(self, k, namespace, obj):
        obj = dict(obj, apiVersion=k.api_version, kind=k.kind)
        with self.lock:
            old = self.store[k.resource].get((namespace, obj["metadata"]["name"]))
            self._system_fields(obj, old)
        reasons = self.validator.check(obj)
        types, unknown, invalid = self.validator.classify(reasons)
        if types or unknown or invalid.errs:
            raise ValueError("test fixture %s/%s is not valid: %s" % (k.kind, obj["metadata"]["name"],
                                                                   "; ".join(reasons)))
        with self.lock:
            self.store[k.resource][(namespace, obj["metadata"]["name"])] = obj
        return json.loads(json.dumps(obj))

    # --- metadata ---

    def _next_rv(self):
        self.rv += 1
        return str(self.rv)

    def _system_fields(self, obj, old):
        md = obj.setdefault("metadata", {})
        if old:
            for f in ("uid", "creationTimestamp"):
                md[f] = old["metadata"][f]
            gen = old["metadata"].get("generation", 1)
            md["generation"] = gen + 1 if obj.get("spec") != old.get("spec") else gen
        else:
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md["generation"] = 1
        md["resourceVersion"] = self._next_rv()
        if obj.get("kind") in ("Node", "Pod"):
            md.pop("generation", None)

    # --- requests ---

    ROUTES = [
        (re.compile(r"^/api/v1/nodes/([^/]+)$"), "node"),
        (re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/eviction$"), "eviction"),
        (re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$"), "pod"),
        (re.compile(r"^/apis/resource\.k8s\.io/v1/resourceslices$"), "slices"),
        (re.compile(r"^/apis/resource\.k8s\.io/v1/resourceslices/([^/]+)$"), "slice"),
        (re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims$"), "claims"),
        (re.compile(r"^/apis/resource\.k8s\.io/v1/namespaces/([^/]+)/resourceclaims/([^/]+)$"),
         "claim"),
    ]

    def handle(self, h, method):
        url = urlsplit(h.path)
        entry = {"method": method, "path": url.path, "query": url.query, "status": None}
        with self.lock:
            self.log.append(entry)
        headers = []
        try:
            body = self._read_body(h)
            self._authenticate(h)
            fault = self._take_fault(method, url.path)
            if fault and self._apply_fault(h, fault, entry):
                return
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            status, obj, headers = self._route(method, url.path, query, body, h.headers)
        except ApiError as e:
            status, obj, headers = e.code, e.body(), list(e.headers.items())
        except Exception as e:  # a bug of the stand-in: a 500 a test can see
            self.internal_errors.append(traceback.format_exc())
            status, obj = 500, ApiError(500, "InternalError", "apiserver-sim: %r" % e).body()
        entry["status"] = status
        if method in ("POST", "PUT", "PATCH", "DELETE"):
            with self.lock:
                self.writes.append({"method": method, "path": url.path, "query": url.query,
                                    "body": self._json_or_text(body), "status": status})
        self._send(h, status, obj, headers)

    @staticmethod
    def _json_or_text(body):
        try:
            return json.loads(body) if body else None
        except ValueError:
            return body.decode(errors="replace")

    def _read_body(self, h):
        n = int(h.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            h.close_connection = True
            raise ApiError(413, "RequestEntityTooLarge", "the request body is larger than %d bytes"
                           % MAX_BODY)
        return h.rfile.read(n) if n else b""

    def _authenticate(self, h):
        auth = h.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not secrets.compare_digest(auth[7:], self.token()):
            raise ApiError(401, "Unauthorized", "Unauthorized")

    def _take_fault(self, method, path):
        with self.lock:
            for f in self.faults:
                if f.path == path and f.method in (None, method) and f.count > 0:
                    f.count -= 1
                    return f
        return None

    def _apply_fault(self, h, f, entry):
        """True when the fault answered (or dropped) the request."""
        if f.kind == "status":
            reason = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable",
                      403: "Forbidden", 404: "NotFound", 504: "Timeout"}.get(f.status, "Unknown")
            msg = f.message or {429: "Too many requests, please try again later.",
                                500: "Internal error occurred: injected by the test"}.get(
                                    f.status, "injected by the test")
            hdrs = [("Retry-After", str(f.retry_after))] if f.retry_after is not None else []
            entry["status"] = f.status
            self._send(h, f.status, ApiError(f.status, reason, msg).body(), hdrs)
            return True
        if f.kind == "hang":
            time.sleep(f.seconds)
            return False
        if f.kind == "drop":
            entry["status"] = "dropped"
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return True
        if f.kind == "oversize":
            entry["status"] = 200
            self._send_big(h, f.size, f.chunked)
            return True
        raise ValueError("unknown fault " + f.kind)

    def _send(self, h, status, obj, headers):
        data = json.dumps(obj).encode()
        try:
            h.send_response(status)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", str(len(data)))
            h.send_header("Audit-Id", str(uuid.uuid4()))
            for k, v in headers:
                h.send_header(k, v)
            h.end_headers()
            h.wfile.write(data)
        except OSError:
            h.close_connection = True  # the client gave up

    def _send_big(self, h, size, chunked):
        head = b'{"kind":"ResourceSliceList","apiVersion":"resource.k8s.io/v1","pad":"'
        tail = b'"}'
        fill = size - len(head) - len(tail)
        try:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            if chunked:
                h.send_header("Transfer-Encoding", "chunked")
            else:
                h.send_header("Content-Length", str(size))
            h.end_headers()
            parts = [head] + [b"x" * min(65536, fill - i) for i in range(0, fill, 65536)] + [tail]
            for p in parts:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(p), p) if chunked else p)
            if chunked:
                h.wfile.write(b"0\r\n\r\n")
        except OSError:
            pass
        h.close_connection = True

    def _route(self, method, path, query, body, headers):
        for rx, name in self.ROUTES:
            m = rx.match(path)
            if not m:
                continue
            fn = getattr(self, "_%s_%s" % (name, method.lower()), None)
            if not fn:
                raise ApiError(405, "MethodNotAllowed",
                               "the server does not allow this method on the requested resource")
            with self.lock:
                return fn(*m.groups(), query=query, body=body, headers=headers)
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    # --- decoding and validation ---

    def _field_validation(self, query):
        v = query.get("fieldValidation", self.default_field_validation)
        if v not in ("Strict", "Warn", "Ignore"):
            raise bad_request('fieldValidation: "%s" is not one of Strict, Warn, Ignore' % v)
        return v

    def _decode(self, k, body, headers, query, patch=False):
        ctype = (headers.get("Content-Type") or "").split(";")[0].strip()
        want = "application/merge-patch+json" if patch else "application/json"
        if ctype != want:
            raise ApiError(415, "UnsupportedMediaType",
                           '%s is unsupported (the stand-in takes only %s here)' % (ctype or "no type", want))
        mode = self._field_validation(query)
        warnings = []
        try:
            obj = json.loads(body, object_pairs_hook=no_duplicates)
        except DuplicateField as d:
            if mode == "Strict":
                raise bad_request('strict decoding error: json: duplicate field "%s"' % d)
            warnings.append('json: duplicate field "%s"' % d)
            obj = json.loads(body)
        except ValueError as e:
            raise bad_request("couldn't get version/kind; json parse error: %s" % e)
        if not isinstance(obj, dict):
            raise bad_request("the body is not a JSON object")
        if not patch:
            obj.setdefault("apiVersion", k.api_version)
            obj.setdefault("kind", k.kind)
            if obj["apiVersion"] != k.api_version or obj["kind"] != k.kind:
                raise bad_request("the API version in the data (%s) does not match the expected API "
                                  "version (%s), or the kind (%s) the expected kind (%s)"
                                  % (obj["apiVersion"], k.api_version, obj["kind"], k.kind))
        return obj, mode, warnings

    def _admit(self, k, obj, mode, warnings, old=None):
        """Validate obj as stored (system fields set): 400 for what decoding
        rejects, 422 for what validation rejects. Returns Warning headers."""
        name = obj.get("metadata", {}).get("name", "")
        types, unknown, invalid = self.validator.classify(self.validator.check(obj))
        if types:
            raise bad_request('%s in version "%s" cannot be handled as a %s: %s'
                              % (k.kind, k.version, k.kind, "; ".join(types)))
        if k is SLICES:
            bad = bad_quantities(obj)
            if bad:
                raise bad_request("%s: quantities must match the regular expression "
                                  "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'" % ", ".join(bad))
        if unknown:
            if mode == "Strict":
                raise bad_request("strict decoding error: " +
                                  ", ".join('unknown field "%s"' % f for f in unknown))
            for f in unknown:
                drop_field(obj, f)
            if mode == "Warn":
                warnings += ['unknown field "%s"' % f for f in unknown]
        if k is SLICES:
            check_resourceslice(obj, old, invalid)
        invalid.raise_invalid(k.kind, k.group, name)
        return [("Warning", '299 - "%s"' % w.replace('"', '\\"')) for w in warnings]

    # --- handlers (called with the lock held) ---

    def _get(self, k, namespace, name):
        o = self.store[k.resource].get((namespace, name))
        if not o:
            raise not_found(k.resource, k.group, name)
        return 200, o, []

    def _node_get(self, name, **_):
        return self._get(NODES, None, name)

    def _node_patch(self, name, query, body, headers, **_):
        """A merge patch of a Node (gpusliced --report-node writes one
        annotation). Only metadata.annotations may change here: the stand-in
        guards the rest, which kubelets own."""
        patch, mode, warnings = self._decode(NODES, body, headers, query, patch=True)
        old = self.store["nodes"].get((None, name))
        if not old:
            raise not_found(NODES.resource, NODES.group, name)
        if set(patch) - {"metadata"} or set(patch.get("metadata") or {}) - {"annotations"}:
            raise bad_request("the stand-in takes only metadata.annotations in a Node patch")
        merged = merge_patch(json.loads(json.dumps(old)), patch)
        invalid = FieldErrors()
        check_annotations(merged["metadata"].get("annotations") or {}, invalid)
        self._system_fields(merged, old)
        hdrs = self._admit(NODES, merged, mode, warnings, old)
        invalid.raise_invalid(NODES.kind, NODES.group, name)
        self.store["nodes"][(None, name)] = merged
        return 200, merged, hdrs

    def _pod_get(self, ns, name, **_):
        return self._get(PODS, ns, name)

    def _claim_get(self, ns, name, **_):
        return self._get(CLAIMS, ns, name)

    def _list(self, k, namespace, query, fields):
        lsel = label_selector(query.get("labelSelector"))
        fsel = field_selector(query.get("fieldSelector"), fields)
        items = []
        for (ns, _), o in sorted(self.store[k.resource].items(), key=lambda kv: kv[0][1]):
            if (namespace is None or ns == namespace) and lsel(o["metadata"].get("labels") or {}) \
                    and fsel(o):
                items.append({f: v for f, v in o.items() if f not in ("apiVersion", "kind")})
        return 200, {"kind": k.kind + "List", "apiVersion": k.api_version,
                     "metadata": {"resourceVersion": str(self.rv)}, "items": items}, []

    def _claims_get(self, ns, query, **_):
        return self._list(CLAIMS, ns, query, {"metadata.name": lambda o: o["metadata"]["name"]})

    def _slices_get(self, query, **_):
        return self._list(SLICES, None, query, SLICE_FIELDS)

    def _slices_post(self, query, body, headers, **_):
        obj, mode, warnings = self._decode(SLICES, body, headers, query)
        md = obj.setdefault("metadata", {})
        if not isinstance(md, dict):
            raise bad_request("metadata must be an object")
        if md.get("resourceVersion"):
            raise bad_request("resourceVersion should not be set on objects to be created")
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + "".join(
                secrets.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5))
        md.pop("namespace", None)  # cluster-scoped
        if not md.get("name"):
            e = FieldErrors()
            e.required("metadata.name", "name or generateName is required")
            e.raise_invalid(SLICES.kind, SLICES.group, "")
        if (None, md["name"]) in self.store["resourceslices"]:
            raise already_exists(SLICES.resource, SLICES.group, md["name"])
        self._system_fields(obj, None)
        hdrs = self._admit(SLICES, obj, mode, warnings)
        self.store["resourceslices"][(None, md["name"])] = obj
        return 201, obj, hdrs

    def _slice_get(self, name, **_):
        return self._get(SLICES, None, name)

    def _update(self, name, obj, mode, warnings):
        old = self.store["resourceslices"].get((None, name))
        if not old:
            raise not_found(SLICES.resource, SLICES.group, name)
        md = obj.setdefault("metadata", {})
        if md.get("name", name) != name:
            raise bad_request("the name of the object (%s) does not match the name on the URL (%s)"
                              % (md.get("name"), name))
        md["name"] = name
        if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise conflict(SLICES.resource, SLICES.group, name,
                           "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (md["uid"], old["metadata"]["uid"]))
        if md.get("resourceVersion") and md["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(SLICES.resource, SLICES.group, name, STALE)
        self._system_fields(obj, old)
        hdrs = self._admit(SLICES, obj, mode, warnings, old)
        self.store["resourceslices"][(None, name)] = obj
        return 200, obj, hdrs

    def _slice_put(self, name, query, body, headers, **_):
        obj, mode, warnings = self._decode(SLICES, body, headers, query)
        return self._update(name, obj, mode, warnings)

    def _slice_patch(self, name, query, body, headers, **_):
        patch, mode, warnings = self._decode(SLICES, body, headers, query, patch=True)
        old = self.store["resourceslices"].get((None, name))
        if not old:
            raise not_found(SLICES.resource, SLICES.group, name)
        merged = merge_patch(json.loads(json.dumps(old)), patch)
        if not (patch.get("metadata") or {}).get("resourceVersion"):
            merged["metadata"].pop("resourceVersion", None)  # no precondition
        return self._update(name, merged, mode, warnings)

    def _slice_delete(self, name, body, **_):
        old = self.store["resourceslices"].get((None, name))
        if not old:
            raise not_found(SLICES.resource, SLICES.group, name)
        opts = self._json_or_text(body) if body else {}
        pre = (opts or {}).get("preconditions") or {} if isinstance(opts, dict) else {}
        if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
            raise conflict(SLICES.resource, SLICES.group, name,
                           "Precondition failed: ResourceVersion in precondition: %s, ResourceVersion "
                           "in object meta: %s" % (pre["resourceVersion"],
                                                   old["metadata"]["resourceVersion"]))
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise conflict(SLICES.resource, SLICES.group, name,
                           "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (pre["uid"], old["metadata"]["uid"]))
        del self.store["resourceslices"][(None, name)]
        self._next_rv()
        return 200, old, []

    def _eviction_post(self, ns, pod, query, body, headers, **_):
        obj, mode, warnings = self._decode(EVICTION, body, headers, query)
        md = obj.get("metadata") or {}
        if md.get("name") != pod:
            raise bad_request("name in URL does not match name in Eviction object")
        if md.get("namespace", ns) != ns:
            raise bad_request("the namespace of the provided object does not match the namespace "
                              "sent on the request")
        hdrs = self._admit(EVICTION, obj, mode, warnings)
        if (ns, pod) not in self.store["pods"]:
            raise not_found(PODS.resource, PODS.group, pod)
        # A uid precondition (DeleteOptions) that names another pod: 409,
        # as the registry's eviction REST checks it.
        pre = (obj.get("deleteOptions") or {}).get("preconditions") or {}
        have = self.store["pods"][(ns, pod)]["metadata"]["uid"]
        if pre.get("uid") and pre["uid"] != have:
            raise conflict(PODS.resource, PODS.group, pod,
                           "Precondition failed: UID in precondition: %s, UID in object meta: %s"
                           % (pre["uid"], have))
        left = self.pdb_protected.get((ns, pod), 0)
        if left is None or left > 0:
            if left:
                self.pdb_protected[(ns, pod)] = left - 1
            raise ApiError(429, "TooManyRequests",
                           "Cannot evict pod as it would violate the pod's disruption budget.",
                           {"causes": [{"reason": "DisruptionBudget", "message":
                                        "The disruption budget %s-pdb needs 1 healthy pods and "
                                        "has 1 currently" % pod}]})
        del self.store["pods"][(ns, pod)]
        self._next_rv()
        self.evictions.append((ns, pod))
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                     "code": 201}, hdrs
