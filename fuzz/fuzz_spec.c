/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target for the API spec loader (src/core/spec.c, spec_yaml.c). The
 * input is a whole spec file. Besides crashes, leaks and sanitizer reports it
 * checks the contracts of a loaded spec: 1..256 APIs with valid, unique
 * names, command or image, a valid GPU share; and a message on rejection. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "spec.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_api(const struct gs_spec *spec, const struct gs_api_spec *a)
{
        uint32_t g = a->compute.gpu_milli;
        if (!gs_dns_label_valid(a->name) || gs_spec_find(spec, a->name) != a)
                abort();
        if (!a->image && (!a->command || a->n_command == 0 || !a->command[0][0]))
                abort();
        if (g == 0 || (g >= 1000 && g % 1000 != 0) || a->port == 0 || a->replicas == 0 ||
            a->line == 0)
                abort();
        for (size_t i = 0; i < a->n_env; i++)
                if (!a->env[i].name || !a->env[i].value)
                        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;

        int r = gs_spec_load_buffer("fuzz.yaml", (const char *)data, size, &spec, &err);
        if (r < 0) {
                if (spec || !err || !err->msg || strncmp(err->msg, "fuzz.yaml", 9) != 0)
                        abort();
                gs_error_free(err);
                return 0;
        }
        if (err || !spec || spec->n_apis == 0 || spec->n_apis > GS_SPEC_MAX_APIS)
                abort();
        for (size_t i = 0; i < spec->n_apis; i++)
                check_api(spec, &spec->apis[i]);
        gs_spec_free(spec);
        return 0;
}
