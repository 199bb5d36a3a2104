/* SPDX-License-Identifier: Apache-2.0 */
/* Ledger: encode/decode round trip, corrupt inputs, limits, persistence. */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "ledger.h"

static struct gs_slice make_slice(struct gs_ledger *l, uint32_t milli, const char *name)
{
        struct gs_slice s = { .milli = milli, .memory_cap = 6ull << 30, .policy = GS_POLICY_SHARE,
                              .pid = 4242, .start_time = 991234, .uid = 1000, .created = 1764471845,
                              .n_gpus = 1 };
        snprintf(s.name, sizeof(s.name), "%s", name);
        snprintf(s.gpus[0].uuid, sizeof(s.gpus[0].uuid), "GPU-0000-aaaa");
        gs_ledger_assign_id(l, &s);
        return s;
}

static void round_trip(void **state)
{
        (void)state;
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice a = make_slice(&l, 300, "iris");
        a.policy = GS_POLICY_CAP;
        struct gs_slice b = make_slice(&l, 2000, "");
        b.memory_cap = 0;
        b.n_gpus = 2;
        b.gpus[0].index = 2; /* whole GPUs of their own: not a's */
        snprintf(b.gpus[0].uuid, sizeof(b.gpus[0].uuid), "GPU-0000-bbbb");
        snprintf(b.gpus[1].uuid, sizeof(b.gpus[1].uuid), "GPU-1111");
        b.gpus[1].index = 3;
        assert_int_equal(gs_ledger_add(&l, &a, NULL), 0);
        assert_int_equal(gs_ledger_add(&l, &b, NULL), 0);
        assert_int_equal(gs_ledger_add(&l, &a, NULL), -EEXIST);

        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_ledger_encode(&l, &text, &len), 0);
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), 0);
        assert_int_equal(back.n_slices, 2);
        assert_int_equal(back.next_id, 3);
        assert_memory_equal(&back.slices[0], &l.slices[0], sizeof(struct gs_slice));
        assert_memory_equal(&back.slices[1], &l.slices[1], sizeof(struct gs_slice));
        assert_string_equal(back.slices[1].gpus[1].uuid, "GPU-1111");
        gs_free(text);

        assert_int_equal(gs_ledger_remove(&l, "s1"), 0);
        assert_int_equal(gs_ledger_remove(&l, "s1"), -ENOENT);
        assert_int_equal(l.n_slices, 1);
        assert_string_equal(l.slices[0].id, "s2");
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

static const char good[] =
        "gpuslice-ledger 1\nnext_id 5\n"
        "slice id=s4 milli=300 memory=1048576 policy=share pid=7 start=1 uid=0 created=2 gpu=0,GPU-a\n"
        "end 1\n";

static void corrupt_inputs(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "",
                "gpuslice-ledger 2\nnext_id 1\nend 0\n",                  /* unknown version */
                "gpuslice-ledger 1\nnext_id 1\n",                          /* truncated: no end */
                "gpuslice-ledger 1\nnext_id 1\nend 1\n",                   /* count mismatch */
                "gpuslice-ledger 1\nnext_id 1\nend 0",                     /* no final newline */
                "gpuslice-ledger 1\nnext_id 5\nslice id=s4 milli=300\nend 1\n", /* missing keys */
                "gpuslice-ledger 1\nnext_id 5\n"
                "slice id=s4 milli=1500 memory=1 policy=share pid=7 start=1 uid=0 created=2 gpu=0,G\n"
                "end 1\n",                                                 /* bad share */
                "gpuslice-ledger 1\nnext_id 5\n"
                "slice id=s4 milli=300 memory=1 policy=fast pid=7 start=1 uid=0 created=2 gpu=0,G\n"
                "end 1\n",                                                 /* bad policy */
                "gpuslice-ledger 1\nnext_id 3\n"
                "slice id=s4 milli=300 memory=1 policy=share pid=7 start=1 uid=0 created=2 gpu=0,G\n"
                "end 1\n",                                                 /* id >= next_id */
                "gpuslice-ledger 1\nnext_id 5\n"
                "slice id=s4 milli=300 memory=1 policy=share pid=7 start=1 uid=0 created=2 gpu=0,G\n"
                "slice id=s4 milli=300 memory=1 policy=share pid=7 start=1 uid=0 created=2 gpu=0,G\n"
                "end 2\n",                                                 /* duplicate */
                "gpuslice-ledger 1\nnext_id 5\n"
                "slice id=s4 milli=300 memory=99999999999999999999 policy=share pid=7 start=1 uid=0 "
                "created=2 gpu=0,G\nend 1\n",                              /* overflow */
                "gpuslice-ledger 1\nnext_id 1\nend 0\ngarbage\n",           /* data after end */
                "{\"json\": true}\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct gs_ledger l;
                gs_ledger_init(&l);
                struct gs_error *err = NULL;
                int r = gs_ledger_decode(&l, bad[i], strlen(bad[i]), &err);
                if (r != -EINVAL)
                        fail_msg("input %zu accepted (r=%d)", i, r);
                assert_non_null(err);
                assert_int_equal(l.n_slices, 0);
                gs_error_free(err);
                gs_ledger_done(&l);
        }
        /* A failed decode leaves the ledger as it was. */
        struct gs_ledger l;
        gs_ledger_init(&l);
        assert_int_equal(gs_ledger_decode(&l, good, strlen(good), NULL), 0);
        assert_int_equal(l.n_slices, 1);
        assert_int_equal(gs_ledger_decode(&l, bad[1], strlen(bad[1]), NULL), -EINVAL);
        assert_int_equal(l.n_slices, 1);
        gs_ledger_done(&l);
}

#define REC(id, milli, mem, gpu) \
        "slice id=" id " milli=" milli " memory=" mem " policy=share pid=7 start=1 uid=0 " \
        "created=2 gpu=" gpu "\n"

/* Decode `body` (the lines after next_id, before sum/end) with a correct
 * sum line added. */
static int decode_summed(struct gs_ledger *l, const char *body, unsigned n, struct gs_error **err)
{
        char text[4096];
        int len = snprintf(text, sizeof(text), "gpuslice-ledger 1\nnext_id 9\n%s", body);
        len += snprintf(text + len, sizeof(text) - (size_t)len, "sum %016" PRIx64 "\nend %u\n",
                        gs_ledger_checksum(text, (size_t)len), n);
        return gs_ledger_decode(l, text, (size_t)len, err);
}

/* Parseable corruption (issue 17): an edited record breaks the checksum;
 * a ledger without one (an older gpusliced's) still loads, flagged, and is
 * saved with one; the capacity invariants hold on every load. */
static void integrity(void **state)
{
        (void)state;
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice s = make_slice(&l, 300, "a");
        assert_int_equal(gs_ledger_add(&l, &s, NULL), 0);
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_ledger_encode(&l, &text, &len), 0);
        assert_non_null(strstr(text, "\nsum "));
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), 0);
        assert_false(back.unsummed);
        /* 300m edited to 900m, and the pid changed: both caught. */
        char *edit = strstr(text, "milli=300");
        edit[6] = '9';
        struct gs_error *err = NULL;
        assert_int_equal(gs_ledger_decode(&back, text, len, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "checksum"));
        assert_non_null(strstr(gs_error_msg(err), "line 4"));
        err = gs_error_free(err);
        edit[6] = '3';
        edit = strstr(text, "pid=4242");
        edit[4] = '5';
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), -EINVAL);
        edit[4] = '4';
        /* Only `end` may follow `sum`; one `sum`. */
        static const char after[] = "gpuslice-ledger 1\nnext_id 1\nsum 0000000000000000\n"
                                    "sum 0000000000000000\nend 0\n";
        assert_int_equal(gs_ledger_decode(&back, after, strlen(after), NULL), -EINVAL);
        static const char shortsum[] = "gpuslice-ledger 1\nnext_id 1\nsum 12\nend 0\n";
        assert_int_equal(gs_ledger_decode(&back, shortsum, strlen(shortsum), NULL), -EINVAL);
        gs_free(text);

        /* Without `sum`: loads, flagged; encoding it again adds the line. */
        assert_int_equal(gs_ledger_decode(&back, good, strlen(good), NULL), 0);
        assert_true(back.unsummed);
        assert_int_equal(gs_ledger_encode(&back, &text, &len), 0);
        assert_non_null(strstr(text, "\nsum "));
        assert_int_equal(gs_ledger_decode(&l, text, len, NULL), 0);
        assert_false(l.unsummed);
        gs_free(text);

        /* Capacity, checksum or not: 300m + 900m on one GPU. */
        static const char over[] = "gpuslice-ledger 1\nnext_id 9\n" REC("s1", "300", "1", "0,GPU-a")
                REC("s2", "900", "1", "0,GPU-a") "end 2\n";
        assert_int_equal(gs_ledger_decode(&back, over, strlen(over), &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "slice s2: the shares on GPU GPU-a add up to "
                                                  "1200m"));
        err = gs_error_free(err);
        assert_int_equal(decode_summed(&back, REC("s1", "300", "1", "0,GPU-a")
                                       REC("s2", "900", "1", "0,GPU-a"), 2, NULL), -EINVAL);
        /* 1000m exactly, and the same shares on two GPUs, are fine. */
        assert_int_equal(decode_summed(&back, REC("s1", "300", "1", "0,GPU-a")
                                       REC("s2", "700", "1", "0,GPU-a")
                                       REC("s3", "900", "1", "1,GPU-b"), 3, NULL), 0);
        /* A whole GPU is exclusive. */
        assert_int_equal(decode_summed(&back, REC("s1", "1000", "0", "0,GPU-a")
                                       REC("s2", "100", "1", "0,GPU-a"), 2, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), "whole-GPU"));
        err = gs_error_free(err);
        assert_int_equal(decode_summed(&back, REC("s2", "100", "1", "1,GPU-b")
                                       REC("s3", "2000", "0", "0,GPU-a gpu=1,GPU-b"), 2, NULL),
                         -EINVAL);
        /* Restored knowingly over a full GPU: kept, and round-trips. */
        assert_int_equal(decode_summed(&back, REC("s1", "900", "1", "0,GPU-a")
                                       "slice id=k8s-2 milli=300 memory=1 policy=share pid=0 "
                                       "start=0 uid=0 created=2 kind=k8s gpu=0,GPU-a "
                                       "overcommit=1\n", 2, NULL), 0);
        assert_true(back.slices[1].overcommitted);
        assert_int_equal(gs_ledger_encode(&back, &text, &len), 0);
        assert_non_null(strstr(text, " overcommit=1\n"));
        gs_free(text);
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

static void limits(void **state)
{
        (void)state;
        struct gs_ledger l;
        gs_ledger_init(&l);
        for (int i = 0; i < GS_LEDGER_MAX_SLICES; i++) {
                struct gs_slice s = make_slice(&l, 1, "x");
                assert_int_equal(gs_ledger_add(&l, &s, NULL), 0);
        }
        struct gs_slice s = make_slice(&l, 1, "x");
        struct gs_error *err = NULL;
        assert_int_equal(gs_ledger_add(&l, &s, &err), -ENOSPC);
        gs_error_free(err);
        struct gs_slice bad = make_slice(&l, 300, "no spaces allowed");
        assert_int_equal(gs_ledger_add(&l, &bad, NULL), -EINVAL);
        gs_ledger_done(&l);
}

static void save_and_load(void **state)
{
        (void)state;
        char dir[] = "/tmp/gs-ledger-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof(path), "%s/ledger", dir);
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        assert_int_equal(gs_ledger_load(&back, path, NULL), -ENOENT);
        struct gs_slice s = make_slice(&l, 250, "a");
        assert_int_equal(gs_ledger_add(&l, &s, NULL), 0);
        assert_int_equal(gs_ledger_save(&l, path, NULL), 0);
        assert_int_equal(gs_ledger_load(&back, path, NULL), 0);
        assert_int_equal(back.n_slices, 1);
        assert_int_equal(back.slices[0].milli, 250);
        /* A corrupt file is an error naming the file, never an empty ledger. */
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("gpuslice-ledger 1\nnext_id 2\nslice id=s1 milli=250", f);
        fclose(f);
        struct gs_error *err = NULL;
        assert_int_equal(gs_ledger_load(&back, path, &err), -EINVAL);
        assert_non_null(strstr(gs_error_msg(err), path));
        gs_error_free(err);
        unlink(path);
        rmdir(dir);
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

/* The test seam for the directory fsync (src/core/ledger.c). */
extern int (*atomic_dir_fsync)(int fd);

static int failing_fsync(int fd)
{
        (void)fd;
        errno = EIO;
        return -1;
}

/* A directory sync failing after the rename is not a failed save: the file
 * already holds the new state, so the caller must not roll back. */
static void dir_sync_fails(void **state)
{
        (void)state;
        char dir[] = "/tmp/gs-ledger-XXXXXX";
        assert_non_null(mkdtemp(dir));
        char path[256];
        snprintf(path, sizeof(path), "%s/ledger", dir);
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice s = make_slice(&l, 400, "d");
        assert_int_equal(gs_ledger_add(&l, &s, NULL), 0);
        int (*saved)(int) = atomic_dir_fsync;
        atomic_dir_fsync = failing_fsync;
        struct gs_error *err = NULL;
        int r = gs_ledger_save(&l, path, &err);
        atomic_dir_fsync = saved;
        assert_int_equal(r, EIO); /* positive: saved, durability not certain */
        assert_null(err);
        assert_int_equal(gs_ledger_load(&back, path, NULL), 0);
        assert_int_equal(back.n_slices, 1);
        assert_int_equal(back.slices[0].milli, 400);
        assert_int_equal(access(path, F_OK), 0);
        char tmp[300];
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        assert_int_not_equal(access(tmp, F_OK), 0);
        unlink(path);
        rmdir(dir);
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

static void oom(void **state)
{
        (void)state;
        for (long n = 0; n < 8; n++) {
                struct gs_ledger l;
                gs_ledger_init(&l);
                gs_alloc_fail_after(n);
                int r = gs_ledger_decode(&l, good, strlen(good), NULL);
                gs_alloc_fail_after(-1);
                assert_true(r == 0 || r == -ENOMEM);
                gs_ledger_done(&l);
        }
}

/* Kubernetes slices: no process (pid 0), kind=k8s, and they round-trip. */
static void kube_slices(void **state)
{
        (void)state;
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice k = make_slice(&l, 600, "");
        snprintf(k.id, sizeof(k.id), "k8s-7");
        k.kind = GS_SLICE_KUBE;
        assert_int_equal(gs_ledger_add(&l, &k, NULL), -EINVAL); /* a pid: refused */
        k.pid = 0;
        k.start_time = 0;
        k.uid = 0;
        assert_int_equal(gs_ledger_add(&l, &k, NULL), 0);
        struct gs_slice local = make_slice(&l, 100, "");
        local.pid = 0;
        assert_int_equal(gs_ledger_add(&l, &local, NULL), -EINVAL); /* local needs a pid */
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_ledger_encode(&l, &text, &len), 0);
        assert_non_null(strstr(text, " kind=k8s"));
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), 0);
        assert_int_equal(back.n_slices, 1);
        assert_memory_equal(&back.slices[0], &l.slices[0], sizeof(struct gs_slice));
        gs_free(text);
        static const char *const bad[] = {
                "gpuslice-ledger 1\nnext_id 1\nslice id=k8s-1 milli=300 memory=2097152 "
                "policy=share pid=0 start=0 uid=0 created=2 kind=pod gpu=0,G\nend 1\n",
                "gpuslice-ledger 1\nnext_id 1\nslice id=k8s-1 milli=300 memory=2097152 "
                "policy=share pid=0 start=0 uid=0 created=2 gpu=0,G\nend 1\n",
                "gpuslice-ledger 1\nnext_id 1\nslice id=k8s-1 milli=300 memory=2097152 "
                "policy=share pid=5 start=0 uid=0 created=2 kind=k8s gpu=0,G\nend 1\n",
                "gpuslice-ledger 1\nnext_id 1\nslice id=k8s-1 milli=300 memory=2097152 "
                "policy=share pid=0 start=0 uid=0 created=2 kind=k8s kind=k8s gpu=0,G\nend 1\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct gs_error *err = NULL;
                assert_int_equal(gs_ledger_decode(&back, bad[i], strlen(bad[i]), &err), -EINVAL);
                gs_error_free(err);
        }
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

/* DRA slices: kind=dra with their claim's uid, request and shareID; the
 * fields belong to DRA slices only, and round-trip. */
static void dra_slices(void **state)
{
        (void)state;
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice d = make_slice(&l, 300, "");
        d.kind = GS_SLICE_DRA;
        d.pid = 0;
        d.start_time = 0;
        d.uid = 0;
        assert_int_equal(gs_ledger_add(&l, &d, NULL), -EINVAL); /* no claim */
        snprintf(d.claim.uid, sizeof(d.claim.uid), "0b7f2c1e-4d3a-4c5b-9e8f-1a2b3c4d5e6f");
        snprintf(d.claim.request, sizeof(d.claim.request), "gpu");
        snprintf(d.claim.share, sizeof(d.claim.share), "9d0c8b7a-6f5e-4d3c-8b2a-1f0e9d8c7b6a");
        assert_int_equal(gs_ledger_add(&l, &d, NULL), 0);
        struct gs_slice local = make_slice(&l, 100, "");
        local.claim = d.claim;
        assert_int_equal(gs_ledger_add(&l, &local, NULL), -EINVAL); /* a claim on a local one */
        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_ledger_encode(&l, &text, &len), 0);
        assert_non_null(strstr(text, " kind=dra claim=0b7f2c1e-4d3a-4c5b-9e8f-1a2b3c4d5e6f "
                                     "request=gpu share=9d0c8b7a"));
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), 0);
        assert_int_equal(back.n_slices, 1);
        assert_memory_equal(&back.slices[0], &l.slices[0], sizeof(struct gs_slice));
        gs_free(text);
        static const char *const bad =
                "gpuslice-ledger 1\nnext_id 1\nslice id=dra-1 milli=300 memory=2097152 "
                "policy=share pid=0 start=0 uid=0 created=2 kind=dra request=gpu gpu=0,G\nend 1\n";
        struct gs_error *err = NULL;
        assert_int_equal(gs_ledger_decode(&back, bad, strlen(bad), &err), -EINVAL);
        gs_error_free(err);
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

/* A slice's own over-use policy (overuse=, omitted for the daemon's) and a
 * DRA slice's claim namespace and name (claim_ns=, claim_name=) round-trip;
 * ledgers without them still decode; bad values reject the ledger. */
static void overuse_and_claim_names(void **state)
{
        (void)state;
        struct gs_ledger l, back;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        struct gs_slice a = make_slice(&l, 300, "iris");
        a.overuse = GS_OVERUSE_KILL;
        struct gs_slice b = make_slice(&l, 100, "");
        struct gs_slice d = make_slice(&l, 200, "");
        d.kind = GS_SLICE_DRA;
        d.pid = 0;
        d.start_time = 0;
        d.uid = 0;
        d.overuse = GS_OVERUSE_EVICT;
        snprintf(d.claim.uid, sizeof(d.claim.uid), "0b7f2c1e-4d3a");
        snprintf(d.claim.request, sizeof(d.claim.request), "gpu");
        snprintf(d.claim.ns, sizeof(d.claim.ns), "team-a");
        assert_int_equal(gs_ledger_add(&l, &d, NULL), -EINVAL); /* ns without name */
        char longname[GS_CLAIM_NAME_MAX + 1];
        memset(longname, 'a', GS_CLAIM_NAME_MAX);
        longname[GS_CLAIM_NAME_MAX] = '\0';
        longname[100] = '.';
        memcpy(d.claim.name, longname, sizeof(longname));
        assert_int_equal(gs_ledger_add(&l, &a, NULL), 0);
        assert_int_equal(gs_ledger_add(&l, &b, NULL), 0);
        assert_int_equal(gs_ledger_add(&l, &d, NULL), 0);
        struct gs_slice local = make_slice(&l, 100, "");
        snprintf(local.claim.ns, sizeof(local.claim.ns), "team-a");
        snprintf(local.claim.name, sizeof(local.claim.name), "c");
        assert_int_equal(gs_ledger_add(&l, &local, NULL), -EINVAL); /* names on a local one */
        local = make_slice(&l, 100, "");
        local.overuse = (enum gs_overuse_policy)7;
        assert_int_equal(gs_ledger_add(&l, &local, NULL), -EINVAL);

        char *text = NULL;
        size_t len = 0;
        assert_int_equal(gs_ledger_encode(&l, &text, &len), 0);
        assert_non_null(strstr(text, "name=iris overuse=kill"));
        assert_non_null(strstr(text, " claim_ns=team-a claim_name=aaaa"));
        assert_non_null(strstr(text, " overuse=evict"));
        assert_int_equal(gs_ledger_decode(&back, text, len, NULL), 0);
        assert_int_equal(back.n_slices, 3);
        for (size_t i = 0; i < 3; i++)
                assert_memory_equal(&back.slices[i], &l.slices[i], sizeof(struct gs_slice));
        assert_int_equal(back.slices[1].overuse, GS_OVERUSE_DEFAULT);
        const char *s2 = strstr(text, "id=s2 ");
        assert_non_null(s2);
        const char *s2_over = strstr(s2, "overuse=");
        assert_true(s2_over > strchr(s2, '\n')); /* the daemon's policy: no token */
        gs_free(text);

#define LINE(extra) "gpuslice-ledger 1\nnext_id 9\nslice id=s4 milli=300 memory=2097152 " \
                    "policy=share pid=7 start=1 uid=0 created=2 gpu=0,G" extra "\nend 1\n"
#define DRA(extra) "gpuslice-ledger 1\nnext_id 9\nslice id=dra-4 milli=300 memory=2097152 " \
                   "policy=share pid=0 start=0 uid=0 created=2 kind=dra claim=u request=gpu " \
                   "gpu=0,G" extra "\nend 1\n"
        static const char *const good_ones[] = {
                LINE(""), LINE(" overuse=report"), DRA(""),
                DRA(" claim_ns=default claim_name=my-claim.v1"),
        };
        for (size_t i = 0; i < sizeof(good_ones) / sizeof(good_ones[0]); i++) {
                struct gs_error *err = NULL;
                int r = gs_ledger_decode(&back, good_ones[i], strlen(good_ones[i]), &err);
                if (r != 0)
                        fail_msg("good input %zu refused: %s", i, gs_error_msg(err));
        }
        static const char *const bad[] = {
                LINE(" overuse=default"), LINE(" overuse=KILL"), LINE(" overuse="),
                LINE(" overuse=kill overuse=kill"), LINE(" claim_ns=a claim_name=b"),
                DRA(" claim_ns=Default claim_name=c"), DRA(" claim_ns=-a claim_name=c"),
                DRA(" claim_ns=a claim_name=c..d"), DRA(" claim_ns=a claim_name=c_d"),
                DRA(" claim_ns=a claim_name=.c"), DRA(" claim_ns=a"), DRA(" claim_name=c"),
                DRA(" claim_ns=aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa "
                    "claim_name=c"), /* 64 */
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct gs_error *err = NULL;
                int r = gs_ledger_decode(&back, bad[i], strlen(bad[i]), &err);
                if (r != -EINVAL)
                        fail_msg("bad input %zu accepted (r=%d)", i, r);
                assert_non_null(strstr(gs_error_msg(err), "line 3"));
                gs_error_free(err);
        }
#undef LINE
#undef DRA
        gs_ledger_done(&l);
        gs_ledger_done(&back);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(round_trip),     cmocka_unit_test(kube_slices),
                cmocka_unit_test(dra_slices),     cmocka_unit_test(overuse_and_claim_names),
                cmocka_unit_test(corrupt_inputs), cmocka_unit_test(limits),
                cmocka_unit_test(save_and_load),  cmocka_unit_test(oom),
                cmocka_unit_test(dir_sync_fails), cmocka_unit_test(integrity),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
