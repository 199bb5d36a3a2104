/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for gpuslice-extender's request decoding: the bytes are an
 * ExtenderArgs body (ext_args_decode, src/extender/ext_args.c, and the node
 * reports in its annotations, ext_state.c), then fed to both verbs
 * (ext_filter_http, ext_prioritize_http) of one extender with a fixed
 * clock, so the admitted-pods record and core's scoring see them too.
 * Checks the decoder's contract: a failure says why; a decoded pod asks
 * slices of 1..999 or whole thousands, or says why it cannot be placed; every
 * answer is 200 or 400 with a JSON body. Lives in fuzz/extender/ because
 * it links gs_extender; tests/extender/CMakeLists.txt replays its corpus
 * (fuzz/corpus/extender_args). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "extender.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t fixed_now(void)
{
        return 1796083200; /* 2026-12-01T00:00:00Z */
}

static void check_decode(const uint8_t *data, size_t size)
{
        struct ext_args a = { 0 };
        struct gs_error *err = NULL;
        json_t *items = NULL;
        if (ext_args_decode((const char *)data, size, &a, &items, &err) == 0) {
                if (a.n_nodes > EXT_MAX_NODES || err)
                        abort();
                const struct ext_pod *p = &a.pod;
                if (p->n_slices > EXT_MAX_SLICES || (p->invalid[0] && p->n_slices) ||
                    (!p->invalid[0] && !p->milli != !p->n_slices))
                        abort();
                for (unsigned k = 0; k < p->n_slices; k++)
                        if (p->slices[k] == 0 || p->slices[k] > p->milli ||
                            (p->slices[k] >= 1000 && p->slices[k] % 1000))
                                abort();
                for (size_t i = 0; i < a.n_nodes; i++)
                        if (a.nodes[i].state_ok && a.nodes[i].st.n_gpus > GS_MAX_GPUS)
                                abort();
        } else if (!err) {
                abort();
        }
        gs_error_free(err);
        json_decref(items);
        ext_args_done(&a);
}

static void verb(struct extender *e,
                 int (*fn)(void *, const char *, size_t, unsigned *, char **, size_t *),
                 const uint8_t *data, size_t size)
{
        char *copy = malloc(size + 1);
        if (!copy)
                return;
        memcpy(copy, data, size);
        copy[size] = '\0';
        unsigned status = 0;
        char *resp = NULL;
        size_t len = 0;
        if (fn(e, copy, size, &status, &resp, &len) == 0) {
                if ((status != 200 && status != 400) || !resp || len == 0 ||
                    (resp[0] != '{' && resp[0] != '['))
                        abort();
        }
        free(resp);
        free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        check_decode(data, size);
        static struct extender e;
        static int ready;
        if (!ready) {
                struct ext_config cfg = { .policy = GS_CP_GPUSLICE,
                                          .stale_after_s = 1L << 40,
                                          .admitted_ttl_s = 60,
                                          .now = fixed_now };
                if (extender_init(&e, &cfg) < 0)
                        abort();
                ready = 1;
        }
        verb(&e, ext_filter_http, data, size);
        verb(&e, ext_prioritize_http, data, size);
        return 0;
}
