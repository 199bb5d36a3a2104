/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the DRA driver's reading of a ResourceClaim
 * (dra_claim_parse): any bytes as the API server's answer. A parsed claim
 * must keep its invariants: at most DRA_MAX_SHARES shares, each 1..1000
 * milli, NUL-terminated names. Its corpus replays as a ctest
 * (tests/kube/CMakeLists.txt). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dra_claim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct dra_claim_alloc a;
        struct gs_error *err = NULL;
        int r = dra_claim_parse((const char *)data, size, "5c1d0f3e-7a2b-4c9d-8e1f-2a3b4c5d6e7f",
                                "gpu.gpuslice.io", "node-a", &a, &err);
        if (r == 0) {
                if (a.n_shares > DRA_MAX_SHARES)
                        abort();
                for (size_t i = 0; i < a.n_shares; i++)
                        if (a.shares[i].milli == 0 || a.shares[i].milli > 1000 ||
                            strlen(a.shares[i].request) > DRA_NAME_MAX ||
                            strlen(a.shares[i].device) > DRA_NAME_MAX)
                                abort();
        } else if (!err) {
                abort(); /* every refusal says why */
        }
        gs_error_free(err);
        return 0;
}
