# SPDX-License-Identifier: Apache-2.0
"""Node.js and the npm package kubernetes-models 5.1.x, with which
validate_k8s.js checks every Kubernetes object gpuslice writes or renders.
The package is installed once per build tree (npm_dir), under a lock shared
by the tests that need it. Unavailable means the tests skip."""
import fcntl
import json
import os
import shutil
import subprocess

MODELS = "kubernetes-models@~5.1.0"


class Unavailable(Exception):
    """openssl, node or kubernetes-models is missing: the tests skip."""


def find_node():
    """Node.js 20 or later: its path."""
    n = shutil.which("node") or "/usr/bin/node"
    try:
        v = subprocess.run([n, "--version"], capture_output=True, text=True, timeout=20).stdout
        major = int(v.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        raise Unavailable("no node (Node.js 20 or later validates the objects written)")
    if major < 20:
        raise Unavailable("node %s: 20 or later needed" % v.strip())
    return n


def installed_version(modules):
    try:
        with open(os.path.join(modules, "kubernetes-models", "package.json")) as f:
            return json.load(f)["version"]
    except (OSError, ValueError, KeyError):
        return None


def node_modules(npm_dir):
    """node_modules holding kubernetes-models 5.1.x, installed into npm_dir once."""
    os.makedirs(npm_dir, exist_ok=True)
    modules = os.path.join(npm_dir, "node_modules")
    with open(os.path.join(npm_dir, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        v = installed_version(modules)
        if v and v.startswith("5.1."):
            return modules
        npm = shutil.which("npm")
        if not npm:
            raise Unavailable("no npm to install %s" % MODELS)
        print("installing %s into %s" % (MODELS, npm_dir), flush=True)
        try:
            r = subprocess.run([npm, "install", "--prefix", npm_dir, "--no-audit", "--no-fund",
                                "--engine-strict=false", "--loglevel=error", MODELS],
                               capture_output=True, text=True, timeout=240)
        except subprocess.TimeoutExpired:
            raise Unavailable("npm install %s timed out" % MODELS)
        v = installed_version(modules)
        if r.returncode != 0 or not v or not v.startswith("5.1."):
            raise Unavailable("cannot install %s (npm exit %d): %s"
                              % (MODELS, r.returncode, (r.stdout + r.stderr).strip()[-400:]))
    return modules
