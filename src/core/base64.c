/* SPDX-License-Identifier: Apache-2.0 */
/* base64 decoding. See base64.h. */
#include "base64.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int b64_value(char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

/* Standard base64 with padding, line breaks ignored (as Go's decoder, which
 * reads kubeconfig []byte fields, does). 0 or -EINVAL. */
int gs_base64_decode(const char *in, char **ret, size_t *ret_len)
{
        size_t n = strlen(in), o = 0, pad = 0, digits = 0;
        char *out = malloc(n / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;
        uint32_t acc = 0;
        int bits = 0;
        for (size_t i = 0; i < n; i++) {
                char c = in[i];
                if (c == '\n' || c == '\r')
                        continue;
                if (c == '=') {
                        pad++;
                        continue;
                }
                int v = b64_value(c);
                if (v < 0 || pad) {
                        free(out);
                        return -EINVAL;
                }
                digits++;
                acc = (acc << 6) | (uint32_t)v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[o++] = (char)(acc >> bits);
                }
        }
        if ((digits + pad) % 4 != 0 || pad > 2 || digits % 4 == 1 || o == 0) {
                free(out);
                return -EINVAL;
        }
        out[o] = '\0';
        *ret = out;
        *ret_len = o;
        return 0;
}

