/* SPDX-License-Identifier: Apache-2.0 */
/* Reading and writing the slice config file (include/gpuslice/slice_conf.h
 * fixes the format and the struct). Used by the shim to read its slice and
 * by the daemon and the CLI to write one. */
#ifndef GS_SLICE_CONF_IO_H
#define GS_SLICE_CONF_IO_H

#include <stddef.h>

#include <gpuslice/slice_conf.h>

#include "error.h"

/* Parse the text of a slice config (`len` bytes, need not be NUL-terminated,
 * at most GS_SLICE_CONF_MAX_BYTES). On success fills *ret and returns 0; on
 * failure returns -EINVAL (or -E2BIG for an oversized text), leaves *ret
 * untouched and sets *err to a message naming the line, the key and the
 * value and what is accepted. */
int gs_slice_conf_parse(const char *text, size_t len, struct gs_slice_conf *ret,
                        struct gs_error **err);

/* Read and parse the slice config at `path`. Returns 0 on success, -ENOENT
 * when the file does not exist (no error message is set then: the caller
 * decides whether that is an error), another negative errno when it cannot
 * be read or is not a regular file, or what gs_slice_conf_parse returns. */
int gs_slice_conf_load(const char *path, struct gs_slice_conf *ret, struct gs_error **err);

/* Write `conf` in the file format into buf (NUL-terminated). Returns the
 * length written (without the NUL), -EINVAL if conf would not parse back
 * (message in *err), or -ENOSPC if buf is too small. */
int gs_slice_conf_format(const struct gs_slice_conf *conf, char *buf, size_t size,
                         struct gs_error **err);

#endif /* GS_SLICE_CONF_IO_H */
