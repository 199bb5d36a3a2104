/* SPDX-License-Identifier: Apache-2.0 */
/* The watchdog's rules: every verdict from a snapshot, its evidence, the
 * grace period, and the well-behaved cases that must stay silent. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "watchdog.h"

#define MiB (1ull << 20)

struct fix {
        struct gs_wd_proc procs[2][8];
        struct gs_wd_gpu gpus[2];
        struct gs_wd_book books[2][8];
        struct gs_wd_slice slices[2];
        struct gs_wd_snapshot snap;
        struct gs_wd_verdict out[32];
};

/* GPU-A with slice s1 (cap 1 GiB, 300m) and GPU-B with no slice. */
static void setup(struct fix *f)
{
        memset(f, 0, sizeof(*f));
        snprintf(f->gpus[0].uuid, sizeof(f->gpus[0].uuid), "GPU-A");
        snprintf(f->gpus[1].uuid, sizeof(f->gpus[1].uuid), "GPU-B");
        f->gpus[0].procs = f->procs[0];
        f->gpus[1].procs = f->procs[1];
        struct gs_wd_slice *s = &f->slices[0];
        snprintf(s->id, sizeof(s->id), "s1");
        snprintf(s->gpu, sizeof(s->gpu), "GPU-A");
        s->shim = true;
        s->cap = 1024 * MiB;
        s->milli = 300;
        s->policy = GS_POLICY_SHARE;
        s->books_valid = true;
        s->books = f->books[0];
        f->snap = (struct gs_wd_snapshot){
                .gpus = f->gpus, .n_gpus = 2, .slices = f->slices, .n_slices = 1
        };
}

static void proc(struct fix *f, unsigned gpu, uint32_t pid, uint64_t used, int slice, int util)
{
        f->procs[gpu][f->gpus[gpu].n_procs++] =
                (struct gs_wd_proc){ .pid = pid, .used = used, .slice = slice, .util = util };
}

static void book(struct fix *f, unsigned slice, uint32_t pid, uint64_t charged)
{
        f->books[slice][f->slices[slice].n_books++] =
                (struct gs_wd_book){ .pid = pid, .charged = charged };
}

static const struct gs_wd_verdict *find(const struct fix *f, size_t n, enum gs_wd_reason r,
                                        uint32_t pid)
{
        for (size_t i = 0; i < n && i < 32; i++)
                if (f->out[i].reason == r && f->out[i].pid == pid)
                        return &f->out[i];
        return NULL;
}

static size_t eval(struct gs_wd *w, struct fix *f, int64_t now)
{
        return gs_wd_evaluate(w, &f->snap, now, f->out, 32);
}

static void test_well_behaved_is_silent(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 500 * MiB, 0, 20);
        book(&f, 0, 100, 500 * MiB);
        proc(&f, 0, 101, 256 * MiB + 2 * MiB, 0, 5); /* within one granule */
        book(&f, 0, 101, 256 * MiB);
        proc(&f, 1, 300, 4096 * MiB, -1, 90); /* unsliced, but GPU-B has no slice */
        struct gs_wd *w = gs_wd_new(NULL);
        assert_non_null(w);
        assert_int_equal(eval(w, &f, 1000), 0);
        assert_int_equal(eval(w, &f, 5000), 0);
        gs_wd_free(w);
}

static void test_child_without_shim_over_cap(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 300 * MiB, 0, 0);
        book(&f, 0, 100, 300 * MiB);
        proc(&f, 0, 101, 900 * MiB, 0, 0); /* the child, no slot */
        struct gs_wd *w = gs_wd_new(NULL);
        size_t n = eval(w, &f, 0);
        assert_int_equal(n, 2);
        const struct gs_wd_verdict *v = find(&f, n, GS_WD_MEMORY_OVER_CAP, 101);
        assert_non_null(v);
        assert_string_equal(v->slice, "s1");
        assert_string_equal(v->gpu, "GPU-A");
        assert_int_equal(v->slice_used, 1200 * MiB);
        assert_int_equal(v->cap, 1024 * MiB);
        assert_int_equal(v->used, 900 * MiB);
        assert_true(v->fresh);
        assert_false(v->actionable);
        assert_non_null(strstr(v->msg, "over its cap"));
        /* the honest process is no culprit */
        assert_null(find(&f, n, GS_WD_MEMORY_OVER_CAP, 100));
        v = find(&f, n, GS_WD_NO_SHIM, 101);
        assert_non_null(v);
        assert_non_null(strstr(v->msg, "never loaded the shim"));
        gs_wd_free(w);
}

static void test_over_cap_all_covered_names_all(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 600 * MiB, 0, 0);
        book(&f, 0, 100, 600 * MiB);
        proc(&f, 0, 101, 600 * MiB, 0, 0);
        book(&f, 0, 101, 600 * MiB);
        struct gs_wd *w = gs_wd_new(NULL);
        size_t n = eval(w, &f, 0);
        assert_int_equal(n, 2);
        assert_non_null(find(&f, n, GS_WD_MEMORY_OVER_CAP, 100));
        assert_non_null(find(&f, n, GS_WD_MEMORY_OVER_CAP, 101));
        gs_wd_free(w);
}

static void test_books_disagree(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 500 * MiB, 0, 0);
        book(&f, 0, 100, 0); /* forged: claims nothing */
        struct gs_wd *w = gs_wd_new(NULL);
        size_t n = eval(w, &f, 0);
        assert_int_equal(n, 1);
        const struct gs_wd_verdict *v = find(&f, n, GS_WD_BOOKS_DISAGREE, 100);
        assert_non_null(v);
        assert_int_equal(v->books, 0);
        assert_int_equal(v->used, 500 * MiB);
        /* one granule more is within tolerance, two are not */
        f.books[0][0].charged = 498 * MiB;
        assert_int_equal(eval(w, &f, 10), 0);
        f.books[0][0].charged = 496 * MiB;
        assert_int_equal(eval(w, &f, 20), 1);
        /* unreadable books */
        f.slices[0].books_valid = false;
        n = eval(w, &f, 30);
        assert_int_equal(n, 1);
        assert_non_null(strstr(f.out[0].msg, "cannot be read"));
        gs_wd_free(w);
}

static void test_unsliced_and_wrong_gpu(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 200, 100 * MiB, -1, 0); /* no slice, on a GPU with slices */
        proc(&f, 1, 100, 100 * MiB, 0, 0);  /* s1's process on GPU-B */
        book(&f, 0, 100, 100 * MiB);
        struct gs_wd *w = gs_wd_new(NULL);
        size_t n = eval(w, &f, 0);
        assert_int_equal(n, 2);
        const struct gs_wd_verdict *v = find(&f, n, GS_WD_UNSLICED, 200);
        assert_non_null(v);
        assert_string_equal(v->slice, "");
        assert_string_equal(v->gpu, "GPU-A");
        v = find(&f, n, GS_WD_WRONG_GPU, 100);
        assert_non_null(v);
        assert_string_equal(v->slice, "s1");
        assert_string_equal(v->gpu, "GPU-B");
        gs_wd_free(w);
}

static void test_whole_gpu_slice_has_no_shim_rules(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        f.slices[0].shim = false;
        f.slices[0].cap = 0;
        f.slices[0].milli = 1000;
        proc(&f, 0, 100, 8000 * MiB, 0, 100);
        struct gs_wd *w = gs_wd_new(NULL);
        assert_int_equal(eval(w, &f, 0), 0);
        /* a second GPU of the slice: not a wrong GPU, and watched */
        proc(&f, 1, 100, 8000 * MiB, 0, 100);
        assert_int_equal(eval(w, &f, 10), 1);
        assert_int_equal(f.out[0].reason, GS_WD_WRONG_GPU);
        snprintf(f.slices[0].more_gpus[0], sizeof(f.slices[0].more_gpus[0]), "GPU-B");
        f.slices[0].n_more_gpus = 1;
        assert_int_equal(eval(w, &f, 20), 0);
        proc(&f, 1, 300, 100 * MiB, -1, 0);
        assert_int_equal(eval(w, &f, 30), 1);
        assert_int_equal(f.out[0].reason, GS_WD_UNSLICED);
        gs_wd_free(w);
}

static void test_grace(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 200, 100 * MiB, -1, 0);
        struct gs_wd *w = gs_wd_new(NULL); /* grace 2000 ms */
        assert_int_equal(eval(w, &f, 1000), 1);
        assert_true(f.out[0].fresh);
        assert_false(f.out[0].actionable);
        assert_int_equal(eval(w, &f, 2500), 1);
        assert_false(f.out[0].fresh);
        assert_false(f.out[0].actionable);
        assert_int_equal(f.out[0].first_seen_ms, 1000);
        assert_int_equal(eval(w, &f, 3000), 1);
        assert_true(f.out[0].actionable);
        assert_true(f.out[0].became_actionable);
        assert_int_equal(eval(w, &f, 3500), 1);
        assert_true(f.out[0].actionable);
        assert_false(f.out[0].became_actionable);
        /* gone for one evaluation: starts over */
        f.gpus[0].n_procs = 0;
        assert_int_equal(eval(w, &f, 4000), 0);
        f.gpus[0].n_procs = 1;
        assert_int_equal(eval(w, &f, 4500), 1);
        assert_true(f.out[0].fresh);
        assert_false(f.out[0].actionable);
        gs_wd_free(w);
}

static void test_compute_over_share_cap_only(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 100 * MiB, 0, 80);
        book(&f, 0, 100, 100 * MiB);
        struct gs_wd_config cfg;
        gs_wd_config_default(&cfg);
        struct gs_wd *w = gs_wd_new(&cfg);
        /* policy share: lending is allowed */
        for (int t = 0; t <= 6000; t += 500)
                assert_int_equal(eval(w, &f, t), 0);
        f.slices[0].policy = GS_POLICY_CAP;
        size_t n = 0;
        for (int t = 6500; t <= 12000; t += 500)
                n = eval(w, &f, t);
        assert_int_equal(n, 1);
        const struct gs_wd_verdict *v = find(&f, n, GS_WD_COMPUTE_OVER_SHARE, 0);
        assert_non_null(v);
        assert_int_equal(v->share_milli, 300);
        assert_int_equal(v->util_milli, 800);
        /* within share + tolerance: silent */
        f.procs[0][0].util = 34;
        for (int t = 12500; t <= 20000; t += 500)
                n = eval(w, &f, t);
        assert_int_equal(n, 0);
        gs_wd_free(w);
}

static void test_truncated_output_counts_all(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        for (uint32_t p = 0; p < 8; p++)
                proc(&f, 0, 500 + p, MiB, -1, 0);
        struct gs_wd *w = gs_wd_new(NULL);
        assert_int_equal(gs_wd_evaluate(w, &f.snap, 0, f.out, 3), 8);
        /* the dropped ones still age */
        assert_int_equal(gs_wd_evaluate(w, &f.snap, 2000, f.out, 32), 8);
        for (int i = 0; i < 8; i++)
                assert_true(f.out[i].actionable);
        gs_wd_free(w);
}

/* Books whose total is not the sum of their slots were written outside
 * the shim: books_forged, slice-wide; books that add up are silent. */
static void test_books_forged(void **state)
{
        (void)state;
        static struct fix f;
        setup(&f);
        proc(&f, 0, 100, 500 * MiB, 0, 20);
        book(&f, 0, 100, 500 * MiB);
        f.slices[0].books_sum = 500 * MiB;
        f.slices[0].books_used = 500 * MiB;
        struct gs_wd *w = gs_wd_new(NULL);
        assert_non_null(w);
        assert_null(find(&f, eval(w, &f, 0), GS_WD_BOOKS_FORGED, 0));
        f.slices[0].books_used = 0; /* the tenant zeroed the total */
        size_t n = eval(w, &f, 500);
        const struct gs_wd_verdict *v = find(&f, n, GS_WD_BOOKS_FORGED, 0);
        assert_non_null(v);
        assert_string_equal(v->slice, "s1");
        assert_int_equal(v->books, 0);
        assert_int_equal(v->used, 500 * MiB);
        assert_true(v->fresh);
        assert_null(find(&f, n, GS_WD_MEMORY_OVER_CAP, 100)); /* NVML is within the cap */
        gs_wd_free(w);
}

static void test_reason_names(void **state)
{
        (void)state;
        assert_string_equal(gs_wd_reason_name(GS_WD_MEMORY_OVER_CAP), "memory_over_cap");
        assert_string_equal(gs_wd_reason_name(GS_WD_COMPUTE_OVER_SHARE), "compute_over_share");
        assert_string_equal(gs_wd_reason_name(GS_WD_BOOKS_FORGED), "books_forged");
        assert_string_equal(gs_wd_reason_name(GS_WD_N_REASONS), "unknown");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_well_behaved_is_silent),
                cmocka_unit_test(test_child_without_shim_over_cap),
                cmocka_unit_test(test_over_cap_all_covered_names_all),
                cmocka_unit_test(test_books_disagree),
                cmocka_unit_test(test_unsliced_and_wrong_gpu),
                cmocka_unit_test(test_whole_gpu_slice_has_no_shim_rules),
                cmocka_unit_test(test_grace),
                cmocka_unit_test(test_compute_over_share_cap_only),
                cmocka_unit_test(test_truncated_output_counts_all),
                cmocka_unit_test(test_books_forged),
                cmocka_unit_test(test_reason_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
