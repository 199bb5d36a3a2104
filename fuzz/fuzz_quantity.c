/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the quantity parsers (src/core/quantity.c). The input is
 * one quantity string. Besides crashes and sanitizer reports it checks the
 * contracts: an accepted GPU share is a slice or whole GPUs, every accepted
 * value formats and parses back to itself, every rejection has a message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rejected(int r, struct gs_error *err)
{
        if (r == 0)
                return;
        if (r != -EINVAL || !err || !err->msg || !strstr(err->msg, "fuzz: \""))
                abort();
        gs_error_free(err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char s[512], buf[64];
        struct gs_error *err = NULL;
        uint32_t milli = 0, back32 = 0;
        uint64_t bytes = 0, back64 = 0;

        if (size >= sizeof(s))
                size = sizeof(s) - 1;
        memcpy(s, data, size);
        s[size] = '\0';

        int r = gs_gpu_quantity_parse("fuzz", s, &milli, &err);
        check_rejected(r, err);
        err = NULL;
        if (r == 0) {
                if (milli == 0 || (milli >= 1000 && milli % 1000 != 0) ||
                    milli > GS_QUANTITY_MAX_SLICE_GPUS * 1000)
                        abort();
                if (gs_gpu_quantity_format(milli, buf, sizeof(buf)) < 0 ||
                    gs_gpu_quantity_parse("fuzz", buf, &back32, NULL) != 0 || back32 != milli)
                        abort();
                if (gs_default_memory_cap(milli, 80ull << 30) > (80ull << 30))
                        abort();
        }

        r = gs_memory_quantity_parse("fuzz", s, &bytes, &err);
        check_rejected(r, err);
        err = NULL;
        if (r == 0) {
                if (bytes == 0 || gs_memory_quantity_format(bytes, buf, sizeof(buf)) < 0 ||
                    gs_memory_quantity_parse("fuzz", buf, &back64, NULL) != 0 || back64 != bytes)
                        abort();
        }

        r = gs_cpu_quantity_parse("fuzz", s, &milli, &err);
        check_rejected(r, err);
        if (r == 0) {
                if (milli == 0 || milli > GS_CPU_MAX_MILLI ||
                    gs_cpu_quantity_format(milli, buf, sizeof(buf)) < 0 ||
                    gs_cpu_quantity_parse("fuzz", buf, &back32, NULL) != 0 || back32 != milli)
                        abort();
        }
        return 0;
}
