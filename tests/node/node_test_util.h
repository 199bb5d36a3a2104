/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the node-layer tests: a temporary state directory, a
 * hand-made inventory, a node over them, and small file checks. Header
 * only (static functions), included after <cmocka.h>. */
#ifndef GS_NODE_TEST_UTIL_H
#define GS_NODE_TEST_UTIL_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inventory.h"
#include "node.h"
#include "node_files.h"
#include "quantity.h"
#include "slice_conf_io.h"

/* Helpers are unused in some tests. */
#define T_FN static __attribute__((unused))

#define T_GIB (1ull << 30)
#define T_MIB (1ull << 20)
#define T_GPU_MEM (16 * T_GIB)
#define T_OVERHEAD (256 * T_MIB)

struct t_env {
        char dir[64];        /* the temporary directory (mkdtemp) */
        char state[96];      /* <dir>/state: the node's state directory */
        struct node_config cfg;
        struct node *node;
};

T_FN const char *t_uuid(unsigned i)
{
        static char buf[GS_MAX_GPUS][GS_GPU_UUID_MAX];
        snprintf(buf[i], sizeof(buf[i]), "GPU-00000000-0000-0000-0000-%012u", i + 1);
        return buf[i];
}

/* n healthy 16 GiB GPUs with a 256 MiB context overhead. */
T_FN struct gs_inventory t_inventory(unsigned n)
{
        struct gs_inventory inv = { .n_gpus = n };
        for (unsigned i = 0; i < n; i++) {
                struct gs_gpu *g = &inv.gpus[i];
                g->index = i;
                snprintf(g->uuid, sizeof(g->uuid), "GPU-00000000-0000-0000-0000-%012u", i + 1);
                snprintf(g->name, sizeof(g->name), "Test GPU");
                g->memory_total = T_GPU_MEM;
                g->healthy = true;
                g->context_overhead = T_OVERHEAD;
                g->overhead_measured = true;
        }
        return inv;
}

T_FN int t_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st, (void)flag, (void)ftw;
        remove(path);
        return 0;
}

T_FN void t_rm_rf(const char *dir)
{
        nftw(dir, t_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* Open the node of env (its dir made already) with n_gpus GPUs set. */
T_FN void t_open(struct t_env *e, unsigned n_gpus)
{
        struct gs_error *err = NULL;
        int r = node_open(&e->cfg, &e->node, &err);
        if (r < 0)
                fail_msg("node_open %s: %d %s", e->dir, r, gs_error_msg(err));
        gs_error_free(err);
        struct gs_inventory inv = t_inventory(n_gpus);
        node_lock(e->node);
        node_set_inventory_locked(e->node, &inv);
        node_unlock(e->node);
}

T_FN void t_reopen(struct t_env *e, unsigned n_gpus)
{
        e->node = node_close(e->node);
        t_open(e, n_gpus);
}

/* Envs not freed yet: a failed test jumps past its t_env_free, and
 * t_teardown then removes what it left under /tmp. */
#define T_LIVE_MAX 8
static struct t_env *t_live[T_LIVE_MAX];

/* A fresh state directory (under a fresh /tmp directory, so that the node
 * creates the state directory itself) and a node over it. */
T_FN struct t_env *t_env_new(unsigned n_gpus, const char *shim, const char *sock,
                               const char *cdi)
{
        struct t_env *e = calloc(1, sizeof(*e));
        assert_non_null(e);
        snprintf(e->dir, sizeof(e->dir), "/tmp/gs-nodetest-XXXXXX");
        assert_non_null(mkdtemp(e->dir));
        snprintf(e->state, sizeof(e->state), "%s/state", e->dir);
        e->cfg = (struct node_config){ .state_dir = e->state,
                                       .daemon_socket = sock,
                                       .shim_path = shim,
                                       .cdi_kind = cdi,
                                       .placement = GS_PLACE_BINPACK,
                                       .compute_policy = GS_POLICY_SHARE };
        t_open(e, n_gpus);
        for (size_t i = 0; i < T_LIVE_MAX; i++)
                if (!t_live[i]) {
                        t_live[i] = e;
                        break;
                }
        return e;
}

T_FN void t_env_free(struct t_env *e)
{
        if (!e)
                return;
        for (size_t i = 0; i < T_LIVE_MAX; i++)
                if (t_live[i] == e)
                        t_live[i] = NULL;
        node_close(e->node);
        t_rm_rf(e->dir);
        free(e);
}

/* cmocka teardown of every test: what a failed test left behind. */
T_FN int t_teardown(void **state)
{
        (void)state;
        for (size_t i = 0; i < T_LIVE_MAX; i++)
                t_env_free(t_live[i]);
        return 0;
}

/* Mode bits of path (not following a link), or -1 when it is missing. */
T_FN int t_mode(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return -1;
        return (int)(st.st_mode & 07777);
}

T_FN bool t_is_dir(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

T_FN bool t_exists(const char *path)
{
        struct stat st;
        return lstat(path, &st) == 0;
}

T_FN void t_conf_path(struct t_env *e, const char *id, char *buf, size_t size)
{
        node_conf_path(e->node, id, buf, size);
}

T_FN void t_dir_path(struct t_env *e, const char *id, char *buf, size_t size)
{
        node_slice_dir_path(e->node, id, buf, size);
}

/* Number of entries (not . and ..) in <state>/<sub>. */
T_FN int t_count(struct t_env *e, const char *sub)
{
        char path[NODE_PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", e->cfg.state_dir, sub);
        int n = 0;
        DIR *d = opendir(path);
        if (!d)
                return -1;
        struct dirent *x;
        while ((x = readdir(d)))
                n += strcmp(x->d_name, ".") && strcmp(x->d_name, "..");
        closedir(d);
        return n;
}

/* A local shim request of `milli` for this process. */
T_FN struct node_request t_local(uint32_t milli)
{
        return (struct node_request){ .kind = GS_SLICE_LOCAL,
                                      .milli = milli,
                                      .pid = getpid(),
                                      .uid = getuid(),
                                      .start_time = 12345 };
}

T_FN struct node_request t_kube(uint32_t milli, const char *units)
{
        return (struct node_request){ .kind = GS_SLICE_KUBE, .milli = milli, .units = units };
}

/* Prepare under the lock; fails the test on error. */
T_FN struct gs_slice t_prepare(struct t_env *e, const struct node_request *req)
{
        struct gs_error *err = NULL;
        struct gs_slice s;
        node_lock(e->node);
        int r = node_slice_prepare_locked(e->node, req, &s, &err);
        node_unlock(e->node);
        if (r < 0)
                fail_msg("prepare %um: %d %s", (unsigned)req->milli, r, gs_error_msg(err));
        gs_error_free(err);
        return s;
}

T_FN int t_release(struct t_env *e, const char *id)
{
        node_lock(e->node);
        int r = node_slice_release_locked(e->node, id, "test");
        node_unlock(e->node);
        return r;
}

/* The ledger as saved on disk. */
T_FN size_t t_disk_slices(struct t_env *e, struct gs_ledger *ret)
{
        gs_ledger_init(ret);
        struct gs_error *err = NULL;
        int r = gs_ledger_load(ret, e->node->ledger_path, &err);
        if (r < 0)
                fail_msg("ledger load: %d %s", r, gs_error_msg(err));
        gs_error_free(err);
        return ret->n_slices;
}

/* The config of shim slice s: mode 0444 and what the ledger says. */
T_FN void t_assert_conf(struct t_env *e, const struct gs_slice *s, const char *slice_dir)
{
        char path[NODE_PATH_MAX];
        t_conf_path(e, s->id, path, sizeof(path));
        assert_int_equal(t_mode(path), 0444);
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        int r = gs_slice_conf_load(path, &c, &err);
        if (r < 0)
                fail_msg("%s: %d %s", path, r, gs_error_msg(err));
        assert_int_equal(c.version, GS_SLICE_CONF_VERSION);
        assert_string_equal(c.slice, s->id);
        assert_string_equal(c.gpu_uuid, s->gpus[0].uuid);
        assert_int_equal(c.memory_limit, gs_default_memory_cap(s->milli, T_GPU_MEM));
        assert_int_equal(c.compute_milli, s->milli);
        assert_int_equal(c.policy, GS_POLICY_SHARE);
        assert_int_equal(c.context_overhead, T_OVERHEAD);
        assert_string_equal(c.slice_dir, slice_dir);
        /* A local slice reaches the socket where it is; a container through
         * the mounted directory of the socket. */
        const char *sock = e->cfg.daemon_socket ? e->cfg.daemon_socket : "";
        char in_container[256] = "";
        if (*sock)
                snprintf(in_container, sizeof(in_container), "/run/gpuslice/daemon/%s",
                         strrchr(sock, '/') + 1);
        assert_string_equal(c.daemon_socket, s->kind == GS_SLICE_KUBE ? in_container : sock);
}

/* The env value with this key in edits, or NULL. */
#ifdef GS_NODE_EDITS_H
T_FN const char *t_env_of(const struct node_edits *ed, const char *key)
{
        for (size_t i = 0; i < ed->n_envs; i++)
                if (strcmp(ed->envs[i].key, key) == 0)
                        return ed->envs[i].value;
        return NULL;
}

T_FN const struct node_mount *t_mount_of(const struct node_edits *ed, const char *cpath)
{
        for (size_t i = 0; i < ed->n_mounts; i++)
                if (strcmp(ed->mounts[i].container_path, cpath) == 0)
                        return &ed->mounts[i];
        return NULL;
}
#endif

#endif /* GS_NODE_TEST_UTIL_H */
