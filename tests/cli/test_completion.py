# SPDX-License-Identifier: Apache-2.0
"""The bash completion (packaging/completion/gpuslice.bash, generated from
the option tables) in a real bash, without the bash-completion package:
`gpuslice ru` completes to run, `gpuslice run --gpu-m` to --gpu-memory,
`--policy` to its values, `gpuslice help l` to the commands, `gpuslice up`
and `render` to files, `run ... -- ` to commands; and every command and
every option of every table (`gpuslice __dump-options`) completes from its
prefix."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import check  # noqa

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(SRC, "packaging/completion/gpuslice.bash")
CLI = os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice")
check(os.path.exists(SCRIPT), "no completion script at " + SCRIPT)


def complete(*words, cwd=None):
    """COMPREPLY for the command line `words` (the last one is being typed)."""
    script = ('source "$1"; shift; complete -p gpuslice >/dev/null || exit 3; '
              'COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gpuslice; '
              'printf "%s\\n" "${COMPREPLY[@]}"')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", script, "bash", SCRIPT,
                        "gpuslice"] + list(words), capture_output=True, text=True, timeout=20,
                       cwd=cwd)
    check(r.returncode == 0 and not r.stderr, "completing %r: %d %r" % (words, r.returncode,
                                                                         r.stderr))
    return [w for w in r.stdout.split("\n") if w]


check(complete("ru") == ["run"], "gpuslice ru: %r" % complete("ru"))
check(complete("run", "--gpu-m") == ["--gpu-memory"], "run --gpu-m: %r" % complete("run", "--gpu-m"))
check(complete("run", "--policy", "") == ["share", "cap"], "run --policy: %r" %
      complete("run", "--policy", ""))
check(complete("run", "--gpu", "") == [], "run --gpu takes a free value")
check(set(complete("help", "")) >= {"run", "ls", "up", "top"}, "help: %r" % complete("help", ""))
check(complete("--state-dir", "/tmp", "r") == ["render", "run"] or
      sorted(complete("--state-dir", "/tmp", "r")) == ["render", "run"],
      "after --state-dir DIR: %r" % complete("--state-dir", "/tmp", "r"))
check("--version" in complete("--v"), "gpuslice --v: %r" % complete("--v"))
with tempfile.TemporaryDirectory() as d:
    open(os.path.join(d, "apis.yaml"), "w").close()
    check(complete("up", "ap", cwd=d) == ["apis.yaml"], "up ap: %r" % complete("up", "ap", cwd=d))
    check(complete("render", "--dra", "ap", cwd=d) == ["apis.yaml"], "render files")
check("bash" in complete("run", "--gpu", "300m", "--", "bas"), "run -- bas: a command")
check(complete("run", "--gpu", "300m", "--", "ls", "--gpu-m") == [],
      "after -- the words are the command's, not run's options")

dump = json.loads(subprocess.run([CLI, "__dump-options"], capture_output=True, text=True,
                                 check=True, timeout=20).stdout)
for c in dump["commands"]:
    if c["hidden"]:
        continue
    check(c["name"] in complete(c["name"][:2]), "%s from %r: %r" %
          (c["name"], c["name"][:2], complete(c["name"][:2])))
    for o in c["options"]:
        long = "--" + o["name"]
        got = complete(c["name"], long[:-1])
        check(long in got, "%s %s from %r: %r" % (c["name"], long, long[:-1], got))
print("ok")
