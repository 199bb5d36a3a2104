/* SPDX-License-Identifier: Apache-2.0 */
/* Node layer: repair at start (node_reconcile_files_locked). Covers a
 * crash between record and files (files deleted by hand, or a ledger
 * written directly), orphan configs and directories no record names,
 * stale or unreadable configs, a symlink in place of a slice directory
 * (never followed: the target's mode and files stay), links in place of
 * the layout's directories and a damaged ledger refused at open, and
 * orphans under slices/ that are not directories removed too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "node_edits.h"
#include "node_test_util.h"

static int reconcile(struct t_env *e)
{
        node_lock(e->node);
        int r = node_reconcile_files_locked(e->node);
        node_unlock(e->node);
        return r;
}

static void put_file(const char *path, const char *text, mode_t mode)
{
        struct gs_error *err = NULL;
        int r = gs_file_replace(path, text, strlen(text), mode, &err);
        if (r < 0)
                fail_msg("%s: %s", path, gs_error_msg(err));
        gs_error_free(err);
}

static const char *ledger_path(struct t_env *e, char *buf, size_t size)
{
        snprintf(buf, size, "%s/ledger", e->state);
        return buf;
}

static void remove_files_by_hand(struct t_env *e, const char *id)
{
        char path[NODE_PATH_MAX];
        t_conf_path(e, id, path, sizeof(path));
        assert_int_equal(unlink(path), 0);
        t_dir_path(e, id, path, sizeof(path));
        assert_int_equal(rmdir(path), 0);
}

static void crash_before_files(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, NULL, "/run/gpuslice/d.sock", NULL);
        struct node_request lr = t_local(300), kr = t_kube(200, "0.0-199");
        struct gs_slice l = t_prepare(e, &lr), k = t_prepare(e, &kr);
        remove_files_by_hand(e, l.id);
        remove_files_by_hand(e, k.id);

        t_reopen(e, 2);
        assert_int_equal(e->node->ledger.n_slices, 2);
        assert_int_equal(reconcile(e), 2);

        char dir[NODE_PATH_MAX];
        t_dir_path(e, l.id, dir, sizeof(dir));
        assert_true(t_is_dir(dir));
        assert_int_equal(t_mode(dir), 0700);
        t_assert_conf(e, &l, dir);
        t_dir_path(e, k.id, dir, sizeof(dir));
        assert_true(t_is_dir(dir));
        assert_int_equal(t_mode(dir), 0777);
        t_assert_conf(e, &k, NODE_CONTAINER_SLICE_DIR);

        /* Repaired once: a second pass finds nothing to do. */
        assert_int_equal(reconcile(e), 0);
        /* Releasing after the repair removes the repaired files. */
        assert_int_equal(t_release(e, l.id), 0);
        t_dir_path(e, l.id, dir, sizeof(dir));
        assert_false(t_exists(dir));
        assert_int_equal(t_count(e, "slices"), 1);
        assert_int_equal(t_count(e, "conf"), 1);
        t_env_free(e);
}

/* The state a crash right after gs_ledger_save leaves: a ledger, no files. */
static void ledger_written_directly(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(2, NULL, NULL, NULL);
        e->node = node_close(e->node);

        struct gs_ledger l;
        gs_ledger_init(&l);
        l.next_id = 7;
        char units[] = "1.0-499";
        struct gs_slice k = { .kind = GS_SLICE_KUBE,
                              .milli = 500,
                              .memory_cap = gs_default_memory_cap(500, T_GPU_MEM),
                              .policy = GS_POLICY_CAP,
                              .created = 1764471845,
                              .n_gpus = 1,
                              .units = units };
        k.gpus[0].index = 1;
        snprintf(k.gpus[0].uuid, sizeof(k.gpus[0].uuid), "%s", t_uuid(1));
        gs_ledger_assign_id(&l, &k);
        struct gs_slice w = { .kind = GS_SLICE_LOCAL, .milli = 1000, .pid = getpid(),
                              .start_time = 1, .created = 1764471845, .n_gpus = 1 };
        snprintf(w.gpus[0].uuid, sizeof(w.gpus[0].uuid), "%s", t_uuid(0));
        gs_ledger_assign_id(&l, &w);
        assert_int_equal(gs_ledger_add(&l, &k, NULL), 0);
        assert_int_equal(gs_ledger_add(&l, &w, NULL), 0);
        char ledger[NODE_PATH_MAX];
        ledger_path(e, ledger, sizeof(ledger));
        assert_true(gs_ledger_save(&l, ledger, NULL) >= 0);
        gs_ledger_done(&l);

        t_open(e, 2);
        /* One repair: the shim slice's files (a whole GPU has none). */
        assert_int_equal(reconcile(e), 1);
        char dir[NODE_PATH_MAX];
        t_dir_path(e, "k8s-7", dir, sizeof(dir));
        assert_int_equal(t_mode(dir), 0777);
        struct gs_slice_conf c;
        char conf[NODE_PATH_MAX];
        t_conf_path(e, "k8s-7", conf, sizeof(conf));
        assert_int_equal(t_mode(conf), 0444);
        assert_int_equal(gs_slice_conf_load(conf, &c, NULL), 0);
        assert_string_equal(c.gpu_uuid, t_uuid(1));
        assert_int_equal(c.memory_limit, k.memory_cap);
        assert_int_equal(c.compute_milli, 500);
        assert_int_equal(c.policy, GS_POLICY_CAP);
        assert_int_equal(c.context_overhead, T_OVERHEAD);
        assert_int_equal(t_count(e, "conf"), 1);
        assert_int_equal(t_count(e, "slices"), 1);

        /* The recorded slices count: GPU 0 is taken whole, GPU 1 has 500m. */
        struct node_request req = t_local(600);
        struct gs_slice out;
        struct gs_error *err = NULL;
        node_lock(e->node);
        assert_int_equal(node_slice_prepare_locked(e->node, &req, &out, &err), -ENOSPC);
        node_unlock(e->node);
        err = gs_error_free(err);
        req = t_local(500);
        out = t_prepare(e, &req);
        assert_string_equal(out.id, "s9");
        assert_string_equal(out.gpus[0].uuid, t_uuid(1));
        t_env_free(e);
}

static void orphans_removed(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct node_request req = t_local(300);
        struct gs_slice s = t_prepare(e, &req);

        char path[NODE_PATH_MAX], inner[NODE_PATH_MAX + 16];
        t_conf_path(e, "s99", path, sizeof(path));
        put_file(path, "version = 1\n", 0444);
        t_dir_path(e, "s99", path, sizeof(path));
        assert_int_equal(mkdir(path, 0777), 0);
        snprintf(inner, sizeof(inner), "%s/books", path);
        put_file(inner, "old", 0600);

        assert_int_equal(reconcile(e), 2);
        assert_false(t_exists(inner));
        assert_false(t_exists(path));
        t_conf_path(e, "s99", path, sizeof(path));
        assert_false(t_exists(path));
        /* The recorded slice keeps its files. */
        char dir[NODE_PATH_MAX];
        t_dir_path(e, s.id, dir, sizeof(dir));
        assert_true(t_is_dir(dir));
        t_assert_conf(e, &s, dir);
        assert_int_equal(t_count(e, "conf"), 1);
        assert_int_equal(t_count(e, "slices"), 1);

        /* Files of a slice freed before a crash (the release saved, the
         * files not yet removed): gone at the next start. */
        e->node = node_close(e->node);
        struct gs_ledger l;
        gs_ledger_init(&l);
        assert_int_equal(gs_ledger_load(&l, ledger_path(e, path, sizeof(path)), NULL), 0);
        assert_int_equal(gs_ledger_remove(&l, s.id), 0);
        assert_true(gs_ledger_save(&l, path, NULL) >= 0);
        gs_ledger_done(&l);
        t_open(e, 1);
        /* Its config, its slice directory and its page directory. */
        assert_int_equal(reconcile(e), 3);
        assert_int_equal(t_count(e, "conf"), 0);
        assert_int_equal(t_count(e, "slices"), 0);
        assert_int_equal(t_count(e, "pages"), 0);
        t_env_free(e);
}

static void stale_config_rewritten(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct node_request req = t_local(300);
        struct gs_slice s = t_prepare(e, &req);
        char conf[NODE_PATH_MAX], dir[NODE_PATH_MAX];
        t_conf_path(e, s.id, conf, sizeof(conf));
        t_dir_path(e, s.id, dir, sizeof(dir));

        /* Someone raised the memory limit in the file. */
        struct gs_slice_conf c;
        assert_int_equal(gs_slice_conf_load(conf, &c, NULL), 0);
        c.memory_limit = 15 * T_GIB;
        char text[GS_SLICE_CONF_MAX_BYTES + 1];
        int len = gs_slice_conf_format(&c, text, sizeof(text), NULL);
        assert_true(len > 0);
        put_file(conf, text, 0644);
        assert_int_equal(reconcile(e), 1);
        t_assert_conf(e, &s, dir);

        /* Garbage in the file. */
        put_file(conf, "this is not a config\n", 0444);
        assert_int_equal(reconcile(e), 1);
        t_assert_conf(e, &s, dir);

        /* The compute share changed in the file. */
        assert_int_equal(gs_slice_conf_load(conf, &c, NULL), 0);
        c.compute_milli = 900;
        len = gs_slice_conf_format(&c, text, sizeof(text), NULL);
        put_file(conf, text, 0444);
        assert_int_equal(reconcile(e), 1);
        t_assert_conf(e, &s, dir);
        assert_int_equal(reconcile(e), 0);
        t_env_free(e);
}

/* A directory elsewhere, mode 0750, with a file in it. */
static void make_target(struct t_env *e, char *target, size_t size, char *keep, size_t ksize)
{
        snprintf(target, size, "%s/elsewhere", e->dir);
        assert_int_equal(mkdir(target, 0750), 0);
        assert_int_equal(chmod(target, 0750), 0);
        snprintf(keep, ksize, "%s/keep", target);
        put_file(keep, "precious", 0600);
}

static void symlink_not_followed_on_prepare(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        char target[NODE_PATH_MAX], keep[NODE_PATH_MAX + 8], link[NODE_PATH_MAX];
        make_target(e, target, sizeof(target), keep, sizeof(keep));
        /* The next Kubernetes slice will be k8s-1. */
        assert_int_equal(e->node->ledger.next_id, 1);
        t_dir_path(e, "k8s-1", link, sizeof(link));
        assert_int_equal(symlink(target, link), 0);

        struct node_request req = t_kube(300, "0.0-299");
        struct gs_slice out;
        struct gs_error *err = NULL;
        node_lock(e->node);
        int r = node_slice_prepare_locked(e->node, &req, &out, &err);
        node_unlock(e->node);
        /* The link's target is untouched (no chmod to 0777, no removal). */
        assert_int_equal(t_mode(target), 0750);
        assert_true(t_exists(keep));
        struct gs_ledger disk;
        if (r < 0) {
                /* Refused (today's behaviour): no record, no config left. */
                assert_non_null(err);
                err = gs_error_free(err);
                assert_int_equal(e->node->ledger.n_slices, 0);
                assert_int_equal(t_disk_slices(e, &disk), 0);
                gs_ledger_done(&disk);
                assert_int_equal(t_count(e, "conf"), 0);
        } else {
                /* Or made: then in a real directory of its own, not the link. */
                assert_true(t_is_dir(link));
                assert_int_equal(t_mode(link), 0777);
        }

        /* The next slice is made normally, with a fresh id. */
        struct gs_slice s = t_prepare(e, &req);
        assert_string_equal(s.id, "k8s-2");
        t_env_free(e);
}

static void symlink_not_followed_on_reconcile(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        char target[NODE_PATH_MAX], keep[NODE_PATH_MAX + 8], dir[NODE_PATH_MAX];
        make_target(e, target, sizeof(target), keep, sizeof(keep));
        struct node_request req = t_local(300);
        struct gs_slice s = t_prepare(e, &req);
        t_dir_path(e, s.id, dir, sizeof(dir));
        assert_int_equal(rmdir(dir), 0);
        assert_int_equal(symlink(target, dir), 0);

        /* The recorded slice's directory is a link: not repaired through it. */
        assert_int_equal(reconcile(e), 0);
        assert_int_equal(t_mode(target), 0750);
        assert_true(t_exists(keep));

        /* An orphan link: removing it must not empty its target. */
        char orphan[NODE_PATH_MAX];
        t_dir_path(e, "s77", orphan, sizeof(orphan));
        assert_int_equal(symlink(target, orphan), 0);
        reconcile(e);
        assert_int_equal(t_mode(target), 0750);
        assert_true(t_exists(keep));

        /* Releasing the slice does not follow the link either. */
        assert_int_equal(t_release(e, s.id), 0);
        assert_true(t_exists(keep));
        assert_int_equal(t_mode(target), 0750);
        t_env_free(e);
}

/* A slice's config replaced by a link to a copy of itself (or a FIFO): it
 * is not read through the link (nor blocked on) but rewritten as a file of
 * its own; the link's target is untouched. */
static void config_link_rewritten(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        char target[NODE_PATH_MAX], keep[NODE_PATH_MAX + 8], conf[NODE_PATH_MAX];
        make_target(e, target, sizeof(target), keep, sizeof(keep));
        struct node_request req = t_local(300);
        struct gs_slice s = t_prepare(e, &req);
        node_conf_path(e->node, s.id, conf, sizeof(conf));
        char copy[NODE_PATH_MAX + 16];
        snprintf(copy, sizeof(copy), "%s/copy.conf", target);
        assert_int_equal(rename(conf, copy), 0);
        assert_int_equal(symlink(copy, conf), 0);
        assert_int_equal(reconcile(e), 1);
        struct stat st;
        assert_int_equal(lstat(conf, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        assert_true(t_exists(copy));
        assert_true(t_exists(keep));
        assert_int_equal(unlink(conf), 0);
        assert_int_equal(mkfifo(conf, 0600), 0);
        assert_int_equal(reconcile(e), 1);
        assert_int_equal(lstat(conf, &st), 0);
        assert_true(S_ISREG(st.st_mode));
        t_env_free(e);
}

/* An entry of slices/ that is not a directory (a symlink, a plain file)
 * that no slice names is removed like any orphan (it was only rmdir()ed,
 * which fails with ENOTDIR, and counted as removed on every start). */
static void orphan_non_directory_removed(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        char target[NODE_PATH_MAX], keep[NODE_PATH_MAX + 8], link[NODE_PATH_MAX];
        char junk[NODE_PATH_MAX];
        make_target(e, target, sizeof(target), keep, sizeof(keep));
        t_dir_path(e, "s77", link, sizeof(link));
        assert_int_equal(symlink(target, link), 0);
        t_dir_path(e, "junk", junk, sizeof(junk));
        put_file(junk, "x", 0600);
        assert_int_equal(reconcile(e), 2);
        assert_true(t_exists(keep));         /* the target is safe ... */
        assert_false(t_exists(link));        /* ... but the link should be gone */
        assert_false(t_exists(junk));
        assert_int_equal(reconcile(e), 0);   /* and nothing left to count */
        t_env_free(e);
}

/* A link in place of the state directory or of conf/ or slices/: refused
 * at open, never written through. */
static void layout_links_refused(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        e->node = node_close(e->node);
        char target[NODE_PATH_MAX], keep[NODE_PATH_MAX + 8], path[NODE_PATH_MAX];
        make_target(e, target, sizeof(target), keep, sizeof(keep));
        static const char *const subs[] = { "conf", "slices" };
        for (size_t i = 0; i < 2; i++) {
                snprintf(path, sizeof(path), "%s/%s", e->state, subs[i]);
                char moved[NODE_PATH_MAX + 8];
                snprintf(moved, sizeof(moved), "%s.real", path);
                assert_int_equal(rename(path, moved), 0);
                assert_int_equal(symlink(target, path), 0);
                struct node *n = NULL;
                struct gs_error *err = NULL;
                assert_true(node_open(&e->cfg, &n, &err) < 0);
                assert_null(n);
                gs_error_free(err);
                assert_int_equal(unlink(path), 0);
                assert_int_equal(rename(moved, path), 0);
        }
        /* The state directory itself a link. */
        char real[NODE_PATH_MAX + 8];
        snprintf(real, sizeof(real), "%s.real", e->state);
        assert_int_equal(rename(e->state, real), 0);
        assert_int_equal(symlink(target, e->state), 0);
        struct node *n = NULL;
        struct gs_error *err = NULL;
        assert_int_equal(node_open(&e->cfg, &n, &err), -EPERM);
        gs_error_free(err);
        assert_int_equal(t_mode(target), 0750);
        assert_true(t_exists(keep));
        char lock[NODE_PATH_MAX + 8];
        snprintf(lock, sizeof(lock), "%s/lock", target);
        assert_false(t_exists(lock));
        assert_int_equal(unlink(e->state), 0);
        assert_int_equal(rename(real, e->state), 0);
        t_open(e, 1);
        t_env_free(e);
}

static void damaged_ledger_refused(void **state)
{
        (void)state;
        struct t_env *e = t_env_new(1, NULL, NULL, NULL);
        struct node_request req = t_local(300);
        t_prepare(e, &req);
        e->node = node_close(e->node);
        char ledger[NODE_PATH_MAX];
        ledger_path(e, ledger, sizeof(ledger));
        static const char bad[] = "gpuslice-ledger 1\nnext_id 5\nslice id=s4 milli=300\n";
        put_file(ledger, bad, 0600);

        struct node *n = NULL;
        struct gs_error *err = NULL;
        assert_true(node_open(&e->cfg, &n, &err) < 0);
        assert_null(n);
        assert_non_null(err);
        assert_non_null(strstr(gs_error_msg(err), ledger));
        gs_error_free(err);
        /* The damaged file is kept for a person to repair. */
        char buf[256] = "";
        FILE *f = fopen(ledger, "r");
        assert_non_null(f);
        size_t got = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        assert_int_equal(got, strlen(bad));
        assert_string_equal(buf, bad);
        /* The lock was given back: once repaired, the node opens. */
        assert_int_equal(unlink(ledger), 0);
        t_open(e, 1);
        t_env_free(e);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_teardown(crash_before_files, t_teardown),
                cmocka_unit_test_teardown(ledger_written_directly, t_teardown),
                cmocka_unit_test_teardown(orphans_removed, t_teardown),
                cmocka_unit_test_teardown(stale_config_rewritten, t_teardown),
                cmocka_unit_test_teardown(symlink_not_followed_on_prepare, t_teardown),
                cmocka_unit_test_teardown(symlink_not_followed_on_reconcile, t_teardown),
                cmocka_unit_test_teardown(orphan_non_directory_removed, t_teardown),
                cmocka_unit_test_teardown(config_link_rewritten, t_teardown),
                cmocka_unit_test_teardown(layout_links_refused, t_teardown),
                cmocka_unit_test_teardown(damaged_ledger_refused, t_teardown),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
