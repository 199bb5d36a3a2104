/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: the slice config parser. Whatever it accepts must format
 * and parse back to the same struct. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "slice_conf_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gs_slice_conf c;
        struct gs_error *err = NULL;
        if (gs_slice_conf_parse((const char *)data, size, &c, &err) < 0) {
                if (!err)
                        abort(); /* every rejection says why */
                gs_error_free(err);
                return 0;
        }
        char *buf = malloc(GS_SLICE_CONF_MAX_BYTES * 2);
        if (!buf)
                return 0;
        int n = gs_slice_conf_format(&c, buf, GS_SLICE_CONF_MAX_BYTES * 2, &err);
        if (n < 0)
                abort();
        struct gs_slice_conf back;
        if (gs_slice_conf_parse(buf, (size_t)n, &back, &err) < 0 || memcmp(&c, &back, sizeof(c)) != 0)
                abort();
        free(buf);
        return 0;
}
