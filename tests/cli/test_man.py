# SPDX-License-Identifier: Apache-2.0
"""The man pages (docs/man/*.1, generated from the option tables): one per
command of `gpuslice __dump-options` and the overview gpuslice.1; each
renders without a warning (groff -man -ww -z) and with `man -l`, and names
every option of its command. Skips (77) without groff (scripts/install-deps
installs groff-base and man-db)."""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../daemon"))
from gstest import check, SKIP  # noqa

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAN = os.path.join(SRC, "docs/man")
CLI = os.path.join(os.environ["GS_BUILD_DIR"], "src/cli/gpuslice")
if not shutil.which("groff"):
    print("SKIP: no groff (apt-get install groff-base)")
    sys.exit(SKIP)

dump = json.loads(subprocess.run([CLI, "__dump-options"], capture_output=True, text=True,
                                 check=True, timeout=20).stdout)
pages = {"gpuslice.1": dump["program"]}
pages.update({"gpuslice-%s.1" % c["name"]: c for c in dump["commands"] if not c["hidden"]})
env = dict(os.environ, MANWIDTH="80", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="")
for page, table in sorted(pages.items()):
    path = os.path.join(MAN, page)
    check(os.path.exists(path), "no man page " + path)
    r = subprocess.run(["groff", "-man", "-ww", "-z", path], capture_output=True, text=True,
                       timeout=20)
    check(r.returncode == 0 and not r.stderr, "groff -ww %s: %r" % (page, r.stderr))
    r = subprocess.run(["groff", "-man", "-Tutf8", "-P-c", "-P-b", "-P-u", path],
                       capture_output=True, text=True, timeout=20)
    text = r.stdout.replace("\u2010", "-").replace("\u2212", "-")
    check(r.returncode == 0, "groff -Tutf8 %s: %r" % (page, r.stderr))
    for o in table["options"]:
        check("--" + o["name"] in text, "%s does not name --%s" % (page, o["name"]))
    if shutil.which("man"):
        r = subprocess.run(["man", "-l", path], capture_output=True, text=True, timeout=20,
                           env=env)
        check(r.returncode == 0 and "NAME" in r.stdout, "man -l %s: %d %r" %
              (page, r.returncode, r.stderr))
print("ok: %d pages" % len(pages))
