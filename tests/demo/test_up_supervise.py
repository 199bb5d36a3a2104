#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The supervisor of `gpuslice up`, driven without a daemon
(up_supervise_driver): output prefixed with the API's name, environment
handed to each start, restarts with doubling backoff, SIGINT stops all and
every start's slice is released, SIGKILL after the grace period.

usage: test_up_supervise.py DRIVER"""
import os
import re
import signal
import subprocess
import sys
import time


def run(driver, args, seconds):
    p = subprocess.Popen([driver, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(seconds)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    return p.returncode, out, err


def check(cond, what, out="", err=""):
    if not cond:
        print(f"FAIL: {what}\n--- stdout\n{out}\n--- stderr\n{err}", file=sys.stderr)
        sys.exit(1)
    print(f"ok: {what}")


def main():
    driver = sys.argv[1]
    rc, out, err = run(driver, ["crash=echo started $UP_TEST_SLICE; echo oops >&2; exit 3",
                                "steady=echo ready $UP_TEST_SLICE; exec sleep 600"], 4.3)
    check(rc == 0, f"clean stop on SIGINT exits 0 (got {rc})", out, err)
    starts = re.findall(r"^\[crash\] started crash-(\d+)$", out, re.M)
    check(len(starts) >= 3, f"a crashing API is restarted ({len(starts)} starts in 4.3s)", out, err)
    check(len(set(starts)) == len(starts), "each start is a new process with its own slice env")
    check(re.search(r"^\[steady\] ready steady-\d+$", out, re.M), "stdout lines are prefixed",
          out, err)
    check(re.search(r"^\[crash\] oops$", err, re.M), "stderr lines are prefixed", out, err)
    delays = [float(d) for d in re.findall(r"\[crash\] exited with status 3 .*restarting in "
                                            r"([0-9.]+)s", err)]
    check(len(delays) >= 3 and delays[:3] == [0.5, 1.0, 2.0],
          f"backoff doubles from 0.5s (got {delays})", out, err)
    check(all(b == 2 * a for a, b in zip(delays, delays[1:])), "backoff keeps doubling")
    check(re.search(r"\[steady\] stopped \(was killed by signal 15", err), "SIGTERM stops an API",
          out, err)
    m = re.search(r"driver: result 0, (\d+) starts, (\d+) releases", err)
    check(m and m.group(1) == m.group(2), "every start's slice is released", out, err)

    # An API that stayed up long enough starts over at the initial delay.
    rc, out, err = run(driver, ["--reset", "300", "slow=sleep 0.4; exit 1"], 3.5)
    delays = re.findall(r"\[slow\] exited with status 1 .*restarting in ([0-9.]+)s", err)
    check(rc == 0 and len(delays) >= 2 and set(delays) == {"0.5"},
          f"the backoff resets after an API stayed up (delays {delays})", out, err)

    # An API that ignores SIGTERM is killed after the grace period.
    t0 = time.monotonic()
    rc, out, err = run(driver, ["--grace", "700",
                                "stubborn=trap '' TERM; echo up; while :; do sleep 0.1; done"], 1.0)
    took = time.monotonic() - t0
    check(rc == 1, f"an API that needed SIGKILL makes the result 1 (got {rc})", out, err)
    check("grace period over" in err and "signal 9" in err, "SIGKILL after the grace period",
          out, err)
    check(took < 10, f"stopping took {took:.1f}s with a 0.7s grace", out, err)
    # Nothing of the stubborn group is left (its `sleep` children included).
    time.sleep(0.2)
    left = subprocess.run(["pgrep", "-f", "trap '' TERM; echo up"], capture_output=True, text=True)
    check(left.stdout.strip() == "", "nothing of a killed API is left running", left.stdout)

    # A start the daemon refuses for good (no room, a bad request) is not
    # restarted; the other API keeps running until Ctrl-C; the result says so.
    rc, out, err = run(driver, ["refused=echo never", "steady=echo ready; exec sleep 600"], 2.0)
    check(re.search(r"^up: refused: not restarted: its slice could not be made: no room$", err,
                    re.M), "a refused slice is not restarted, and says why", out, err)
    check("[refused] never" not in out and "restarting" not in err,
          "nothing restarts the refused API", out, err)
    check(re.search(r"^\[steady\] ready$", out, re.M) and
          re.search(r"\[steady\] stopped \(was killed by signal 15", err),
          "the other API kept running until SIGINT", out, err)
    check(rc == 4, f"an API given up makes the result 4 (got {rc})", out, err)
    m = re.search(r"driver: result 4, (\d+) starts, (\d+) releases", err)
    check(m and m.group(1) == "2" and m.group(2) == "2", "one start each, each released",
          out, err)

    # A command that cannot be run (exit 127 / 126) is not restarted either;
    # once no API is left, the supervisor returns by itself.
    noexec = os.path.join(os.environ.get("TMPDIR", "/tmp"), "up-noexec-%d" % os.getpid())
    with open(noexec, "w") as f:
        f.write("#!/bin/sh\necho hi\n")
    os.chmod(noexec, 0o644)
    try:
        p = subprocess.Popen([driver, "gone=exec /nonexistent/serve", "noexec=exec " + noexec],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = p.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            check(False, "up kept restarting commands that cannot be run", out, err)
    finally:
        os.unlink(noexec)
    check(p.returncode == 4, f"result 4 when every API was given up (got {p.returncode})",
          out, err)
    check(re.search(r"^up: gone: not restarted: /bin/sh exited with status 127 \(command not "
                    r"found\)$", err, re.M), "exit 127: not found", out, err)
    check(re.search(r"^up: noexec: not restarted: .*status 126 \(command not executable\)$",
                    err, re.M), "exit 126: not executable", out, err)
    check("restarting" not in err and "no API is left running" in err,
          "no restart; the supervisor says it has nothing left", out, err)

    # A failure worth a retry (the daemon unreachable once) is retried.
    rc, out, err = run(driver, ["flaky=echo started; exec sleep 600"], 2.0)
    check(re.search(r"^up: \[flaky\] could not be started \(.*\) after .*restarting in 0.5s",
                    err, re.M) and re.search(r"^\[flaky\] started$", out, re.M) and rc == 0,
          f"a transient failure is retried (rc {rc})", out, err)


if __name__ == "__main__":
    main()
