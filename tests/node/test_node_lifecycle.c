/* SPDX-License-Identifier: Apache-2.0 */
/* Node layer: a slice's lifecycle through gs_node on a temporary state
 * directory. Covers node_open's layout and lock, local and Kubernetes shim
 * slices (ledger in memory and on disk, config file and slice directory
 * with their modes and content, removal on release), container edits,
 * the whole-GPU backend, refusals (-ENOSPC naming every GPU's free share,
 * nothing recorded or written), ids never reused across releases and
 * restarts, and the slice_removed observer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "node_edits.h"
#include "node_test_util.h"

#define T_SHIM "/opt/gpuslice/lib/libgpuslice.so"
#define T_SOCK "/run/gpuslice/test.sock"
#define T_CDI "nvidia.com/gpu"

static void open_layout(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, NULL, NULL, NULL);
        char path[NODE_PATH_MAX];
        assert_true(t_is_dir(e->state));
        assert_int_equal(t_mode(e->state), geteuid() == 0 ? 0755 : 0700);
        snprintf(path, sizeof(path), "%s/conf", e->state);
        assert_true(t_is_dir(path));
        snprintf(path, sizeof(path), "%s/slices", e->state);
        assert_true(t_is_dir(path));
        snprintf(path, sizeof(path), "%s/lock", e->state);
        assert_true(t_exists(path));
        assert_int_equal(e->node->ledger.n_slices, 0);
        /* No shim path: no ld.so.preload for containers. */
        node_preload_path(e->node, path, sizeof(path));
        assert_false(t_exists(path));

        /* One daemon or plugin per state directory. */
        struct node *second = NULL;
        struct gs_error *err = NULL;
        assert_int_equal(node_open(&e->cfg, &second, &err), -EBUSY);
        assert_null(second);
        assert_non_null(err);
        assert_non_null(strstr(gs_error_msg(err), e->state));
        err = gs_error_free(err);

        /* Closing gives the lock back. */
        t_reopen(e, 2);
        assert_int_equal(e->node->inv.n_gpus, 2);

        /* No state directory at all: refused. */
        struct node_config none = { .state_dir = "" };
        assert_int_equal(node_open(&none, &second, &err), -EINVAL);
        err = gs_error_free(err);
        t_env_free(e);
}

static void local_shim_slice(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        /* A shim path: node_open writes the containers' ld.so.preload, for
         * whichever front-end (device plugin, DRA driver) mounts it. */
        char preload_path[NODE_PATH_MAX], line[128] = "";
        node_preload_path(e->node, preload_path, sizeof(preload_path));
        assert_int_equal(t_mode(preload_path), 0644);
        FILE *pf = fopen(preload_path, "r");
        assert_non_null(pf);
        assert_non_null(fgets(line, sizeof(line), pf));
        fclose(pf);
        assert_string_equal(line, NODE_CONTAINER_SHIM "\n");
        struct node_request req = t_local(300);
        struct gs_slice s = t_prepare(e, &req);
        assert_string_equal(s.id, "s1");
        assert_int_equal(s.kind, GS_SLICE_LOCAL);
        assert_int_equal(s.milli, 300);
        assert_int_equal(s.n_gpus, 1);
        assert_string_equal(s.gpus[0].uuid, t_uuid(0));
        assert_int_equal(s.memory_cap, gs_default_memory_cap(300, T_GPU_MEM));

        /* Recorded, in memory and in the saved ledger. */
        const struct gs_slice *rec = gs_ledger_find(&e->node->ledger, "s1");
        assert_non_null(rec);
        assert_int_equal(rec->pid, getpid());
        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(e, &disk), 1);
        const struct gs_slice *d = gs_ledger_find(&disk, "s1");
        assert_non_null(d);
        assert_int_equal(d->kind, GS_SLICE_LOCAL);
        assert_int_equal(d->milli, 300);
        assert_int_equal(d->pid, getpid());
        assert_int_equal(d->uid, getuid());
        assert_int_equal(d->start_time, 12345);
        assert_int_equal(d->memory_cap, s.memory_cap);
        assert_string_equal(d->gpus[0].uuid, t_uuid(0));
        gs_ledger_done(&disk);

        /* Files: the config (host path of the directory) and the directory. */
        char dir[NODE_PATH_MAX], conf[NODE_PATH_MAX], inner[NODE_PATH_MAX + 16];
        t_dir_path(e, s.id, dir, sizeof(dir));
        t_conf_path(e, s.id, conf, sizeof(conf));
        assert_true(t_is_dir(dir));
        assert_int_equal(t_mode(dir), 0700);
        t_assert_conf(e, &s, dir);

        /* The shim's books inside the directory go with it. */
        snprintf(inner, sizeof(inner), "%s/books", dir);
        assert_int_equal(gs_file_replace(inner, "x", 1, 0600, NULL), 0);

        assert_int_equal(t_release(e, s.id), 0);
        assert_false(t_exists(conf));
        assert_false(t_exists(dir));
        assert_int_equal(e->node->ledger.n_slices, 0);
        assert_int_equal(t_disk_slices(e, &disk), 0);
        gs_ledger_done(&disk);
        assert_int_equal(t_release(e, s.id), -ENOENT);
        t_env_free(e);
}

static void kube_shim_slice(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        struct node_request req = t_kube(300, "0.0-299");
        struct gs_slice s = t_prepare(e, &req);
        assert_string_equal(s.id, "k8s-1");
        assert_int_equal(s.kind, GS_SLICE_KUBE);
        assert_int_equal(s.pid, 0);

        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(e, &disk), 1);
        const struct gs_slice *d = gs_ledger_find(&disk, "k8s-1");
        assert_non_null(d);
        assert_int_equal(d->kind, GS_SLICE_KUBE);
        assert_non_null(d->units);
        assert_string_equal(d->units, "0.0-299");
        gs_ledger_done(&disk);

        char dir[NODE_PATH_MAX], conf[NODE_PATH_MAX], preload[NODE_PATH_MAX];
        t_dir_path(e, s.id, dir, sizeof(dir));
        t_conf_path(e, s.id, conf, sizeof(conf));
        node_preload_path(e->node, preload, sizeof(preload));
        assert_true(t_is_dir(dir));
        assert_int_equal(t_mode(dir), 0777);
        /* Containers see their directory where it is mounted. */
        t_assert_conf(e, &s, NODE_CONTAINER_SLICE_DIR);

        struct node_edits ed;
        node_lock(e->node);
        assert_int_equal(node_container_edits_locked(e->node, &s, &ed), 0);
        node_unlock(e->node);
        assert_int_equal(ed.n_envs, 4);
        assert_string_equal(t_env_of(&ed, "NVIDIA_VISIBLE_DEVICES"), t_uuid(0));
        assert_string_equal(t_env_of(&ed, "CUDA_VISIBLE_DEVICES"), t_uuid(0));
        assert_string_equal(t_env_of(&ed, "GPUSLICE_CONFIG"), "/run/gpuslice/slice.conf");
        assert_string_equal(t_env_of(&ed, "GPUSLICE_SLICE"), "k8s-1");

        assert_int_equal(ed.n_mounts, 6);
        const struct node_mount *m = t_mount_of(&ed, "/run/gpuslice/slice.conf");
        assert_non_null(m);
        assert_string_equal(m->host_path, conf);
        assert_true(m->read_only);
        assert_non_null(m = t_mount_of(&ed, "/run/gpuslice/slice"));
        assert_string_equal(m->host_path, dir);
        assert_false(m->read_only);
        assert_non_null(m = t_mount_of(&ed, NODE_CONTAINER_SHIM));
        assert_string_equal(m->host_path, T_SHIM);
        assert_true(m->read_only);
        assert_non_null(m = t_mount_of(&ed, "/etc/ld.so.preload"));
        assert_string_equal(m->host_path, preload);
        assert_true(m->read_only);
        /* The socket's directory, never the socket file: a restarted
         * daemon's new socket must be seen by running containers. */
        assert_null(t_mount_of(&ed, T_SOCK));
        assert_non_null(m = t_mount_of(&ed, "/run/gpuslice/daemon"));
        assert_string_equal(m->host_path, "/run/gpuslice");
        assert_true(m->read_only);
        /* The lease page's directory: the daemon's, read-only. */
        char pdir[NODE_PATH_MAX];
        node_page_dir_path(e->node, s.id, pdir, sizeof(pdir));
        assert_non_null(m = t_mount_of(&ed, "/run/gpuslice/lease"));
        assert_string_equal(m->host_path, pdir);
        assert_true(m->read_only);
        assert_int_equal(t_mode(pdir), 0755);

        assert_int_equal(ed.n_cdi_devices, 1);
        char want[256];
        snprintf(want, sizeof(want), "%s=%s", T_CDI, t_uuid(0));
        assert_string_equal(ed.cdi_devices[0], want);

        assert_int_equal(t_release(e, s.id), 0);
        assert_false(t_exists(conf));
        assert_false(t_exists(dir));
        assert_false(t_exists(pdir));
        assert_int_equal(t_disk_slices(e, &disk), 0);
        gs_ledger_done(&disk);
        t_env_free(e);
}

/* A node without shim path, socket or CDI kind: the slice's own mounts only. */
static void edits_minimal(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct node_request req = t_kube(250, "0.0-249");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed;
        node_lock(e->node);
        assert_int_equal(node_container_edits_locked(e->node, &s, &ed), 0);
        node_unlock(e->node);
        assert_int_equal(ed.n_mounts, 2);
        assert_non_null(t_mount_of(&ed, "/run/gpuslice/slice.conf"));
        assert_non_null(t_mount_of(&ed, "/run/gpuslice/slice"));
        assert_null(t_mount_of(&ed, "/etc/ld.so.preload"));
        assert_int_equal(ed.n_cdi_devices, 0);
        assert_string_equal(t_env_of(&ed, "GPUSLICE_CONFIG"), "/run/gpuslice/slice.conf");
        t_env_free(e);
}

static void whole_backend(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        struct node_request req = t_kube(1000, "0.0-999");
        struct gs_slice s = t_prepare(e, &req);
        assert_int_equal(s.n_gpus, 1);
        assert_int_equal(s.memory_cap, 0);
        assert_int_equal(t_count(e, "conf"), 0);
        assert_int_equal(t_count(e, "slices"), 0);
        struct node_edits ed;
        node_lock(e->node);
        assert_int_equal(node_container_edits_locked(e->node, &s, &ed), 0);
        node_unlock(e->node);
        assert_null(t_env_of(&ed, "GPUSLICE_CONFIG"));
        assert_int_equal(ed.n_mounts, 0);
        assert_string_equal(t_env_of(&ed, "NVIDIA_VISIBLE_DEVICES"), s.gpus[0].uuid);
        assert_string_equal(t_env_of(&ed, "GPUSLICE_SLICE"), s.id);
        assert_int_equal(ed.n_cdi_devices, 1);
        assert_int_equal(t_release(e, s.id), 0);

        /* Two whole GPUs. */
        req = t_local(2000);
        s = t_prepare(e, &req);
        assert_int_equal(s.n_gpus, 2);
        assert_string_not_equal(s.gpus[0].uuid, s.gpus[1].uuid);
        assert_int_equal(t_count(e, "conf"), 0);
        assert_int_equal(t_count(e, "slices"), 0);
        node_lock(e->node);
        assert_int_equal(node_container_edits_locked(e->node, &s, &ed), 0);
        node_unlock(e->node);
        char both[256];
        snprintf(both, sizeof(both), "%s,%s", t_uuid(0), t_uuid(1));
        assert_string_equal(t_env_of(&ed, "NVIDIA_VISIBLE_DEVICES"), both);
        assert_string_equal(t_env_of(&ed, "CUDA_VISIBLE_DEVICES"), both);
        assert_int_equal(ed.n_cdi_devices, 2);

        /* Every GPU taken: neither a slice nor another whole GPU fits. */
        struct gs_error *err = NULL;
        struct gs_slice out;
        req = t_local(1000);
        node_lock(e->node);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -ENOSPC);
        err = gs_error_free(err);
        req = t_local(100);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -ENOSPC);
        err = gs_error_free(err);
        node_unlock(e->node);
        assert_int_equal(t_release(e, s.id), 0);

        /* Requests no backend takes. */
        static const struct {
                uint32_t milli;
                uint64_t memory;
        } bad[] = { { 1000, T_GIB }, { 2000, 1 }, { 0, 0 }, { 1500, 0 } };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                req = t_local(bad[i].milli);
                req.memory = bad[i].memory;
                node_lock(e->node);
                assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -EINVAL);
                node_unlock(e->node);
                assert_non_null(err);
                err = gs_error_free(err);
        }
        /* Memory beyond any GPU: never fits. */
        req = t_local(300);
        req.memory = 17 * T_GIB;
        node_lock(e->node);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -EINVAL);
        node_unlock(e->node);
        err = gs_error_free(err);
        assert_int_equal(e->node->ledger.n_slices, 0);
        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(e, &disk), 0);
        gs_ledger_done(&disk);
        t_env_free(e);
}

static char *slurp(const char *path)
{
        FILE *f = fopen(path, "r");
        assert_non_null(f);
        char *buf = calloc(1, 1 << 16);
        assert_non_null(buf);
        size_t n = fread(buf, 1, (1 << 16) - 1, f);
        buf[n] = '\0';
        fclose(f);
        return buf;
}

static void refusal_names_each_gpu(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, NULL, NULL);
        struct node_request req = t_local(400);
        req.allowed_gpus = 1u << 1;
        struct gs_slice a = t_prepare(e, &req);
        assert_string_equal(a.gpus[0].uuid, t_uuid(1));
        req.allowed_gpus = 1u << 0;
        struct gs_slice b = t_prepare(e, &req);
        assert_string_equal(b.gpus[0].uuid, t_uuid(0));

        char *before = slurp(e->node->ledger_path);
        uint64_t next = e->node->ledger.next_id;
        struct gs_error *err = NULL;
        struct gs_slice out;
        req = t_local(700);
        node_lock(e->node);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -ENOSPC);
        node_unlock(e->node);
        assert_non_null(err);
        const char *msg = gs_error_msg(err);
        /* 16 GiB less the 400m slice's default cap (6.4 GiB, 2 MiB rounded). */
        char want[512];
        for (unsigned g = 0; g < 2; g++) {
                snprintf(want, sizeof(want), "GPU %u (%.96s): 600m and 9.6Gi free (1 slice)", g,
                         t_uuid(g));
                if (!strstr(msg, want))
                        fail_msg("refusal '%s' lacks '%s'", msg, want);
        }
        assert_non_null(strstr(msg, "700m"));
        err = gs_error_free(err);

        /* Nothing recorded, nothing written, no id spent. */
        assert_int_equal(e->node->ledger.n_slices, 2);
        assert_int_equal(e->node->ledger.next_id, next);
        char *after = slurp(e->node->ledger_path);
        assert_string_equal(before, after);
        free(before);
        free(after);
        assert_int_equal(t_count(e, "conf"), 2);
        assert_int_equal(t_count(e, "slices"), 2);

        /* 600m still fits, on the GPU the hint names. */
        req = t_local(600);
        req.prefer = true;
        req.preferred_gpu = 1;
        struct gs_slice c = t_prepare(e, &req);
        assert_string_equal(c.gpus[0].uuid, t_uuid(1));
        t_env_free(e);
}

static void placement_policy(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, NULL, NULL, NULL);
        struct node_request req = t_local(300);
        struct gs_slice a = t_prepare(e, &req), b = t_prepare(e, &req);
        /* binpack: the second goes where the first is. */
        assert_string_equal(a.gpus[0].uuid, b.gpus[0].uuid);
        node_close(e->node);
        e->cfg.placement = GS_PLACE_SPREAD;
        t_open(e, 2);
        struct gs_slice c = t_prepare(e, &req);
        assert_string_not_equal(c.gpus[0].uuid, a.gpus[0].uuid);
        t_env_free(e);
}

static void ids_never_reused(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, NULL, NULL, NULL);
        struct node_request req = t_local(100);
        struct gs_slice s = t_prepare(e, &req);
        assert_string_equal(s.id, "s1");
        assert_int_equal(t_release(e, s.id), 0);
        s = t_prepare(e, &req);
        assert_string_equal(s.id, "s2");
        req = t_kube(100, "1.0-99");
        s = t_prepare(e, &req);
        assert_string_equal(s.id, "k8s-3");
        assert_int_equal(t_release(e, "s2"), 0);
        assert_int_equal(t_release(e, "k8s-3"), 0);
        assert_int_equal(e->node->ledger.n_slices, 0);

        /* The counter is persisted even when the ledger is empty. */
        t_reopen(e, 2);
        assert_int_equal(e->node->ledger.next_id, 4);
        req = t_local(100);
        s = t_prepare(e, &req);
        assert_string_equal(s.id, "s4");
        t_reopen(e, 2);
        assert_non_null(gs_ledger_find(&e->node->ledger, "s4"));
        req = t_kube(100, "0.0-99");
        s = t_prepare(e, &req);
        assert_string_equal(s.id, "k8s-5");
        t_env_free(e);
}

struct seen {
        int calls;
        char id[GS_SLICE_ID_MAX + 1];
        char why[64];
        bool conf_there; /* files are removed after the observers */
        bool locked;     /* the node's lock is held */
        struct t_env *e;
};

static void on_removed(void *ctx, const struct gs_slice *s, const char *why)
{
        struct seen *x = ctx;
        x->calls++;
        snprintf(x->id, sizeof(x->id), "%s", s->id);
        snprintf(x->why, sizeof(x->why), "%s", why);
        char conf[NODE_PATH_MAX];
        t_conf_path(x->e, s->id, conf, sizeof(conf));
        x->conf_there = t_exists(conf);
        int r = pthread_mutex_trylock(&x->e->node->lock);
        x->locked = r != 0;
        if (r == 0)
                pthread_mutex_unlock(&x->e->node->lock);
}

static void observer_told_once(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct seen x = { .e = e };
        e->node->observer = (struct node_observer){ .ctx = &x, .slice_removed = on_removed };
        struct node_request req = t_local(200);
        struct gs_slice a = t_prepare(e, &req), b = t_prepare(e, &req);
        assert_int_equal(x.calls, 0);
        assert_int_equal(t_release(e, a.id), 0);
        assert_int_equal(x.calls, 1);
        assert_string_equal(x.id, a.id);
        assert_string_equal(x.why, "test");
        assert_true(x.conf_there);
        assert_true(x.locked);
        assert_int_equal(t_release(e, a.id), -ENOENT);
        assert_int_equal(t_release(e, "s999"), -ENOENT);
        assert_int_equal(x.calls, 1);
        assert_int_equal(t_release(e, b.id), 0);
        assert_int_equal(x.calls, 2);
        assert_string_equal(x.id, b.id);

        /* A refused prepare tells nobody. */
        req = t_local(999);
        req.memory = 15 * T_GIB;
        struct gs_slice s = t_prepare(e, &req);
        req = t_local(10);
        req.memory = 512ull << 20; /* 10m's default would hold no context */
        struct gs_slice out;
        struct gs_error *err = NULL;
        node_lock(e->node);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -ENOSPC);
        node_unlock(e->node);
        gs_error_free(err);
        assert_int_equal(x.calls, 2);
        assert_int_equal(t_release(e, s.id), 0);
        assert_int_equal(x.calls, 3);
        t_env_free(e);
}

/* Resize: a share grows where there is room (ledger, disk and config
 * follow), is refused past it or on a GPU that is not healthy, and a
 * refusal changes nothing. */
static void resize_share(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, T_SHIM, T_SOCK, NULL);
        struct node_request req = t_kube(300, "0.0-299");
        struct gs_slice s = t_prepare(e, &req);
        struct node_request other = t_local(400);
        t_prepare(e, &other);
        struct gs_error *err = NULL;
        node_lock(e->node);
        assert_int_equal(node_slice_resize_locked(e->node, s.id, 600, "0.0-599", &err), 0);
        const struct gs_slice *rec = gs_ledger_find(&e->node->ledger, s.id);
        assert_int_equal(rec->milli, 600);
        assert_int_equal(rec->memory_cap, gs_default_memory_cap(600, T_GPU_MEM));
        assert_string_equal(rec->units, "0.0-599");
        node_unlock(e->node);
        struct gs_slice grown = *rec;
        char dir[NODE_PATH_MAX];
        t_dir_path(e, s.id, dir, sizeof(dir));
        t_assert_conf(e, &grown, "/run/gpuslice/slice");
        struct gs_ledger disk;
        assert_int_equal(t_disk_slices(e, &disk), 2);
        assert_int_equal(gs_ledger_find(&disk, s.id)->milli, 600);
        gs_ledger_done(&disk);

        /* 601 + 400 > 1000: refused, nothing changed. */
        node_lock(e->node);
        assert_int_equal(node_slice_resize_locked(e->node, s.id, 601, "0.0-600", &err), -ENOSPC);
        assert_non_null(strstr(gs_error_msg(err), "600m"));
        err = gs_error_free(err);
        assert_int_equal(gs_ledger_find(&e->node->ledger, s.id)->milli, 600);

        /* A GPU that is not healthy: no resize. */
        struct gs_inventory inv = e->node->inv;
        inv.gpus[0].healthy = false;
        node_set_inventory_locked(e->node, &inv);
        assert_int_equal(node_slice_resize_locked(e->node, s.id, 500, "0.0-499", &err), -ENODEV);
        assert_non_null(strstr(gs_error_msg(err), "not healthy"));
        err = gs_error_free(err);
        rec = gs_ledger_find(&e->node->ledger, s.id);
        assert_int_equal(rec->milli, 600);
        assert_string_equal(rec->units, "0.0-599");
        node_unlock(e->node);
        t_assert_conf(e, &grown, "/run/gpuslice/slice");
        t_env_free(e);
}

/* The pod of a pod slice: recorded by a front-end, read back, refused for
 * a local slice or a malformed pod, and forgotten with the slice. */
static void pod_of_slice(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, T_SHIM, T_SOCK, T_CDI);
        struct node_request kube = t_kube(300, "0.0-299");
        struct gs_slice k = t_prepare(e, &kube);
        struct node_request local = t_local(200);
        struct gs_slice l = t_prepare(e, &local);
        struct node_pod p = { .ns = "ml", .name = "serve-7f9", .container = "model" }, got;
        node_lock(e->node);
        assert_int_equal(node_pod_locked(e->node, k.id, &got), -ENOENT);
        assert_int_equal(node_set_pod_locked(e->node, k.id, &p), 0);
        assert_int_equal(node_pod_locked(e->node, k.id, &got), 0);
        assert_string_equal(got.ns, "ml");
        assert_string_equal(got.name, "serve-7f9");
        assert_string_equal(got.container, "model");
        snprintf(p.container, sizeof(p.container), "%s", "sidecar");
        assert_int_equal(node_set_pod_locked(e->node, k.id, &p), 0); /* replaced */
        assert_int_equal(node_pod_locked(e->node, k.id, &got), 0);
        assert_string_equal(got.container, "sidecar");
        assert_int_equal(node_set_pod_locked(e->node, l.id, &p), -ENOENT); /* local: no pod */
        assert_int_equal(node_set_pod_locked(e->node, "k8s-99", &p), -ENOENT);
        struct node_pod bad = { .ns = "", .name = "x" };
        assert_int_equal(node_set_pod_locked(e->node, k.id, &bad), -EINVAL);
        memset(bad.ns, 'a', sizeof(bad.ns)); /* unterminated */
        assert_int_equal(node_set_pod_locked(e->node, k.id, &bad), -EINVAL);
        assert_int_equal(node_slice_release_locked(e->node, k.id, "test"), 0);
        assert_int_equal(node_pod_locked(e->node, k.id, &got), -ENOENT);
        node_unlock(e->node);
        t_env_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(open_layout, t_teardown),
                cmocka_unit_test_teardown(local_shim_slice, t_teardown),
                cmocka_unit_test_teardown(kube_shim_slice, t_teardown),
                cmocka_unit_test_teardown(resize_share, t_teardown),
                cmocka_unit_test_teardown(edits_minimal, t_teardown),
                cmocka_unit_test_teardown(whole_backend, t_teardown),
                cmocka_unit_test_teardown(refusal_names_each_gpu, t_teardown),
                cmocka_unit_test_teardown(placement_policy, t_teardown),
                cmocka_unit_test_teardown(ids_never_reused, t_teardown),
                cmocka_unit_test_teardown(observer_told_once, t_teardown),
                cmocka_unit_test_teardown(pod_of_slice, t_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
