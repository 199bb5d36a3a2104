/* SPDX-License-Identifier: Apache-2.0 */
/* API specs: checks the YAML tree (spec_yaml.c) against the schema and
 * builds struct gs_spec. Every message reads
 * "file:line: api-name: field: what is wrong: what is accepted". */
#include "spec.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "compute_policy.h"
#include "overuse_policy.h"
#include "quantity.h"
#include "spec_yaml.h"

/* Where the walk is, for messages. */
struct walk {
        const char *file;
        char label[GS_API_NAME_MAX + 16]; /* the API's name, or "API #n" */
        struct gs_error **err;
};

static int fail(struct walk *w, const struct spec_node *n, const char *fmt, ...) GS_PRINTF(3, 4);
static int fail(struct walk *w, const struct spec_node *n, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return gs_error_set(w->err, -EINVAL, "%s:%u: %s: %s", w->file, n->line, w->label, msg);
}

/* Add the file, line and API to an error set by a quantity parser. */
static int wrap(struct walk *w, const struct spec_node *n, int r)
{
        gs_error_wrap(w->err, "%s:%u: %s", w->file, n->line, w->label);
        return r;
}

static int oom(struct walk *w)
{
        return gs_error_set(w->err, -ENOMEM, "%s: out of memory", w->file);
}

int gs_dns_label_valid(const char *s)
{
        size_t len = strnlen(s, GS_API_NAME_MAX + 1);

        if (len == 0 || len > GS_API_NAME_MAX || s[0] == '-' || s[len - 1] == '-')
                return 0;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return 0;
        return 1;
}

static bool env_name_valid(const char *s)
{
        size_t len = strnlen(s, 257);

        if (len == 0 || len > 256 || (s[0] >= '0' && s[0] <= '9'))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
                      (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
                        return false;
        return true;
}

/* A scalar with a value: not a list or mapping, not null, no NUL byte,
 * at most GS_SPEC_MAX_STRING bytes. */
static int want_string(struct walk *w, const struct spec_node *n, const char *field,
                       const char *example)
{
        if (n->type != SPEC_NODE_SCALAR || spec_node_is_null(n))
                return fail(w, n, "%s: expected a value such as %s, got %s", field, example,
                            spec_node_kind(n));
        if (strlen(n->value) != n->len)
                return fail(w, n, "%s: contains a NUL character", field);
        if (n->len > GS_SPEC_MAX_STRING)
                return fail(w, n, "%s: longer than %u bytes", field, GS_SPEC_MAX_STRING);
        return 0;
}

static int dup_string(struct walk *w, const struct spec_node *n, char **ret)
{
        char *s = gs_strdup(n->value);
        if (!s)
                return oom(w);
        *ret = s;
        return 0;
}

/* A decimal integer lo..hi written without sign or leading zeros. */
static int parse_int(struct walk *w, const struct spec_node *n, const char *field, uint32_t lo,
                     uint32_t hi, uint32_t *ret)
{
        char q[GS_QUOTE_MAX];
        uint64_t v = 0;

        int r = want_string(w, n, field, "8080");
        if (r < 0)
                return r;
        bool ok = n->len > 0 && n->len <= 10 && n->value[0] != '0';
        for (size_t i = 0; ok && i < n->len; i++) {
                ok = n->value[i] >= '0' && n->value[i] <= '9';
                v = v * 10 + (uint64_t)(n->value[i] - '0');
        }
        if (!ok || v < lo || v > hi)
                return fail(w, n, "%s: \"%s\" is not valid: use a whole number from %u to %u",
                            field, gs_quote(n->value, q, sizeof(q)), lo, hi);
        *ret = (uint32_t)v;
        return 0;
}

/* Find the mapping key `key` in n (a mapping), or NULL. */
static const struct spec_node *map_get(const struct spec_node *n, const char *key)
{
        for (size_t i = 0; i + 1 < n->n_items; i += 2)
                if (n->items[i]->type == SPEC_NODE_SCALAR && strcmp(n->items[i]->value, key) == 0)
                        return n->items[i + 1];
        return NULL;
}

/* Look up key in keys[]; reject non-scalar, unknown and repeated keys.
 * *seen has one bit per entry of keys. Returns the index. */
static int match_key(struct walk *w, const struct spec_node *k, const char *prefix,
                     const char *const *keys, size_t n_keys, unsigned *seen, const char *accepted)
{
        char q[GS_QUOTE_MAX];

        if (k->type != SPEC_NODE_SCALAR)
                return fail(w, k, "%skeys must be plain words, got %s", prefix, spec_node_kind(k));
        if (strlen(k->value) != k->len)
                return fail(w, k, "%s%s...: a key contains a NUL character", prefix,
                            gs_quote(k->value, q, sizeof(q)));
        for (size_t i = 0; i < n_keys; i++) {
                if (strcmp(k->value, keys[i]) != 0)
                        continue;
                if (*seen & (1u << i))
                        return fail(w, k, "%s%s: given twice", prefix, keys[i]);
                *seen |= 1u << i;
                return (int)i;
        }
        return fail(w, k, "unknown key \"%s%s\"; accepted keys: %s", prefix,
                    gs_quote(k->value, q, sizeof(q)), accepted);
}

static int parse_command(struct walk *w, const struct spec_node *n, struct gs_api_spec *api)
{
        static const char example[] = "[\"./serve\", \"--port\", \"8080\"]";

        if (n->type != SPEC_NODE_SEQUENCE || n->n_items == 0)
                return fail(w, n, "command: expected a non-empty list of strings such as %s, got %s",
                            example, n->type == SPEC_NODE_SEQUENCE ? "an empty list"
                                                                  : spec_node_kind(n));
        if (n->n_items > GS_SPEC_MAX_ARGS)
                return fail(w, n, "command: more than %u arguments", GS_SPEC_MAX_ARGS);
        api->command = gs_calloc(n->n_items + 1, sizeof(char *));
        if (!api->command)
                return oom(w);
        for (size_t i = 0; i < n->n_items; i++) {
                char field[32];
                snprintf(field, sizeof(field), "command[%zu]", i);
                const struct spec_node *a = n->items[i];
                /* An argument may be "" (quoted), the program may not. */
                bool empty_ok = i > 0 && a->type == SPEC_NODE_SCALAR && !a->plain;
                int r = empty_ok && a->len == 0 ? 0 : want_string(w, a, field, "\"./serve\"");
                if (r < 0)
                        return r;
                if (i == 0 && a->len == 0)
                        return fail(w, a, "%s: the program must not be empty", field);
                r = dup_string(w, a, &api->command[i]);
                if (r < 0)
                        return r;
                api->n_command++;
        }
        return 0;
}

static int parse_image(struct walk *w, const struct spec_node *n, struct gs_api_spec *api)
{
        char q[GS_QUOTE_MAX];

        int r = want_string(w, n, "image", "registry.example/iris:1.0");
        if (r < 0)
                return r;
        for (size_t i = 0; i < n->len; i++)
                if (n->value[i] <= ' ' || n->value[i] > '~')
                        return fail(w, n,
                                    "image: \"%s\" is not a valid image reference: no spaces or "
                                    "control characters",
                                    gs_quote(n->value, q, sizeof(q)));
        return dup_string(w, n, &api->image);
}

static int parse_env(struct walk *w, const struct spec_node *n, struct gs_api_spec *api)
{
        char q[GS_QUOTE_MAX];

        if (n->type != SPEC_NODE_MAPPING)
                return fail(w, n, "env: expected a mapping of names to values such as "
                                  "{MODEL: iris}, got %s",
                            spec_node_kind(n));
        size_t count = n->n_items / 2;
        if (count > GS_SPEC_MAX_ENV)
                return fail(w, n, "env: more than %u variables", GS_SPEC_MAX_ENV);
        api->env = gs_calloc(count ? count : 1, sizeof(*api->env));
        if (!api->env)
                return oom(w);
        for (size_t i = 0; i < count; i++) {
                const struct spec_node *k = n->items[2 * i], *v = n->items[2 * i + 1];
                if (k->type != SPEC_NODE_SCALAR || strlen(k->value) != k->len ||
                    !env_name_valid(k->value))
                        return fail(w, k,
                                    "env: \"%s\" is not a valid variable name: use letters, "
                                    "digits and '_', not starting with a digit",
                                    k->type == SPEC_NODE_SCALAR ? gs_quote(k->value, q, sizeof(q))
                                                                : spec_node_kind(k));
                for (size_t j = 0; j < i; j++)
                        if (strcmp(api->env[j].name, k->value) == 0)
                                return fail(w, k, "env.%s: given twice", k->value);
                char field[280];
                snprintf(field, sizeof(field), "env.%s", k->value);
                bool empty = v->type == SPEC_NODE_SCALAR && !v->plain && v->len == 0;
                int r = empty ? 0 : want_string(w, v, field, "\"value\" (or \"\" for empty)");
                if (r < 0)
                        return r;
                r = dup_string(w, k, &api->env[i].name);
                if (r < 0)
                        return r;
                api->n_env++;
                r = dup_string(w, v, &api->env[i].value);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int parse_policy(struct walk *w, const struct spec_node *n, enum gs_compute_policy *ret)
{
        char q[GS_QUOTE_MAX];

        int r = want_string(w, n, "compute.policy", "share");
        if (r < 0)
                return r;
        if (gs_compute_policy_parse_str(n->value, ret) < 0)
                return fail(w, n,
                            "compute.policy: \"%s\" is not a policy: use share (the default: a "
                            "guaranteed share, idle time lent) or cap (never above the share)",
                            gs_quote(n->value, q, sizeof(q)));
        return 0;
}

static int parse_overuse(struct walk *w, const struct spec_node *n, enum gs_overuse_policy *ret)
{
        char q[GS_QUOTE_MAX];

        if (gs_overuse_policy_parse_str(n->value, ret) < 0)
                return fail(w, n,
                            "compute.overuse: \"%s\" is not an over-use policy: use one of "
                            GS_OVERUSE_POLICY_NAMES " (unset: the daemon's --overuse-policy)",
                            gs_quote(n->value, q, sizeof(q)));
        return 0;
}

enum { C_GPU, C_GPU_MEMORY, C_CPU, C_MEM, C_POLICY, C_OVERUSE };
static const char *const compute_keys[] = { "gpu", "gpu_memory", "cpu", "mem", "policy",
                                            "overuse" };
#define COMPUTE_ACCEPTED "gpu, gpu_memory, cpu, mem, policy, overuse"

static int parse_compute_value(struct walk *w, int key, const struct spec_node *v,
                               struct gs_api_compute *c)
{
        static const char *const examples[] = { "300m", "6Gi", "500m", "2Gi", "share", "kill" };
        char field[32];
        int r;

        snprintf(field, sizeof(field), "compute.%s", compute_keys[key]);
        r = want_string(w, v, field, examples[key]);
        if (r < 0)
                return r;
        switch (key) {
        case C_GPU:
                r = gs_gpu_quantity_parse(field, v->value, &c->gpu_milli, w->err);
                break;
        case C_GPU_MEMORY:
                r = gs_memory_size_parse(field, v->value, &c->gpu_memory, w->err);
                break;
        case C_CPU:
                r = gs_cpu_quantity_parse(field, v->value, &c->cpu_milli, w->err);
                break;
        case C_MEM:
                r = gs_memory_size_parse(field, v->value, &c->mem, w->err);
                break;
        case C_OVERUSE:
                return parse_overuse(w, v, &c->overuse);
        default:
                return parse_policy(w, v, &c->policy);
        }
        return r < 0 ? wrap(w, v, r) : 0;
}

static int parse_compute(struct walk *w, const struct spec_node *n, struct gs_api_compute *c)
{
        unsigned seen = 0;

        if (n->type != SPEC_NODE_MAPPING)
                return fail(w, n, "compute: expected a mapping such as {gpu: 300m}, got %s",
                            spec_node_kind(n));
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                int key = match_key(w, n->items[i], "compute.", compute_keys,
                                    GS_ARRAY_SIZE(compute_keys), &seen, COMPUTE_ACCEPTED);
                if (key < 0)
                        return key;
                int r = parse_compute_value(w, key, n->items[i + 1], c);
                if (r < 0)
                        return r;
        }
        if (!(seen & (1u << C_GPU)))
                return fail(w, n, "compute.gpu: missing; every API needs a GPU share such as "
                                  "gpu: 300m (or gpu: 1 for a whole GPU)");
        if (c->gpu_milli >= GS_MILLI_PER_GPU && (seen & (1u << C_GPU_MEMORY)))
                return fail(w, map_get(n, "gpu_memory"),
                            "compute.gpu_memory: only for slices below one GPU; an API with "
                            "whole GPUs gets all their memory");
        if (c->gpu_milli >= GS_MILLI_PER_GPU && (seen & (1u << C_POLICY)))
                return fail(w, map_get(n, "policy"),
                            "compute.policy: only for slices below one GPU; an API with whole "
                            "GPUs is not limited");
        return 0;
}

enum { K_NAME, K_COMMAND, K_IMAGE, K_PORT, K_REPLICAS, K_ENV, K_COMPUTE };
static const char *const api_keys[] = { "name", "command", "image", "port",
                                        "replicas", "env", "compute" };
#define API_ACCEPTED "name, command, image, port, replicas, env, compute"

static int parse_api_value(struct walk *w, int key, const struct spec_node *v,
                           struct gs_api_spec *api)
{
        char q[GS_QUOTE_MAX];
        uint32_t u = 0;
        int r;

        switch (key) {
        case K_NAME:
                r = want_string(w, v, "name", "iris-classifier");
                if (r < 0)
                        return r;
                if (!gs_dns_label_valid(v->value))
                        return fail(w, v,
                                    "name: \"%s\" is not a valid name: use 1 to 63 lowercase "
                                    "letters, digits and '-', starting and ending with a letter "
                                    "or digit (a DNS label)",
                                    gs_quote(v->value, q, sizeof(q)));
                return dup_string(w, v, &api->name);
        case K_COMMAND:
                return parse_command(w, v, api);
        case K_IMAGE:
                return parse_image(w, v, api);
        case K_PORT:
                r = parse_int(w, v, "port", 1, 65535, &u);
                api->port = (uint16_t)u;
                return r;
        case K_REPLICAS:
                return parse_int(w, v, "replicas", 1, GS_SPEC_MAX_REPLICAS, &api->replicas);
        case K_ENV:
                return parse_env(w, v, api);
        default:
                return parse_compute(w, v, &api->compute);
        }
}

static int parse_api(struct walk *w, const struct spec_node *n, size_t index,
                     struct gs_api_spec *api)
{
        unsigned seen = 0;

        /* Name the API in messages by its name when it has a good one. */
        snprintf(w->label, sizeof(w->label), "API #%zu", index + 1);
        if (n->type != SPEC_NODE_MAPPING)
                return fail(w, n, "expected a mapping such as \"name: iris\" with compute, "
                                  "command or image, got %s",
                            spec_node_kind(n));
        const struct spec_node *name = map_get(n, "name");
        if (name && name->type == SPEC_NODE_SCALAR && gs_dns_label_valid(name->value))
                snprintf(w->label, sizeof(w->label), "%s", name->value);

        api->line = n->line;
        api->port = GS_SPEC_DEFAULT_PORT;
        api->replicas = 1;
        api->compute.policy = GS_POLICY_SHARE;
        for (size_t i = 0; i + 1 < n->n_items; i += 2) {
                int key = match_key(w, n->items[i], "", api_keys, GS_ARRAY_SIZE(api_keys), &seen,
                                    API_ACCEPTED);
                if (key < 0)
                        return key;
                int r = parse_api_value(w, key, n->items[i + 1], api);
                if (r < 0)
                        return r;
        }
        if (!(seen & (1u << K_NAME)))
                return fail(w, n, "name: missing; every API needs a name such as "
                                  "\"name: iris-classifier\"");
        if (!(seen & ((1u << K_COMMAND) | (1u << K_IMAGE))))
                return fail(w, n, "neither command nor image given: use command (a list, to run "
                                  "locally) or image (for Kubernetes), or both");
        if (!(seen & (1u << K_COMPUTE)))
                return fail(w, n, "compute: missing; every API needs at least compute.gpu, "
                                  "e.g. \"compute: {gpu: 300m}\"");
        return 0;
}

static void api_done(struct gs_api_spec *api)
{
        gs_free(api->name);
        for (size_t i = 0; i < api->n_command; i++)
                gs_free(api->command[i]);
        gs_free(api->command);
        gs_free(api->image);
        for (size_t i = 0; i < api->n_env; i++) {
                gs_free(api->env[i].name);
                gs_free(api->env[i].value);
        }
        gs_free(api->env);
}

struct gs_spec *gs_spec_free(struct gs_spec *spec)
{
        if (!spec)
                return NULL;
        for (size_t i = 0; i < spec->n_apis; i++)
                api_done(&spec->apis[i]);
        gs_free(spec->apis);
        gs_free(spec->source);
        gs_free(spec);
        return NULL;
}

const struct gs_api_spec *gs_spec_find(const struct gs_spec *spec, const char *name)
{
        if (!spec || !name)
                return NULL;
        for (size_t i = 0; i < spec->n_apis; i++)
                if (strcmp(spec->apis[i].name, name) == 0)
                        return &spec->apis[i];
        return NULL;
}

/* Check the root of the document and build the spec from it. */
static int build_spec(struct walk *w, const struct spec_node *root, struct gs_spec *spec)
{
        if (!root)
                return gs_error_set(w->err, -EINVAL,
                                    "%s: the file is empty: expected a list of APIs, each "
                                    "starting with \"- name:\"",
                                    w->file);
        if (root->type != SPEC_NODE_SEQUENCE)
                return gs_error_set(w->err, -EINVAL,
                                    "%s:%u: expected a list of APIs, each starting with "
                                    "\"- name:\", got %s",
                                    w->file, root->line, spec_node_kind(root));
        if (root->n_items == 0)
                return gs_error_set(w->err, -EINVAL, "%s:%u: the list of APIs is empty", w->file,
                                    root->line);
        if (root->n_items > GS_SPEC_MAX_APIS)
                return gs_error_set(w->err, -EINVAL, "%s:%u: more than %u APIs in one file",
                                    w->file, root->line, GS_SPEC_MAX_APIS);

        spec->apis = gs_calloc(root->n_items, sizeof(*spec->apis));
        if (!spec->apis)
                return oom(w);
        spec->n_apis = root->n_items;
        for (size_t i = 0; i < root->n_items; i++) {
                int r = parse_api(w, root->items[i], i, &spec->apis[i]);
                if (r < 0)
                        return r;
                for (size_t j = 0; j < i; j++)
                        if (strcmp(spec->apis[j].name, spec->apis[i].name) == 0)
                                return fail(w, map_get(root->items[i], "name"),
                                            "name: another API is already called \"%s\" (line "
                                            "%u); names must be unique",
                                            spec->apis[i].name, spec->apis[j].line);
        }
        return 0;
}

int gs_spec_load_buffer(const char *name, const char *buf, size_t len, struct gs_spec **ret_spec,
                        struct gs_error **err)
{
        struct walk w = { .file = name ? name : "<spec>", .err = err };
        struct spec_node *root = NULL;

        if (len > GS_SPEC_MAX_BYTES)
                return gs_error_set(err, -EFBIG, "%s: larger than the %u bytes an API spec may have",
                                    w.file, GS_SPEC_MAX_BYTES);
        if (!buf && len > 0)
                return gs_error_set(err, -EINVAL, "%s: no buffer", w.file);
        if (!buf)
                buf = ""; /* libyaml asserts on a NULL input */
        struct gs_spec *spec = gs_calloc(1, sizeof(*spec));
        if (!spec)
                return oom(&w);
        spec->source = gs_strdup(w.file);
        int r = spec->source ? 0 : oom(&w);
        if (r == 0)
                r = spec_yaml_load(w.file, buf, len, &root, err);
        if (r == 0)
                r = build_spec(&w, root, spec);
        spec_node_free(root);
        if (r < 0) {
                gs_spec_free(spec);
                return r;
        }
        *ret_spec = spec;
        return 0;
}

/* Read at most GS_SPEC_MAX_BYTES + 1 bytes of fd into a new buffer. */
static int read_bounded(int fd, size_t hint, char **ret_buf, size_t *ret_len)
{
        size_t cap = GS_MIN(GS_MAX(hint + 1, (size_t)4096), (size_t)GS_SPEC_MAX_BYTES + 1);
        size_t n = 0;
        char *buf = gs_malloc(cap);

        if (!buf)
                return -ENOMEM;
        for (;;) {
                if (n == cap) {
                        if (cap > GS_SPEC_MAX_BYTES)
                                break;
                        size_t bigger = GS_MIN(cap * 2, (size_t)GS_SPEC_MAX_BYTES + 1);
                        char *p = gs_realloc(buf, bigger);
                        if (!p) {
                                gs_free(buf);
                                return -ENOMEM;
                        }
                        buf = p;
                        cap = bigger;
                }
                ssize_t got = read(fd, buf + n, cap - n);
                if (got < 0 && errno == EINTR)
                        continue;
                if (got < 0) {
                        int e = -errno;
                        gs_free(buf);
                        return e;
                }
                if (got == 0)
                        break;
                n += (size_t)got;
        }
        *ret_buf = buf;
        *ret_len = n;
        return 0;
}

int gs_spec_load_file(const char *path, struct gs_spec **ret_spec, struct gs_error **err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        struct stat st;
        char *buf = NULL;
        size_t len = 0;

        if (fd < 0) {
                int e = errno;
                return gs_error_set(err, -e, "%s: cannot open: %s", path, strerror(e));
        }
        if (fstat(fd, &st) < 0) {
                int e = errno;
                return gs_error_set(err, -e, "%s: cannot stat: %s", path, strerror(e));
        }
        if (S_ISDIR(st.st_mode))
                return gs_error_set(err, -EISDIR, "%s: is a directory, not an API spec file",
                                    path);
        if (S_ISREG(st.st_mode) && st.st_size > (off_t)GS_SPEC_MAX_BYTES)
                return gs_error_set(err, -EFBIG, "%s: larger than the %u bytes an API spec may have",
                                    path, GS_SPEC_MAX_BYTES);
        size_t hint = S_ISREG(st.st_mode) ? (size_t)st.st_size : 0;
        int r = read_bounded(fd, hint, &buf, &len);
        if (r == -ENOMEM)
                return gs_error_set(err, r, "%s: out of memory", path);
        if (r < 0)
                return gs_error_set(err, r, "%s: cannot read: %s", path, strerror(-r));
        r = gs_spec_load_buffer(path, buf, len, ret_spec, err);
        gs_free(buf);
        return r;
}
