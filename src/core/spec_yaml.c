/* SPDX-License-Identifier: Apache-2.0 */
/* YAML text to a small node tree, with libyaml's event parser.
 *
 * Only the YAML an API spec needs gets through: one document of scalars,
 * lists and mappings. Anchors and aliases are refused (an alias can expand
 * a small file into a huge tree: "billion laughs"), so are tags (`!!binary`,
 * `!foo`) and a second document. Nesting depth and the node count are
 * bounded; the caller bounds the input size. */
#include "spec_yaml.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

#include "alloc.h"
#include "quantity.h"

struct builder {
        const char *name;
        struct spec_node *root;
        struct spec_node *stack[SPEC_YAML_MAX_DEPTH];
        unsigned depth;
        size_t n_nodes;
        unsigned documents;
        struct gs_error **err;
};

struct spec_node *spec_node_free(struct spec_node *n)
{
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_items; i++)
                spec_node_free(n->items[i]);
        gs_free(n->items);
        gs_free(n->value);
        gs_free(n);
        return NULL;
}

bool spec_node_is_null(const struct spec_node *n)
{
        if (!n || n->type != SPEC_NODE_SCALAR || !n->plain)
                return false;
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL" };
        for (size_t i = 0; i < GS_ARRAY_SIZE(nulls); i++)
                if (strcmp(n->value, nulls[i]) == 0)
                        return true;
        return false;
}

const char *spec_node_kind(const struct spec_node *n)
{
        switch (n->type) {
        case SPEC_NODE_SEQUENCE:
                return "a list";
        case SPEC_NODE_MAPPING:
                return "a mapping";
        default:
                return spec_node_is_null(n) ? "nothing" : "a string";
        }
}

static unsigned mark_line(const yaml_mark_t *m)
{
        return m->line >= 0xfffffffe ? 0xffffffffu : (unsigned)m->line + 1;
}

static unsigned mark_column(const yaml_mark_t *m)
{
        return m->column >= 0xfffffffe ? 0xffffffffu : (unsigned)m->column + 1;
}

static int fail(struct builder *b, const yaml_mark_t *m, const char *fmt, ...) GS_PRINTF(3, 4);
static int fail(struct builder *b, const yaml_mark_t *m, const char *fmt, ...)
{
        char msg[512];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return gs_error_set(b->err, -EINVAL, "%s:%u:%u: %s", b->name, mark_line(m),
                            mark_column(m), msg);
}

static int oom(struct builder *b)
{
        return gs_error_set(b->err, -ENOMEM, "%s: out of memory", b->name);
}

/* Append child to parent's items. The array holds 4, 8, 16, ... items, so
 * it is full exactly when the count is 0 or a power of two from 4 up. */
static int node_append(struct spec_node *parent, struct spec_node *child)
{
        size_t n = parent->n_items;
        if (n == 0 || (n >= 4 && (n & (n - 1)) == 0)) {
                size_t cap = n ? n * 2 : 4;
                struct spec_node **items = gs_realloc(parent->items, cap * sizeof(*items));
                if (!items)
                        return -ENOMEM;
                parent->items = items;
        }
        parent->items[parent->n_items++] = child;
        return 0;
}

/* Refuse anchors and tags on a node event. */
static int check_props(struct builder *b, const yaml_event_t *ev, const yaml_char_t *anchor,
                       const yaml_char_t *tag)
{
        char q[GS_QUOTE_MAX];

        if (anchor)
                return fail(b, &ev->start_mark,
                            "anchors (&%s) and aliases are not supported; write each value out",
                            gs_quote((const char *)anchor, q, sizeof(q)));
        if (tag)
                return fail(b, &ev->start_mark, "YAML tags (%s) are not supported",
                            gs_quote((const char *)tag, q, sizeof(q)));
        return 0;
}

/* Create a node for a scalar or collection start and attach it. */
static int add_node(struct builder *b, const yaml_event_t *ev, enum spec_node_type type)
{
        if (b->n_nodes >= SPEC_YAML_MAX_NODES)
                return fail(b, &ev->start_mark, "too many values (more than %u)",
                            SPEC_YAML_MAX_NODES);
        if (type != SPEC_NODE_SCALAR && b->depth >= SPEC_YAML_MAX_DEPTH)
                return fail(b, &ev->start_mark, "nested too deeply (more than %d levels)",
                            SPEC_YAML_MAX_DEPTH);

        struct spec_node *n = gs_calloc(1, sizeof(*n));
        if (!n)
                return oom(b);
        n->type = type;
        n->line = mark_line(&ev->start_mark);
        n->column = mark_column(&ev->start_mark);
        if (type == SPEC_NODE_SCALAR) {
                n->len = ev->data.scalar.length;
                n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                n->value = gs_malloc(n->len + 1);
                if (!n->value) {
                        spec_node_free(n);
                        return oom(b);
                }
                memcpy(n->value, ev->data.scalar.value, n->len);
                n->value[n->len] = '\0';
        }

        if (b->depth == 0) {
                b->root = n;
        } else if (node_append(b->stack[b->depth - 1], n) < 0) {
                spec_node_free(n);
                return oom(b);
        }
        b->n_nodes++;
        if (type != SPEC_NODE_SCALAR)
                b->stack[b->depth++] = n;
        return 0;
}

static int handle_event(struct builder *b, const yaml_event_t *ev)
{
        char q[GS_QUOTE_MAX];
        int r;

        switch (ev->type) {
        case YAML_DOCUMENT_START_EVENT:
                if (b->documents++ > 0)
                        return fail(b, &ev->start_mark,
                                    "a second YAML document; put every API in one list");
                return 0;
        case YAML_ALIAS_EVENT:
                return fail(b, &ev->start_mark,
                            "aliases (*%s) and anchors are not supported; write each value out",
                            gs_quote((const char *)ev->data.alias.anchor, q, sizeof(q)));
        case YAML_SCALAR_EVENT:
                r = check_props(b, ev, ev->data.scalar.anchor, ev->data.scalar.tag);
                return r < 0 ? r : add_node(b, ev, SPEC_NODE_SCALAR);
        case YAML_SEQUENCE_START_EVENT:
                r = check_props(b, ev, ev->data.sequence_start.anchor,
                                ev->data.sequence_start.tag);
                return r < 0 ? r : add_node(b, ev, SPEC_NODE_SEQUENCE);
        case YAML_MAPPING_START_EVENT:
                r = check_props(b, ev, ev->data.mapping_start.anchor,
                                ev->data.mapping_start.tag);
                return r < 0 ? r : add_node(b, ev, SPEC_NODE_MAPPING);
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
                if (b->depth > 0)
                        b->depth--;
                return 0;
        default:
                return 0;
        }
}

/* Turn libyaml's error state into a message. */
static int parser_error(struct builder *b, const yaml_parser_t *p)
{
        if (p->error == YAML_MEMORY_ERROR)
                return oom(b);
        const char *problem = p->problem ? p->problem : "unknown problem";
        if (p->error == YAML_READER_ERROR)
                return gs_error_set(b->err, -EINVAL, "%s: not valid YAML text: %s at byte %zu",
                                    b->name, problem, p->problem_offset);
        if (p->context)
                return fail(b, &p->problem_mark, "not valid YAML: %s %s (line %u)", problem,
                            p->context, mark_line(&p->context_mark));
        return fail(b, &p->problem_mark, "not valid YAML: %s", problem);
}

int spec_yaml_load(const char *name, const char *buf, size_t len, struct spec_node **ret_root,
                   struct gs_error **err)
{
        struct builder b = { .name = name, .err = err };
        yaml_parser_t parser;
        int r = 0;

        if (!yaml_parser_initialize(&parser))
                return gs_error_set(err, -ENOMEM, "%s: out of memory", name);
        yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);

        for (;;) {
                yaml_event_t ev;
                if (!yaml_parser_parse(&parser, &ev)) {
                        r = parser_error(&b, &parser);
                        break;
                }
                r = handle_event(&b, &ev);
                bool end = ev.type == YAML_STREAM_END_EVENT;
                yaml_event_delete(&ev);
                if (r < 0 || end)
                        break;
        }
        yaml_parser_delete(&parser);
        if (r < 0) {
                spec_node_free(b.root);
                return r;
        }
        *ret_root = b.root;
        return 0;
}
