/* SPDX-License-Identifier: Apache-2.0 */
/* The node's state layout and the one writer of a slice's files.
 *
 *   <state>/ledger             the ledger (gs_ledger_save), 0600
 *   <state>/lock               flock: one daemon or plugin per state dir
 *   <state>/conf/<id>.conf     a shim slice's config, root's, 0444; mounted
 *                              read-only into containers
 *   <state>/slices/<id>/       a shim slice's directory (the shim's shared
 *                              books, compute.local), mounted read-write:
 *                                local slice: 0700, owned by the slice's uid
 *                                Kubernetes:  0777 (the container's uid is
 *                                             not known to the node)
 *   <state>/pages/<id>/        the daemon's, 0755: the slice's lease page
 *                              (`compute`, 0444), which the slice's processes
 *                              may read, never replace; mounted read-only
 *   <state>/ld.so.preload      names the container path of the shim, 0644;
 *                              mounted over /etc/ld.so.preload
 *
 * Every file is written through gs_file_replace (temp, fsync, rename,
 * directory fsync) and never through a link. Whole-GPU slices have no
 * files. */
#ifndef GS_NODE_FILES_H
#define GS_NODE_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "ledger.h"

struct node;

#define NODE_CONF_MODE 0444
#define NODE_PRELOAD_MODE 0644
#define NODE_LOCAL_DIR_MODE 0700
#define NODE_KUBE_DIR_MODE 0777
#define NODE_PAGE_DIR_MODE 0755

/* Host paths of a slice's config, directory and page directory, and of
 * ld.so.preload. */
void node_conf_path(const struct node *n, const char *id, char *buf, size_t size);
void node_slice_dir_path(const struct node *n, const char *id, char *buf, size_t size);
void node_page_dir_path(const struct node *n, const char *id, char *buf, size_t size);
void node_preload_path(const struct node *n, char *buf, size_t size);

/* Make the layout's directories under n->state_dir (which exists) and,
 * when the node has a shim path, <state>/ld.so.preload naming the shim's
 * path in containers. */
int node_files_init(struct node *n, struct gs_error **err);

/* Write a shim slice's directory (mode and owner by its kind, see above),
 * its page directory and its config. 0 or a negative errno with *err. */
int node_files_write_slice(struct node *n, const struct gs_slice *s, struct gs_error **err);

/* Whether a shim slice's config holds what the ledger says and its
 * directory and page directory (the daemon's, NODE_PAGE_DIR_MODE) exist. */
bool node_files_slice_ok(struct node *n, const struct gs_slice *s);

/* Remove a slice's config, its directory and its page directory (one level
 * of files each). Best effort, logged; a missing file is not an error.
 * 0, or -1 when something could not be removed (a read-only disk). */
int node_files_remove_slice(struct node *n, const char *id);

/* Remove configs and slice directories no slice of the ledger names.
 * Returns how many were removed. */
int node_files_remove_orphans(struct node *n);

#endif /* GS_NODE_FILES_H */
