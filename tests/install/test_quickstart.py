# SPDX-License-Identifier: Apache-2.0
"""The README's quick start on a fresh machine, as written, for root and for a
user in the group gpuslice (issue 15, "Done when"):

 A. `make install` (PREFIX /usr/local) and `systemctl enable --now gpusliced`:
    the installed unit's ExecStartPre (makes the group gpuslice) and
    ExecStart, run as systemd would; then, with /usr/local/bin on PATH,
    root, and a user in the group gpuslice, each run
    `gpuslice run --gpu 300m -- CMD` and `gpuslice ls`; the member's slice
    (a CMD that holds 64 MiB) is the machine daemon's: root's `ls --json`
    lists it with the member's uid and 300 milli, and simgpu's own record of
    the hardware (simgpu-smi) shows the member's process holding its memory;
 B. on a fresh machine, no service: the group made first (`groupadd
    --system gpuslice`, before the daemon starts, as the README says), then
    "root's first `run` starts it", from the build tree with the README's
    `export PATH=...`; then the member again;
 C. the group made after root's first run started the daemon (which hands its
    socket to the group only at start, docs/daemon.md): the member is told
    to restart the daemon, not to join the group it is in; after the restart
    the member's commands work;
 and in each, a user NOT in the group gets the refusal the README promises
 (`ask to be added to the group gpuslice`) and no private daemon.

The machine: a mount and pid namespace of its own (unshare), with tmpfs on
/run, /tmp, /usr/local and /var/log (root's slice logs) and a copy of /etc
bound over /etc, so the daemon at /run/gpuslice, the install, the group and
the throwaway users (useradd/groupadd) never touch the real machine, and every
process dies with the namespace. Its NVIDIA driver is simgpu: its libraries in
the loader's path (ld.so.conf.d, in the /etc copy) and its state, the
"device", usable by every user (SIMGPU_DIR, mode 0666, as /dev/nvidia* are).
CMD is the docs' stand-in program (tests/docs/user_program.py), which fails
unless its memory is the slice's cap. Needs root: SKIP otherwise."""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../common"))
import fresh_tmpfs  # noqa: E402

SKIP = 77
SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
SYS_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SIMDIR = "/tmp/simgpu-machine"
QS = "/tmp/qs"
MEMBER, OTHER = "gsqs-member", "gsqs-other"
REFUSAL = "ask to be added to the group gpuslice"

HOLD = r'''#!/usr/bin/python3
import ctypes, os, sys
cu = ctypes.CDLL("libcuda.so.1")
assert cu.cuInit(0) == 0, "cuInit"
ctx = ctypes.c_void_p()
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0, "context"
assert cu.cuCtxSetCurrent(ctx) == 0
p = ctypes.c_uint64()
assert cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(64 << 20)) == 0, "cuMemAlloc"
print("held", os.getpid(), flush=True)
sys.stdin.read()
'''


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def sh(*args, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120, **kw)


def user_env(path):
    return {"PATH": path, "SIMGPU_DIR": SIMDIR, "LANG": "C.UTF-8"}


def as_user(user, args, path, **kw):
    """args as user (its groups from /etc/group), with a login's plain env."""
    home = "/tmp/home-" + user if user != "root" else "/root"
    env = dict(user_env(path), HOME=home, USER=user)
    pre = [] if user == "root" else ["setpriv", "--reuid=" + user, "--regid=" + user,
                                     "--init-groups", "--"]
    return subprocess.run(pre + list(args), env=env, capture_output=True, text=True, timeout=60,
                          cwd=home if os.path.isdir(home) else "/", **kw)


def fresh_etc():
    """/etc a fresh private copy of the real one (no group gpuslice, no
    throwaway users unless the real machine has them)."""
    subprocess.run(["umount", "/etc"], capture_output=True)
    shutil.rmtree("/tmp/qs-etc", ignore_errors=True)
    subprocess.run(["cp", "-a", "/etc", "/tmp/qs-etc"], check=True)
    subprocess.run(["mount", "--bind", "/tmp/qs-etc", "/etc"], check=True)
    with open("/etc/ld.so.conf.d/gs-simgpu.conf", "w") as f:
        f.write(os.path.join(os.environ["GS_BUILD_DIR"], "sim") + "\n")
    subprocess.run(["ldconfig", "-X"], check=True)
    check(sh("getent", "group", "gpuslice").returncode != 0,
          "the real machine has a group gpuslice: not a fresh machine")


def machine(build):
    """/run, /tmp, /usr/local fresh; /etc a private copy; simgpu the driver."""
    # A checkout (and its build, ../shared) under one of them stays visible.
    for keep in (SRC, os.path.join(os.path.dirname(SRC), "shared"), build):
        fresh_tmpfs.keep(keep)
    for mnt, mode in (("/run", "755"), ("/tmp", "1777"), ("/usr/local", "755"),
                      ("/var/log", "755")):
        fresh_tmpfs.mount_tmpfs(mnt, mode, "gs-qs")
    fresh_etc()
    os.makedirs(SIMDIR)
    os.chmod(SIMDIR, 0o1777)
    r = sh(os.path.join(build, "sim/simgpu-smi"), "-L", env={"SIMGPU_DIR": SIMDIR})
    check(r.returncode == 0 and "GPU 0:" in r.stdout, "the simulated GPU: %r" % r.stderr)
    for f in os.listdir(SIMDIR):
        os.chmod(os.path.join(SIMDIR, f), 0o666)
    os.makedirs(QS)
    os.chmod(QS, 0o755)
    shutil.copy(os.path.join(SRC, "tests/docs/user_program.py"), QS + "/serve-model")
    with open(QS + "/hold", "w") as f:
        f.write(HOLD)
    for p in ("serve-model", "hold"):
        os.chmod(os.path.join(QS, p), 0o755)


def add_users():
    """The member: made, then added to the group (usermod -aG, as the docs
    say; setpriv --init-groups reads its groups as a new login would)."""
    for user in (MEMBER, OTHER):
        r = sh("useradd", "-m", "-d", "/tmp/home-" + user, "-s", "/bin/sh", user)
        check(r.returncode == 0, "useradd %s: %s" % (user, r.stderr))
    r = sh("usermod", "-aG", "gpuslice", MEMBER)
    check(r.returncode == 0, "usermod -aG gpuslice %s: %s" % (MEMBER, r.stderr))


def del_users():
    for user in (MEMBER, OTHER):
        sh("userdel", "-r", user)


def wait_socket(what, proc=None):
    deadline = time.monotonic() + 30
    while not os.path.exists("/run/gpuslice/gpusliced.sock"):
        if proc is not None and proc.poll() is not None:
            fail("%s exited (%d) before its socket appeared: %s" %
                 (what, proc.returncode, open("/tmp/unit-daemon.log", errors="replace").read()))
        check(time.monotonic() < deadline, "%s: no /run/gpuslice/gpusliced.sock after 30 s" % what)
        time.sleep(0.05)


def slices(out):
    return [s for g in json.loads(out)["gpus"] for s in g["slices"]]


def milli_of(s):
    return [v for k, v in s.items() if "milli" in k and isinstance(v, int)]


def simgpu_procs(build):
    r = sh(os.path.join(build, "sim/simgpu-smi"), "--json", env={"SIMGPU_DIR": SIMDIR})
    check(r.returncode == 0, "simgpu-smi --json: %r" % r.stderr)
    return json.loads(r.stdout)["processes"]


def users_run(build, path, where):
    """The quick start's two commands as root and as the member, the
    member's slice the machine daemon's, the non-member refused."""
    for user in ("root", MEMBER):
        r = as_user(user, ["gpuslice", "run", "--gpu", "300m", "--", QS + "/serve-model"], path)
        check(r.returncode == 0 and "CUDA ok" in r.stdout,
              "%s, %s: gpuslice run --gpu 300m -- CMD: exit %d\n%s%s" %
              (where, user, r.returncode, r.stdout, r.stderr))
        r = as_user(user, ["gpuslice", "ls"], path)
        check(r.returncode == 0 and "GPU" in r.stdout,
              "%s, %s: gpuslice ls: exit %d %r" % (where, user, r.returncode, r.stderr))
    uid = int(sh("id", "-u", MEMBER).stdout)
    pre = ["setpriv", "--reuid=" + MEMBER, "--regid=" + MEMBER, "--init-groups", "--"]
    hold = subprocess.Popen(pre + ["gpuslice", "run", "--gpu", "300m", "--", QS + "/hold"],
                            env=dict(user_env(path), HOME="/tmp/home-" + MEMBER),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd="/tmp/home-" + MEMBER)
    try:
        line = hold.stdout.readline()
        check(line.startswith("held "), "%s: the member's held CMD: %r %r" %
              (where, line, hold.stderr.read() if hold.poll() is not None else ""))
        pid = int(line.split()[1])
        r = as_user("root", ["gpuslice", "ls", "--json"], path)
        check(r.returncode == 0, "%s: root's ls --json: %r" % (where, r.stderr))
        mine = [s for s in slices(r.stdout) if s.get("uid") == uid]
        check(len(mine) == 1 and 300 in milli_of(mine[0]),
              "%s: the machine daemon does not list the member's 300m slice: %s" %
              (where, r.stdout))
        procs = [p for p in simgpu_procs(build) if p["pid"] == pid and p["alive"]]
        check(procs and procs[0]["used_bytes"] >= 64 << 20,
              "%s: simgpu does not see the member's process %d holding 64 MiB: %s" %
              (where, pid, procs))
        r = as_user(MEMBER, ["gpuslice", "ls", "--json"], path)
        check(r.returncode == 0 and any(s.get("uid") == uid for s in slices(r.stdout)),
              "%s: the member's ls does not show its slice: %r" % (where, r.stdout + r.stderr))
    finally:
        hold.stdin.close()
        hold.wait(timeout=60)
    check(hold.returncode == 0, "%s: the member's held run: exit %d %r" %
          (where, hold.returncode, hold.stderr.read()))
    for args in (["ls"], ["run", "--gpu", "300m", "--", QS + "/serve-model"]):
        r = as_user(OTHER, ["gpuslice"] + args, path)
        check(r.returncode != 0 and REFUSAL in r.stderr,
              "%s: a user not in the group, gpuslice %s: exit %d, no clear refusal: %r" %
              (where, args[0], r.returncode, r.stderr))
        check("starting gpusliced" not in r.stderr and
              not any(n.startswith("gpuslice-sim") for n in os.listdir("/tmp")),
              "%s: the non-member got a private daemon: %r" % (where, r.stderr))


def stop_daemons():
    """Every gpusliced of this namespace stopped (SIGTERM), as systemctl
    stop would; the ones root's run started are no child of ours."""
    pids = []
    for p in [p for p in os.listdir("/proc") if p.isdigit()]:
        try:
            if open("/proc/%s/comm" % p).read().strip() == "gpusliced":
                pids.append(int(p))
        except OSError:
            pass
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while any(os.path.exists("/proc/%d/comm" % p) for p in pids):
        try:
            os.waitpid(-1, os.WNOHANG)  # orphans are ours, pid 1's, to reap
        except ChildProcessError:
            pass
        check(time.monotonic() < deadline, "gpusliced did not stop on SIGTERM within 30 s")
        time.sleep(0.05)


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def main():
    build = os.environ["GS_BUILD_DIR"]
    check(os.getpid() == 1, "not the init of a pid namespace of its own")
    machine(build)
    try:
        # A. make install; systemctl enable --now gpusliced (its ExecStartPre
        # makes the group); the member is added to the group.
        r = sh("make", "-s", "-C", SRC, "install", "BUILD=" + build, "NOBUILD=1")
        check(r.returncode == 0, "make install: %s%s" % (r.stdout, r.stderr))
        unit = "/usr/local/lib/systemd/system/gpusliced.service"
        keys = {}
        for line in open(unit):
            k, sep, v = line.strip().partition("=")
            if sep and k in ("ExecStartPre", "ExecStart"):
                keys.setdefault(k, []).append(v)
        check(len(keys.get("ExecStart", [])) == 1, "%s: one ExecStart wanted: %s" % (unit, keys))
        senv = {"PATH": SYS_PATH, "SIMGPU_DIR": SIMDIR, "LANG": "C.UTF-8"}
        for cmd in keys.get("ExecStartPre", []):
            r = subprocess.run(shlex.split(cmd.lstrip("-")), env=senv, capture_output=True,
                               text=True, timeout=60)
            check(r.returncode == 0 or cmd.startswith("-"), "ExecStartPre %s: %r" % (cmd, r.stderr))
        check(sh("getent", "group", "gpuslice").returncode == 0,
              "the unit's ExecStartPre did not make the group gpuslice")
        add_users()
        log = open("/tmp/unit-daemon.log", "wb")
        daemon = subprocess.Popen(shlex.split(keys["ExecStart"][0]), env=senv, stdout=log,
                                  stderr=log, start_new_session=True)
        log.close()
        wait_socket("the unit's gpusliced", daemon)
        st = os.stat("/run/gpuslice/gpusliced.sock")
        check(st.st_mode & 0o777 == 0o660 and st.st_gid == int(
            sh("getent", "group", "gpuslice").stdout.split(":")[2]),
            "the socket is not the group gpuslice's, 0660: %o gid %d" % (st.st_mode, st.st_gid))
        users_run(build, SYS_PATH, "installed, the unit's daemon")
        stop(daemon)
        del_users()

        # B. A fresh machine, no service: the group first (`groupadd --system
        # gpuslice` before the daemon starts, as the README says), then root's
        # first `run` starts the daemon (the build tree, the README's
        # `export PATH=...`), then the member is added to the group.
        shutil.rmtree("/run/gpuslice")
        fresh_etc()
        r = sh("groupadd", "--system", "gpuslice")
        check(r.returncode == 0, "groupadd --system gpuslice: %s" % r.stderr)
        path = ":".join(os.path.join(build, p) for p in ("src/cli", "src/daemon", "examples"))
        path += ":" + SYS_PATH
        r = as_user("root", ["gpuslice", "run", "--gpu", "300m", "--", QS + "/serve-model"], path)
        check(r.returncode == 0 and "starting gpusliced" in r.stderr and "CUDA ok" in r.stdout,
              "root's first run from the build tree: exit %d %r %r" %
              (r.returncode, r.stdout, r.stderr))
        check(os.path.exists("/run/gpuslice/gpusliced.sock"), "root's first run: no machine daemon")
        add_users()
        users_run(build, path, "the build tree, root's first run's daemon")
        stop_daemons()
        del_users()

        # C. The group made after the daemon started (docs/daemon.md: it takes
        # effect at the daemon's next start): the member is told so, not to
        # ask for the group it is in; once the daemon started again, it works.
        shutil.rmtree("/run/gpuslice")
        fresh_etc()
        r = as_user("root", ["gpuslice", "run", "--gpu", "300m", "--", QS + "/serve-model"], path)
        check(r.returncode == 0 and "starting gpusliced" in r.stderr,
              "C: root's first run: exit %d %r" % (r.returncode, r.stderr))
        r = sh("groupadd", "--system", "gpuslice")
        check(r.returncode == 0, "groupadd --system gpuslice: %s" % r.stderr)
        add_users()
        r = as_user(MEMBER, ["gpuslice", "run", "--gpu", "300m", "--", QS + "/serve-model"], path)
        check(r.returncode != 0 and "though you are in it" in r.stderr and "restart" in r.stderr,
              "C: the member of a group made after the daemon started is not told to restart "
              "it: exit %d %r" % (r.returncode, r.stderr))
        stop_daemons()
        r = as_user("root", ["gpuslice", "run", "--gpu", "300m", "--", QS + "/serve-model"], path)
        check(r.returncode == 0 and "starting gpusliced" in r.stderr,
              "C: root's run after the restart: exit %d %r" % (r.returncode, r.stderr))
        users_run(build, path, "the daemon started again after the group was made")
    finally:
        del_users()
    print("PASS")


if __name__ == "__main__":
    if os.environ.get("GS_QS_IN_NS") == "1":
        main()
        sys.exit(0)
    if os.geteuid() != 0 or not all(shutil.which(p) for p in ("unshare", "setpriv", "useradd")):
        print("SKIP: needs root, unshare, setpriv and useradd")
        sys.exit(SKIP)
    r = subprocess.run(["unshare", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
                        "--propagation", "private", sys.executable, os.path.abspath(__file__)],
                       env=dict(os.environ, GS_QS_IN_NS="1"))
    sys.exit(r.returncode)
