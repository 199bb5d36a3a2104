/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by the API-server client's two files (apiserver.c,
 * apiserver_config.c); not for other callers. */
#ifndef GS_APISERVER_INTERNAL_H
#define GS_APISERVER_INTERNAL_H

#include <stddef.h>
#include <sys/stat.h>

#include "error.h"

/* Read the regular file `path` whole, following links (service-account
 * volumes and Secrets mounted as files are links), at most `max` bytes,
 * into *ret_buf (malloc'ed, NUL-terminated) and *ret_len, and the state of
 * the file read into *ret_st (when non-NULL). `what` names the file in
 * messages ("token file", "kubeconfig"). 0, or a negative errno with *err
 * set: -EFBIG over max, -EINVAL not a regular file, -ENOMEM, or the
 * errno of open/read (-ENOENT, -EACCES). */
int apiserver_file_read(const char *what, const char *path, size_t max, char **ret_buf,
                        size_t *ret_len, struct stat *ret_st, struct gs_error **err);

#endif /* GS_APISERVER_INTERNAL_H */
