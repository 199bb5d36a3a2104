# SPDX-License-Identifier: Apache-2.0
"""Every example in README.md and docs/**/*.md runs or parses as written
(issue 15). The fenced blocks are found anew on every run, so an example
someone adds is checked without touching this test.

What each block gets, by its language and by a marker, an HTML comment on the
line right above its opening fence (invisible when the page is rendered):
  ```sh     run as one `bash -e -o pipefail` script (60 s at most);
            <!-- example: interactive --> runs each line as a command typed at
            a terminal (a pty): one still running after 10 s gets Ctrl-C
            (SIGINT) and must then exit, and must not have printed a failure
            (TROUBLE: an error, an API that exited); one that exits by itself
            must exit 0.
  ```yaml   parsed; an API spec (a list of APIs) also by gpuslice's own parser
            (spec_check: core's spec loader; a spec whose APIs all have an
            image also by gpuslice render and render --dra); a Kubernetes object must have
            apiVersion and kind; a Kustomization's paths into deploy/ must exist.
  ```json   parsed.
  anything else (no language, promql...) must be marked.
  <!-- example: output of CMD -->     a JSON sample of what CMD prints: CMD runs (in
            the page's terminal, while a 300m slice `api-a` is held) and every
            key of the sample must be in its output, at the same place (a
            list empty in the output, such as no events yet, is not compared).
  <!-- example: text -->              not a command: a synopsis, an output, a log line.
  <!-- example: not-run (REASON) -->  an example this machine cannot run (a
            cluster, systemd, a real GPU, minutes of benchmark); REASON says why.
Marked blocks are listed in the summary, so nothing is left out silently.

The blocks run as root in namespaces of their own (mount, pid, network:
`unshare`), with tmpfs on /run, /tmp and /var/log, so a daemon an example
starts (the machine's one at /run/gpuslice included) and the files it writes
never touch the real machine, and every process an example leaves behind dies
with the namespace; everything else but the build is read-only there. Each doc
file starts on a fresh machine; its blocks run in order in one "terminal"
(exported variables and the directory carry from block to block), in a scratch
copy of the source tree (symbolic links; build/ is the build under test).
That machine's NVIDIA driver is simgpu: its libraries on
LD_LIBRARY_PATH and simgpu-smi as nvidia-smi on PATH; on PATH are also the
build's gpuslice, gpusliced and simgpu-smi (not examples/: the README says to
add it). The user's own programs the docs name (PROGRAMS below) are a small
driver-API stand-in (user_program.py) that fails when its slice's cap is not
in effect. Not root: SKIP."""
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../common"))
import fresh_tmpfs  # noqa: E402

SKIP = 77
SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = ("serve-model", "serve", "my-driver-api-program", "my-program")
SCRIPT_TIMEOUT = 60
INTERACTIVE_TIMEOUT = 10
# What a command still running at Ctrl-C must not have printed.
TROUBLE = re.compile(r"error|cannot|failed|refused|exited with status|not restarted|"
                     r"killed by|no such file|not found", re.I)
MARK = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```\s*([A-Za-z0-9_+-]*)\s*$")


def docs():
    out = [os.path.join(SRC, "README.md")]
    for root, _, files in os.walk(os.path.join(SRC, "docs")):
        out += [os.path.join(root, f) for f in files if f.endswith(".md")]
    return sorted(out, key=lambda p: (p != out[0], p))


def blocks(path):
    """(line, lang, marker, body) of every fenced block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = len(m.group(1)), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not re.match(r"^\s*```\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        mk = MARK.match(lines[start - 1]) if start > 0 else None
        out.append((start + 1, lang, mk.group(1) if mk else None, "\n".join(body) + "\n"))
        i += 1
    return out


# ---- the machine each doc file runs on ---------------------------------------


def fresh_machine():
    """A fresh /run, /tmp and /var/log (tmpfs: root's slice logs go to
    /var/log/gpuslice), no process of an earlier doc left."""
    me = os.getpid()
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        if pid != me:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        except ChildProcessError:
            break
        time.sleep(0.05)
    os.chdir("/")
    for mnt, mode in (("/run", "755"), ("/tmp", "1777"), ("/var/log", "755")):
        fresh_tmpfs.mount_tmpfs(mnt, mode, "gs-doc-" + mnt[1:])


def protect(build):
    """Everything but /tmp, /run and the build read-only in this mount
    namespace: a block that escapes its marker (`make install PREFIX=/usr`)
    fails instead of changing the machine."""
    for d in ("/", "/usr", "/etc", "/var", "/opt", "/home", "/root", "/srv", "/boot", SRC):
        if os.path.isdir(d) and not os.path.islink(d):
            subprocess.run(["mount", "--bind", d, d], check=True)
            subprocess.run(["mount", "-o", "remount,bind,ro", d], check=True)
    subprocess.run(["mount", "--bind", build, build], check=True)
    subprocess.run(["mount", "-o", "remount,bind,rw", build], check=True)


def scratch(build):
    """A scratch tree under /tmp: the source's entries as links, build/ the
    build under test, the stand-in programs; returns (dir, env)."""
    d = tempfile.mkdtemp(prefix="gs-doc-", dir="/tmp")
    os.chmod(d, 0o755)
    for e in os.listdir(SRC):
        if not e.startswith(".") and not e.startswith("build"):
            os.symlink(os.path.join(SRC, e), os.path.join(d, e))
    os.symlink(build, os.path.join(d, "build"))
    for p in PROGRAMS:
        shutil.copy(os.path.join(HERE, "user_program.py"), os.path.join(d, p))
        os.chmod(os.path.join(d, p), 0o755)
    bind = os.path.join(d, ".bin")
    os.makedirs(bind)
    os.symlink(os.path.join(build, "sim/simgpu-smi"), os.path.join(bind, "nvidia-smi"))
    for sub in ("home", "xdg"):
        os.makedirs(os.path.join(d, "." + sub), mode=0o700)
    path = [bind] + [os.path.join(build, p) for p in ("src/cli", "src/daemon", "sim")]
    env = {
        "PATH": ":".join(path + ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin",
                                 "/sbin", "/bin"]),
        "HOME": os.path.join(d, ".home"),
        "XDG_RUNTIME_DIR": os.path.join(d, ".xdg"),
        "LD_LIBRARY_PATH": os.path.join(build, "sim"),
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "USER": "root",
        "SHELL": "/bin/bash",
    }
    # Sanitizer builds: the test's processes report into the output. An ASan
    # shim that an example preloads by hand (LD_PRELOAD=.../libgpuslice.so)
    # comes without the ASan runtime first, and the stand-in is Python.
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    ldd = subprocess.run(["ldd", os.path.join(build, "src/shim/libgpuslice.so")],
                         capture_output=True, text=True).stdout
    if "libasan" in ldd:
        env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"),
                                                     "verify_asan_link_order=0",
                                                     "detect_leaks=0"]))
    with open(os.path.join(d, ".cwd"), "w") as f:
        f.write(d + "\n")
    return d, env


def wrap(d, cmd):
    """A bash script: the terminal's state so far, cmd, then the state saved."""
    return ("[ -f %(d)s/.env ] && . %(d)s/.env\ncd \"$(cat %(d)s/.cwd)\"\n%(cmd)s\n"
            "__rc=$?\nexport -p | grep -v -e ' PWD=' -e ' OLDPWD=' -e ' SHLVL=' > %(d)s/.env\n"
            "pwd > %(d)s/.cwd\nexit $__rc\n" % {"d": d, "cmd": cmd})


def run_script(d, env, body, timeout):
    """Runs body as one script; returns (ok, output)."""
    path = os.path.join(d, ".block.sh")
    with open(path, "w") as f:
        f.write("set -e -o pipefail\n" + wrap(d, body))
    outp = os.path.join(d, ".out")
    with open(outp, "wb") as out:
        # Output to a file, not a pipe: an example's background job (`cmd &`)
        # keeps what it inherited open after the script ends.
        p = subprocess.Popen(["bash", path], env=env, stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = p.wait(timeout=timeout)
            why = "exit %d" % rc if rc else ""
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            why = ("still running after %d s (an example that runs until stopped wants "
                   "<!-- example: interactive -->)" % timeout)
    return not why, why, open(outp, errors="replace").read()


def commands(body):
    """The commands of an interactive block: lines, `\\` continuations
    joined, blank and comment-only lines dropped."""
    out, cur = [], ""
    for line in body.split("\n"):
        if line.rstrip().endswith("\\"):
            cur += line.rstrip()[:-1] + " "
            continue
        cur += line
        if cur.strip() and not cur.strip().startswith("#"):
            out.append(cur)
        cur = ""
    return out


def run_interactive(d, env, cmd):
    """One command typed at a terminal; Ctrl-C after INTERACTIVE_TIMEOUT."""
    path = os.path.join(d, ".line.sh")
    with open(path, "w") as f:
        f.write(wrap(d, cmd))
    pid, fd = pty.fork()
    if pid == 0:
        try:
            os.execve("/bin/bash", ["bash", path], env)
        finally:
            os._exit(127)
    out, status, stopped, cut = b"", None, False, 0
    deadline = time.monotonic() + INTERACTIVE_TIMEOUT
    while status is None:
        try:
            if select.select([fd], [], [], 0.1)[0]:
                out += os.read(fd, 65536)
        except OSError:
            pass
        w, st = os.waitpid(pid, os.WNOHANG)
        if w:
            status = st
            break
        if time.monotonic() > deadline:
            if stopped:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return False, "did not exit within 30 s of Ctrl-C", out.decode(errors="replace")
            os.killpg(pid, signal.SIGINT)
            stopped, deadline, cut = True, time.monotonic() + 30, len(out)
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
    except OSError:
        pass
    os.close(fd)
    text = out.decode(errors="replace")
    if stopped:
        # Still running is not yet success: `up` restarting an API that
        # crashes runs on too. Whatever it printed before Ctrl-C must not
        # say something failed.
        before = out[:cut].decode(errors="replace")
        bad = [ln for ln in before.split("\n") if TROUBLE.search(ln)]
        if bad:
            return False, "still running at Ctrl-C, but it printed: %s" % bad[0].strip(), text
        return True, "", text
    rc = os.waitstatus_to_exitcode(status)
    return rc == 0, "exit %d" % rc if rc else "", text


# ---- the other languages -----------------------------------------------------


def check_yaml(d, env, body):
    try:
        docs_ = [x for x in yaml.safe_load_all(body) if x is not None]
    except yaml.YAMLError as e:
        return False, "not valid YAML: %s" % e, ""
    if not docs_:
        return False, "empty", ""
    notes = []
    for doc in docs_:
        if isinstance(doc, list) and doc and all(isinstance(a, dict) and "name" in a for a in doc):
            spec = os.path.join(d, ".spec.yaml")
            with open(spec, "w") as f:
                f.write(body)
            r = subprocess.run([os.environ["GS_SPEC_CHECK"], spec], env=env, capture_output=True,
                               text=True, timeout=30)
            if r.returncode != 0:
                return False, "the spec parser refuses it", r.stderr
            notes.append("an API spec: the spec parser accepts it")
            if all("image" in a for a in doc):
                for extra in ([], ["--dra"]):
                    r = subprocess.run(["gpuslice", "render"] + extra + [spec], env=env,
                                       capture_output=True, text=True, timeout=30)
                    if r.returncode != 0:
                        return (False, "gpuslice render %s refuses the spec" % " ".join(extra),
                                r.stderr)
                notes.append("gpuslice render and render --dra accept it")
        elif isinstance(doc, list) and all(isinstance(a, dict) and "kind" in a for a in doc):
            notes.append("a list of Kubernetes objects: %s" % ", ".join(a["kind"] for a in doc))
        elif isinstance(doc, dict) and ("kind" in doc or "apiVersion" in doc):
            if not doc.get("kind") or not doc.get("apiVersion"):
                return False, "a Kubernetes object without apiVersion or kind", ""
            if doc["kind"] == "Kustomization":
                for ref in (doc.get("resources") or []) + (doc.get("components") or []):
                    at = ref.find("deploy/")
                    if at >= 0 and not os.path.exists(os.path.join(SRC, ref[at:])):
                        return False, "names %s: no %s in the repository" % (ref, ref[at:]), ""
            notes.append("a %s" % doc["kind"])
        else:
            notes.append("a fragment: parsed")
    return True, "", "; ".join(notes)


def check_json(body):
    try:
        json.loads(body)
    except ValueError as e:
        return False, "not valid JSON: %s" % e, ""
    return True, "", "parsed"


def missing_keys(doc, real, at="$"):
    """Paths of the keys of doc that real lacks (lists: first elements)."""
    if isinstance(doc, dict):
        if not isinstance(real, dict):
            return ["%s (not an object in the output)" % at]
        out = []
        for k, v in doc.items():
            if k not in real:
                out.append("%s.%s" % (at, k))
            else:
                out += missing_keys(v, real[k], "%s.%s" % (at, k))
        return out
    if isinstance(doc, list) and doc and isinstance(doc[0], (dict, list)):
        if not isinstance(real, list):
            return ["%s (not a list in the output)" % at]
        # An empty list (no over-use events yet) has nothing to compare.
        return missing_keys(doc[0], real[0], at + "[0]") if real else []
    return []


def check_output(d, env, body, cmd):
    """A JSON sample of cmd's output: its keys in cmd's real output."""
    try:
        doc = json.loads(body)
    except ValueError as e:
        return False, "not valid JSON: %s" % e, ""
    hold = subprocess.Popen(["bash", "-c", wrap(d, "exec gpuslice run --gpu 300m --name api-a "
                                                   "-- sleep 120")],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            r = subprocess.run(["gpuslice", "ls", "--json"], env=env, capture_output=True,
                               text=True, timeout=30)
            if r.returncode == 0 and "api-a" in r.stdout:
                break
            if hold.poll() is not None or time.monotonic() > deadline:
                return False, "could not hold a slice to show: %s" % hold.stderr.read(), ""
            time.sleep(0.1)
        ok, why, out = run_script(d, env, cmd, SCRIPT_TIMEOUT)
        if not ok:
            return False, "%s: %s" % (cmd, why), out
        try:
            real = json.loads(out)
        except ValueError as e:
            return False, "%s does not print JSON: %s" % (cmd, e), out
        miss = missing_keys(doc, real)
        if miss:
            return False, "keys the output of %s does not have: %s" % (cmd, ", ".join(miss)), out
        return True, "", "every key is in the output of " + cmd
    finally:
        os.killpg(hold.pid, signal.SIGINT)
        try:
            hold.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(hold.pid, signal.SIGKILL)
            hold.wait()


# ---- main --------------------------------------------------------------------


def main():
    build = os.environ["GS_BUILD_DIR"]
    if os.getpid() != 1:
        sys.exit("FAIL: not the init of a pid namespace of its own: refusing to clear the machine")
    # A checkout (and its build, ../shared) under /tmp stays visible over
    # each fresh /tmp: the source read-only, the build writable.
    fresh_tmpfs.keep(SRC, read_only=True)
    fresh_tmpfs.keep(os.path.join(os.path.dirname(SRC), "shared"), read_only=True)
    fresh_tmpfs.keep(build)
    protect(build)
    results, failed = [], 0
    for path in docs():
        rel = os.path.relpath(path, SRC)
        if os.environ.get("GS_DOC_ONLY") and rel != os.environ["GS_DOC_ONLY"]:
            continue  # for working on one page: GS_DOC_ONLY=README.md
        bl = blocks(path)
        if not bl:
            continue
        fresh_machine()
        d, env = scratch(build)
        for line, lang, mark, body in bl:
            where = "%s:%d" % (rel, line)
            kind, ok, why, out = lang or "(none)", True, "", ""
            if mark is not None:
                m = re.match(r"^(not-run|text|interactive|output of)\b\s*(.*)$", mark)
                if not m:
                    ok, why = False, "unknown marker <!-- example: %s -->" % mark
                elif m.group(1) == "not-run":
                    if not re.match(r"^\(.+\)$", m.group(2)):
                        ok, why = False, "not-run needs its reason: <!-- example: not-run (WHY) -->"
                    kind = "not run " + m.group(2)
                elif m.group(1) == "text":
                    kind = "text"
                elif m.group(1) == "output of":
                    kind = "json, output of " + m.group(2)
                    if lang != "json" or not m.group(2):
                        ok, why = False, "output of CMD is for json blocks, and names CMD"
                    else:
                        ok, why, out = check_output(d, env, body, m.group(2))
                elif lang != "sh":
                    ok, why = False, "interactive is for sh blocks"
                else:
                    kind = "sh, interactive"
                    for cmd in commands(body):
                        ok, why, o = run_interactive(d, env, cmd)
                        out += "$ %s\n%s" % (cmd, o)
                        if not ok:
                            why = "%s: %s" % (cmd.strip(), why)
                            break
            elif lang == "sh":
                ok, why, out = run_script(d, env, body, SCRIPT_TIMEOUT)
                # A shim that failed closed says why only in its log.
                for log in [] if ok else re.findall(r"GPUSLICE_LOG=(\S+)", body):
                    try:
                        out += "%s:\n%s" % (log, open(log, errors="replace").read()[-2000:])
                    except OSError:
                        pass
            elif lang == "yaml":
                ok, why, out = check_yaml(d, env, body)
            elif lang == "json":
                ok, why, out = check_json(body)
            else:
                ok, why = False, ("a %s block this test cannot check: mark it "
                                  "<!-- example: text --> or <!-- example: not-run (WHY) -->"
                                  % (lang or "plain"))
            results.append((where, kind, ok))
            if not ok:
                failed += 1
                print("FAIL %s (%s): %s\n----\n%s----\n%s----" % (where, kind, why, body, out),
                      file=sys.stderr)
            elif os.environ.get("GS_DOC_VERBOSE"):
                print("ok %s (%s)\n%s" % (where, kind, out))
    print("%-34s %-6s %s" % ("block", "result", "what"))
    for where, kind, ok in results:
        print("%-34s %-6s %s" % (where, "ok" if ok else "FAIL", kind))
    ran = sum(1 for r in results if not r[1].startswith(("not run", "text")))
    print("%d blocks: %d checked, %d not run or text, %d failed" %
          (len(results), ran, len(results) - ran, failed))
    if failed:
        print("FAIL: %d example(s) do not run as written" % failed, file=sys.stderr)
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    if os.environ.get("GS_DOC_IN_NS") == "1":
        subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
        main()
        sys.exit(0)
    if os.geteuid() != 0 or not shutil.which("unshare"):
        print("SKIP: needs root and unshare (the examples run in namespaces of their own)")
        sys.exit(SKIP)
    probe = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc",
                            "sh", "-c", "mount -t tmpfs none /run"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: cannot make mount, pid and network namespaces: %r" % probe.stderr)
        sys.exit(SKIP)
    env = dict(os.environ, GS_DOC_IN_NS="1")
    r = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc",
                        "--kill-child", "--propagation", "private", sys.executable,
                        os.path.abspath(__file__)], env=env)
    sys.exit(r.returncode)
