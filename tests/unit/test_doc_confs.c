/* SPDX-License-Identifier: Apache-2.0 */
/* The slice configs the docs show (README.md, docs/shim.md: every
 * `cat > FILE <<'CONF'` block) parse as written (issue 15): an example the
 * shim refuses (a trailing comment) sends a user to a fail-closed shim. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "slice_conf_io.h"

/* The file `rel` of the source tree, found from this file's own path. */
static char *read_doc(const char *rel)
{
        char path[4096];
        const char *slash = strrchr(__FILE__, '/');
        int dir = slash ? (int)(slash - __FILE__) : 1;
        snprintf(path, sizeof(path), "%.*s/../../%s", dir, slash ? __FILE__ : ".", rel);
        FILE *f = fopen(path, "re");
        assert_non_null(f);
        char *buf = calloc(1, 1 << 20);
        assert_non_null(buf);
        size_t n = fread(buf, 1, (1 << 20) - 1, f);
        fclose(f);
        buf[n] = '\0';
        return buf;
}

/* Parse every CONF block of doc; returns how many there are. */
static unsigned check_doc(const char *rel)
{
        char *text = read_doc(rel);
        unsigned n = 0;

        for (char *p = strstr(text, "<<'CONF'\n"); p; p = strstr(p, "<<'CONF'\n")) {
                char *body = p + strlen("<<'CONF'\n");
                char *end = strstr(body, "\nCONF\n");
                assert_non_null(end);
                struct gs_slice_conf c;
                struct gs_error *err = NULL;
                int r = gs_slice_conf_parse(body, (size_t)(end - body) + 1, &c, &err);
                if (r < 0)
                        print_message("%s: CONF block %u refused: %s\n", rel, n + 1,
                                      gs_error_msg(err));
                gs_error_free(err);
                assert_int_equal(r, 0);
                n++;
                p = end;
        }
        free(text);
        return n;
}

static void readme_confs_parse(void **state)
{
        (void)state;
        assert_true(check_doc("README.md") >= 1);
}

static void shim_doc_confs_parse(void **state)
{
        (void)state;
        assert_true(check_doc("docs/shim.md") >= 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(readme_confs_parse),
                cmocka_unit_test(shim_doc_confs_parse),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
