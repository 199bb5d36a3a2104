/* SPDX-License-Identifier: Apache-2.0 */
/* CDI specs of slice shares: what a container runtime (containerd >= 1.7
 * with CDI on, CRI-O, podman) applies to a container that asks for the CDI
 * device gpuslice.io/slice=<name>. A DRA driver's NodePrepareResources
 * writes one spec per prepared claim share and returns the qualified name in
 * cdi_device_ids; NodeUnprepareResources removes it. The node layer stays
 * the one writer of a slice's files: this is the only code that writes or
 * removes gpuslice's CDI specs.
 *
 *   <cdi_dir>/gpuslice.io-<name>.json   (mode 0644)
 *   {"cdiVersion": "0.3.0" (0.5.0 when <name> begins with a digit),
 *    "kind": "gpuslice.io/slice",
 *    "devices": [{"name": "<name>", "containerEdits": {
 *        "env": ["KEY=VALUE", ...],
 *        "mounts": [{"hostPath": ..., "containerPath": ...,
 *                    "options": ["ro"|"rw", "nosuid", "nodev", "bind"]}]}}]}
 *
 * One spec file per device, so a share's spec is written and removed
 * without touching another's, each through gs_file_replace (temp file
 * <path>.tmp, which runtimes ignore: they read *.json and *.yaml only;
 * fsync; rename). Output is deterministic (sorted keys, the edits' order),
 * so rewriting the same share gives the same bytes. See docs/internals/cdi.md. */
#ifndef GS_NODE_CDI_H
#define GS_NODE_CDI_H

#include <stddef.h>

#include "error.h"
#include "node.h"
#include "node_edits.h"

#define NODE_CDI_VENDOR "gpuslice.io"
#define NODE_CDI_CLASS "slice"
#define NODE_CDI_KIND NODE_CDI_VENDOR "/" NODE_CDI_CLASS
/* Spec files are <prefix><name><suffix>; nothing else in a CDI directory
 * is ours. */
#define NODE_CDI_FILE_PREFIX NODE_CDI_VENDOR "-"
#define NODE_CDI_FILE_SUFFIX ".json"
#define NODE_CDI_SPEC_MODE 0644
/* Longest device name: the temp file gpuslice.io-<name>.json.tmp must fit
 * NAME_MAX (255) = 12 + name + 5 + 4. The CDI spec sets no limit of its
 * own; a DRA name claim-<uid>-<request> is at most 106. */
#define NODE_CDI_NAME_MAX 234
/* A qualified name gpuslice.io/slice=<name> with its NUL. */
#define NODE_CDI_QUALIFIED_MAX (sizeof(NODE_CDI_KIND "=") + NODE_CDI_NAME_MAX)

/* Whether `name` is a CDI device name we write: 1..NODE_CDI_NAME_MAX
 * characters of [A-Za-z0-9_.-], beginning and ending with a letter or a
 * digit (CDI SPEC.md, "CDI Devices"; the reference parser also allows ':',
 * which we refuse). Such a name is a safe file-name part: no '/', never
 * "." or "..". 0, or -EINVAL with *err naming the name. */
int node_cdi_name_check(const char *name, struct gs_error **err);

/* Write the CDI spec of one slice share, device `device_name`, carrying
 * `edits` (node_container_edits_locked): every env as KEY=VALUE, every mount
 * as a bind mount, read-only ones "ro" and the others "rw" (both nosuid,
 * nodev). The edits' cdi_devices (the GPUs' own CDI names, when the node has
 * a CDI kind) are not part of this spec: a caller returns them in
 * cdi_device_ids next to ours. `n`'s lock is held: writes of one name are
 * serialized (they share one temp file) and the edits are the ledger's.
 * `cdi_dir` is created (mode 0755) when missing, not its parents.
 *
 * On success the file holds the new spec (replaced atomically, mode 0644,
 * umask ignored), *ret_qualified_name (unless NULL) is
 * "gpuslice.io/slice=<device_name>" and 0 is returned; a failing sync of
 * the directory after the rename is logged, not an error. On failure the
 * previous spec (if any) is left as it was, no temp file remains and
 * *ret_qualified_name is untouched: -EINVAL (a bad device name, an edit
 * with an empty or relative path, an empty key, no edits at all, text that
 * is not UTF-8), -ENAMETOOLONG (the path, or `size` too small for the
 * name), -ENOMEM, or the file system's error, with *err saying which. */
int node_cdi_write_locked(const struct node *n, const char *cdi_dir, const char *device_name,
                          const struct node_edits *edits, char *ret_qualified_name, size_t size,
                          struct gs_error **err);

/* Remove the spec of `device_name` from `cdi_dir` (and a temp file a crash
 * mid-write may have left). 0 when it is gone (missing already: 0),
 * -EINVAL for a name node_cdi_name_check refuses, or the negative errno of
 * the failing unlink. */
int node_cdi_remove(const char *cdi_dir, const char *device_name);

/* Called once per device name that has a spec of ours (or only the temp
 * file of one) in the directory; 0 to go on, a negative errno to stop. */
typedef int (*node_cdi_list_fn)(void *ctx, const char *device_name);

/* Enumerate our specs in `cdi_dir`, in byte order of their names: the
 * entries that are not directories named gpuslice.io-<name>.json (or
 * .json.tmp) with a valid <name>. Anything else (another vendor's spec, a
 * bad name) is ignored. The listing is taken before the first call, so fn
 * may node_cdi_remove the name it is given (a driver removes the specs no
 * claim owns after a restart). Returns the number of names given to fn (a
 * missing directory has none), the negative errno fn stopped with, or a
 * negative errno with *err when the directory cannot be read. */
int node_cdi_list(const char *cdi_dir, node_cdi_list_fn fn, void *ctx, struct gs_error **err);

#endif /* GS_NODE_CDI_H */
