# SPDX-License-Identifier: Apache-2.0
"""The CLI's option tables (src/cli/cli_opts.h): for every command that
`gpuslice __dump-options` lists, `gpuslice help CMD`, `CMD --help` and
`CMD -h` print the same help (exit 0), which names every option of its
table; an unknown option, an ambiguous abbreviation, a missing argument and
an argument given to an option that takes none each exit 2 with a message
naming the option; `gpuslice help` is `gpuslice --help` and lists every
command; the read commands (ls, top, events) declare JSON and have --json.
Needs no daemon (every case fails before one is asked)."""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import check, fail  # noqa

CLI = os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice")
# No daemon may be reached, nor started, by mistake.
ENV = dict(os.environ, GPUSLICE_SOCKET="/nonexistent/gs.sock", GPUSLICE_STATE_DIR="/nonexistent/st")


def cli(*args):
    return subprocess.run([CLI] + list(args), capture_output=True, text=True, timeout=20, env=ENV)


r = cli("__dump-options")
check(r.returncode == 0, "__dump-options: %d %s" % (r.returncode, r.stderr))
dump = json.loads(r.stdout)
cmds = [c for c in dump["commands"] if not c["hidden"]]
check(len(cmds) >= 2, "commands: %r" % [c["name"] for c in cmds])

general = cli("help")
check(general.returncode == 0 and general.stdout == cli("--help").stdout, "help != --help")
listed = general.stdout.split("Commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
listed = [line.split()[0] for line in listed if line.strip()]
check(sorted(listed) == sorted([c["name"] for c in cmds] + ["help"]),
      "gpuslice help lists %r, the tables %r: every command has a table" %
      (listed, [c["name"] for c in cmds]))
r = cli("help", "no-such-command")
check(r.returncode == 2 and "no-such-command" in r.stderr, "help of an unknown command: %r" % (r,))

for c in cmds:
    name = c["name"]
    h = cli("help", name)
    check(h.returncode == 0 and h.stdout.startswith("Usage: gpuslice %s " % name),
          "help %s: %d %r" % (name, h.returncode, h.stdout[:200]))
    for spelling in ("--help", "-h"):
        r = cli(name, spelling)
        check(r.returncode == 0 and r.stdout == h.stdout, "%s %s differs from help %s" %
              (name, spelling, name))
    for o in c["options"]:
        left = "--" + o["name"] + (" " + o["arg"] if o["arg"] else "")
        check(left in h.stdout, "help %s lacks %s" % (name, left))
        if o["letter"]:
            check("-%s, --%s" % (o["letter"], o["name"]) in h.stdout, "help %s lacks -%s" %
                  (name, o["letter"]))
        if o["name"] == "help":
            continue
        if o["arg"]:
            r = cli(name, "--" + o["name"])
            check(r.returncode == 2 and "'--%s' needs an argument (%s)" % (o["name"], o["arg"])
                  in r.stderr, "%s --%s without its argument: %d %r" %
                  (name, o["name"], r.returncode, r.stderr))
        else:
            r = cli(name, "--%s=1" % o["name"])
            check(r.returncode == 2 and "'--%s' takes no argument" % o["name"] in r.stderr,
                  "%s --%s=1: %d %r" % (name, o["name"], r.returncode, r.stderr))
    r = cli(name, "--no-such-option")
    check(r.returncode == 2 and "unknown option '--no-such-option'" in r.stderr
          and "Usage: gpuslice %s" % name in r.stderr,
          "%s --no-such-option: %d %r" % (name, r.returncode, r.stderr))
    r = cli(name, "-Z")
    check(r.returncode == 2 and "unknown option '-Z'" in r.stderr, "%s -Z: %r" % (name, r.stderr))

# The read commands declare their JSON (CLI_CMD_JSON) and have --json.
json_cmds = {c["name"] for c in cmds if c["json"]}
check({"ls", "top", "events"} <= json_cmds, "read commands without CLI_CMD_JSON: %r" % json_cmds)
for c in cmds:
    if c["json"]:
        check("json" in [o["name"] for o in c["options"]], "%s declares JSON but has no --json"
              % c["name"])

# An abbreviation that fits two options names both.
run = [c for c in cmds if c["name"] == "run"]
if run:
    r = cli("run", "--gp", "300m", "--", "true")
    check(r.returncode == 2 and "'--gp' is ambiguous: --gpu, --gpu-memory" in r.stderr,
          "run --gp: %r" % r.stderr)
    r = cli("run", "--gpu-m", "1Gi", "--gpu", "2", "--", "true")
    check(r.returncode == 2 and "--gpu-memory applies to slices" in r.stderr,
          "run --gpu-m (an abbreviation) is --gpu-memory: %r" % r.stderr)
print("ok: %d commands" % len(cmds))
