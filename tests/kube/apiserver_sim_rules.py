# SPDX-License-Identifier: Apache-2.0
"""The API server's rules that the stand-in (apiserver_sim.py) applies:
Status bodies, field errors, quantities, label and field selectors, JSON
merge patch, and the ResourceSlice validation that the OpenAPI schema
cannot express.

What is modelled, and from where (Kubernetes 1.34-1.37):

  * Status and field errors: k8s.io/apimachinery pkg/api/errors
    (NewNotFound, NewAlreadyExists, NewConflict, NewInvalid, NewBadRequest)
    and pkg/util/validation/field (the "path: Invalid value: v: detail"
    wording of field.Error.Error()).
  * Quantities: k8s.io/apimachinery pkg/api/resource (decimal and binary
    suffixes, exponents; an unparseable one fails decoding with 400).
  * Selectors: pkg/labels (=, ==, !=, exists, !exists, in, notin) and
    pkg/fields (=, ==, !=); ResourceSlice supports the field selectors
    metadata.name, spec.nodeName and spec.driver (pkg/registry/resource/
    resourceslice/strategy.go), others answer 400.
  * JSON merge patch: RFC 7386.
  * ResourceSlice validation: pkg/apis/resource/validation/validation.go
    (ValidateResourceSlice and ValidateResourceSliceUpdate): driver and
    pool names, resourceSliceCount > 0, generation >= 0, exactly one of
    nodeName / nodeSelector / allNodes / perDeviceNodeSelection, devices
    xor sharedCounters, at most 128 devices (64 with taints or counters),
    device names (DNS labels, unique), at most 32 attributes and capacities
    per device, attribute names and exactly one value each, capacity
    requestPolicy only with allowMultipleAllocations, and the requestPolicy
    rules (validValues xor validRange, default required and in range, min,
    max and step against the capacity's value); driver, pool.name and
    nodeName immutable on update.
Not modelled: CEL in DeviceClass selectors, device taints' effects, the
sharedCounters/consumesCounters arithmetic, admission plugins."""
import json
import math
import re
from fractions import Fraction

# --- Status -------------------------------------------------------------------


class ApiError(Exception):
    """An answer that is a Status: code, reason, message, details."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers or {}

    def body(self):
        st = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            st["details"] = self.details
        return st


def qualified(resource, group):
    return "%s.%s" % (resource, group) if group else resource


def not_found(resource, group, name):
    return ApiError(404, "NotFound", '%s "%s" not found' % (qualified(resource, group), name),
                    {"name": name, "group": group, "kind": resource})


def already_exists(resource, group, name):
    return ApiError(409, "AlreadyExists",
                    '%s "%s" already exists' % (qualified(resource, group), name),
                    {"name": name, "group": group, "kind": resource})


def conflict(resource, group, name, why):
    return ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": %s'
                    % (qualified(resource, group), name, why),
                    {"name": name, "group": group, "kind": resource})


STALE = "the object has been modified; please apply your changes to the latest version and try again"


def bad_request(message):
    return ApiError(400, "BadRequest", message)


# --- field errors (k8s.io/apimachinery/pkg/util/validation/field) --------------


class FieldErrors:
    def __init__(self):
        self.errs = []  # (reason, field, text)

    def add(self, reason, field, text):
        self.errs.append((reason, field, text))

    def required(self, field, detail=""):
        self.add("FieldValueRequired", field, "Required value" + (": " + detail if detail else ""))

    def invalid(self, field, value, detail):
        self.add("FieldValueInvalid", field, "Invalid value: %s: %s" % (shown(value), detail))

    def forbidden(self, field, detail):
        self.add("FieldValueForbidden", field, "Forbidden: " + detail)

    def too_many(self, field, n, limit):
        self.add("FieldValueTooMany", field, "Too many: %d: must have at most %d items" % (n, limit))

    def duplicate(self, field, value):
        self.add("FieldValueDuplicate", field, "Duplicate value: %s" % shown(value))

    def unsupported(self, field, detail):
        self.add("FieldValueNotSupported", field, "Unsupported value: " + detail)

    def raise_invalid(self, kind, group, name):
        """422 Invalid, as errors.NewInvalid words it."""
        if not self.errs:
            return
        self.errs = list(dict.fromkeys(self.errs))  # the schema and the rules may both say it
        items = ["%s: %s" % (f, t) for _, f, t in self.errs]
        msg = items[0] if len(items) == 1 else "[" + ", ".join(items) + "]"
        causes = [{"reason": r, "message": t, "field": f} for r, f, t in self.errs]
        raise ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (qualified(kind, group), name, msg),
                       {"name": name, "group": group, "kind": kind, "causes": causes})


# ValidateAnnotations (k8s.io/apimachinery/pkg/api/validation/objectmeta.go):
# keys are qualified names, the total size of keys and values at most
# TotalAnnotationSizeLimitB (256 KiB).
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def check_annotations(annotations, errs):
    total = 0
    for k, v in annotations.items():
        prefix, _, nm = k.rpartition("/")
        if (not QUALIFIED_NAME.match(nm) or len(nm) > 63 or
                (prefix and (len(prefix) > 253 or not DNS1123_SUBDOMAIN.match(prefix)))):
            errs.invalid("metadata.annotations", k, "name part must consist of alphanumeric "
                         "characters, '-', '_' or '.'")
        if not isinstance(v, str):
            errs.invalid("metadata.annotations", k, "must be a string")
            continue
        total += len(k) + len(v)
    if total > 256 * 1024:
        errs.add("FieldValueTooLong", "metadata.annotations",
                 "Too long: must have at most 262144 bytes")


def shown(v):
    return json.dumps(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


# --- names ------------------------------------------------------------------------

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
C_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
                    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
                    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$")


def is_dns_label(s):
    return isinstance(s, str) and 0 < len(s) <= 63 and bool(DNS_LABEL.match(s))


def is_dns_subdomain(s):
    return isinstance(s, str) and 0 < len(s) <= 253 and all(is_dns_label(p) for p in s.split("."))


# --- quantities (k8s.io/apimachinery/pkg/api/resource) ---------------------------

QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
                      r"(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?[0-9]+))?$")
SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
          "n": Fraction(1, 10 ** 9), "u": Fraction(1, 10 ** 6), "m": Fraction(1, 1000),
          "k": 10 ** 3, "M": 10 ** 6, "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def quantity(v):
    """A Quantity (JSON string or number) as a Fraction; None if invalid."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return Fraction(v)
    if not isinstance(v, str):
        return None
    m = QUANTITY.match(v)
    if not m:
        return None
    x = Fraction(m.group(2))
    if m.group(3):
        x *= SUFFIX[m.group(3)]
    elif m.group(4):
        x *= Fraction(10) ** int(m.group(4))
    return -x if m.group(1) == "-" else x


def quantity_value(q):
    """Quantity.Value(): rounded up to an integer."""
    return math.ceil(q)


def bad_quantities(obj):
    """Paths of the quantities of a ResourceSlice that do not parse:
    decoding fails on them with 400, before validation."""
    found = []
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}

    def counters(field, lst):
        for i, cs in enumerate(lst if isinstance(lst, list) else []):
            for k, c in ((cs or {}).get("counters") or {}).items():
                found.append(("%s[%d].counters[%s].value" % (field, i, k), (c or {}).get("value")))

    counters("spec.sharedCounters", spec.get("sharedCounters"))
    for i, d in enumerate(spec.get("devices") or []):
        if not isinstance(d, dict):
            continue
        counters("spec.devices[%d].consumesCounters" % i, d.get("consumesCounters"))
        for k, c in (d.get("capacity") or {}).items():
            f = "spec.devices[%d].capacity[%s]" % (i, k)
            c = c if isinstance(c, dict) else {}
            found.append((f + ".value", c.get("value")))
            pol = c.get("requestPolicy") if isinstance(c.get("requestPolicy"), dict) else {}
            found.append((f + ".requestPolicy.default", pol.get("default")))
            for j, v in enumerate(pol.get("validValues") or []):
                found.append(("%s.requestPolicy.validValues[%d]" % (f, j), v))
            vr = pol.get("validRange") if isinstance(pol.get("validRange"), dict) else {}
            for b in ("min", "max", "step"):
                found.append(("%s.requestPolicy.validRange.%s" % (f, b), vr.get(b)))
    return [f for f, v in found if v is not None and quantity(v) is None]


# --- selectors ----------------------------------------------------------------------


def split_top(s):
    parts, depth, cur = [], 0, ""
    for c in s:
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        if c == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += c
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def label_selector(sel):
    """A predicate over a labels dict; 400 on a malformed selector."""
    reqs = []
    for term in split_top(sel or ""):
        m = re.match(r"^([^\s!=()]+)\s+(in|notin)\s+\(([^)]*)\)$", term)
        if m:
            vals = {v.strip() for v in m.group(3).split(",") if v.strip()}
            reqs.append((m.group(1), m.group(2), vals))
            continue
        m = re.match(r"^([^\s!=()]+)\s*(==|=|!=)\s*([^\s!=(),]*)$", term)
        if m:
            reqs.append((m.group(1), m.group(2), m.group(3)))
            continue
        m = re.match(r"^(!?)([^\s!=(),]+)$", term)
        if m:
            reqs.append((m.group(2), "!" if m.group(1) else "exists", None))
            continue
        raise bad_request("unable to parse requirement: %r" % term)

    def match(labels):
        for k, op, v in reqs:
            have = labels.get(k)
            if op in ("=", "==") and have != v or op == "!=" and have == v:
                return False
            if op == "in" and have not in v or op == "notin" and have in v:
                return False
            if op == "exists" and k not in labels or op == "!" and k in labels:
                return False
        return True
    return match


def field_selector(sel, supported):
    """A predicate over an object; `supported` maps selector field names to
    getters. 400 on a malformed selector or an unsupported field."""
    reqs = []
    for term in split_top(sel or ""):
        m = re.match(r"^([^\s!=]+)\s*(==|=|!=)\s*(.*)$", term)
        if not m:
            raise bad_request("invalid selector: %r; can't understand %r" % (sel, term))
        if m.group(1) not in supported:
            raise bad_request('"%s" is not a known field selector: only %s' % (
                m.group(1), ", ".join('"%s"' % f for f in sorted(supported))))
        reqs.append((supported[m.group(1)], m.group(2), m.group(3)))
    return lambda obj: all((get(obj) == v) == (op != "!=") for get, op, v in reqs)


# --- JSON merge patch (RFC 7386) ---------------------------------------------------------


def merge_patch(target, patch):
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- ResourceSlice (pkg/apis/resource/validation/validation.go) ----------------------------

MAX_DEVICES, MAX_DEVICES_TAINTS_OR_COUNTERS = 128, 64
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ID = 32
MAX_ATTRIBUTE_VALUE = 64


def check_driver(e, field, v):
    if not v:
        e.required(field)
    elif not is_dns_subdomain(v) or len(v) > 63:
        e.invalid(field, v, "a lowercase RFC 1123 subdomain of at most 63 characters")


def check_pool_name(e, field, v):
    if not v:
        e.required(field)
    elif len(v) > 253 or not all(is_dns_subdomain(p) for p in v.split("/")):
        e.invalid(field, v, "must be one or more DNS sub-domains separated by slashes")


def check_qualified_name(e, field, name):
    parts = name.split("/")
    ident = parts[-1]
    if len(parts) == 2:
        if not parts[0]:
            e.invalid(field, "", "the domain must not be empty")
        else:
            check_driver(e, field, parts[0])
    if not ident:
        e.invalid(field, "", "the name must not be empty")
    elif len(ident) > MAX_ID:
        e.add("FieldValueTooLong", field, "Too long: may not be more than %d bytes" % MAX_ID)
    elif not C_IDENT.match(ident):
        e.invalid(field, ident, "a valid C identifier must start with alphabetic character or '_', "
                  "followed by a string of alphanumeric characters or '_'")


def check_attribute(e, field, a):
    if not isinstance(a, dict):
        return
    kinds = [k for k in ("bool", "int", "string", "version") if k in a]
    if len(kinds) != 1:
        e.invalid(field, a if kinds else "", "exactly one value must be specified")
    if isinstance(a.get("string"), str) and len(a["string"]) > MAX_ATTRIBUTE_VALUE:
        e.add("FieldValueTooLong", field + ".string",
              "Too long: may not be more than %d bytes" % MAX_ATTRIBUTE_VALUE)
    if isinstance(a.get("version"), str) and not SEMVER.match(a["version"]):
        e.invalid(field + ".version", a["version"], "must be a string compatible with semver.org spec 2.0.0")


def check_step(e, field, value, lo, step):
    """value, lo, step: the quantities as written (messages show them so,
    as Quantity.String() does for canonical input)."""
    v, m, s = (quantity_value(quantity(x)) for x in (value, lo, step))
    if s > 0 and (v - m) % s != 0:
        e.invalid(field, str(value), "value is not a multiple of a given step (%s) from (%s)" % (step, lo))


def check_request_policy(e, field, cap_value, pol):
    if not isinstance(pol, dict):
        return
    vv, vr, default = pol.get("validValues"), pol.get("validRange"), pol.get("default")
    if vv and vr is not None:
        e.forbidden(field, 'exactly one policy can be specified, cannot specify "validValues" '
                    'and "validRange" at the same time')
        return
    d = quantity(default) if default is not None else None
    if vv:
        if d is None:
            e.required(field + ".default", "required when validValues is defined")
            return
        qs = [quantity(x) for x in vv]
        for i in range(len(qs) - 1):
            if qs[i] > qs[i + 1]:
                e.invalid("%s.validValues[%d]" % (field, i + 1), vv[i + 1], "values must be sorted in ascending order")
        for i, q in enumerate(qs):
            if q > cap_value:
                e.invalid("%s.validValues[%d]" % (field, i), vv[i], "option is larger than capacity value: %s" % cap_value)
        if d not in qs:
            e.invalid(field + ".validValues", default, "default value is not valid according to the requestPolicy")
    elif isinstance(vr, dict):
        f = field + ".validRange"
        if d is None:
            e.required(field + ".default", "required when validRange is defined")
            return
        if vr.get("min") is None:
            e.required(f + ".min", "required when validRange is defined")
            return
        lo = quantity(vr["min"])
        if lo > cap_value:
            e.invalid(f + ".min", vr["min"], "min is larger than capacity value: %s" % cap_value)
        if d < lo:
            e.invalid(f + ".min", default, "default is less than min: %s" % vr["min"])
        hi = quantity(vr["max"]) if vr.get("max") is not None else None
        if hi is not None:
            if lo > hi:
                e.invalid(f + ".max", vr["min"], "min is larger than max: %s" % vr["max"])
            if hi > cap_value:
                e.invalid(f + ".max", vr["max"], "max is larger than capacity value: %s" % cap_value)
            if d > hi:
                e.invalid(f + ".max", default, "default is more than max: %s" % vr["max"])
        if vr.get("step") is not None:
            step = quantity(vr["step"])
            if lo + step > cap_value:
                e.invalid(f + ".step", vr["step"], "one step %s is larger than capacity value: %s"
                          % (lo + step, cap_value))
            check_step(e, f + ".step", default, vr["min"], vr["step"])
            if hi is not None:
                check_step(e, f + ".step", vr["max"], vr["min"], vr["step"])


def check_device(e, field, dev, per_device):
    if not isinstance(dev, dict):
        return
    multi = dev.get("allowMultipleAllocations") is True
    name = dev.get("name")
    if not name:
        e.required(field + ".name")
    elif not is_dns_label(name):
        e.invalid(field + ".name", name, "a lowercase RFC 1123 label must consist of lower case "
                  "alphanumeric characters or '-', and must start and end with an alphanumeric character")
    attrs, caps = dev.get("attributes") or {}, dev.get("capacity") or {}
    if len(attrs) + len(caps) > MAX_ATTRIBUTES_AND_CAPACITIES:
        e.invalid(field, len(attrs) + len(caps), "the total number of attributes and capacities "
                  "must not exceed %d" % MAX_ATTRIBUTES_AND_CAPACITIES)
    for k, a in attrs.items():
        check_qualified_name(e, "%s.attributes[%s]" % (field, k), k)
        check_attribute(e, "%s.attributes[%s]" % (field, k), a)
    for k, c in caps.items():
        f = "%s.capacity[%s]" % (field, k)
        check_qualified_name(e, f, k)
        if not isinstance(c, dict) or "requestPolicy" not in c:
            continue
        if not multi:
            e.forbidden(f + ".requestPolicy", "allowMultipleAllocations must be true")
        elif quantity(c.get("value")) is not None:
            check_request_policy(e, f + ".requestPolicy", quantity(c["value"]), c["requestPolicy"])
    placed = [k for k in ("nodeName", "nodeSelector", "allNodes") if k in dev]
    if not per_device and placed:
        e.invalid(field, None, "`nodeName`, `nodeSelector` and `allNodes` can only be set if "
                  "`perDeviceNodeSelection` is set to true in the ResourceSlice spec")
    elif per_device and len(placed) != 1:
        e.required(field, "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required "
                   "when `perDeviceNodeSelection` is set to true in the ResourceSlice spec")


def check_resourceslice(obj, old=None, e=None):
    """Add to e (FieldErrors) what the real server rejects in a ResourceSlice;
    without e, raise 422 Invalid at once."""
    raise_now = e is None
    e = e if e is not None else FieldErrors()
    spec = obj.get("spec") or {}
    check_driver(e, "spec.driver", spec.get("driver"))
    pool = spec.get("pool") or {}
    check_pool_name(e, "spec.pool.name", pool.get("name"))
    if isinstance(pool.get("resourceSliceCount"), int) and pool["resourceSliceCount"] <= 0:
        e.invalid("spec.pool.resourceSliceCount", pool["resourceSliceCount"], "must be greater than zero")
    if isinstance(pool.get("generation"), int) and pool["generation"] < 0:
        e.invalid("spec.pool.generation", pool["generation"], "must be greater than or equal to zero")
    if old is not None:
        ospec = old.get("spec") or {}
        for f, a, b in (("spec.pool.name", pool.get("name"), (ospec.get("pool") or {}).get("name")),
                        ("spec.driver", spec.get("driver"), ospec.get("driver")),
                        ("spec.nodeName", spec.get("nodeName"), ospec.get("nodeName"))):
            if a != b:
                e.invalid(f, a, "field is immutable")
    placed = []
    if "nodeName" in spec:
        if spec["nodeName"]:
            placed.append("`nodeName`")
        else:
            e.invalid("spec.nodeName", "", "must be either unset or set to a non-empty string")
    if "nodeSelector" in spec:
        placed.append("`nodeSelector`")
        terms = (spec["nodeSelector"] or {}).get("nodeSelectorTerms") or []
        if len(terms) != 1:
            e.invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term")
    for k in ("allNodes", "perDeviceNodeSelection"):
        if k in spec:
            if spec[k] is True:
                placed.append("`%s`" % k)
            else:
                e.invalid("spec." + k, spec[k], "must be either unset or set to true")
    one_of = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not placed:
        e.required("spec", one_of)
    elif len(placed) > 1:
        e.invalid("spec", "{%s}" % ", ".join(placed), one_of + ", but multiple fields are set")
    devices = spec.get("devices")
    if devices is not None and spec.get("sharedCounters") is not None:
        e.invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed")
    devices = devices or []
    limit = MAX_DEVICES
    if any(isinstance(d, dict) and (d.get("taints") or d.get("consumesCounters")) for d in devices):
        limit = MAX_DEVICES_TAINTS_OR_COUNTERS
    if len(devices) > limit:
        e.too_many("spec.devices", len(devices), limit)
    else:
        seen = set()
        for i, d in enumerate(devices):
            check_device(e, "spec.devices[%d]" % i, d, spec.get("perDeviceNodeSelection") is True)
            n = d.get("name") if isinstance(d, dict) else None
            if n in seen:
                e.duplicate("spec.devices[%d]" % i, n)
            seen.add(n)
    if raise_now:
        e.raise_invalid("ResourceSlice", "resource.k8s.io", (obj.get("metadata") or {}).get("name", ""))
