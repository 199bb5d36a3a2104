/* SPDX-License-Identifier: Apache-2.0 */
/* Placement: binpack and spread, memory fit, whole GPUs, refusal message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "placement.h"

#define GiB (1ull << 30)

static void make_inv(struct gs_inventory *inv, unsigned n, uint64_t mem)
{
        memset(inv, 0, sizeof(*inv));
        inv->n_gpus = n;
        for (unsigned i = 0; i < n; i++) {
                inv->gpus[i].index = i;
                snprintf(inv->gpus[i].uuid, sizeof(inv->gpus[i].uuid), "GPU-%u", i);
                inv->gpus[i].memory_total = mem;
                inv->gpus[i].healthy = true;
        }
}

static void add(struct gs_ledger *l, unsigned gpu, uint32_t milli, uint64_t mem)
{
        struct gs_slice s = { .milli = milli, .memory_cap = mem, .pid = 1, .n_gpus = 1 };
        s.gpus[0].index = gpu;
        snprintf(s.gpus[0].uuid, sizeof(s.gpus[0].uuid), "GPU-%u", gpu);
        gs_ledger_assign_id(l, &s);
        assert_int_equal(gs_ledger_add(l, &s, NULL), 0);
}

static int place(const struct gs_inventory *inv, const struct gs_ledger *l,
                 enum gs_placement_policy pol, uint32_t milli, uint64_t mem, struct gs_placement *p,
                 struct gs_error **err)
{
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(inv, l, usage);
        struct gs_placement_request req = { .milli = milli, .memory = mem };
        return gs_place(inv, usage, pol, &req, p, err);
}

static void binpack_best_fit(void **state)
{
        (void)state;
        struct gs_inventory inv;
        struct gs_ledger l;
        make_inv(&inv, 3, 10 * GiB);
        gs_ledger_init(&l);
        add(&l, 0, 200, 2 * GiB);   /* GPU 0: 800m free */
        add(&l, 1, 600, 6 * GiB);   /* GPU 1: 400m free */
        struct gs_placement p;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 300, GiB, &p, NULL), 0);
        assert_int_equal(p.n_gpus, 1);
        assert_int_equal(p.gpus[0], 1);            /* least free share that fits */
        assert_int_equal(p.memory_cap, GiB);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 500, GiB, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 0);
        /* Memory decides too: GPU 1 has share but not 5Gi. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 300, 5 * GiB, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 0);
        /* Default memory: share x GPU memory, rounded to 2 MiB. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 250, 0, &p, NULL), 0);
        assert_int_equal(p.memory_cap, (10 * GiB / 4) & ~((2ull << 20) - 1));
        gs_ledger_done(&l);
}

static void spread_most_free(void **state)
{
        (void)state;
        struct gs_inventory inv;
        struct gs_ledger l;
        make_inv(&inv, 3, 10 * GiB);
        gs_ledger_init(&l);
        add(&l, 0, 200, GiB);
        add(&l, 2, 100, GiB);
        struct gs_placement p;
        assert_int_equal(place(&inv, &l, GS_PLACE_SPREAD, 300, GiB, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 1);
        /* Planning several: commit and place again. */
        struct gs_gpu_usage usage[GS_MAX_GPUS];
        gs_placement_usage(&inv, &l, usage);
        struct gs_placement_request req = { .milli = 300, .memory = GiB };
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_SPREAD, &req, &p, NULL), 0);
        gs_placement_commit(usage, &req, &p);
        assert_int_equal(gs_place(&inv, usage, GS_PLACE_SPREAD, &req, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 2);   /* GPU 1 now has 700m, GPU 2 900m */
        gs_ledger_done(&l);
}

static void refusal_message(void **state)
{
        (void)state;
        struct gs_inventory inv;
        struct gs_ledger l;
        make_inv(&inv, 2, 10 * GiB);
        gs_ledger_init(&l);
        add(&l, 0, 600, 3 * GiB);
        add(&l, 1, 300, 8 * GiB);
        inv.gpus[1].healthy = true;
        struct gs_placement p;
        struct gs_error *err = NULL;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 600, 9 * GiB, &p, &err), -ENOSPC);
        assert_string_equal(gs_error_msg(err),
                            "no single GPU has room for 600m and 9.0Gi: "
                            "GPU 0 (GPU-0): 400m and 7.0Gi free (1 slice); "
                            "GPU 1 (GPU-1): 700m and 2.0Gi free (1 slice)");
        gs_error_free(err);
        err = NULL;
        /* Unhealthy GPUs are never chosen and say so. */
        inv.gpus[0].healthy = false;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 100, GiB, &p, &err), 0);
        assert_int_equal(p.gpus[0], 1);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 800, GiB, &p, &err), -ENOSPC);
        assert_non_null(strstr(gs_error_msg(err), "GPU 0 (GPU-0): unhealthy"));
        gs_error_free(err);
        err = NULL;
        /* Never fits: more memory than any GPU. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 100, 11 * GiB, &p, &err), -EINVAL);
        gs_error_free(err);
        gs_ledger_done(&l);
}

/* A share whose memory cap cannot hold one CUDA context (issue 17: 10m of
 * 16 GiB is 162 MiB in 2 MiB granules, a context takes 256 MiB) can never run: refused up
 * front naming the least share and memory that would, not placed to fail
 * later in the slice config. */
static void tiny_shares(void **state)
{
        (void)state;
        struct gs_inventory inv;
        make_inv(&inv, 2, 16 * GiB);
        inv.gpus[0].context_overhead = inv.gpus[1].context_overhead = 256ull << 20;
        struct gs_ledger l;
        gs_ledger_init(&l);
        struct gs_placement p;
        struct gs_error *err = NULL;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 10, 0, &p, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "gpu share 10m gets 162.0Mi of memory by "
                                                  "default"));
        assert_non_null(strstr(gs_error_msg(err), "a share of at least 16m"));
        assert_non_null(strstr(gs_error_msg(err), "gpu memory above 256.0Mi"));
        err = gs_error_free(err);
        /* 15m: 244 MiB, still no room; 16m: 262 MiB. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 15, 0, &p, NULL), -EINVAL);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 16, 0, &p, NULL), 0);
        /* A tiny share with memory of its own is fine; too little memory is not. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 1, GiB, &p, NULL), 0);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 100, 200ull << 20, &p, &err),
                         -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "gpu memory 200.0Mi is not more than a CUDA "
                                                  "context takes"));
        err = gs_error_free(err);
        /* A GPU whose context takes more is skipped, another one used. */
        inv.gpus[0].context_overhead = GiB;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 30, 0, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 1);
        /* Whole GPUs: at most 8 per slice, and the node's count named. */
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 4000, 0, &p, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "this node has 2 GPUs"));
        err = gs_error_free(err);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 9000, 0, &p, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "one slice holds at most 8"));
        err = gs_error_free(err);
        gs_ledger_done(&l);
}

static void whole_gpus(void **state)
{
        (void)state;
        struct gs_inventory inv;
        struct gs_ledger l;
        make_inv(&inv, 3, 10 * GiB);
        gs_ledger_init(&l);
        add(&l, 1, 1, 2 << 20);
        struct gs_placement p;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 2000, 0, &p, NULL), 0);
        assert_int_equal(p.n_gpus, 2);
        assert_int_equal(p.gpus[0], 0);
        assert_int_equal(p.gpus[1], 2);
        assert_int_equal(p.memory_cap, 0);
        struct gs_error *err = NULL;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 3000, 0, &p, &err), -ENOSPC);
        assert_non_null(strstr(gs_error_msg(err), "only 2 GPUs hold no slices"));
        gs_error_free(err);
        err = NULL;
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 4000, 0, &p, &err), -EINVAL);
        gs_error_free(err);
        /* A whole-GPU slice fills its GPUs: no fractional slice lands there. */
        struct gs_slice s = { .milli = 1000, .pid = 1, .n_gpus = 1 };
        snprintf(s.gpus[0].uuid, sizeof(s.gpus[0].uuid), "GPU-0");
        gs_ledger_assign_id(&l, &s);
        assert_int_equal(gs_ledger_add(&l, &s, NULL), 0);
        assert_int_equal(place(&inv, &l, GS_PLACE_SPREAD, 500, GiB, &p, NULL), 0);
        assert_int_equal(p.gpus[0], 2);
        assert_int_equal(place(&inv, &l, GS_PLACE_BINPACK, 1500, 0, &p, NULL), -EINVAL);
        gs_ledger_done(&l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(binpack_best_fit), cmocka_unit_test(spread_most_free),
                cmocka_unit_test(refusal_message),  cmocka_unit_test(whole_gpus),
                cmocka_unit_test(tiny_shares),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
