/* SPDX-License-Identifier: Apache-2.0 */
/* `gpusliced install-shim`: copy the shim libgpuslice.so from the image to
 * a host path, atomically, so that a DaemonSet's init container needs no
 * shell (the image is FROM scratch: no /bin/sh, no cp). */
#ifndef GS_INSTALL_SHIM_H
#define GS_INSTALL_SHIM_H

/* The shim's place in the image, relative to the directory of the gpusliced
 * binary: /usr/bin/gpusliced -> /usr/lib/gpuslice/libgpuslice.so (the CLI
 * looks there too). In a build tree the shim is ../shim/libgpuslice.so. */
#define INSTALL_SHIM_IMAGE_REL "../lib/gpuslice/libgpuslice.so"
#define INSTALL_SHIM_BUILD_REL "../shim/libgpuslice.so"

/* Run `install-shim [--from PATH] DEST`; argv[0] is "install-shim".
 *
 * Copies PATH (default: INSTALL_SHIM_IMAGE_REL, then INSTALL_SHIM_BUILD_REL,
 * next to this binary; a link given as --from is resolved) to DEST: creates
 * DEST's missing directories (mode 0755), then writes DEST.tmp (never
 * following a link there, mode 0755), fsyncs it, renames it over DEST and
 * fsyncs the directory (gs_file_replace). Programs that have the previous
 * shim mapped keep their copy (a new inode, never a rewrite in place). The
 * source must be an ELF file of at most 64 MiB.
 *
 * Returns the process's exit status: 0 installed (a failed directory sync
 * after the rename is a warning only), 1 failed (stderr names the path and
 * the reason; DEST is left as it was), 2 a usage error. Prints one line on
 * success. Reads nothing but the source and touches nothing but DEST, DEST.tmp
 * and DEST's missing directories. */
int install_shim_main(int argc, char **argv);

#endif /* GS_INSTALL_SHIM_H */
