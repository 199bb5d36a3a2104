/* SPDX-License-Identifier: Apache-2.0 */
/* The one writer of a slice's files. See node_files.h for the layout. */
#include "node_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gpuslice/arbiter_proto.h>

#include "atomic_file.h"
#include "log.h"
#include "macro.h"
#include "node.h"
#include "node_edits.h"
#include "slice_conf_io.h"

#define CONF_SUFFIX ".conf"

void node_conf_path(const struct node *n, const char *id, char *buf, size_t size)
{
        snprintf(buf, size, "%s/conf/%s" CONF_SUFFIX, n->state_dir, id);
}

void node_slice_dir_path(const struct node *n, const char *id, char *buf, size_t size)
{
        snprintf(buf, size, "%s/slices/%s", n->state_dir, id);
}

void node_page_dir_path(const struct node *n, const char *id, char *buf, size_t size)
{
        snprintf(buf, size, "%s/pages/%s", n->state_dir, id);
}

void node_preload_path(const struct node *n, char *buf, size_t size)
{
        snprintf(buf, size, "%s/ld.so.preload", n->state_dir);
}

/* Write <state>/ld.so.preload naming `container_shim`. */
static int write_preload(struct node *n, const char *container_shim, struct gs_error **err)
{
        char path[NODE_PATH_MAX], line[GS_PATH_MAX + 2];
        node_preload_path(n, path, sizeof(path));
        int len = snprintf(line, sizeof(line), "%s\n", container_shim);
        if (len < 0 || (size_t)len >= sizeof(line))
                return gs_error_set(err, -ENAMETOOLONG, "shim path too long");
        int r = gs_file_replace(path, line, (size_t)len, NODE_PRELOAD_MODE, err);
        return r < 0 ? r : 0;
}

int node_files_init(struct node *n, struct gs_error **err)
{
        static const char *const subs[] = { "conf", "slices", "pages" };
        for (size_t i = 0; i < GS_ARRAY_SIZE(subs); i++) {
                char path[NODE_PATH_MAX];
                snprintf(path, sizeof(path), "%s/%s", n->state_dir, subs[i]);
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        return gs_error_set(err, -errno, "cannot create %s: %s", path,
                                            strerror(errno));
                /* Never through a link: a `conf` planted as a symlink
                 * would have root write slice configs where it points. */
                struct stat st;
                if (lstat(path, &st) < 0)
                        return gs_error_set(err, -errno, "cannot use %s: %s", path,
                                            strerror(errno));
                int r = gs_dir_check_trusted("the state directory's", path, &st,
                                             (unsigned)geteuid(), false, err);
                if (r < 0)
                        return r;
        }
        /* Every front-end that mounts the shim into containers (the device
         * plugin, the DRA driver) mounts this file with it. */
        return n->shim_path[0] ? write_preload(n, NODE_CONTAINER_SHIM, err) : 0;
}

/* The config a shim slice's processes read. */
static int slice_conf_of(const struct node *n, const struct gs_slice *s,
                         struct gs_slice_conf *ret, struct gs_error **err)
{
        struct gs_slice_conf c = { .version = GS_SLICE_CONF_VERSION,
                                   .memory_limit = s->memory_cap,
                                   .compute_milli = s->milli,
                                   .policy = s->policy };
        snprintf(c.slice, sizeof(c.slice), "%s", s->id);
        snprintf(c.gpu_uuid, sizeof(c.gpu_uuid), "%s", s->gpus[0].uuid);
        /* A container sees its slice directory and the daemon's socket
         * where they are mounted. */
        if (gs_slice_in_container(s)) {
                snprintf(c.slice_dir, sizeof(c.slice_dir), "%s", NODE_CONTAINER_SLICE_DIR);
                node_container_socket_path(n, c.daemon_socket, sizeof(c.daemon_socket));
                snprintf(c.lease_page, sizeof(c.lease_page), "%s/%s", NODE_CONTAINER_LEASE_DIR,
                         GS_ARB_PAGE_FILE);
        } else {
                node_slice_dir_path(n, s->id, c.slice_dir, sizeof(c.slice_dir));
                snprintf(c.daemon_socket, sizeof(c.daemon_socket), "%s", n->daemon_socket);
                char dir[NODE_PATH_MAX];
                node_page_dir_path(n, s->id, dir, sizeof(dir));
                snprintf(c.lease_page, sizeof(c.lease_page), "%s/%s", dir, GS_ARB_PAGE_FILE);
        }
        /* Without a daemon there are no leases, and so no page to name. */
        if (!c.daemon_socket[0])
                c.lease_page[0] = '\0';
        int pos = node_gpu_position_locked(n, s->gpus[0].uuid);
        if (pos >= 0)
                c.context_overhead = n->inv.gpus[pos].context_overhead;
        if (c.memory_limit == 0)
                return gs_error_set(err, -EINVAL, "slice %s: no memory cap", s->id);
        *ret = c;
        return 0;
}

/* The slice's page directory, <state>/pages/<id>: the daemon's, 0755, so
 * that the lease page in it can be read by the slice's processes but not
 * replaced by them (the slice directory is theirs). Never through a link. */
static int write_page_dir(const struct node *n, const struct gs_slice *s, struct gs_error **err)
{
        char dir[NODE_PATH_MAX];
        node_page_dir_path(n, s->id, dir, sizeof(dir));
        if (mkdir(dir, NODE_PAGE_DIR_MODE) < 0 && errno != EEXIST)
                return gs_error_set(err, errno == ENOSPC || errno == EDQUOT ? -EIO : -errno,
                                    "cannot create page directory %s: %s", dir, strerror(errno));
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0)
                return gs_error_set(err, -errno, "cannot open page directory %s: %s", dir,
                                    strerror(errno));
        if (st.st_uid != geteuid())
                return gs_error_set(err, -EPERM, "page directory %s is owned by uid %u, not by "
                                    "the daemon's user", dir, (unsigned)st.st_uid);
        if ((st.st_mode & 07777) != NODE_PAGE_DIR_MODE && fchmod(fd, NODE_PAGE_DIR_MODE) < 0)
                return gs_error_set(err, -errno, "cannot chmod %s: %s", dir, strerror(errno));
        return 0;
}

static int write_dir(const struct node *n, const struct gs_slice *s, struct gs_error **err)
{
        char dir[NODE_PATH_MAX];
        node_slice_dir_path(n, s->id, dir, sizeof(dir));
        mode_t mode = gs_slice_in_container(s) ? NODE_KUBE_DIR_MODE : NODE_LOCAL_DIR_MODE;
        if (mkdir(dir, mode) < 0 && errno != EEXIST)
                return gs_error_set(err, errno == ENOSPC || errno == EDQUOT ? -EIO : -errno,
                                    "cannot create slice directory %s: %s", dir,
                                    strerror(errno));
        /* Opened without following a link: the directory is the tenant's,
         * a link in its place must not make us chmod or chown elsewhere. */
        _cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return gs_error_set(err, -errno, "cannot open slice directory %s: %s", dir,
                                    strerror(errno));
        if (fchmod(fd, mode) < 0)
                return gs_error_set(err, -errno, "cannot chmod %s: %s", dir, strerror(errno));
        if (s->kind == GS_SLICE_LOCAL && geteuid() == 0 && s->uid != 0 &&
            fchown(fd, s->uid, (gid_t)-1) < 0)
                return gs_error_set(err, -errno, "cannot hand %s to uid %u: %s", dir,
                                    (unsigned)s->uid, strerror(errno));
        return 0;
}

int node_files_write_slice(struct node *n, const struct gs_slice *s, struct gs_error **err)
{
        int r = write_dir(n, s, err);
        if (r >= 0)
                r = write_page_dir(n, s, err);
        if (r < 0)
                return r;
        struct gs_slice_conf c;
        if ((r = slice_conf_of(n, s, &c, err)) < 0)
                return r;
        char text[GS_SLICE_CONF_MAX_BYTES + 1], path[NODE_PATH_MAX];
        int len = gs_slice_conf_format(&c, text, sizeof(text), err);
        if (len < 0)
                return gs_error_wrap(err, "slice %s config", s->id), len;
        node_conf_path(n, s->id, path, sizeof(path));
        r = gs_file_replace(path, text, (size_t)len, NODE_CONF_MODE, err);
        if (r > 0) {
                gs_log_warn("%s written, but its directory could not be synced (%s)", path,
                            strerror(r));
                r = 0;
        }
        /* A full disk: the daemon's failure, not "does not fit" (-ENOSPC). */
        return r == -ENOSPC || r == -EDQUOT ? -EIO : r;
}

bool node_files_slice_ok(struct node *n, const struct gs_slice *s)
{
        char path[NODE_PATH_MAX];
        struct stat st;
        node_slice_dir_path(n, s->id, path, sizeof(path));
        if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode))
                return false;
        node_page_dir_path(n, s->id, path, sizeof(path));
        if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
            (st.st_mode & 07777) != NODE_PAGE_DIR_MODE)
                return false;
        struct gs_slice_conf want, have;
        node_conf_path(n, s->id, path, sizeof(path));
        /* Read back as a state file: a link, FIFO or device there is not
         * followed or blocked on but taken as stale (and so replaced). */
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        if (slice_conf_of(n, s, &want, NULL) < 0 ||
            gs_file_read(path, GS_SLICE_CONF_MAX_BYTES, &text, &len, NULL) < 0 ||
            gs_slice_conf_parse(text, len, &have, NULL) < 0)
                return false;
        return want.version == have.version && strcmp(want.slice, have.slice) == 0 &&
               strcmp(want.gpu_uuid, have.gpu_uuid) == 0 &&
               want.memory_limit == have.memory_limit &&
               want.compute_milli == have.compute_milli && want.policy == have.policy &&
               want.context_overhead == have.context_overhead &&
               strcmp(want.slice_dir, have.slice_dir) == 0 &&
               strcmp(want.daemon_socket, have.daemon_socket) == 0 &&
               strcmp(want.lease_page, have.lease_page) == 0;
}

/* Remove the files in dir (one level: the shim makes no subdirectories),
 * then dir itself. 0, or -1 when dir is still there. */
static int remove_dir(const char *dir)
{
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) {
                DIR *dh = fdopendir(fd);
                if (!dh) {
                        close(fd);
                } else {
                        struct dirent *e;
                        while ((e = readdir(dh)))
                                if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
                                        unlinkat(dirfd(dh), e->d_name, 0);
                        closedir(dh);
                }
        }
        if (rmdir(dir) < 0 && errno != ENOENT) {
                gs_log_warn("cannot remove %s: %m", dir);
                return -1;
        }
        return 0;
}

int node_files_remove_slice(struct node *n, const char *id)
{
        char path[NODE_PATH_MAX];
        int left = 0;
        node_conf_path(n, id, path, sizeof(path));
        if (unlink(path) < 0 && errno != ENOENT) {
                gs_log_warn("cannot remove %s: %m", path);
                left = -1;
        }
        node_slice_dir_path(n, id, path, sizeof(path));
        left |= remove_dir(path);
        node_page_dir_path(n, id, path, sizeof(path));
        left |= remove_dir(path);
        return left;
}

/* Remove the entries of <state>/<sub> that name no slice of the ledger:
 * in conf/ "<id>.conf" (and leftover temp files), in slices/ "<id>". */
static int remove_unrecorded(struct node *n, const char *sub, bool conf)
{
        char dir[NODE_PATH_MAX];
        snprintf(dir, sizeof(dir), "%s/%s", n->state_dir, sub);
        DIR *dh = opendir(dir);
        if (!dh)
                return 0;
        int removed = 0;
        struct dirent *e;
        while ((e = readdir(dh))) {
                if (e->d_name[0] == '.')
                        continue;
                char id[GS_SLICE_ID_MAX + 1];
                size_t len = strlen(e->d_name);
                size_t suffix = conf ? strlen(CONF_SUFFIX) : 0;
                bool named = len > suffix && len - suffix <= GS_SLICE_ID_MAX &&
                             (!conf || strcmp(e->d_name + len - suffix, CONF_SUFFIX) == 0);
                if (named) {
                        memcpy(id, e->d_name, len - suffix);
                        id[len - suffix] = '\0';
                        named = gs_ledger_find(&n->ledger, id) != NULL;
                }
                if (named)
                        continue;
                char path[NODE_PATH_MAX + 256];
                snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
                gs_log_info("removing %s: no slice of the ledger owns it", path);
                /* Whatever it is (a file, a link, a directory): never
                 * followed, and counted only once it is gone. */
                struct stat st;
                if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
                        remove_dir(path);
                else if (unlink(path) < 0)
                        gs_log_warn("cannot remove %s: %m", path);
                if (lstat(path, &st) < 0 && errno == ENOENT)
                        removed++;
                else
                        n->repair_pending = true; /* tried again by node_retry_locked */
        }
        closedir(dh);
        return removed;
}

int node_files_remove_orphans(struct node *n)
{
        return remove_unrecorded(n, "conf", true) + remove_unrecorded(n, "slices", false) +
               remove_unrecorded(n, "pages", false);
}
