#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Validate the CDI specs gpuslice writes against the CDI JSON schema.

Runs the node_cdi test program ($GS_NODE_CDI_TEST) with GS_CDI_SPEC_OUT set,
so that its spec_variants test leaves every shape of spec node_cdi writes in
a temporary directory, then checks each *.json there:

- against the upstream schema ($GS_CDI_SCHEMA, with defs.json next to it:
  cncf-tags/container-device-interface schema/, kept in
  ../shared/reference/cdi) with python3-jsonschema (draft-07);
- against what the schema does not say but SPEC.md and the reference
  implementation (specs-go/version.go, pkg/parser, pkg/cdi) require: the
  kind and device-name syntax, env entries "KEY=VALUE" (the schema's env
  items carry a typo, "ref", and check nothing), absolute mount paths, and
  a cdiVersion that is the lowest the content needs.

Then the negative cases: deliberately broken specs must be refused, by the
schema or (where the schema cannot tell) by those checks. Exit 77 (skipped)
when the schema or jsonschema is missing.
"""
import copy
import json
import os
import pathlib
import re
import stat
import subprocess
import sys
import tempfile

SKIP = 77
HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_SCHEMA = HERE.parents[2] / "shared" / "reference" / "cdi" / "schema.json"
WANT = {"claim-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-gpu", "claim-bare-gpu", "0digit",
        "claim-whole-gpu"}

NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
VENDOR_RE = re.compile(r"^[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?$")
CLASS_RE = VENDOR_RE


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def validator_for(jsonschema, schema_path):
    """A draft-07 validator for schema.json that resolves defs.json."""
    defs_path = schema_path.with_name("defs.json")
    schema = json.loads(schema_path.read_text())
    defs = json.loads(defs_path.read_text())
    schema_uri, defs_uri = schema_path.as_uri(), defs_path.as_uri()
    # schema.json has no $id: give it its file's, so that "defs.json#..."
    # resolves next to it.
    schema = dict(schema, **{"$id": schema_uri})
    cls = jsonschema.Draft7Validator
    cls.check_schema(schema)
    try:  # jsonschema >= 4.18
        from referencing import Registry
        from referencing.jsonschema import DRAFT7
        registry = Registry().with_resources(
            [(schema_uri, DRAFT7.create_resource(schema)),
             (defs_uri, DRAFT7.create_resource(defs))])
        return cls(schema, registry=registry)
    except ImportError:  # Debian's 4.10
        resolver = jsonschema.RefResolver.from_schema(schema, store={defs_uri: defs})
        return cls(schema, resolver=resolver)


def schema_errors(validator, spec):
    return [f"{'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}"
            for e in validator.iter_errors(spec)]


def lowest_version(spec):
    """The lowest cdiVersion the content needs, as specs-go/version.go
    computes it for the fields gpuslice could use."""
    need = (0, 3, 0)
    edits = [d.get("containerEdits", {}) for d in spec.get("devices", [])]
    edits.append(spec.get("containerEdits", {}))
    if any("type" in m for e in edits for m in e.get("mounts", [])):
        need = max(need, (0, 4, 0))
    if any(d.get("name", "a")[:1].isdigit() for d in spec.get("devices", [])) or \
            any("hostPath" in n for e in edits for n in e.get("deviceNodes", [])):
        need = max(need, (0, 5, 0))
    cls = spec.get("kind", "/").partition("/")[2]
    if spec.get("annotations") or any(d.get("annotations") for d in spec.get("devices", [])) \
            or "." in cls:
        need = max(need, (0, 6, 0))
    if any("intelRdt" in e or "additionalGids" in e for e in edits):
        need = max(need, (0, 7, 0))
    return "%d.%d.%d" % need


def rule_errors(spec):
    """What SPEC.md and the reference implementation require beyond the
    schema, for the fields gpuslice writes."""
    errs = []
    vendor, slash, cls = str(spec.get("kind", "")).partition("/")
    if not slash or not VENDOR_RE.match(vendor) or not CLASS_RE.match(cls) or len(cls) > 63:
        errs.append(f"kind {spec.get('kind')!r} is not vendor.com/class")
    if not re.match(r"^\d+\.\d+\.\d+$", str(spec.get("cdiVersion", ""))):
        errs.append(f"cdiVersion {spec.get('cdiVersion')!r} is not a semantic version")
    elif spec["cdiVersion"] != lowest_version(spec):
        errs.append(f"cdiVersion {spec['cdiVersion']} is not the lowest the content needs "
                    f"({lowest_version(spec)})")
    devices = spec.get("devices", [])
    if len(devices) != 1:
        errs.append(f"{len(devices)} devices, not one")
    for d in devices:
        name = d.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            errs.append(f"device name {name!r} breaks the CDI device-name rules")
        e = d.get("containerEdits", {})
        if not e.get("env") and not e.get("mounts"):
            errs.append(f"device {name}: no container edits")
        for v in e.get("env", []):
            if not isinstance(v, str) or v.find("=") <= 0:
                errs.append(f"device {name}: env entry {v!r} is not KEY=VALUE")
        for m in e.get("mounts", []):
            for k in ("hostPath", "containerPath"):
                if not str(m.get(k, "")).startswith("/"):
                    errs.append(f"device {name}: mount {k} {m.get(k)!r} is not absolute")
            opts = m.get("options", [])
            if "bind" not in opts or sorted(o for o in opts if o in ("ro", "rw")) not in (
                    ["ro"], ["rw"]):
                errs.append(f"device {name}: mount {m.get('containerPath')} options {opts} "
                            "are not a ro or rw bind mount")
    return errs


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys in {keys}")
    return dict(pairs)


def write_specs(test, out):
    env = dict(os.environ, GS_CDI_SPEC_OUT=str(out))
    p = subprocess.run([test], env=env, capture_output=True, text=True, timeout=50)
    if p.returncode != 0:
        fail(f"{test} exited {p.returncode}:\n{p.stdout}{p.stderr}")


def check_written(validator, out):
    files = sorted(out.glob("*.json"))
    names = {f.name[len("gpuslice.io-"):-len(".json")] for f in files}
    if names != WANT or any(not f.name.startswith("gpuslice.io-") for f in files):
        fail(f"specs written: {[f.name for f in files]}, expected one per {sorted(WANT)}")
    if list(out.glob("*.tmp")):
        fail(f"temp files left: {list(out.glob('*.tmp'))}")
    specs = {}
    for f in files:
        mode = stat.S_IMODE(f.stat().st_mode)
        if mode != 0o644:
            fail(f"{f.name}: mode {mode:o}, not 644")
        spec = json.loads(f.read_text(), object_pairs_hook=no_duplicates)
        errs = schema_errors(validator, spec) + rule_errors(spec)
        if spec["devices"][0]["name"] != f.name[len("gpuslice.io-"):-len(".json")]:
            errs.append("the file name does not name its device")
        if errs:
            fail(f"{f.name}:\n  " + "\n  ".join(errs))
        print(f"ok: {f.name} (cdiVersion {spec['cdiVersion']}) valid")
        specs[f.name] = spec
    return specs


def broken(spec):
    """(what, spec the schema must refuse) and (what, spec only the rules
    refuse)."""
    def edit(fn):
        s = copy.deepcopy(spec)
        fn(s)
        return s

    dev = lambda s: s["devices"][0]  # noqa: E731
    mount = lambda s: dev(s)["containerEdits"]["mounts"][0]  # noqa: E731
    by_schema = [
        ("no devices", edit(lambda s: s.pop("devices"))),
        ("no cdiVersion", edit(lambda s: s.pop("cdiVersion"))),
        ("no kind", edit(lambda s: s.pop("kind"))),
        ("kind not a string", edit(lambda s: s.update(kind=7))),
        ("cdiVersion not a string", edit(lambda s: s.update(cdiVersion=0.3))),
        ("unknown top-level field (0.1.0's containerRuntime)",
         edit(lambda s: s.update(containerRuntime=["runc"]))),
        ("device without containerEdits", edit(lambda s: dev(s).pop("containerEdits"))),
        ("device without name", edit(lambda s: dev(s).pop("name"))),
        ("misspelt device field", edit(lambda s: dev(s).update(
            containerEdit=dev(s).pop("containerEdits")))),
        ("devices not an array", edit(lambda s: s.update(devices=dev(s)))),
        ("mount without containerPath", edit(lambda s: mount(s).pop("containerPath"))),
        ("mount without hostPath", edit(lambda s: mount(s).pop("hostPath"))),
        ("mount options a string", edit(lambda s: mount(s).update(options="ro,bind"))),
        ("mounts not an array", edit(lambda s: dev(s)["containerEdits"].update(
            mounts=mount(s)))),
        ("annotation value not a string", edit(lambda s: s.update(annotations={"a": 1}))),
    ]
    by_rules = [
        ("env entry without '='", edit(lambda s: dev(s)["containerEdits"]["env"].append(
            "NOVALUE"))),
        ("env entry not a string", edit(lambda s: dev(s)["containerEdits"]["env"].append(5))),
        ("device name with '/'", edit(lambda s: dev(s).update(name="a/b"))),
        ("kind without vendor", edit(lambda s: s.update(kind="slice"))),
        ("mount type with cdiVersion 0.3.0", edit(lambda s: mount(s).update(type="bind"))),
        ("relative container path", edit(lambda s: mount(s).update(containerPath="run/x"))),
        ("cdiVersion higher than needed", edit(lambda s: s.update(cdiVersion="0.8.0"))),
    ]
    return by_schema, by_rules


def main():
    schema_path = pathlib.Path(os.environ.get("GS_CDI_SCHEMA") or DEFAULT_SCHEMA)
    if not schema_path.is_file() or not schema_path.with_name("defs.json").is_file():
        print(f"SKIP: the CDI JSON schema is not at {schema_path} (with defs.json next to "
              "it): the checkout's ../shared/reference/cdi is missing")
        return SKIP
    try:
        import jsonschema
    except ImportError:
        print("SKIP: python3-jsonschema is not installed (apt-get install python3-jsonschema)")
        return SKIP
    test = os.environ.get("GS_NODE_CDI_TEST")
    if not test or not os.access(test, os.X_OK):
        fail(f"GS_NODE_CDI_TEST={test!r} is not the node_cdi test program")
    validator = validator_for(jsonschema, schema_path)

    with tempfile.TemporaryDirectory(prefix="gs-cdi-schema-") as tmp:
        out = pathlib.Path(tmp) / "cdi"
        write_specs(test, out)
        specs = check_written(validator, out)

    # The fullest spec (shim, preload, socket directory) is broken each way.
    full = max(specs.values(), key=lambda s: len(json.dumps(s)))
    by_schema, by_rules = broken(full)
    for what, spec in by_schema:
        if not schema_errors(validator, spec):
            fail(f"the schema accepts a broken spec: {what}")
        print(f"ok: the schema refuses: {what}")
    for what, spec in by_rules:
        if not rule_errors(spec):
            fail(f"the rules accept a broken spec: {what}")
        print(f"ok: the rules refuse: {what}")
    print(f"{len(specs)} specs valid, {len(by_schema) + len(by_rules)} broken ones refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
