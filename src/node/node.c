/* SPDX-License-Identifier: Apache-2.0 */
/* The node: its state directory, lock, ledger and inventory. See node.h;
 * the slice lifecycle itself is in node_lifecycle.c. */
#include "node.h"

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "log.h"
#include "macro.h"
#include "node_files.h"

/* Whether the directories above the state directory `path` keep others
 * from replacing it: each owned by root or us, and writable by others only
 * with the sticky bit (/tmp: others cannot rename or remove our entry). */
static int check_ancestors(const char *path, struct gs_error **err)
{
        char buf[NODE_PATH_MAX];
        snprintf(buf, sizeof(buf), "%s", path);
        for (char *slash = strrchr(buf, '/'); slash; slash = strrchr(buf, '/')) {
                *slash = '\0';
                const char *dir = slash == buf ? "/" : buf;
                struct stat st;
                if (stat(dir, &st) < 0)
                        return gs_error_set(err, -errno, "cannot check %s: %s", dir,
                                            strerror(errno));
                bool owner_ok = st.st_uid == 0 || st.st_uid == geteuid();
                bool write_ok = !(st.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_mode & S_ISVTX);
                if (!owner_ok || !write_ok)
                        return gs_error_set(err, -EPERM,
                                            "refusing the state directory %s: %s above it (uid %u, "
                                            "mode %04o) lets another user replace it (expected "
                                            "root's or uid %u's, writable by others only if "
                                            "sticky)",
                                            path, dir, (unsigned)st.st_uid,
                                            (unsigned)(st.st_mode & 07777), (unsigned)geteuid());
                if (slash == buf)
                        break;
        }
        return 0;
}

/* mkdir -p with `mode` for the last component, which must then be a
 * directory of ours that no other user can write to, reached through
 * directories no other user can swap (a shared /tmp: not someone's
 * symlink or 0777 directory). */
static int make_state_dir(const char *path, mode_t mode, struct gs_error **err)
{
        char buf[NODE_PATH_MAX];
        if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
                return gs_error_set(err, -ENAMETOOLONG, "state directory %.64s... is too long",
                                    path);
        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, 0755) < 0 && errno != EEXIST)
                        return gs_error_set(err, -errno, "cannot create %s: %s", buf,
                                            strerror(errno));
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return gs_error_set(err, -errno, "cannot create %s: %s", buf, strerror(errno));
        struct stat st;
        if (lstat(buf, &st) < 0)
                return gs_error_set(err, -errno, "cannot use %s: %s", buf, strerror(errno));
        int r = gs_dir_check_trusted("the state directory", buf, &st, (unsigned)geteuid(), false,
                                     err);
        return r < 0 ? r : check_ancestors(buf, err);
}

static void copy_opt(char *dst, size_t size, const char *src)
{
        snprintf(dst, size, "%s", src ? src : "");
}

static int take_lock(struct node *n, struct gs_error **err)
{
        char path[NODE_PATH_MAX];
        snprintf(path, sizeof(path), "%s/lock", n->state_dir);
        /* A link, FIFO or device planted there is named, not followed
         * (nor taken for another daemon's lock). */
        n->lock_fd = gs_state_open(path, O_RDWR | O_CREAT, 0600, "lock", err);
        if (n->lock_fd < 0)
                return n->lock_fd;
        if (flock(n->lock_fd, LOCK_EX | LOCK_NB) < 0)
                return gs_error_set(err, -EBUSY,
                                    "state directory %s is in use by another gpusliced or "
                                    "plugin (lock %s: %s)",
                                    n->state_dir, path, strerror(errno));
        return 0;
}

static int load_ledger(struct node *n, struct gs_error **err)
{
        int r = gs_ledger_load(&n->ledger, n->ledger_path, err);
        if (r == -ENOENT) {
                gs_log_info("no state file %s yet: starting with an empty ledger", n->ledger_path);
                return 0;
        }
        if (r < 0)
                return gs_error_wrap(err,
                                     "refusing to start: an empty ledger could over-commit GPUs "
                                     "that running slices use (repair or remove %s once no "
                                     "slice process runs)",
                                     n->ledger_path);
        gs_log_info("loaded %zu slice%s from %s", n->ledger.n_slices,
                    n->ledger.n_slices == 1 ? "" : "s", n->ledger_path);
        if (n->ledger.unsummed)
                gs_log_info("%s has no checksum line (an older gpusliced's, or one deleted by a "
                            "repair): loaded on its capacity checks; the next save writes one",
                            n->ledger_path);
        return 0;
}

int node_open(const struct node_config *cfg, struct node **ret, struct gs_error **err)
{
        if (!cfg->state_dir || !*cfg->state_dir)
                return gs_error_set(err, -EINVAL, "no state directory");
        if (strlen(cfg->state_dir) >= NODE_DIR_MAX)
                return gs_error_set(err, -ENAMETOOLONG, "state directory %.64s... is too long",
                                    cfg->state_dir);
        struct node *n = calloc(1, sizeof(*n));
        if (!n)
                return gs_error_set(err, -ENOMEM, "out of memory");
        pthread_mutex_init(&n->lock, NULL);
        n->lock_fd = -1;
        gs_ledger_init(&n->ledger);
        copy_opt(n->state_dir, sizeof(n->state_dir), cfg->state_dir);
        snprintf(n->ledger_path, sizeof(n->ledger_path), "%s/ledger", n->state_dir);
        copy_opt(n->daemon_socket, sizeof(n->daemon_socket), cfg->daemon_socket);
        copy_opt(n->shim_path, sizeof(n->shim_path), cfg->shim_path);
        copy_opt(n->cdi_kind, sizeof(n->cdi_kind), cfg->cdi_kind);
        n->placement = cfg->placement;
        n->generation = 1;
        n->compute_policy = cfg->compute_policy;
        int r = make_state_dir(n->state_dir, geteuid() == 0 ? 0755 : 0700, err);
        if (r >= 0)
                r = take_lock(n, err);
        if (r >= 0)
                r = node_files_init(n, err);
        if (r >= 0)
                r = load_ledger(n, err);
        n->opened_next_id = n->ledger.next_id;
        if (r < 0) {
                node_close(n);
                return r;
        }
        *ret = n;
        return 0;
}

struct node *node_close(struct node *n)
{
        if (!n)
                return NULL;
        if (n->lock_fd >= 0)
                close(n->lock_fd);
        gs_ledger_done(&n->ledger);
        free(n->pods);
        pthread_mutex_destroy(&n->lock);
        free(n);
        return NULL;
}

void node_lock(struct node *n)
{
        pthread_mutex_lock(&n->lock);
}

void node_unlock(struct node *n)
{
        pthread_mutex_unlock(&n->lock);
}

int node_gpu_position_locked(const struct node *n, const char *uuid)
{
        for (unsigned i = 0; i < n->inv.n_gpus; i++)
                if (strcmp(n->inv.gpus[i].uuid, uuid) == 0)
                        return (int)i;
        return -1;
}

bool node_set_inventory_locked(struct node *n, const struct gs_inventory *inv)
{
        bool changed = inv->n_gpus != n->inv.n_gpus;
        struct gs_inventory next = *inv;
        for (unsigned i = 0; i < next.n_gpus; i++) {
                struct gs_gpu *g = &next.gpus[i];
                const struct gs_gpu *old = i < n->inv.n_gpus ? &n->inv.gpus[i] : NULL;
                /* A lost GPU answers no query, not even its UUID: it keeps
                 * the identity it had, only its health changes. */
                if (!g->healthy && old) {
                        *g = *old;
                        g->healthy = false;
                }
                /* Measured once at start; a new reading does not repeat it. */
                if (old && strcmp(old->uuid, g->uuid) == 0 && !g->overhead_measured) {
                        g->context_overhead = old->context_overhead;
                        g->overhead_measured = old->overhead_measured;
                }
                if (!old || strcmp(old->uuid, g->uuid) != 0) {
                        changed = true;
                } else if (old->healthy != g->healthy) {
                        gs_log_warn("GPU %u (%s) is %s", g->index, g->uuid,
                                    g->healthy ? "healthy again" : "UNHEALTHY");
                        changed = true;
                }
        }
        n->inv = next;
        if (changed)
                n->generation++;
        return changed;
}

void node_usage_locked(const struct node *n, struct gs_gpu_usage usage[GS_MAX_GPUS])
{
        gs_placement_usage(&n->inv, &n->ledger, usage);
}

int node_check_ledger_locked(struct node *n, struct gs_error **err)
{
        uint64_t used[GS_MAX_GPUS] = { 0 };
        bool all_healthy = true;
        for (unsigned i = 0; i < n->inv.n_gpus; i++)
                all_healthy = all_healthy && n->inv.gpus[i].healthy;
        for (size_t k = 0; k < n->ledger.n_slices; k++) {
                const struct gs_slice *s = &n->ledger.slices[k];
                for (unsigned g = 0; g < s->n_gpus; g++) {
                        int pos = node_gpu_position_locked(n, s->gpus[g].uuid);
                        /* An unhealthy GPU may have answered no uuid: it
                         * may be that one; kept (warned), refused otherwise. */
                        if (pos < 0 && !all_healthy) {
                                gs_log_warn("slice %s: GPU %s is not in the inventory (an "
                                            "unhealthy GPU there may be it)", s->id,
                                            s->gpus[g].uuid);
                                continue;
                        }
                        if (pos < 0)
                                return gs_error_set(err, -EINVAL,
                                                    "slice %s is on GPU %s, which this node "
                                                    "does not have (%u GPU%s): its share would "
                                                    "drop out of the accounting",
                                                    s->id, s->gpus[g].uuid, n->inv.n_gpus,
                                                    n->inv.n_gpus == 1 ? "" : "s");
                        const struct gs_gpu *gpu = &n->inv.gpus[pos];
                        if (gs_slice_is_whole(s) || s->overcommitted || !gpu->memory_total)
                                continue;
                        used[pos] += s->memory_cap;
                        if (s->memory_cap > gpu->memory_total || used[pos] > gpu->memory_total)
                                return gs_error_set(err, -EINVAL,
                                                    "slice %s: the memory caps on GPU %u (%s) "
                                                    "add up to %" PRIu64 " bytes with it, more "
                                                    "than its %" PRIu64,
                                                    s->id, gpu->index, gpu->uuid, used[pos],
                                                    gpu->memory_total);
                }
        }
        return 0;
}

int node_save_locked(struct node *n, struct gs_error **err)
{
        int r = gs_ledger_save(&n->ledger, n->ledger_path, err);
        if (r > 0) /* saved; only the directory sync failed */
                gs_log_warn("state saved to %s, but its directory could not be synced (%s): "
                            "the change may not survive a power loss",
                            n->ledger_path, strerror(r));
        /* A full disk is the daemon's failure, not the request's: not
         * -ENOSPC, which callers read (and log at info) as "does not fit". */
        if (r == -ENOSPC || r == -EDQUOT)
                r = -EIO;
        n->save_pending = r < 0;
        return r < 0 ? r : 0;
}

bool node_retry_locked(struct node *n)
{
        if (n->save_pending) {
                struct gs_error *err = NULL;
                if (node_save_locked(n, &err) == 0)
                        gs_log_info("the ledger %s is saved again", n->ledger_path);
                gs_error_free(err);
        }
        if (n->repair_pending && !n->save_pending) {
                /* only once the disk takes writes: the ledger first, so that
                 * what is removed is what the saved ledger no longer names */
                n->repair_pending = false;
                int removed = node_files_remove_orphans(n);
                if (!n->repair_pending && removed > 0) /* else: tried again next time */
                        gs_log_info("%d file%s of freed slices removed", removed,
                                    removed == 1 ? "" : "s");
        }
        return n->save_pending || n->repair_pending;
}
