/* SPDX-License-Identifier: Apache-2.0 */
/* spec_check FILE: loads the API spec FILE with core's spec parser, the one
 * `gpuslice up` and `gpuslice render` use, and prints each API's name and
 * share; for the docs' examples (tests/docs/test_doc_examples.py), which may
 * be local-mode specs (command, no image) that render rightly refuses.
 * Exit status: 0 the spec loads, 1 it is refused (the parser's message on
 * stderr), 2 usage. */
#include <stdio.h>

#include "error.h"
#include "spec.h"

int main(int argc, char **argv)
{
        if (argc != 2) {
                fputs("usage: spec_check FILE\n", stderr);
                return 2;
        }
        struct gs_spec *spec = NULL;
        struct gs_error *err = NULL;
        if (gs_spec_load_file(argv[1], &spec, &err) < 0) {
                fprintf(stderr, "%s\n", gs_error_msg(err));
                gs_error_free(err);
                return 1;
        }
        for (size_t i = 0; i < spec->n_apis; i++)
                printf("%s: %u milli%s\n", spec->apis[i].name, spec->apis[i].compute.gpu_milli,
                       spec->apis[i].image ? ", an image" : ", a command");
        gs_spec_free(spec);
        return 0;
}
