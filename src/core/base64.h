/* SPDX-License-Identifier: Apache-2.0 */
/* Standard base64 (RFC 4648, with padding) decoding, as Go's encoding
 * writes []byte fields in JSON (the kubelet's checkpoint) and kubeconfig's
 * *-data fields. Pure. */
#ifndef GS_BASE64_H
#define GS_BASE64_H

#include <stddef.h>

/* Decode the NUL-terminated `in` (line breaks ignored) into *ret
 * (malloc'ed, NUL-terminated after *ret_len bytes). 0; -EINVAL for a
 * character outside the alphabet, data after padding, a bad length or an
 * empty result; -ENOMEM. */
int gs_base64_decode(const char *in, char **ret, size_t *ret_len);

#endif /* GS_BASE64_H */
