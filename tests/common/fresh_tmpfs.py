# SPDX-License-Identifier: Apache-2.0
"""A fresh tmpfs over a directory such as /tmp, in a test's own mount
namespace, that still shows the paths the test runs from.

A checkout may live under /tmp (CI may clone there): a tmpfs mounted over
/tmp would hide the source, its build and ../shared from the test itself.
keep() remembers such a path before anything is mounted (a directory by an
O_PATH descriptor, a symbolic link by its target); mount_tmpfs() mounts the
tmpfs, then puts every kept path under it back: directories bound from
their descriptors (the kernel follows /proc/self/fd/N to the hidden
directory), links made again. Only for a process in a mount namespace of
its own (unshare --mount)."""
import ctypes
import os

MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096

_libc = ctypes.CDLL(None, use_errno=True)
_kept = []   # (path, fd or None, link target or None, read_only)


def _mount(source, target, flags):
    if _libc.mount(source.encode(), target.encode(), None, flags, None) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "mount %s on %s: %s" % (source, target, os.strerror(e)))


def keep(path, read_only=False):
    """Remember path (a directory or a symbolic link; absent: ignored) to
    show again under every later mount_tmpfs() it lies under; a directory
    bound read-only when read_only, else
    writable (whatever the mount it was found on)."""
    path = os.path.abspath(path)
    if os.path.islink(path):
        _kept.append((path, None, os.readlink(path), read_only))
    elif os.path.isdir(path):
        _kept.append((path, os.open(path, os.O_PATH | os.O_DIRECTORY), None, read_only))


def mount_tmpfs(mnt, mode, name):
    """Unmount what is on mnt (lazily), mount a tmpfs (mode, source name)
    there, and show again each kept path under mnt, outer paths first."""
    os.system("umount -l %s 2>/dev/null" % mnt)
    os.system("mount -t tmpfs -o mode=%s %s %s" % (mode, name, mnt))
    if not os.path.ismount(mnt):
        raise OSError("cannot mount a tmpfs on %s" % mnt)
    prefix = mnt.rstrip("/") + "/"
    for path, fd, link, read_only in sorted(_kept, key=lambda k: len(k[0])):
        if not path.startswith(prefix):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if link is not None:
            if not os.path.lexists(path):
                os.symlink(link, path)
            continue
        os.makedirs(path, exist_ok=True)
        _mount("/proc/self/fd/%d" % fd, path, MS_BIND)
        _mount("none", path, MS_REMOUNT | MS_BIND | (MS_RDONLY if read_only else 0))
