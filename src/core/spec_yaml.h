/* SPDX-License-Identifier: Apache-2.0 */
/* Internal to the spec loader: turns YAML text into a small tree of
 * scalars, lists and mappings with line numbers, refusing the parts of YAML
 * an API spec never needs (anchors, aliases, tags, several documents) and
 * bounding depth and size. Built on libyaml's event parser. */
#ifndef GS_SPEC_YAML_H
#define GS_SPEC_YAML_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define SPEC_YAML_MAX_DEPTH 16
#define SPEC_YAML_MAX_NODES (1u << 18)

enum spec_node_type {
        SPEC_NODE_SCALAR,
        SPEC_NODE_SEQUENCE,
        SPEC_NODE_MAPPING,
};

struct spec_node {
        enum spec_node_type type;
        unsigned line, column;     /* 1-based position of the node's start */
        char *value;               /* scalar: NUL-terminated copy of its bytes */
        size_t len;                /* scalar: bytes in value (a NUL inside makes len differ from strlen) */
        bool plain;                /* scalar: written without quotes */
        struct spec_node **items;  /* sequence: items; mapping: key, value, key, value, ... */
        size_t n_items;            /* mapping: twice the number of pairs */
};

/* Parse buf (len bytes) into a tree; `name` is used in messages. Stores the
 * root in *ret_root, or NULL for a stream with no document, and returns 0.
 * Fails with -EINVAL (message "name:line:column: ...") or -ENOMEM. */
int spec_yaml_load(const char *name, const char *buf, size_t len, struct spec_node **ret_root,
                   struct gs_error **err);

/* Free a node and its children; accepts NULL, returns NULL. */
struct spec_node *spec_node_free(struct spec_node *n);

/* Whether a scalar means null in YAML when plain: empty, ~, null. */
bool spec_node_is_null(const struct spec_node *n);

/* "a string", "a list" or "a mapping", for messages. */
const char *spec_node_kind(const struct spec_node *n);

#endif /* GS_SPEC_YAML_H */
