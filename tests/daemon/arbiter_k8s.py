# SPDX-License-Identifier: Apache-2.0
"""Processes of a Kubernetes pod's slice join the GPU's compute arbiter.

`gpusliced --sim --kubelet` on simgpu, a fake kubelet (tests/kube/kubelet_sim.py)
Allocates a 300m slice; a "container" is a private mount namespace (unshare -m)
with a tmpfs on /run and the slice's host directory and config bind-mounted at
/run/gpuslice/slice and /run/gpuslice/slice.conf, as the device plugin's mounts
do, running gs-burn under the shim. The daemon identifies it by the st_dev/st_ino
of /proc/<pid>/root/run/gpuslice/slice, so:
  1. the pod's process is accepted as a member of that slice (daemon log, shim
     log without "local enforcement") and granted leases (arbiter trace), and
     its share is work-conserving: alone on the GPU it gets well beyond its
     300m (local enforcement would cap it there);
  2. a process with some OTHER directory mounted at /run/gpuslice/slice is
     refused and falls back to local enforcement, the daemon saying why;
  3. so is one whose /run/gpuslice/slice is a symlink to the slice's host
     directory (a tenant must not name another pod's directory by path);
  4. a pod's process outlives a daemon restart (kill -9, as a crash or a
     rolling update of the DaemonSet): pods get the daemon socket's
     directory mounted, not the socket file, so its shim reaches the new
     daemon's socket and is granted leases again."""
import os
import re
import subprocess
import sys
import tempfile

from kubelet_sim import GIB, Node, PodResources, check, envs, ids, mounts, read_conf, wait_for

SKIP = 77

# The "container": a private mount namespace with the device plugin's
# mounts. $1: what to put at /run/gpuslice/slice, $2: "bind" or "symlink",
# $3: the host config, $4: the host directory of the daemon's socket; then
# the command.
CONTAINER = r'''
set -e
mount -t tmpfs gs-run /run
mkdir -p /run/gpuslice/daemon
mount --bind "$4" /run/gpuslice/daemon
# Read-only, as the runtime mounts it: connect() still works through it.
mount -o remount,bind,ro /run/gpuslice/daemon
# The lease page's directory, read-only as the device plugin asks.
mkdir -p /run/gpuslice/lease
mount --bind "$5" /run/gpuslice/lease
mount -o remount,bind,ro /run/gpuslice/lease
touch /run/gpuslice/slice.conf
mount --bind "$3" /run/gpuslice/slice.conf
if [ "$2" = symlink ]; then
    ln -s "$1" /run/gpuslice/slice
else
    mkdir /run/gpuslice/slice
    mount --bind "$1" /run/gpuslice/slice
fi
shift 5
exec "$@"
'''


def main():
    build = os.environ["GS_BUILD_DIR"]
    simlib = os.environ.get("GS_SIM_LIBDIR", "")
    shim = os.path.join(build, "src/shim/libgpuslice.so")
    burn = os.path.join(build, "bench/compute/gs-burn")
    ptx = os.path.join(simlib, "gs_kernels.ptx")
    for f in (shim, burn, ptx):
        if not os.path.exists(f):
            print("SKIP: %s is not built" % f)
            sys.exit(SKIP)
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "true"],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        print("SKIP: unshare -m is not permitted here (%s)" % probe.stderr.strip())
        sys.exit(SKIP)
    # An ASan shim must come after the ASan runtime in LD_PRELOAD.
    preload = shim
    ldd = subprocess.run(["ldd", shim], capture_output=True, text=True).stdout
    m = re.search(r"(\S*libasan\.so\S*) => (\S+)", ldd)
    if m:
        preload = m.group(2) + ":" + shim

    node = Node(gpus=(("GPU-sim-0", 16 * GIB),), extra_args=["--log-level", "debug"])
    node.kubelet.start()
    ok = False
    try:
        node.pods = PodResources(node.pr_sock)
        node.pods.set([("default", "pod", "serve", ids(0, 0, 300))])
        trace = os.path.join(node.tmp, "arb.trace")
        node.env["GPUSLICE_ARB_TRACE"] = trace
        node.start_plugin()
        c = node.client()
        r = c.allocate(ids(0, 0, 300))
        c.close()
        e, mnt = envs(r), mounts(r)
        slice_id = e["GPUSLICE_SLICE"]
        host_conf = mnt["/run/gpuslice/slice.conf"][0]
        host_dir = mnt["/run/gpuslice/slice"][0]
        page_dir, page_ro = mnt["/run/gpuslice/lease"]
        check(page_ro, "the lease page's directory is mounted read-only")
        sock_dir, sock_ro = mnt["/run/gpuslice/daemon"]
        check(sock_ro and os.path.isdir(sock_dir), "the socket's directory is mounted read-only")
        conf = read_conf(host_conf)
        check(conf["slice_dir"] == "/run/gpuslice/slice" and conf["compute_milli"] == "300",
              "slice config: %s" % conf)
        check(conf.get("lease_page") == "/run/gpuslice/lease/compute",
              "the config names the mounted lease page: %s" % conf)
        check(conf.get("policy", "share") == "share", "the plugin's default policy: %s" % conf)
        # The arbiter picks Kubernetes slices up from the ledger (every 0.5 s).
        wait_for(lambda: os.path.exists(os.path.join(page_dir, "compute")), 10,
                 "the arbiter's lease page of %s" % slice_id)

        def start(name, source, how, seconds):
            log = os.path.join(node.tmp, name + ".shim.log")
            env = dict(node.env)
            env.pop("GPUSLICE_ARB_TRACE", None)
            env.update({
                "LD_PRELOAD": preload,
                "LD_LIBRARY_PATH": simlib,
                "GPUSLICE_CONFIG": e["GPUSLICE_CONFIG"],
                "GPUSLICE_SLICE": slice_id,
                "CUDA_VISIBLE_DEVICES": e["CUDA_VISIBLE_DEVICES"],
                "GS_KERNELS_PTX": ptx,
                "GPUSLICE_LOG": log,
            })
            env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", CONTAINER, "container",
                   source, how, host_conf, sock_dir, page_dir,
                   burn, "--kernel", "1ms", "--duration", "%dms" % int(seconds * 1000)]
            return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True), log

        def finish(name, proc, log):
            out, err = proc.communicate(timeout=40)
            p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
            check(p.returncode == 0, "%s: exit %d: %s %s" % (name, p.returncode, p.stdout,
                                                              p.stderr))
            fields = dict(kv.split("=", 1) for kv in p.stdout.split() if "=" in kv)
            check("pid" in fields and "kernels" in fields, "%s: gs-burn said %r" % (name, p.stdout))
            with open(log) as f:
                shim_log = f.read()
            return fields, shim_log

        def run(name, source, how, seconds):
            return finish(name, *start(name, source, how, seconds))

        def read(path):
            try:
                with open(path) as f:
                    return f.read()
            except OSError:
                return ""

        def daemon_log():
            with open(node.log) as f:
                return f.read()

        # 1. The pod's process joins its slice and gets leases.
        fields, shim_log = run("member", host_dir, "bind", 2.0)
        pid = int(fields["pid"])
        print("member: %s" % " ".join("%s=%s" % kv for kv in sorted(fields.items())))
        check("leases from gpusliced" in shim_log and "local enforcement" not in shim_log,
              "the pod's process was not linked to the arbiter:\n" + shim_log)
        check("shim pid %d of slice %s connected" % (pid, slice_id) in daemon_log(),
              "the daemon did not accept pid %d into %s:\n%s" % (pid, slice_id, daemon_log()))
        with open(trace) as f:
            tr = f.read()
        wants = len(re.findall(r"^\d+ msg %s pid %d type " % (slice_id, pid), tr, re.M))
        grants = [(int(a), int(b)) for a, b in re.findall(
            r"^\d+ page %s gen [1-9]\d* start (\d+) until (\d+)$" % slice_id, tr, re.M)]
        grants = [g for g in grants if g[1] > g[0]]
        print("arbiter trace: %d frames from pid %d, %d leases shown to %s"
              % (wants, pid, len(grants), slice_id))
        check(wants > 0, "no frame of pid %d reached %s's arbiter" % (pid, slice_id))
        check(len(grants) > 0, "the arbiter granted %s no lease" % slice_id)
        # Work-conserving: alone on the GPU, a 300m share slice is lent the
        # idle rest (local enforcement caps it at 300m). Coarse: > 45%.
        used = int(fields["kernels"]) * int(fields["kernel_ns"]) / (float(fields["seconds"]) * 1e9)
        print("300m share slice alone: %.0f%% of the GPU" % (100 * used))
        check(used > 0.45, "a 300m share slice alone got %.0f%% of the GPU: not lent the rest"
              % (100 * used))

        # 2. Another directory at /run/gpuslice/slice: refused.
        other = tempfile.mkdtemp(dir=node.tmp)
        fields, shim_log = run("outsider", other, "bind", 0.4)
        pid = int(fields["pid"])
        used = int(fields["kernels"]) * int(fields["kernel_ns"]) / (float(fields["seconds"]) * 1e9)
        print("refused process, enforcing alone: %.0f%% of the GPU" % (100 * used))
        check("unreachable" in shim_log and "local enforcement" in shim_log,
              "a process with another slice directory was not refused:\n" + shim_log)
        want = "shim pid %d: the process is in no slice" % pid
        line = [ln for ln in daemon_log().splitlines() if want in ln]
        check(line and "is no Kubernetes slice's directory" in line[0],
              "the daemon gave no reason for refusing pid %d:\n%s" % (pid, daemon_log()))
        print("refused: %s" % line[0].split(": ", 2)[-1])
        check("shim pid %d of slice" % pid not in daemon_log(), "pid %d was accepted" % pid)

        # 3. A symlink to the slice's host directory: refused too.
        fields, shim_log = run("symlink", host_dir, "symlink", 0.4)
        pid = int(fields["pid"])
        check("local enforcement" in shim_log,
              "a symlink named the slice's directory and was accepted:\n" + shim_log)
        line = [ln for ln in daemon_log().splitlines()
                if "shim pid %d: the process is in no slice" % pid in ln]
        check(line, "the daemon gave no reason for refusing pid %d" % pid)
        print("refused: %s" % line[0].split(": ", 2)[-1])

        # 4. The daemon dies (kill -9) and a new one starts while the pod's
        #    process runs: its shim reaches the new daemon's socket.
        proc, log = start("restart", host_dir, "bind", 8.0)
        wait_for(lambda: "leases from gpusliced" in read(log), 10, "the shim to link")
        before = len(daemon_log())
        node.proc.kill()
        node.proc.wait()
        node.proc = None
        if os.path.exists(node.sock):
            os.unlink(node.sock)  # a killed plugin leaves its socket
        node.start_plugin()
        wait_for(lambda: "grants leases again" in read(log), 12,
                 "the pod's shim to reach the restarted daemon:\n" + read(log))
        fields, shim_log = finish("restart", proc, log)
        pid = int(fields["pid"])
        check("shim pid %d of slice %s connected" % (pid, slice_id) in daemon_log()[before:],
              "the new daemon did not accept pid %d:\n%s" % (pid, daemon_log()[before:]))
        print("after kill -9 and a new daemon, pid %d is a member again" % pid)
        ok = True
        print("PASS")
    finally:
        node.close(ok)


if __name__ == "__main__":
    main()
