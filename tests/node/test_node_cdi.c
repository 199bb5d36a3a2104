/* SPDX-License-Identifier: Apache-2.0 */
/* Node layer: the CDI spec of a slice share (node_cdi.h). A Kubernetes shim
 * slice on a 2-GPU node, its container edits written as a spec into a
 * temporary CDI directory: the file (name, mode 0644 under any umask),
 * its JSON (cdiVersion, kind, device, every env and mount of the edits with
 * ro/rw bind options), byte-identical rewrites, refused names and edits
 * (nothing written, the previous spec kept), removal, and the listing a
 * driver cleans up with (foreign files ignored).
 *
 * With GS_CDI_SPEC_OUT set, spec_variants also leaves its specs (shim slice
 * with and without shim and socket, a whole GPU, a name that begins with a
 * digit) in that directory: check_cdi_schema.py validates them against the
 * CDI JSON schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "node_cdi.h"
#include "node_edits.h"
#include "node_test_util.h"

#define T_SHIM "/opt/gpuslice/lib/libgpuslice.so"
#define T_SOCK "/run/gpuslice/test.sock"
#define T_CDI "nvidia.com/gpu"
#define T_NAME "claim-0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0-gpu"

/* <env dir>/cdi (not created: the writer makes it). */
static void cdi_dir(struct t_env *e, char *buf, size_t size)
{
        snprintf(buf, size, "%s/cdi", e->dir);
}

static void spec_file(const char *dir, const char *name, char *buf, size_t size)
{
        snprintf(buf, size, "%s/gpuslice.io-%s.json", dir, name);
}

static struct node_edits edits_of(struct t_env *e, const struct gs_slice *s)
{
        struct node_edits ed;
        node_lock(e->node);
        assert_int_equal(node_container_edits_locked(e->node, s, &ed), 0);
        node_unlock(e->node);
        return ed;
}

/* Write under the lock; fails the test on error. */
static void write_ok(struct t_env *e, const char *dir, const char *name,
                     const struct node_edits *ed)
{
        char q[NODE_CDI_QUALIFIED_MAX], want[NODE_CDI_QUALIFIED_MAX];
        struct gs_error *err = NULL;
        node_lock(e->node);
        int r = node_cdi_write_locked(e->node, dir, name, ed, q, sizeof(q), &err);
        node_unlock(e->node);
        if (r != 0)
                fail_msg("write %s: %d %s", name, r, gs_error_msg(err));
        snprintf(want, sizeof(want), "gpuslice.io/slice=%s", name);
        assert_string_equal(q, want);
}

/* A write that must fail with `code`, its message naming `needle`. */
static void write_fails(struct t_env *e, const char *dir, const char *name,
                        const struct node_edits *ed, int code, const char *needle)
{
        char q[NODE_CDI_QUALIFIED_MAX] = "untouched";
        struct gs_error *err = NULL;
        node_lock(e->node);
        int r = node_cdi_write_locked(e->node, dir, name, ed, q, sizeof(q), &err);
        node_unlock(e->node);
        assert_int_equal(r, code);
        assert_non_null(err);
        if (needle && !strstr(gs_error_msg(err), needle))
                fail_msg("error \"%s\" does not name \"%s\"", gs_error_msg(err), needle);
        assert_string_equal(q, "untouched");
        gs_error_free(err);
}

static char *slurp(const char *path)
{
        char *buf = NULL;
        size_t len;
        struct gs_error *err = NULL;
        if (gs_file_read(path, 1 << 20, &buf, &len, &err) < 0)
                fail_msg("read %s: %s", path, gs_error_msg(err));
        return buf;
}

static json_t *load(const char *path)
{
        json_error_t jerr;
        json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
        if (!j)
                fail_msg("%s is not JSON: %s (line %d)", path, jerr.text, jerr.line);
        return j;
}

static void assert_options(json_t *opts, bool read_only)
{
        const char *want[] = { read_only ? "ro" : "rw", "nosuid", "nodev", "bind" };
        assert_true(json_is_array(opts));
        assert_int_equal(json_array_size(opts), 4);
        for (size_t i = 0; i < 4; i++)
                assert_string_equal(json_string_value(json_array_get(opts, i)), want[i]);
}

/* The spec at path holds exactly the edits, for device name. */
static void assert_spec(const char *path, const char *name, const char *version,
                        const struct node_edits *ed)
{
        json_t *spec = load(path);
        assert_int_equal(json_object_size(spec), 3);
        assert_string_equal(json_string_value(json_object_get(spec, "cdiVersion")), version);
        assert_string_equal(json_string_value(json_object_get(spec, "kind")), "gpuslice.io/slice");
        json_t *devices = json_object_get(spec, "devices");
        assert_int_equal(json_array_size(devices), 1);
        json_t *dev = json_array_get(devices, 0);
        assert_string_equal(json_string_value(json_object_get(dev, "name")), name);
        json_t *edits = json_object_get(dev, "containerEdits");
        assert_true(json_is_object(edits));

        json_t *env = json_object_get(edits, "env");
        assert_int_equal(json_array_size(env), ed->n_envs);
        for (size_t i = 0; i < ed->n_envs; i++) {
                char want[512];
                snprintf(want, sizeof(want), "%s=%s", ed->envs[i].key, ed->envs[i].value);
                assert_string_equal(json_string_value(json_array_get(env, i)), want);
        }
        json_t *mounts = json_object_get(edits, "mounts");
        if (ed->n_mounts == 0)
                assert_null(mounts);
        assert_int_equal(json_array_size(mounts), ed->n_mounts);
        for (size_t i = 0; i < ed->n_mounts; i++) {
                const struct node_mount *m = &ed->mounts[i];
                json_t *jm = json_array_get(mounts, i);
                assert_string_equal(json_string_value(json_object_get(jm, "hostPath")),
                                    m->host_path);
                assert_string_equal(json_string_value(json_object_get(jm, "containerPath")),
                                    m->container_path);
                assert_options(json_object_get(jm, "options"), m->read_only);
                /* No "type": it would need cdiVersion 0.4.0. */
                assert_null(json_object_get(jm, "type"));
        }
        json_decref(spec);
}

/* Options of the mount at container path cpath in the spec at path. */
static json_t *spec_mount(json_t *spec, const char *cpath)
{
        json_t *dev = json_array_get(json_object_get(spec, "devices"), 0);
        json_t *mounts = json_object_get(json_object_get(dev, "containerEdits"), "mounts");
        for (size_t i = 0; i < json_array_size(mounts); i++) {
                json_t *m = json_array_get(mounts, i);
                if (strcmp(json_string_value(json_object_get(m, "containerPath")), cpath) == 0)
                        return m;
        }
        fail_msg("no mount at %s", cpath);
        return NULL;
}

static void kube_spec(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        struct node_request req = t_kube(300, "0.0-299");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        assert_int_equal(ed.n_envs, 4);
        assert_int_equal(ed.n_mounts, 6);

        char dir[256], path[512], conf[NODE_PATH_MAX], sdir[NODE_PATH_MAX];
        cdi_dir(e, dir, sizeof(dir));
        write_ok(e, dir, T_NAME, &ed);
        /* Created for the runtime to read, whatever the umask (077). */
        assert_int_equal(t_mode(dir), 0755);
        spec_file(dir, T_NAME, path, sizeof(path));
        assert_int_equal(t_mode(path), 0644);
        char tmp[600];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        assert_false(t_exists(tmp));
        assert_spec(path, T_NAME, "0.3.0", &ed);

        /* By container path: the config, the shim and ld.so.preload are
         * read-only; the slice directory and the socket's are not. */
        json_t *spec = load(path);
        t_conf_path(e, s.id, conf, sizeof(conf));
        t_dir_path(e, s.id, sdir, sizeof(sdir));
        json_t *m = spec_mount(spec, NODE_CONTAINER_CONF);
        assert_string_equal(json_string_value(json_object_get(m, "hostPath")), conf);
        assert_options(json_object_get(m, "options"), true);
        assert_options(json_object_get(spec_mount(spec, NODE_CONTAINER_SHIM), "options"), true);
        assert_options(json_object_get(spec_mount(spec, NODE_CONTAINER_PRELOAD), "options"), true);
        m = spec_mount(spec, NODE_CONTAINER_SLICE_DIR);
        assert_string_equal(json_string_value(json_object_get(m, "hostPath")), sdir);
        assert_options(json_object_get(m, "options"), false);
        m = spec_mount(spec, NODE_CONTAINER_DAEMON_DIR);
        assert_string_equal(json_string_value(json_object_get(m, "hostPath")), "/run/gpuslice");
        assert_options(json_object_get(m, "options"), true);
        /* The lease page's directory is the daemon's: read-only. */
        char pdir[NODE_PATH_MAX];
        node_page_dir_path(e->node, s.id, pdir, sizeof(pdir));
        m = spec_mount(spec, NODE_CONTAINER_LEASE_DIR);
        assert_string_equal(json_string_value(json_object_get(m, "hostPath")), pdir);
        assert_options(json_object_get(m, "options"), true);
        json_decref(spec);

        /* The GPUs' own CDI names are the caller's second id, not ours. */
        char *text = slurp(path);
        assert_null(strstr(text, T_CDI));
        free(text);
        t_env_free(e);
}

/* Rewriting a share (a retried prepare, a restarted daemon) gives the same
 * bytes. */
static void rewrite_identical(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, T_SHIM, T_SOCK, NULL);
        struct node_request req = t_kube(250, "0.0-249");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        char dir[256], path[512];
        cdi_dir(e, dir, sizeof(dir));
        spec_file(dir, T_NAME, path, sizeof(path));
        write_ok(e, dir, T_NAME, &ed);
        char *first = slurp(path);
        assert_non_null(strchr(first, '\n'));
        assert_int_equal(first[strlen(first) - 1], '\n');
        write_ok(e, dir, T_NAME, &ed);
        char *second = slurp(path);
        assert_string_equal(first, second);
        free(second);

        /* After a restart, from the saved ledger. */
        t_reopen(e, 2);
        node_lock(e->node);
        const struct gs_slice *again = gs_ledger_find(&e->node->ledger, s.id);
        assert_non_null(again);
        struct node_edits ed2;
        assert_int_equal(node_container_edits_locked(e->node, again, &ed2), 0);
        node_unlock(e->node);
        write_ok(e, dir, T_NAME, &ed2);
        second = slurp(path);
        assert_string_equal(first, second);
        free(second);
        free(first);
        assert_int_equal(t_mode(path), 0644);
        t_env_free(e);
}

static void bad_names(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct node_request req = t_kube(100, "0.0-99");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        char dir[256];
        cdi_dir(e, dir, sizeof(dir));
        static const char *const bad[] = { "-claim", "claim-", ".claim", "claim.", "a/b", "../x",
                                           "a b",    "a:b",    "é",      "a\nb",   "x_",  "_" };
        for (size_t i = 0; i < GS_ARRAY_SIZE(bad); i++)
                write_fails(e, dir, bad[i], &ed, -EINVAL, bad[i]);
        write_fails(e, dir, "", &ed, -EINVAL, "empty");
        write_fails(e, dir, NULL, &ed, -EINVAL, "empty");
        char longest[NODE_CDI_NAME_MAX + 2];
        memset(longest, 'a', sizeof(longest) - 1);
        longest[sizeof(longest) - 1] = '\0';
        write_fails(e, dir, longest, &ed, -EINVAL, "at most 234");
        /* Nothing was written, not even the directory. */
        assert_false(t_exists(dir));

        /* The edges that are accepted: one character, the longest name,
         * inner '.', '_' and '-'. A leading digit needs cdiVersion 0.5.0. */
        longest[NODE_CDI_NAME_MAX] = '\0';
        write_ok(e, dir, longest, &ed);
        write_ok(e, dir, "a", &ed);
        write_ok(e, dir, "A.b_c-D", &ed);
        write_ok(e, dir, "0abc", &ed);
        char path[512];
        spec_file(dir, "a", path, sizeof(path));
        assert_spec(path, "a", "0.3.0", &ed);
        spec_file(dir, "0abc", path, sizeof(path));
        assert_spec(path, "0abc", "0.5.0", &ed);
        t_env_free(e);
}

/* Refused edits and buffers: nothing written, the previous spec kept. */
static void bad_edits(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, T_SHIM, T_SOCK, NULL);
        struct node_request req = t_kube(100, "0.0-99");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        char dir[256], path[512];
        cdi_dir(e, dir, sizeof(dir));
        spec_file(dir, T_NAME, path, sizeof(path));
        write_ok(e, dir, T_NAME, &ed);
        char *before = slurp(path);

        struct node_edits bad = ed;
        snprintf(bad.mounts[0].host_path, sizeof(bad.mounts[0].host_path), "relative/conf");
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "relative/conf");
        bad = ed;
        bad.mounts[1].container_path = "run/x";
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "run/x");
        bad = ed;
        bad.mounts[1].host_path[0] = '\0';
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "absolute");
        bad = ed;
        bad.envs[0].key = "A=B";
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "A=B");
        bad = ed;
        snprintf(bad.envs[1].value, sizeof(bad.envs[1].value), "\xff\xfe");
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "UTF-8");
        bad = ed;
        bad.n_envs = 0;
        bad.n_mounts = 0;
        write_fails(e, dir, T_NAME, &bad, -EINVAL, "no container edits");
        bad = ed;
        bad.n_mounts = NODE_EDITS_MAX_MOUNTS + 1;
        write_fails(e, dir, T_NAME, &bad, -EINVAL, NULL);

        /* Too small a buffer for the qualified name. */
        char q[8] = "keep";
        struct gs_error *err = NULL;
        node_lock(e->node);
        assert_int_equal(node_cdi_write_locked(e->node, dir, T_NAME, &ed, q, sizeof(q), &err),
                         -ENAMETOOLONG);
        node_unlock(e->node);
        assert_string_equal(q, "keep");
        gs_error_free(err);
        /* No directory: an error naming it. */
        write_fails(e, "", T_NAME, &ed, -EINVAL, "CDI directory");
        char file_dir[512];
        snprintf(file_dir, sizeof(file_dir), "%s/gpuslice.io-%s.json", dir, T_NAME);
        write_fails(e, file_dir, "x", &ed, -ENOTDIR, file_dir);

        char *after = slurp(path);
        assert_string_equal(before, after);
        free(after);
        free(before);
        char tmp[600];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        assert_false(t_exists(tmp));
        /* A NULL buffer: the name is not returned. */
        node_lock(e->node);
        assert_int_equal(node_cdi_write_locked(e->node, dir, "other", &ed, NULL, 0, NULL), 0);
        node_unlock(e->node);
        t_env_free(e);
}

static void remove_spec(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, T_SHIM, NULL, NULL);
        struct node_request req = t_kube(100, "0.0-99");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        char dir[256], path[512], other[512], tmp[600];
        cdi_dir(e, dir, sizeof(dir));
        spec_file(dir, T_NAME, path, sizeof(path));
        spec_file(dir, "other", other, sizeof(other));
        write_ok(e, dir, T_NAME, &ed);
        write_ok(e, dir, "other", &ed);
        assert_int_equal(node_cdi_remove(dir, T_NAME), 0);
        assert_false(t_exists(path));
        assert_true(t_exists(other));
        assert_int_equal(node_cdi_remove(dir, T_NAME), 0); /* gone already */
        assert_int_equal(node_cdi_remove("/nonexistent-gs-cdi", T_NAME), 0);
        assert_int_equal(node_cdi_remove(dir, "../other"), -EINVAL);
        assert_int_equal(node_cdi_remove(dir, ""), -EINVAL);
        assert_true(t_exists(other));
        /* A crash mid-write left a temp file: removed with its spec. */
        snprintf(tmp, sizeof(tmp), "%s.tmp", other);
        FILE *f = fopen(tmp, "w");
        assert_non_null(f);
        fclose(f);
        assert_int_equal(node_cdi_remove(dir, "other"), 0);
        assert_false(t_exists(other));
        assert_false(t_exists(tmp));
        t_env_free(e);
}

struct seen {
        char names[16][NODE_CDI_NAME_MAX + 1];
        size_t n;
        const char *dir;
        bool remove;
        int stop_after;
};

static int on_name(void *ctx, const char *name)
{
        struct seen *x = ctx;
        assert_true(x->n < 16);
        snprintf(x->names[x->n++], sizeof(x->names[0]), "%s", name);
        if (x->remove)
                assert_int_equal(node_cdi_remove(x->dir, name), 0);
        return x->stop_after && (int)x->n == x->stop_after ? -ECANCELED : 0;
}

static void touch(const char *dir, const char *file)
{
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("{}\n", f);
        fclose(f);
}

static void list_specs(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, T_SHIM, NULL, NULL);
        struct node_request req = t_kube(100, "0.0-99");
        struct gs_slice s = t_prepare(e, &req);
        struct node_edits ed = edits_of(e, &s);
        char dir[256], sub[300];
        cdi_dir(e, dir, sizeof(dir));
        struct seen x = { .dir = dir };
        assert_int_equal(node_cdi_list(dir, on_name, &x, NULL), 0); /* no directory yet */
        write_ok(e, dir, T_NAME, &ed);
        write_ok(e, dir, "b.json-x", &ed);
        write_ok(e, dir, "a", &ed);
        /* Not ours, or not a spec of ours. */
        touch(dir, "nvidia.com-gpu.json");
        touch(dir, "gpuslice.io-bad name.json");
        touch(dir, "gpuslice.io-a.yaml");
        touch(dir, "gpuslice.io-.json");
        touch(dir, "gpuslice.io-x.json~");
        touch(dir, "other.json.tmp");
        snprintf(sub, sizeof(sub), "%s/gpuslice.io-dir.json", dir);
        assert_int_equal(mkdir(sub, 0755), 0);
        /* Temp files: one next to its spec (listed once), one alone (a
         * crash before the first rename: listed, so it can be removed). */
        touch(dir, "gpuslice.io-a.json.tmp");
        touch(dir, "gpuslice.io-crashed.json.tmp");

        static const char *const want[] = { "a", "b.json-x", T_NAME, "crashed" };
        struct gs_error *err = NULL;
        assert_int_equal(node_cdi_list(dir, on_name, &x, &err), 4);
        assert_null(err);
        assert_int_equal(x.n, 4);
        for (size_t i = 0; i < 4; i++)
                assert_string_equal(x.names[i], want[i]);

        /* A callback that stops. */
        x = (struct seen){ .dir = dir, .stop_after = 2 };
        assert_int_equal(node_cdi_list(dir, on_name, &x, NULL), -ECANCELED);
        assert_int_equal(x.n, 2);

        /* A driver's cleanup: remove each name as it is given. */
        x = (struct seen){ .dir = dir, .remove = true };
        assert_int_equal(node_cdi_list(dir, on_name, &x, NULL), 4);
        x = (struct seen){ .dir = dir };
        assert_int_equal(node_cdi_list(dir, on_name, &x, NULL), 0);
        /* The foreign entries are all still there. */
        char path[512];
        snprintf(path, sizeof(path), "%s/nvidia.com-gpu.json", dir);
        assert_true(t_exists(path));
        assert_true(t_is_dir(sub));
        snprintf(path, sizeof(path), "%s/gpuslice.io-bad name.json", dir);
        assert_true(t_exists(path));

        /* An unreadable directory is an error naming it. */
        char file[512];
        snprintf(file, sizeof(file), "%s/nvidia.com-gpu.json", dir);
        assert_true(node_cdi_list(file, on_name, &x, &err) < 0);
        assert_non_null(err);
        assert_non_null(strstr(gs_error_msg(err), file));
        gs_error_free(err);
        t_env_free(e);
}

/* The specs check_cdi_schema.py validates: every shape a share's spec
 * takes. Left in $GS_CDI_SPEC_OUT when it is set. */
static void spec_variants(void **state)
{
        (void)state;
        const char *out = getenv("GS_CDI_SPEC_OUT");
        struct t_env *full = t_env_new(2, T_SHIM, T_SOCK, T_CDI);
        struct t_env *bare = t_env_new(2, NULL, NULL, NULL);
        char dir[256];
        snprintf(dir, sizeof(dir), "%s", out && *out ? out : "");
        if (!dir[0])
                cdi_dir(full, dir, sizeof(dir));

        struct node_request req = t_kube(300, "0.0-299");
        struct gs_slice s = t_prepare(full, &req);
        struct node_edits ed = edits_of(full, &s);
        write_ok(full, dir, T_NAME, &ed);
        s = t_prepare(bare, &req);
        struct node_edits ed_bare = edits_of(bare, &s);
        assert_int_equal(ed_bare.n_mounts, 2);
        write_ok(bare, dir, "claim-bare-gpu", &ed_bare);
        write_ok(bare, dir, "0digit", &ed_bare);
        req = t_kube(1000, "1.0-999");
        s = t_prepare(full, &req);
        struct node_edits ed_whole = edits_of(full, &s);
        assert_int_equal(ed_whole.n_mounts, 0);
        write_ok(full, dir, "claim-whole-gpu", &ed_whole);

        char path[512];
        spec_file(dir, T_NAME, path, sizeof(path));
        assert_spec(path, T_NAME, "0.3.0", &ed);
        spec_file(dir, "claim-bare-gpu", path, sizeof(path));
        assert_spec(path, "claim-bare-gpu", "0.3.0", &ed_bare);
        spec_file(dir, "0digit", path, sizeof(path));
        assert_spec(path, "0digit", "0.5.0", &ed_bare);
        spec_file(dir, "claim-whole-gpu", path, sizeof(path));
        assert_spec(path, "claim-whole-gpu", "0.3.0", &ed_whole);
        t_env_free(bare);
        t_env_free(full);
}

int main(void)
{
        /* Neither the spec's mode nor the directory's depends on it. */
        umask(077);
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(kube_spec, t_teardown),
                cmocka_unit_test_teardown(rewrite_identical, t_teardown),
                cmocka_unit_test_teardown(bad_names, t_teardown),
                cmocka_unit_test_teardown(bad_edits, t_teardown),
                cmocka_unit_test_teardown(remove_spec, t_teardown),
                cmocka_unit_test_teardown(list_specs, t_teardown),
                cmocka_unit_test_teardown(spec_variants, t_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
