# SPDX-License-Identifier: Apache-2.0
"""gpuslice run: exit status, 128+signal, signal forwarding, the child's
environment (slice config, shim, only its GPU), refusal with 125, whole GPUs
without limits."""
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import *  # noqa

w = World("run", devices=2, memory="8Gi")
try:
    w.start_daemon()
    have_shim = os.path.exists(w.shim)
    if not have_shim:
        w.env["GPUSLICE_SHIM"] = "/dev/null"  # the env checks below still hold

    r = w.cli("run", "--sim", "--gpu", "1", "--", "sh", "-c", "exit 7")
    check(r.returncode == 7, "exit status: %d %s" % (r.returncode, r.stderr))
    r = w.cli("run", "--sim", "--gpu", "1", "--", "sh", "-c", "kill -TERM $$")
    check(r.returncode == 128 + signal.SIGTERM, "killed: %d" % r.returncode)
    r = w.cli("run", "--sim", "--gpu", "1", "--", "/nonexistent/cmd")
    check(r.returncode == 127 and "cannot execute" in r.stderr, "missing cmd: %d" % r.returncode)
    r = w.cli("run", "--gpu", "1500m", "--", "true")
    check(r.returncode == 2 and "--gpu" in r.stderr, "bad quantity: %r" % r.stderr)

    # Environment of a fractional slice.
    r = w.cli("run", "--sim", "--gpu", "300m", "--gpu-memory", "2Gi", "--name", "envcheck", "--",
              "sh", "-c", 'echo "$CUDA_VISIBLE_DEVICES|$GPUSLICE_CONFIG|$LD_PRELOAD"; '
              'cat "$GPUSLICE_CONFIG"')
    check(r.returncode == 0, "env run failed: %s" % r.stderr)
    first, _, conf_text = r.stdout.partition("\n")
    vis, conf, preload = first.split("|")
    uuids = [g for k, g in w.call(STATUS)[1] if k == "gpu_uuid"]
    check(vis in uuids, "CUDA_VISIBLE_DEVICES=%r is not one GPU of %r" % (vis, uuids))
    check(conf.endswith(".conf") and "2147483648" in conf_text and vis in conf_text,
          "config: %r %r" % (conf, conf_text))
    check((w.shim if have_shim else "/dev/null") in preload, "LD_PRELOAD=%r" % preload)
    w.wait_for(lambda: not w.slices(), what="run slice freed")

    # Whole GPUs: both visible, no shim, no config.
    r = w.cli("run", "--sim", "--gpu", "2", "--", "sh", "-c",
              'echo "$CUDA_VISIBLE_DEVICES|${GPUSLICE_CONFIG:-none}|${LD_PRELOAD:-none}"')
    vis, conf, preload = r.stdout.strip().split("|")
    check(sorted(vis.split(",")) == sorted(uuids) and conf == "none" and preload == "none",
          "whole GPUs env: %r" % r.stdout)

    # Signal forwarding: SIGUSR1 reaches the command, which exits 3. The command
    # blocks SIGUSR1 before it says "up", then takes it with sigtimedwait, so a
    # signal that comes early stays pending. (A Python handler plus time.sleep
    # loses it on a loaded machine: a signal that lands after the interpreter's
    # last check for signals and before the sleep starts runs the C handler,
    # then the sleep runs its full 30 s.)
    p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "200m", "--", "/usr/bin/python3", "-c",
                          "import signal,sys\n"
                          "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                          "print('up', flush=True)\n"
                          "sys.exit(3 if signal.sigtimedwait({signal.SIGUSR1}, 30) else 4)\n"],
                         env=w.env, stdout=subprocess.PIPE, text=True)
    check(p.stdout.readline().strip() == "up", "child did not start")
    p.send_signal(signal.SIGUSR1)
    try:
        rc = p.wait(timeout=15)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        fail("SIGUSR1 not forwarded: the command did not get it within 15 s")
    check(rc == 3, "SIGUSR1 not forwarded: status %r (3: got it; 4: waited 30 s for it)" % rc)
    p = subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "200m", "--", "sleep", "30"],
                         env=w.env)
    w.wait_for(lambda: len(w.slices()) == 1, what="sleep slice")
    p.send_signal(signal.SIGTERM)
    check(p.wait(timeout=15) == 128 + signal.SIGTERM, "SIGTERM: %r" % p.returncode)

    # Refusal: 700m twice fits on 2 GPUs, a third does not; says why, exits 125.
    hold = [subprocess.Popen([w.cli_bin, "run", "--sim", "--gpu", "700m", "--", "sleep", "30"],
                             env=w.env) for _ in range(2)]
    w.wait_for(lambda: len(w.slices()) == 2, what="two 700m slices")
    r = w.cli("run", "--sim", "--gpu", "700m", "--", "true")
    check(r.returncode == 125 and "no single GPU has room for 700m" in r.stderr
          and "300m and" in r.stderr, "refusal: %d %r" % (r.returncode, r.stderr))
    for h in hold:
        h.terminate()
        h.wait()
    print("PASS")
finally:
    w.cleanup()
