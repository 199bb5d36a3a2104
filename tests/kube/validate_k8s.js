#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
// Validates Kubernetes objects against the upstream OpenAPI schemas, as
// compiled by the npm package kubernetes-models (5.1.x).
//
//   node validate_k8s.js --modules DIR/node_modules FILE.json ...
//   node validate_k8s.js --modules DIR/node_modules --self-check
//
// FILE.json is a list of {"source": "where it came from", "object": {...}}.
// Each object is checked three ways:
//   schema   new Kind(obj).validate(): types, enums, formats, required fields
//            (what the package checks; it ignores fields it does not know)
//   unknown  every field must be one the schema defines. The package's
//            validators are compiled from the schemas and read each property
//            the schema defines (and every key of a map); the object is
//            handed to the same validator through a Proxy that records what
//            it reads, and any key it never read is a field the schema does
//            not have. The self-check proves the method sound: every
//            property the package's type definitions declare is read.
//            A field of type RawExtension (a DRA driver's opaque parameters)
//            holds whatever its owner defines, as on the API server, so what
//            lies under one is not checked (OPAQUE; the self-check proves the
//            table covers every RawExtension of the audited groups).
//   api      rules the API server applies that the schema cannot say:
//            metadata names, extended resources (integers; request equal to
//            limit), a workload's selector matching its pod labels, a
//            container's resource claims naming claims of its pod, a claim's
//            configs naming its requests.
// Prints one line per object (OK or FAIL with the reasons) and exits 1 if
// any object fails, 2 on usage or set-up errors.
"use strict";

const fs = require("fs");
const path = require("path");
const { pathToFileURL } = require("url");

let MODULES = null;

function usage(msg) {
  if (msg) process.stderr.write(`validate_k8s: ${msg}\n`);
  process.stderr.write(
    "usage: validate_k8s.js --modules NODE_MODULES (--self-check | FILE.json ...)\n");
  process.exit(2);
}

// The package's module for an apiVersion: "v1" (core) is kubernetes-models/v1,
// "apps/v1" is kubernetes-models/apps/v1, and so on.
const moduleCache = new Map();
async function kindClass(apiVersion, kind) {
  if (typeof apiVersion !== "string" || typeof kind !== "string" ||
      !/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion))
    return null;
  if (!moduleCache.has(apiVersion)) {
    const file = path.join(MODULES, "kubernetes-models", apiVersion, "index.js");
    moduleCache.set(apiVersion, fs.existsSync(file) ? await import(pathToFileURL(file).href) : null);
  }
  const mod = moduleCache.get(apiVersion);
  const C = mod && Object.prototype.hasOwnProperty.call(mod, kind) ? mod[kind] : null;
  // Only top-level kinds: their validator pins apiVersion and kind.
  return C && C.apiVersion === apiVersion && C.kind === kind ? C : null;
}

// --- unknown fields ---------------------------------------------------------

// Fields of type RawExtension (k8s.io/apimachinery runtime.RawExtension): the
// API server keeps what is under them as it is, and their owner (a DRA
// driver) validates it, so their contents are not unknown fields. `path`
// matches the field's path in objects of the API `group`; the self-check
// proves that these are all the RawExtension properties of the audited
// groups, and that every property of type OpaqueDeviceConfiguration is
// named `opaque`.
const OPAQUE = [
  { model: "OpaqueDeviceConfiguration", prop: "parameters", group: "resource.k8s.io",
    path: /(^|\.)opaque\.parameters$/ },
  { model: "AllocatedDeviceStatus", prop: "data", group: "resource.k8s.io",
    path: /^status\.devices\[\d+\]\.data$/ },
  { model: "ControllerRevision", prop: "data", group: "apps", kind: "ControllerRevision",
    path: /^data$/ },
  { model: "WatchEvent", prop: "object", group: "", kind: "WatchEvent", path: /^object$/ },
];

function groupOf(apiVersion) {
  return typeof apiVersion === "string" && apiVersion.includes("/") ? apiVersion.split("/")[0] : "";
}

function opaqueAt(obj, where) {
  const group = groupOf(obj && obj.apiVersion), kind = obj && obj.kind;
  return OPAQUE.some((o) => o.group === group && (!o.kind || o.kind === kind) && o.path.test(where));
}

function tracker() {
  const reads = new WeakMap();
  const proxies = new WeakMap();
  function track(o) {
    if (o === null || typeof o !== "object") return o;
    if (proxies.has(o)) return proxies.get(o);
    reads.set(o, new Set());
    const p = new Proxy(o, {
      get(t, k, r) {
        if (typeof k === "string") reads.get(t).add(k);
        return track(Reflect.get(t, k, r));
      },
    });
    proxies.set(o, p);
    return p;
  }
  // Paths of the keys that no validator read (none under a RawExtension of
  // the object `top`).
  function unread(o, where, out, top) {
    if (o === null || typeof o !== "object") return out;
    if (where && opaqueAt(top, where)) return out;
    const seen = reads.get(o) || new Set();
    if (Array.isArray(o)) {
      o.forEach((v, i) => unread(v, `${where}[${i}]`, out, top));
      return out;
    }
    for (const k of Object.keys(o)) {
      const p = where ? `${where}.${k}` : k;
      if (!seen.has(k)) out.push(p);
      else unread(o[k], p, out, top);
    }
    return out;
  }
  return { track, unread };
}

// The keys of `obj` (at any depth) that the schema of C does not define.
function unknownFields(C, obj) {
  const copy = JSON.parse(JSON.stringify(obj));
  const t = tracker();
  try {
    C.prototype.validate.call(t.track(copy));
  } catch (e) {
    // Schema errors are reported by the schema check; the reads still count.
  }
  return t.unread(copy, "", [], obj);
}

// --- rules of the API server ------------------------------------------------

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
function dnsSubdomain(s) {
  return typeof s === "string" && s.length <= 253 && s.split(".").every((l) => DNS_LABEL.test(l));
}

// Native resources are cpu, memory, ephemeral-storage, hugepages-*, and
// names in a kubernetes.io domain; the rest with a domain are extended.
function extended(name) {
  if (!name.includes("/")) return false;
  const domain = name.split("/")[0];
  return domain !== "kubernetes.io" && !domain.endsWith(".kubernetes.io");
}

// A ResourceClaim's or ResourceClaimTemplate's device claim
// (resource.k8s.io validation): requests are DNS labels, unique, each with
// exactly one of exactly / firstAvailable; a count is positive; configs name
// requests of the claim. (The schema checks that capacity requests are
// quantities.)
function deviceClaimRules(dc, where, errs) {
  if (!dc || typeof dc !== "object") return;
  const names = new Set();
  (dc.requests || []).forEach((r, i) => {
    const at = `${where}.requests[${i}]`;
    if (!r || typeof r !== "object") return;
    if (!DNS_LABEL.test(String(r.name))) errs.push(`${at}.name ${JSON.stringify(r.name)} is not a DNS label`);
    if (names.has(r.name)) errs.push(`${at}.name ${r.name} is not unique`);
    names.add(r.name);
    if ((r.exactly === undefined) === (r.firstAvailable === undefined))
      errs.push(`${at}: exactly one of exactly and firstAvailable must be set`);
    const ex = r.exactly || {};
    if (ex.count !== undefined && !(Number.isInteger(ex.count) && ex.count > 0))
      errs.push(`${at}.exactly.count must be a positive integer`);
    if (ex.deviceClassName !== undefined && !dnsSubdomain(ex.deviceClassName))
      errs.push(`${at}.exactly.deviceClassName is not a DNS subdomain`);
  });
  (dc.config || []).forEach((c, i) => {
    for (const r of (c && c.requests) || [])
      if (!names.has(r)) errs.push(`${where}.config[${i}].requests: ${r} is not a request of the claim`);
    const o = c && c.opaque;
    if (o && !dnsSubdomain(o.driver)) errs.push(`${where}.config[${i}].opaque.driver is not a DNS subdomain`);
  });
}

function podSpec(obj) {
  if (obj.kind === "Pod") return obj.spec;
  return obj.spec && obj.spec.template ? obj.spec.template.spec : null;
}

function apiRules(C, obj) {
  const errs = [];
  const md = obj.metadata || {};
  if (!dnsSubdomain(md.name))
    errs.push(`metadata.name ${JSON.stringify(md.name)} is not a DNS subdomain`);
  if (md.namespace !== undefined && !DNS_LABEL.test(md.namespace))
    errs.push(`metadata.namespace ${JSON.stringify(md.namespace)} is not a DNS label`);
  const ps = podSpec(obj);
  if (ps) {
    for (const list of ["initContainers", "containers"]) {
      (ps[list] || []).forEach((c, i) => {
        const r = (c && c.resources) || {};
        const lim = r.limits || {}, req = r.requests || {};
        for (const [kind, m] of [["limits", lim], ["requests", req]]) {
          for (const [name, v] of Object.entries(m)) {
            if (!extended(name)) continue;
            if (!(Number.isInteger(v) || (typeof v === "string" && /^[0-9]+$/.test(v))))
              errs.push(`${list}[${i}].resources.${kind}.${name}: ${JSON.stringify(v)} ` +
                        "must be an integer (an extended resource)");
          }
        }
        for (const name of Object.keys(req)) {
          if (extended(name) && name in lim && String(lim[name]) !== String(req[name]))
            errs.push(`${list}[${i}].resources: ${name} request ${req[name]} differs from ` +
                      `its limit ${lim[name]} (extended resources cannot be overcommitted)`);
        }
      });
    }
    // Resource claims: each of the pod's names one claim or one template,
    // and a container's claims are the pod's.
    const claims = new Set();
    (ps.resourceClaims || []).forEach((c, i) => {
      if (!c || typeof c !== "object") return;
      if (!DNS_LABEL.test(String(c.name))) errs.push(`resourceClaims[${i}].name is not a DNS label`);
      if (claims.has(c.name)) errs.push(`resourceClaims[${i}].name ${c.name} is not unique`);
      claims.add(c.name);
      if ((c.resourceClaimName === undefined) === (c.resourceClaimTemplateName === undefined))
        errs.push(`resourceClaims[${i}]: exactly one of resourceClaimName and ` +
                  "resourceClaimTemplateName must be set");
    });
    for (const list of ["initContainers", "containers"]) {
      (ps[list] || []).forEach((c, i) => {
        for (const rc of (c && c.resources && c.resources.claims) || [])
          if (!claims.has(rc && rc.name))
            errs.push(`${list}[${i}].resources.claims: ${rc && rc.name} is not one of the pod's ` +
                      "resourceClaims");
      });
    }
    (ps.volumes || []).forEach((v, i) => {
      if (v && v.hostPath && !path.isAbsolute(String(v.hostPath.path)))
        errs.push(`volumes[${i}].hostPath.path must be absolute`);
    });
  }
  if (groupOf(obj.apiVersion) === "resource.k8s.io" && obj.spec) {
    if (obj.kind === "ResourceClaim") deviceClaimRules(obj.spec.devices, "spec.devices", errs);
    if (obj.kind === "ResourceClaimTemplate" && obj.spec.spec)
      deviceClaimRules(obj.spec.spec.devices, "spec.spec.devices", errs);
  }
  const sel = obj.spec && obj.spec.selector && obj.spec.selector.matchLabels;
  if (sel && obj.spec.template && obj.kind !== "Service") {
    const labels = (obj.spec.template.metadata || {}).labels || {};
    for (const [k, v] of Object.entries(sel))
      if (labels[k] !== v)
        errs.push(`spec.selector.matchLabels ${k}=${v} does not match the pod template's labels`);
  }
  return errs;
}

// --- one object --------------------------------------------------------------

async function check(obj) {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj))
    return ["not an object"];
  const C = await kindClass(obj.apiVersion, obj.kind);
  if (!C) return [`no schema for apiVersion ${JSON.stringify(obj.apiVersion)} ` +
                  `kind ${JSON.stringify(obj.kind)}`];
  const errs = [];
  try {
    new C(obj).validate();
  } catch (e) {
    errs.push(`schema: ${e.message}`);
  }
  for (const p of unknownFields(C, obj))
    errs.push(`unknown field ${p}`);
  for (const e of apiRules(C, obj))
    errs.push(`api: ${e}`);
  return errs;
}

function describe(obj) {
  const md = (obj && obj.metadata) || {};
  return `${obj && obj.kind}/${md.namespace ? md.namespace + "/" : ""}${md.name}`;
}

async function validateFiles(files) {
  let n = 0, bad = 0;
  for (const f of files) {
    const items = JSON.parse(fs.readFileSync(f, "utf8"));
    if (!Array.isArray(items)) usage(`${f}: not a list of {source, object}`);
    for (const it of items) {
      const errs = await check(it.object);
      n++;
      if (errs.length) {
        bad++;
        console.log(`FAIL ${it.source}: ${describe(it.object)}`);
        for (const e of errs) console.log(`  ${e}`);
      } else {
        console.log(`OK ${it.source}: ${describe(it.object)}`);
      }
    }
  }
  console.log(`validate_k8s: ${n} objects, ${bad} failed`);
  return bad ? 1 : 0;
}

// --- self-check ----------------------------------------------------------------

function goodDaemonSet() {
  return {
    apiVersion: "apps/v1", kind: "DaemonSet",
    metadata: { name: "probe", namespace: "kube-system", labels: { app: "probe" } },
    spec: {
      selector: { matchLabels: { app: "probe" } },
      template: {
        metadata: { labels: { app: "probe" } },
        spec: {
          hostPID: true, runtimeClassName: "nvidia", nodeSelector: { "gpuslice.io/enabled": "true" },
          containers: [{
            name: "c", image: "gpuslice:0.1.0", args: ["--kubelet"],
            ports: [{ containerPort: 8080 }],
            env: [{ name: "A", value: "b" }],
            securityContext: { privileged: false, capabilities: { drop: ["ALL"], add: ["SYS_PTRACE"] } },
            resources: { limits: { "gpuslice.io/gpu-milli": 300, memory: "256Mi" } },
            volumeMounts: [{ name: "v", mountPath: "/var/lib/gpuslice" }],
          }],
          volumes: [{ name: "v", hostPath: { path: "/var/lib/gpuslice", type: "DirectoryOrCreate" } }],
        },
      },
    },
  };
}

function mutate(fn, good = goodDaemonSet) {
  const o = good();
  fn(o);
  return o;
}

// What `gpuslice render --dra` prints for a slice, and its pod.
function goodClaimTemplate() {
  return {
    apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate",
    metadata: { name: "api-gpu", namespace: "ml" },
    spec: { spec: { devices: {
      requests: [{ name: "gpu", exactly: { deviceClassName: "gpu.gpuslice.io",
                                           capacity: { requests: { milli: "300", memory: "6Gi" } } } }],
      config: [{ requests: ["gpu"], opaque: { driver: "gpu.gpuslice.io", parameters: {
        apiVersion: "gpu.gpuslice.io/v1alpha1", kind: "SliceConfig", policy: "cap" } } }],
    } } },
  };
}

function goodClaimPod() {
  return {
    apiVersion: "v1", kind: "Pod", metadata: { name: "p" },
    spec: { resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "api-gpu" }],
            containers: [{ name: "s", image: "i", resources: { claims: [{ name: "gpu" }] } }] },
  };
}

function goodClusterRole() {
  return {
    apiVersion: "rbac.authorization.k8s.io/v1", kind: "ClusterRole", metadata: { name: "r" },
    rules: [{ apiGroups: ["resource.k8s.io"], resources: ["resourceslices"], verbs: ["get"] }],
  };
}

function goodPolicy() {
  return {
    apiVersion: "admissionregistration.k8s.io/v1", kind: "ValidatingAdmissionPolicy",
    metadata: { name: "p" },
    spec: {
      failurePolicy: "Fail",
      matchConstraints: { resourceRules: [{ apiGroups: ["resource.k8s.io"], apiVersions: ["*"],
                                            operations: ["CREATE"], resources: ["resourceslices"] }] },
      matchConditions: [{ name: "m", expression: "true" }],
      variables: [{ name: "v", expression: "1" }],
      validations: [{ expression: "true", message: "m" }],
    },
  };
}

// Every RawExtension property that the type definitions of these groups
// declare is in OPAQUE, every OPAQUE entry is one of them, and every
// property of type OpaqueDeviceConfiguration is named "opaque" (what
// OPAQUE's path for it assumes).
function auditOpaque(groups) {
  const found = new Set(), bad = [];
  for (const dir of groups) {
    for (const f of fs.readdirSync(dir).sort()) {
      if (!f.endsWith(".d.ts") || f === "index.d.ts") continue;
      const body = fs.readFileSync(path.join(dir, f), "utf8")
        .match(/^export interface I\w+(?: extends \w+)? \{\n([\s\S]*?)^\}/m);
      if (!body) continue;
      const model = f.slice(0, -5);
      for (const m of body[1].matchAll(/^ {4}"([^"]+)"\??: (\w+);/gm)) {
        if (m[2] === "IIoK8sApimachineryPkgRuntimeRawExtension") {
          found.add(`${model}.${m[1]}`);
          if (!OPAQUE.some((o) => o.model === model && o.prop === m[1]))
            bad.push(`${model}.${m[1]} (a RawExtension not in OPAQUE)`);
        }
        if (m[2] === "IIoK8sApiResourceV1OpaqueDeviceConfiguration" && m[1] !== "opaque")
          bad.push(`${model}.${m[1]} (an OpaqueDeviceConfiguration not named opaque)`);
      }
    }
  }
  for (const o of OPAQUE)
    if (!found.has(`${o.model}.${o.prop}`)) bad.push(`${o.model}.${o.prop} (in OPAQUE, not declared)`);
  return { found: found.size, bad };
}

// Every property that the package's type definitions declare for the models
// of these API groups is read by the tracking validator, so the unknown-field
// check never rejects a field that the schema has. Top-level kinds (their
// interfaces extend TypeMeta) are audited too.
async function auditReads(groups) {
  let props = 0, models = 0;
  const missed = [];
  for (const dir of groups) {
    for (const f of fs.readdirSync(dir).sort()) {
      if (!f.endsWith(".d.ts") || f === "index.d.ts") continue;
      const name = f.slice(0, -5);
      const dts = fs.readFileSync(path.join(dir, f), "utf8");
      const body = dts.match(/^export interface I\w+(?: extends \w+)? \{\n([\s\S]*?)^\}/m);
      if (!body) continue;
      const declared = [...body[1].matchAll(/^ {4}"([^"]+)"\??:/gm)].map((m) => m[1]);
      const mod = await import(pathToFileURL(path.join(dir, name + ".js")).href);
      const C = mod[name];
      if (!C || typeof C.prototype.validate !== "function" || !declared.length) continue;
      const obj = Object.fromEntries(declared.map((p) => [p, null]));
      const unread = unknownFields(C, obj);
      models++;
      props += declared.length;
      for (const p of unread) missed.push(`${name}.${p}`);
    }
  }
  return { models, props, missed };
}

async function selfCheck() {
  let failures = 0;
  const expect = async (label, obj, want) => {
    const errs = await check(obj);
    const ok = want === null ? errs.length === 0 : errs.some((e) => want.test(e));
    console.log(`${ok ? "ok  " : "BAD "} ${label}${errs.length ? ": " + errs.join("; ") : ""}`);
    if (!ok) failures++;
  };
  await expect("a good DaemonSet is accepted", goodDaemonSet(), null);
  await expect("a good Pod is accepted", {
    apiVersion: "v1", kind: "Pod", metadata: { name: "p" },
    spec: { runtimeClassName: "nvidia",
            containers: [{ name: "s", image: "i", resources: { limits: { "gpuslice.io/gpu-milli": 300 } } }] },
  }, null);
  await expect("unknown top-level field", mutate((o) => { o.specs = {}; }), /^unknown field specs$/);
  await expect("unknown metadata field", mutate((o) => { o.metadata.label = {}; }),
               /^unknown field metadata\.label$/);
  await expect("unknown field deep in a container", mutate((o) => {
    o.spec.template.spec.containers[0].securityContext.privilegd = false;
  }), /^unknown field spec\.template\.spec\.containers\[0\]\.securityContext\.privilegd$/);
  await expect("unknown field in a list item", mutate((o) => {
    o.spec.template.spec.volumes[0].hostPath.typ = "Directory";
  }), /^unknown field spec\.template\.spec\.volumes\[0\]\.hostPath\.typ$/);
  await expect("a pod-spec field one level too high", mutate((o) => {
    o.spec.template.hostPID = true;
  }), /^unknown field spec\.template\.hostPID$/);
  await expect("wrong type: boolean as a string", mutate((o) => {
    o.spec.template.spec.hostPID = "true";
  }), /^schema: .*hostPID must be boolean/);
  await expect("wrong type: port as a string", mutate((o) => {
    o.spec.template.spec.containers[0].ports[0].containerPort = "8080";
  }), /^schema: .*containerPort must be integer/);
  await expect("wrong type: args not a list", mutate((o) => {
    o.spec.template.spec.containers[0].args = "--kubelet";
  }), /^schema: .*args must be array/);
  await expect("bad enum: hostPath type", mutate((o) => {
    o.spec.template.spec.volumes[0].hostPath.type = "Dir";
  }), /^schema: .*hostPath\/type must be equal to one of the allowed values/);
  await expect("missing required: container name", mutate((o) => {
    delete o.spec.template.spec.containers[0].name;
  }), /^schema: .*must have required property name$/);
  await expect("missing required: selector", mutate((o) => { delete o.spec.selector; }),
               /^schema: .*must have required property selector$/);
  await expect("fractional extended resource", mutate((o) => {
    o.spec.template.spec.containers[0].resources.limits["gpuslice.io/gpu-milli"] = "300m";
  }), /^api: .*must be an integer/);
  await expect("selector not matching the pod labels", mutate((o) => {
    o.spec.selector.matchLabels.app = "other";
  }), /^api: spec\.selector/);
  await expect("a name that is not a DNS subdomain", mutate((o) => { o.metadata.name = "Probe"; }),
               /^api: metadata\.name/);
  await expect("unknown kind", { apiVersion: "apps/v1", kind: "DaemonSett", metadata: { name: "x" } },
               /^no schema/);
  await expect("a kind in the wrong group", { apiVersion: "v1", kind: "DaemonSet", metadata: { name: "x" } },
               /^no schema/);

  // DRA claims, classes, RBAC and admission policies (deploy/components/dra,
  // gpuslice render --dra).
  await expect("a good ResourceClaimTemplate (opaque parameters) is accepted", goodClaimTemplate(), null);
  await expect("a good Pod with a resource claim is accepted", goodClaimPod(), null);
  await expect("a good ClusterRole is accepted", goodClusterRole(), null);
  await expect("a good ValidatingAdmissionPolicy is accepted", goodPolicy(), null);
  await expect("a good DeviceClass is accepted", {
    apiVersion: "resource.k8s.io/v1", kind: "DeviceClass", metadata: { name: "gpu.gpuslice.io" },
    spec: { selectors: [{ cel: { expression: 'device.driver == "gpu.gpuslice.io"' } }] },
  }, null);
  await expect("unknown field beside the opaque parameters", mutate((o) => {
    o.spec.spec.devices.config[0].opaque.paramters = {};
  }, goodClaimTemplate), /^unknown field spec\.spec\.devices\.config\[0\]\.opaque\.paramters$/);
  await expect("unknown field in a device request", mutate((o) => {
    o.spec.spec.devices.requests[0].exactly.capacity.request = { milli: "300" };
  }, goodClaimTemplate), /^unknown field spec\.spec\.devices\.requests\[0\]\.exactly\.capacity\.request$/);
  await expect("parameters where no RawExtension is", mutate((o) => {
    o.spec.spec.devices.requests[0].exactly.parameters = { policy: "cap" };
  }, goodClaimTemplate), /^unknown field spec\.spec\.devices\.requests\[0\]\.exactly\.parameters$/);
  await expect("a claim's spec one level too high", mutate((o) => {
    o.spec.devices = o.spec.spec.devices;
  }, goodClaimTemplate), /^unknown field spec\.devices$/);
  await expect("wrong type: count as a string", mutate((o) => {
    o.spec.spec.devices.requests[0].exactly.count = "2";
  }, goodClaimTemplate), /^schema: .*count must be integer/);
  await expect("missing required: deviceClassName", mutate((o) => {
    delete o.spec.spec.devices.requests[0].exactly.deviceClassName;
  }, goodClaimTemplate), /^schema: .*must have required property deviceClassName$/);
  await expect("a capacity request that is not a quantity", mutate((o) => {
    o.spec.spec.devices.requests[0].exactly.capacity.requests.milli = "300 units";
  }, goodClaimTemplate), /^schema: .*capacity\/requests\/milli must match format "quantity"/);
  await expect("a config naming no request of the claim", mutate((o) => {
    o.spec.spec.devices.config[0].requests = ["gpus"];
  }, goodClaimTemplate), /^api: .*gpus is not a request of the claim/);
  await expect("a container claim the pod does not have", mutate((o) => {
    o.spec.containers[0].resources.claims[0].name = "gpu2";
  }, goodClaimPod), /^api: .*gpu2 is not one of the pod's resourceClaims/);
  await expect("a pod claim with neither a claim nor a template", mutate((o) => {
    delete o.spec.resourceClaims[0].resourceClaimTemplateName;
  }, goodClaimPod), /^api: resourceClaims\[0\]: exactly one of/);
  await expect("unknown field in an RBAC rule", mutate((o) => { o.rules[0].verb = ["get"]; },
                                                     goodClusterRole), /^unknown field rules\[0\]\.verb$/);
  await expect("missing required: an RBAC rule's verbs", mutate((o) => { delete o.rules[0].verbs; },
                                                                goodClusterRole),
               /^schema: .*must have required property verbs$/);
  await expect("unknown field in a policy validation", mutate((o) => {
    o.spec.validations[0].messageExpresion = "x";
  }, goodPolicy), /^unknown field spec\.validations\[0\]\.messageExpresion$/);
  await expect("bad enum: failurePolicy", mutate((o) => { o.spec.failurePolicy = "Deny"; }, goodPolicy),
               /^schema: .*failurePolicy must be equal to one of the allowed values/);

  const km = path.join(MODULES, "kubernetes-models");
  const groups = [path.join(km, "v1"), path.join(km, "apps", "v1"), path.join(km, "node.k8s.io", "v1"),
                  path.join(km, "resource.k8s.io", "v1"), path.join(km, "rbac.authorization.k8s.io", "v1"),
                  path.join(km, "admissionregistration.k8s.io", "v1"),
                  path.join(MODULES, "@kubernetes-models", "apimachinery", "apis", "meta", "v1")];
  const o = auditOpaque(groups);
  const opaqueOk = o.bad.length === 0 && o.found === OPAQUE.length;
  console.log(`${opaqueOk ? "ok  " : "BAD "} OPAQUE covers every RawExtension property: ` +
              `${o.found} declared` + (o.bad.length ? `: ${o.bad.join(", ")}` : ""));
  if (!opaqueOk) failures++;
  const a = await auditReads(groups);
  const sound = a.models > 100 && a.props > 500 && a.missed.length === 0;
  console.log(`${sound ? "ok  " : "BAD "} tracking reads every declared property: ` +
              `${a.models} models, ${a.props} properties, ${a.missed.length} unread` +
              (a.missed.length ? `: ${a.missed.slice(0, 20).join(", ")}` : ""));
  if (!sound) failures++;
  console.log(`validate_k8s: self-check ${failures ? "FAILED" : "passed"}`);
  return failures ? 1 : 0;
}

async function main() {
  const args = process.argv.slice(2);
  let self = false;
  const files = [];
  for (let i = 0; i < args.length; i++) {
    if (args[i] === "--modules") MODULES = args[++i];
    else if (args[i] === "--self-check") self = true;
    else if (args[i].startsWith("--")) usage(`unknown option ${args[i]}`);
    else files.push(args[i]);
  }
  if (!MODULES) usage("--modules is required");
  const pkg = path.join(MODULES, "kubernetes-models", "package.json");
  if (!fs.existsSync(pkg)) usage(`no kubernetes-models under ${MODULES}`);
  const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
  if (!/^5\.1\./.test(version)) usage(`kubernetes-models ${version} under ${MODULES}: 5.1.x wanted`);
  if (self === (files.length > 0)) usage("give --self-check or files, not both");
  console.log(`validate_k8s: kubernetes-models ${version}, node ${process.version}`);
  process.exit(self ? await selfCheck() : await validateFiles(files));
}

main().catch((e) => {
  process.stderr.write(`validate_k8s: ${e && e.stack ? e.stack : e}\n`);
  process.exit(2);
});
