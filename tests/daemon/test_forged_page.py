# SPDX-License-Identifier: Apache-2.0
"""The lease page is the daemon's (issue 17, docs/internals/trust.md),
judged by simgpu's ground truth (per-process busy_ns from simgpu-smi):

1. The adversary of the issue (forge_page.py: unlink <slice_dir>/compute,
   put a copy there, keep writing a lease that never ends) in a 100m `cap`
   slice: the shim reads the page the config names, in the daemon's page
   directory, so the slice stays within its cap.
2. A page the tenant could write (world-writable, as by a careless chmod)
   is refused by the shim, the log says so, and the slice stays capped
   (local enforcement) while a writer loop fills the page with leases.
3. A page owned by another user is refused the same way.
4. As an unprivileged user the page and its directory can be read, not
   replaced or written."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gstest import *  # noqa

w = World("forgedpage", devices=1)
burn = os.path.join(w.build, "bench/compute/gs-burn")
ptx = os.path.join(w.simlib, "gs_kernels.ptx")
forger = os.path.join(os.path.dirname(os.path.abspath(__file__)), "forge_page.py")
if not os.path.exists(burn) or not os.path.exists(w.shim) or not os.path.exists(ptx):
    print("SKIP: gs-burn, the shim or the kernels are not built")
    w.cleanup()
    sys.exit(SKIP)
w.env["GS_KERNELS_PTX"] = ptx


def start(name, script, log):
    env = dict(w.env)
    env["GPUSLICE_LOG"] = log
    args = [w.cli_bin, "run", "--sim", "--gpu", "100m", "--policy", "cap", "--name", name, "--",
            "sh", "-c", script]
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    w.children.append(p)
    return p


def slice_of(name):
    w.wait_for(lambda: name in {s.get("name") for s in w.slices()}, timeout=15,
               what="slice %s" % name)
    return [s for s in w.slices() if s.get("name") == name][0]


def busy():
    return {p["pid"]: p["busy_ns"] for p in w.smi()["processes"]}


def share(pid, seconds):
    b0, t0 = busy(), time.monotonic()
    time.sleep(seconds)
    b1, t1 = busy(), time.monotonic()
    return 100.0 * (b1.get(pid, 0) - b0.get(pid, 0)) / ((t1 - t0) * 1e9)


def finish(p, what):
    out, err = p.communicate(timeout=30)
    check(p.returncode == 0, "%s: exit %d: %s %s" % (what, p.returncode, out, err))
    return out


def read(path):
    with open(path) as f:
        return f.read()


def page_of(s):
    return os.path.join(w.state, "pages", s["id"], "compute")


# The burn starts after the forger (or the test) has done its work; it is
# exec'd, so the slice's pid is the burn's.
BURN = "exec %s --kernel 1ms --duration 3s" % burn
try:
    w.start_daemon()

    # 1. The adversary.
    log1 = os.path.join(w.dir, "shim1.log")
    p = start("forger", "%s %s 4 & sleep 0.5; %s" % (sys.executable, forger, BURN), log1)
    s = slice_of("forger")
    time.sleep(1.1)
    f = share(int(s["pid"]), 2.0)
    print("100m cap with a forged page in its slice directory: %.1f%% of the GPU" % f)
    out = finish(p, "forger")
    check("forged" in out, "the forger did not run: %r" % out)
    check(f <= 15, "the forged page was obeyed: a 100m cap slice used %.1f%%" % f)
    check(f >= 3, "100m cap slice starved: %.1f%%" % f)
    check("leases from gpusliced" in read(log1), "the shim did not take the daemon's leases: "
          + read(log1))

    # 2. and 3. A page the tenant could write, or another user's: refused.
    for k, (what, fix, why) in enumerate((("world-writable", lambda pg: os.chmod(pg, 0o666),
                            "mode 0666: others could write leases into it"),
                           ("another user's", lambda pg: os.chown(pg, 4242, -1),
                            "owned by uid 4242, expected root or uid"))):
        if what == "another user's" and os.geteuid() != 0:
            print("another user's page: not root, skipped")
            continue
        log = os.path.join(w.dir, "shim-%d.log" % k)
        flag = os.path.join(w.dir, "go-%d" % k)
        name = "bad%d" % k
        p = start(name, "while [ ! -e %s ]; do sleep 0.02; done; %s" % (flag, BURN), log)
        s = slice_of(name)
        pg = page_of(s)
        w.wait_for(lambda: os.path.exists(pg), timeout=10, what="the page of " + name)
        fix(pg)
        writer = None
        if what == "world-writable":
            # The tenant's writer loop, now possible: leases that never end.
            env = dict(w.env)
            env["GPUSLICE_CONFIG"] = os.path.join(w.state, "conf", s["id"] + ".conf")
            writer = subprocess.Popen([sys.executable, forger, "4", pg], env=env,
                                      stdout=subprocess.DEVNULL)
            w.children.append(writer)
        open(flag, "w").close()
        time.sleep(1.1)
        f = share(int(s["pid"]), 2.0)
        print("100m cap, %s page: %.1f%% of the GPU" % (what, f))
        finish(p, name)
        text = read(log)
        check("compute: lease page %s refused: %s" % (pg, why) in text,
              "the shim did not refuse the %s page: %s" % (what, text))
        check(f <= 15, "100m cap slice with a %s page used %.1f%%" % (what, f))
        check(f >= 3, "100m cap slice starved: %.1f%%" % f)
        if writer:
            writer.wait(timeout=10)

    # 4. An unprivileged tenant cannot replace or write the daemon's page.
    if os.geteuid() == 0 and subprocess.run(["which", "setpriv"], capture_output=True).returncode == 0:
        log = os.path.join(w.dir, "shim4.log")
        flag = os.path.join(w.dir, "go4")
        p = start("unpriv", "while [ ! -e %s ]; do sleep 0.02; done; exit 0" % flag, log)
        s = slice_of("unpriv")
        pg = page_of(s)
        w.wait_for(lambda: os.path.exists(pg), timeout=10, what="the page of unpriv")
        os.chmod(w.dir, 0o755)
        st = os.stat(os.path.dirname(pg))
        check(st.st_uid == os.geteuid() and st.st_mode & 0o7777 == 0o755,
              "page directory owner %d mode %o" % (st.st_uid, st.st_mode & 0o7777))
        check(os.stat(pg).st_mode & 0o777 == 0o444, "page mode %o" % (os.stat(pg).st_mode & 0o777))
        r = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c",
             "import os,sys\n"
             "p=sys.argv[1]\n"
             "open(p,'rb').read(8)\n"
             "for f in (lambda: os.unlink(p), lambda: os.open(p, os.O_RDWR),\n"
             "          lambda: open(os.path.join(os.path.dirname(p), 'x'), 'w')):\n"
             "    try:\n"
             "        f(); print('ALLOWED')\n"
             "    except PermissionError:\n"
             "        print('refused')\n", pg], capture_output=True, text=True)
        print("nobody against the page: %s" % r.stdout.split())
        check(r.returncode == 0 and r.stdout.split() == ["refused"] * 3,
              "an unprivileged tenant could touch the page: %r %r" % (r.stdout, r.stderr))
        open(flag, "w").close()
        finish(p, "unpriv")
    print("PASS")
finally:
    w.cleanup()
