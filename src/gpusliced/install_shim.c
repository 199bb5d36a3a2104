/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced install-shim: the shim from the image to a host path, in one
 * atomic replace. See install_shim.h. */
#include "install_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "error.h"
#include "macro.h"

/* Where the image puts the shim, for when /proc is not mounted (a plain
 * chroot) and this binary cannot find itself. */
#define INSTALL_SHIM_IMAGE_PATH "/usr/lib/gpuslice/libgpuslice.so"
/* The shim is well under 1 MiB; a sanitizer build is bigger. */
#define INSTALL_SHIM_MAX (64u << 20)

static const char usage_text[] =
        "Usage: gpusliced install-shim [--from PATH] DEST\n"
        "Copy the shim libgpuslice.so to DEST atomically (DEST.tmp, fsync, rename,\n"
        "fsync of the directory), mode 0755, creating DEST's directories (0755).\n\n"
        "  --from PATH   the shim to copy (default: ../lib/gpuslice/libgpuslice.so\n"
        "                next to this binary, i.e. " INSTALL_SHIM_IMAGE_PATH "\n"
        "                in the image)\n"
        "  -h, --help    this text\n";

/* The default source: next to this binary (image, then build tree), else
 * the image's absolute path. 0 with the path in buf, or -ENOENT with the
 * places looked at in `looked`. */
static int find_default_source(char *buf, size_t size, char *looked, size_t looked_size)
{
        static const char *const rels[] = { INSTALL_SHIM_IMAGE_REL, INSTALL_SHIM_BUILD_REL };
        char exe[PATH_MAX];
        size_t used = 0;

        looked[0] = '\0';
        ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (n > 0) {
                exe[n] = '\0';
                const char *dir = dirname(exe);
                for (size_t i = 0; i < GS_ARRAY_SIZE(rels); i++) {
                        char cand[PATH_MAX + 64];
                        snprintf(cand, sizeof(cand), "%s/%s", dir, rels[i]);
                        if (access(cand, R_OK) == 0) {
                                snprintf(buf, size, "%s", cand);
                                return 0;
                        }
                        if (used < looked_size)
                                used += (size_t)snprintf(looked + used, looked_size - used,
                                                         "%s, ", cand);
                }
        }
        if (access(INSTALL_SHIM_IMAGE_PATH, R_OK) == 0) {
                snprintf(buf, size, "%s", INSTALL_SHIM_IMAGE_PATH);
                return 0;
        }
        if (used < looked_size)
                snprintf(looked + used, looked_size - used, "%s", INSTALL_SHIM_IMAGE_PATH);
        return -ENOENT;
}

/* Read the shim at `path` (a link is resolved) into *buf and *len; it must be
 * an ELF file. */
static int read_source(const char *path, char **buf, size_t *len, struct gs_error **err)
{
        char real[PATH_MAX];
        if (!realpath(path, real)) {
                int e = errno;
                return gs_error_set(err, -e, "cannot read the shim %s: %s", path, strerror(e));
        }
        int r = gs_file_read(real, INSTALL_SHIM_MAX, buf, len, err);
        if (r == -ENOENT)
                return gs_error_set(err, r, "cannot read the shim %s: %s", path, strerror(-r));
        if (r < 0)
                return gs_error_wrap(err, "the shim %s", path);
        if (*len < 4 || memcmp(*buf, "\177ELF", 4) != 0) {
                free(*buf);
                *buf = NULL;
                return gs_error_set(err, -EINVAL, "the shim %s is not an ELF shared object",
                                    path);
        }
        return 0;
}

/* fsync the directory `dir`, best effort: a created directory's entry. */
static void sync_dir(const char *dir)
{
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd >= 0)
                (void)fsync(fd);
}

/* mkdir -p of DEST's directory, each new one 0755 (umask is 022 here) and
 * its entry synced in its parent. */
static int make_parent_dirs(const char *dest, struct gs_error **err)
{
        char dir[PATH_MAX];
        if (snprintf(dir, sizeof(dir), "%s", dest) >= (int)sizeof(dir))
                return gs_error_set(err, -ENAMETOOLONG, "%s: path too long", dest);
        char *slash = strrchr(dir, '/');
        if (!slash)
                return 0; /* the current directory */
        if (slash == dir)
                return 0; /* the root */
        *slash = '\0';
        for (char *p = dir + 1;; p++) {
                if (*p != '/' && *p != '\0')
                        continue;
                bool last = *p == '\0';
                *p = '\0';
                struct stat st;
                if (mkdir(dir, 0755) == 0) {
                        char parent[PATH_MAX];
                        snprintf(parent, sizeof(parent), "%s", dir);
                        sync_dir(dirname(parent));
                } else if (errno != EEXIST) {
                        int e = errno;
                        return gs_error_set(err, -e, "cannot create the directory %s: %s", dir,
                                            strerror(e));
                } else if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        return gs_error_set(err, -ENOTDIR, "cannot create the directory %s: "
                                            "it exists and is not a directory", dir);
                }
                if (last)
                        break;
                *p = '/';
        }
        return 0;
}

static int install(const char *src, const char *dest)
{
        _cleanup_error_ struct gs_error *err = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        struct stat st;

        if (dest[strlen(dest) - 1] == '/' || (stat(dest, &st) == 0 && S_ISDIR(st.st_mode))) {
                fprintf(stderr, "gpusliced install-shim: %s is a directory; DEST is the file's "
                                "path, e.g. %s%slibgpuslice.so\n", dest, dest,
                        dest[strlen(dest) - 1] == '/' ? "" : "/");
                return 1;
        }
        if (read_source(src, &buf, &len, &err) < 0 || make_parent_dirs(dest, &err) < 0) {
                fprintf(stderr, "gpusliced install-shim: cannot install the shim at %s: %s\n",
                        dest, gs_error_msg(err));
                return 1;
        }
        int r = gs_file_replace(dest, buf, len, 0755, &err);
        if (r < 0) {
                fprintf(stderr, "gpusliced install-shim: cannot install the shim at %s: %s\n",
                        dest, gs_error_msg(err));
                return 1;
        }
        if (r > 0)
                fprintf(stderr, "gpusliced install-shim: warning: %s is installed but its "
                                "directory could not be synced (%s): it may not survive a power "
                                "loss\n", dest, strerror(r));
        printf("gpusliced install-shim: installed %s (%zu bytes, from %s)\n", dest, len, src);
        return 0;
}

int install_shim_main(int argc, char **argv)
{
        static const struct option opts[] = {
                { "from", required_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *from = NULL;
        int c;

        /* Only the directories we create; the shim's own mode is set
         * explicitly by gs_file_replace. */
        umask(022);
        optind = 1;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                switch (c) {
                case 'f':
                        if (!*optarg)
                                return fputs("gpusliced install-shim: --from: empty path\n",
                                             stderr), 2;
                        from = optarg;
                        break;
                case 'h':
                        fputs(usage_text, stdout);
                        return 0;
                default:
                        fputs(usage_text, stderr);
                        return 2;
                }
        }
        if (argc - optind != 1 || !*argv[optind]) {
                fprintf(stderr, "gpusliced install-shim: %s\n%s",
                        argc - optind > 1 ? "expected one DEST" : "DEST is missing", usage_text);
                return 2;
        }
        const char *dest = argv[optind];
        char src[PATH_MAX + 64];
        if (from) {
                snprintf(src, sizeof(src), "%s", from);
        } else {
                char looked[3 * PATH_MAX];
                if (find_default_source(src, sizeof(src), looked, sizeof(looked)) < 0) {
                        fprintf(stderr, "gpusliced install-shim: cannot install the shim at %s: "
                                        "no libgpuslice.so found (looked at %s); pass --from "
                                        "PATH\n", dest, looked);
                        return 1;
                }
        }
        return install(src, dest);
}
