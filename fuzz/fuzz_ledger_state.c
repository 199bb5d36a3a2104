/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz the ledger state-file parser; what it accepts must re-encode (with
 * its checksum line) and decode to the same ledger. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ledger.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gs_ledger l, back;
        struct gs_error *err = NULL;
        gs_ledger_init(&l);
        gs_ledger_init(&back);
        if (gs_ledger_decode(&l, (const char *)data, size, &err) == 0) {
                char *text = NULL;
                size_t len = 0;
                if (gs_ledger_encode(&l, &text, &len) == 0) {
                        if (gs_ledger_decode(&back, text, len, NULL) != 0 ||
                            back.n_slices != l.n_slices || back.next_id != l.next_id ||
                            back.unsummed)
                                abort();
                        for (size_t i = 0; i < l.n_slices; i++)
                                if (back.slices[i].overuse != l.slices[i].overuse ||
                                    back.slices[i].overcommitted != l.slices[i].overcommitted ||
                                    strcmp(back.slices[i].claim.ns, l.slices[i].claim.ns) != 0 ||
                                    strcmp(back.slices[i].claim.name, l.slices[i].claim.name) != 0)
                                        abort();
                        gs_free(text);
                }
        }
        gs_error_free(err);
        gs_ledger_done(&l);
        gs_ledger_done(&back);
        return 0;
}
