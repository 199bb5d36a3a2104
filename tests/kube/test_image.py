# SPDX-License-Identifier: Apache-2.0
"""The OCI image (scripts/build-image, `make image`): built from scratch with
buildah, pulling nothing; its configuration (skopeo inspect) is the
Containerfile's; unpacked by hand from the oci-archive (blobs checked against
their digests, the layer against the config's diff_id) it is a root in which
the programs run under chroot, with every library they link, and where
`gpusliced install-shim` copies the shim atomically or fails naming the path.

Environment: GS_BUILD_DIR, the build to make the image of. Exits 77 (skip)
without buildah or skopeo, or when not root (buildah's storage, chroot)."""
import gzip
import hashlib
import json
import os
import platform
import shutil
import stat
import struct
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
BUILD = os.environ.get("GS_BUILD_DIR", os.path.join(ROOT, "build"))
ARCHIVE = os.path.join(BUILD, "gpuslice-image.tar")
ARCH = {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}
NOBODY = "65534:65534"


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def run(argv, ok=True, **kw):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=240, **kw)
    if ok and p.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(argv), p.returncode, p.stdout,
                                                   p.stderr))
    return p


def containerfile():
    """The LABEL, ENV and ENTRYPOINT lines of the Containerfile."""
    labels, env, entrypoint = {}, [], None
    for line in open(os.path.join(ROOT, "Containerfile")):
        line = line.rstrip("\n")
        if line.startswith("LABEL "):
            k, v = line[len("LABEL "):].split("=", 1)
            labels[k] = v.strip('"')
        elif line.startswith("ENV "):
            env.append(line[len("ENV "):])
        elif line.startswith("ENTRYPOINT "):
            entrypoint = json.loads(line[len("ENTRYPOINT "):])
    return labels, env, entrypoint


def blob(layout, digest):
    algo, hexd = digest.split(":", 1)
    path = os.path.join(layout, "blobs", algo, hexd)
    with open(path, "rb") as f:
        data = f.read()
    assert hashlib.new(algo, data).hexdigest() == hexd, "blob %s: digest mismatch" % digest
    return path, data


def unpack(tmp):
    """Extract the oci-archive's layers in order into tmp/root; returns
    (root, image config)."""
    layout = os.path.join(tmp, "layout")
    with tarfile.open(ARCHIVE) as t:
        t.extractall(layout, **trusted())
    index = json.load(open(os.path.join(layout, "index.json")))
    assert len(index["manifests"]) == 1, index
    m = index["manifests"][0]
    assert m["annotations"]["org.opencontainers.image.ref.name"].startswith("localhost/gpuslice:")
    manifest = json.loads(blob(layout, m["digest"])[1])
    config = json.loads(blob(layout, manifest["config"]["digest"])[1])
    assert len(manifest["layers"]) == len(config["rootfs"]["diff_ids"]) == 1, manifest
    root = os.path.join(tmp, "root")
    os.mkdir(root)
    for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"]):
        assert layer["mediaType"].endswith("tar+gzip") or layer["mediaType"].endswith("tar")
        path, _ = blob(layout, layer["digest"])
        with tarfile.open(path, "r:*") as t:
            names = t.getnames()
            assert not any(os.path.basename(n).startswith(".wh.") for n in names), "whiteouts"
            t.extractall(root, numeric_owner=True, **trusted())
        # The uncompressed layer is what the config's diff_id names.
        opener = gzip.open if layer["mediaType"].endswith("gzip") else open
        with opener(path, "rb") as f:
            raw = f.read()
        assert "sha256:" + hashlib.sha256(raw).hexdigest() == diff_id, "diff_id mismatch"
    return root, config


def trusted():
    # Our own archive: extract it as tar always did (modes, /tmp's sticky bit).
    return {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def interpreter(path):
    """PT_INTERP of an ELF64 little-endian file."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "%s: not ELF64 LE" % path
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from("<IIQQQQ", data,
                                                                 phoff + i * phentsize)
        if p_type == 3:
            return data[p_offset:p_offset + p_filesz].rstrip(b"\0").decode()
    return None


def check_config(config, labels, env, entrypoint):
    info = json.loads(run(["skopeo", "inspect", "oci-archive:" + ARCHIVE]).stdout)
    assert info["Architecture"] == ARCH.get(platform.machine()), info["Architecture"]
    assert info["Os"] == "linux"
    assert info["Labels"] == labels, "labels %s, Containerfile %s" % (info["Labels"], labels)
    assert len(info["Layers"]) == 1, info["Layers"]
    c = config["config"]
    assert c["Entrypoint"] == entrypoint == ["/usr/bin/gpusliced"], c["Entrypoint"]
    assert c.get("Env") == env, c.get("Env")
    assert config["architecture"] == info["Architecture"]


def check_root(root):
    for f in ("usr/bin/gpusliced", "usr/bin/gpuslice", "usr/bin/gpuslice-kubelet-plugin",
              "usr/bin/gpuslice-extender", "usr/lib/gpuslice/libgpuslice.so"):
        st = os.stat(os.path.join(root, f))
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755, f
        assert st.st_uid == 0 and st.st_gid == 0, f
    assert stat.S_IMODE(os.stat(os.path.join(root, "tmp")).st_mode) == 0o1777
    everything = [os.path.join(d, n) for d, _, ns in os.walk(root) for n in ns]
    nv = [p for p in everything if "libnvidia-ml" in p or "libcuda.so" in p]
    assert not nv, "NVML/CUDA must come from the NVIDIA runtime, not the image: %s" % nv
    # The image's loader (the programs' PT_INTERP) resolves every library of
    # every program in the image, and of the shim.
    interp = interpreter(os.path.join(root, "usr/bin/gpusliced"))
    assert interp and os.path.exists(os.path.join(root, interp.lstrip("/"))), interp
    for f in ("/usr/bin/gpusliced", "/usr/bin/gpuslice", "/usr/bin/gpuslice-kubelet-plugin",
              "/usr/bin/gpuslice-extender", "/usr/lib/gpuslice/libgpuslice.so"):
        assert interpreter(os.path.join(root, f.lstrip("/"))) in (interp, None), f
        out = run(["chroot", root, interp, "--list", f]).stdout
        assert "not found" not in out, "%s in the image:\n%s" % (f, out)


def check_programs(root, version):
    p = run(["chroot", root, "/usr/bin/gpusliced", "--version"])
    assert p.stdout.strip() == "gpusliced " + version, p.stdout
    p = run(["chroot", root, "/usr/bin/gpuslice", "--version"])
    assert p.stdout.startswith("gpuslice "), p.stdout
    assert "Usage" in run(["chroot", root, "/usr/bin/gpuslice", "--help"]).stdout
    assert "Usage" in run(["chroot", root, "/usr/bin/gpusliced", "--help"]).stdout
    assert "usage" in run(["chroot", root, "/usr/bin/gpuslice-kubelet-plugin", "--help"]).stdout
    p = run(["chroot", root, "/usr/bin/gpuslice-extender", "--version"])
    assert p.stdout.strip() == "gpuslice-extender " + version, p.stdout


def check_install_shim(root):
    shim = open(os.path.join(root, "usr/lib/gpuslice/libgpuslice.so"), "rb").read()
    dest = os.path.join(root, "tmp/x/lib/libgpuslice.so")
    # Default source (the image's shim), missing directories created.
    p = run(["chroot", root, "/usr/bin/gpusliced", "install-shim", "/tmp/x/lib/libgpuslice.so"])
    assert "/tmp/x/lib/libgpuslice.so" in p.stdout, p.stdout
    st = os.lstat(dest)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
    assert open(dest, "rb").read() == shim, "the installed shim differs from the image's"
    for d in ("tmp/x", "tmp/x/lib"):
        assert stat.S_IMODE(os.stat(os.path.join(root, d)).st_mode) == 0o755, d
    assert os.listdir(os.path.dirname(dest)) == ["libgpuslice.so"], "a temp file was left"
    # Again: replaced by rename (a new inode; a mapped copy is never rewritten).
    run(["chroot", root, "/usr/bin/gpusliced", "install-shim", "--from",
         "/usr/lib/gpuslice/libgpuslice.so", "/tmp/x/lib/libgpuslice.so"])
    assert os.lstat(dest).st_ino != st.st_ino, "replaced in place, not renamed"
    assert open(dest, "rb").read() == shim

    def fails(argv, *needles, user=None):
        pre = ["chroot"] + (["--userspec=" + user] if user else []) + [root]
        p = run(pre + ["/usr/bin/gpusliced", "install-shim"] + argv, ok=False)
        assert p.returncode == 1, "%s: exit %d, expected 1" % (argv, p.returncode)
        for n in needles:
            assert n in p.stderr, "%s: %r does not name %r" % (argv, p.stderr, n)

    # Unwritable places: the message names the path and the reason.
    fails(["/usr/lib/gpuslice/new/libgpuslice.so"], "/usr/lib/gpuslice/new",
          "Permission denied", user=NOBODY)
    fails(["/usr/lib/gpuslice/libgpuslice.so"], "/usr/lib/gpuslice/libgpuslice.so.tmp",
          "Permission denied", user=NOBODY)
    fails(["/usr/bin/gpusliced/lib/libgpuslice.so"], "/usr/bin/gpusliced", "not a directory")
    fails(["/tmp/x/lib"], "/tmp/x/lib is a directory")
    fails(["--from", "/nonexistent.so", "/tmp/y.so"], "/nonexistent.so",
          "No such file or directory")
    fails(["--from", "/tmp", "/tmp/y.so"], "/tmp")
    assert open(os.path.join(root, "usr/lib/gpuslice/libgpuslice.so"), "rb").read() == shim
    assert not os.path.exists(os.path.join(root, "tmp/y.so"))


def main():
    for tool in ("buildah", "skopeo"):
        if not shutil.which(tool):
            skip("%s not installed (scripts/install-deps installs it)" % tool)
    if os.geteuid() != 0:
        skip("needs root (buildah's vfs storage, chroot)")
    daemon = os.path.join(BUILD, "src/daemon/gpusliced")
    if "libasan" in run(["ldd", daemon], ok=False).stdout:
        # Sanitizer runtimes need /proc, which a bare chroot of the image
        # lacks; the image users run is the normal build's (tested there).
        skip("a sanitizer build: the image test runs on the normal build")
    labels, env, entrypoint = containerfile()
    with tempfile.TemporaryDirectory(prefix="gs-image-") as tmp:
        os.environ["TMPDIR"] = tmp  # skopeo unpacks the archive there
        p = run([os.path.join(ROOT, "scripts/build-image"), BUILD])
        print(p.stdout.strip())
        root, config = unpack(tmp)
        check_config(config, labels, env, entrypoint)
        check_root(root)
        check_programs(root, labels["org.opencontainers.image.version"])
        check_install_shim(root)
    print("PASS image: %s (%d bytes)" % (ARCHIVE, os.path.getsize(ARCHIVE)))


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, KeyError, OSError, subprocess.SubprocessError) as e:
        print("FAIL:", e)
        sys.exit(1)
