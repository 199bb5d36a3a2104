/* SPDX-License-Identifier: Apache-2.0 */
/* gs_base64_decode: RFC 4648 vectors, line breaks, and every malformed
 * shape refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base64.h"

static void vectors(void **state)
{
        (void)state;
        static const char *const pairs[][2] = {
                { "Zg==", "f" }, { "Zm8=", "fo" }, { "Zm9v", "foo" }, { "Zm9vYg==", "foob" },
                { "Zm9vYmE=", "fooba" }, { "Zm9vYmFy", "foobar" }, { "Zm9v\nYmFy\n", "foobar" },
        };
        for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
                char *out = NULL;
                size_t len = 0;
                assert_int_equal(gs_base64_decode(pairs[i][0], &out, &len), 0);
                assert_int_equal(len, strlen(pairs[i][1]));
                assert_memory_equal(out, pairs[i][1], len);
                assert_int_equal(out[len], '\0');
                free(out);
        }
}

static void refused(void **state)
{
        (void)state;
        static const char *const bad[] = { "", "Zg=", "Zg==Zg==", "Z", "Zm9v!", "Zm9=v", "====" };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                char *out = NULL;
                size_t len = 0;
                assert_int_equal(gs_base64_decode(bad[i], &out, &len), -EINVAL);
                assert_null(out);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = { cmocka_unit_test(vectors), cmocka_unit_test(refused) };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
