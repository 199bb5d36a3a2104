/* SPDX-License-Identifier: Apache-2.0 */
/* The slice ledger: in-memory set of slices, its versioned text encoding
 * and crash-safe persistence. See ledger.h for the format. */
#include "ledger.h"

#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "atomic_file.h"
#include "compute_policy.h"
#include "number.h"
#include "overuse_policy.h"
#include "quantity.h"
#include "unit_ids.h"
#include "macro.h"

#define LEDGER_MAGIC "gpuslice-ledger"

_Static_assert(GS_SLICE_MAX_GPUS == GS_QUANTITY_MAX_SLICE_GPUS,
               "what the quantity parser accepts is what a slice holds");
/* A Kubernetes slice of 8 whole GPUs lists up to 8000 unit ids. */
#define LEDGER_MAX_LINE (128 * 1024)

uint64_t gs_ledger_checksum(const char *text, size_t len)
{
        uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
        for (size_t i = 0; i < len; i++) {
                h ^= (unsigned char)text[i];
                h *= 0x100000001b3ull;
        }
        return h;
}

void gs_ledger_init(struct gs_ledger *l)
{
        *l = (struct gs_ledger){ .next_id = 1 };
}

void gs_ledger_done(struct gs_ledger *l)
{
        if (!l)
                return;
        for (size_t i = 0; i < l->n_slices; i++)
                free(l->slices[i].units);
        gs_free(l->slices);
        gs_ledger_init(l);
}

bool gs_slice_is_whole(const struct gs_slice *s)
{
        return s->milli >= 1000 && s->milli % 1000 == 0;
}

bool gs_slice_in_container(const struct gs_slice *s)
{
        return s->kind == GS_SLICE_KUBE || s->kind == GS_SLICE_DRA;
}

/* [A-Za-z0-9._-]{min,max} */
static bool token_ok(const char *s, size_t min, size_t max)
{
        size_t n = strnlen(s, max + 1);
        if (n < min || n > max)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-'))
                        return false;
        }
        return true;
}

static bool dns_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* 1-max of [a-z0-9-] (and '.' when dots), each dot-separated part
 * alphanumeric at both ends. */
static bool dns_name_ok(const char *s, size_t max, bool dots)
{
        size_t n = strnlen(s, max + 1);
        if (n == 0 || n > max)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool edge = i == 0 || i == n - 1 || (dots && (s[i - 1] == '.' || s[i + 1] == '.'));
                if (dns_alnum(c))
                        continue;
                if (edge || !(c == '-' || (dots && c == '.')))
                        return false;
        }
        return true;
}

bool gs_ledger_dns_label_ok(const char *s)
{
        return dns_name_ok(s, GS_CLAIM_NS_MAX, false);
}

bool gs_ledger_dns_subdomain_ok(const char *s)
{
        return dns_name_ok(s, GS_CLAIM_NAME_MAX, true);
}

/* A DRA slice's claim: uid and request always, share, ns and name when set;
 * ns and name together or neither. */
static bool claim_ok(const struct gs_slice_claim *c)
{
        return token_ok(c->uid, 1, GS_CLAIM_FIELD_MAX) &&
               token_ok(c->request, 1, GS_CLAIM_FIELD_MAX) &&
               (!c->share[0] || token_ok(c->share, 1, GS_CLAIM_FIELD_MAX)) &&
               (!c->ns[0] || gs_ledger_dns_label_ok(c->ns)) &&
               (!c->name[0] || gs_ledger_dns_subdomain_ok(c->name)) &&
               (c->ns[0] != '\0') == (c->name[0] != '\0');
}

int gs_slice_validate(const struct gs_slice *s, struct gs_error **err)
{
        if (!token_ok(s->id, 1, GS_SLICE_ID_MAX))
                return gs_error_set(err, -EINVAL, "slice id '%.64s' is not 1-63 of [A-Za-z0-9._-]",
                                    s->id);
        if (s->name[0] && !token_ok(s->name, 1, GS_SLICE_NAME_MAX))
                return gs_error_set(err, -EINVAL, "slice name '%.64s' is not 1-63 of [A-Za-z0-9._-]",
                                    s->name);
        bool whole = gs_slice_is_whole(s);
        if (s->milli == 0 || (s->milli >= 1000 && !whole))
                return gs_error_set(err, -EINVAL,
                                    "slice %s: share %" PRIu32 "m is neither 1m..999m nor whole GPUs",
                                    s->id, s->milli);
        unsigned want = whole ? s->milli / 1000 : 1;
        if (s->n_gpus != want || want > GS_SLICE_MAX_GPUS)
                return gs_error_set(err, -EINVAL, "slice %s: share %" PRIu32 "m needs %u GPU(s), has %u",
                                    s->id, s->milli, want, s->n_gpus);
        if (!whole && s->memory_cap == 0)
                return gs_error_set(err, -EINVAL, "slice %s: memory cap is 0", s->id);
        if (s->policy != GS_POLICY_SHARE && s->policy != GS_POLICY_CAP)
                return gs_error_set(err, -EINVAL, "slice %s: unknown policy", s->id);
        if (s->kind != GS_SLICE_LOCAL && s->kind != GS_SLICE_KUBE && s->kind != GS_SLICE_DRA)
                return gs_error_set(err, -EINVAL, "slice %s: unknown kind", s->id);
        if (gs_slice_in_container(s) && s->pid != 0)
                return gs_error_set(err, -EINVAL, "slice %s: a Kubernetes slice has no pid",
                                    s->id);
        if (s->overuse != GS_OVERUSE_DEFAULT && s->overuse != GS_OVERUSE_REPORT &&
            s->overuse != GS_OVERUSE_KILL && s->overuse != GS_OVERUSE_EVICT)
                return gs_error_set(err, -EINVAL, "slice %s: unknown over-use policy", s->id);
        if ((s->kind == GS_SLICE_DRA) != (s->claim.uid[0] != '\0') ||
            (s->claim.uid[0] && !claim_ok(&s->claim)) ||
            (s->kind != GS_SLICE_DRA && (s->claim.ns[0] || s->claim.name[0])))
                return gs_error_set(err, -EINVAL,
                                    "slice %s: a DRA slice names its claim's uid and request "
                                    "(1-63 of [A-Za-z0-9._-]), and optionally its namespace "
                                    "(a DNS label) with its name (a DNS subdomain); only a "
                                    "DRA slice does",
                                    s->id);
        if (s->units) {
                struct gs_unit_set *set = malloc(sizeof(*set));
                int r = !set ? -ENOMEM : gs_unit_set_decode(s->units, set);
                free(set);
                if (r == -ENOMEM)
                        return gs_error_set(err, r, "out of memory");
                if (r < 0 || s->kind != GS_SLICE_KUBE)
                        return gs_error_set(err, -EINVAL, "slice %s: units '%.40s' are not the "
                                            "unit ranges of a Kubernetes slice", s->id, s->units);
        }
        if (s->kind == GS_SLICE_LOCAL && s->pid <= 0)
                return gs_error_set(err, -EINVAL, "slice %s: pid %d is not a process", s->id,
                                    (int)s->pid);
        for (unsigned i = 0; i < s->n_gpus; i++) {
                if (!token_ok(s->gpus[i].uuid, 1, GS_GPU_UUID_MAX - 1))
                        return gs_error_set(err, -EINVAL, "slice %s: GPU uuid '%.96s' is invalid",
                                            s->id, s->gpus[i].uuid);
                if (s->gpus[i].index >= GS_MAX_GPUS)
                        return gs_error_set(err, -EINVAL, "slice %s: GPU index %u out of range",
                                            s->id, s->gpus[i].index);
                for (unsigned j = 0; j < i; j++)
                        if (strcmp(s->gpus[i].uuid, s->gpus[j].uuid) == 0)
                                return gs_error_set(err, -EINVAL, "slice %s: GPU %s listed twice",
                                                    s->id, s->gpus[i].uuid);
        }
        return 0;
}

void gs_ledger_assign_id(struct gs_ledger *l, struct gs_slice *s)
{
        snprintf(s->id, sizeof(s->id), "%s%" PRIu64,
                 s->kind == GS_SLICE_KUBE ? "k8s-" : s->kind == GS_SLICE_DRA ? "dra-" : "s",
                 l->next_id);
        l->next_id++;
}

int gs_slice_id_number(const char *id, uint64_t *ret)
{
        const char *num = id + strlen(id);
        while (num > id && num[-1] >= '0' && num[-1] <= '9')
                num--; /* the number ending "s<n>", "k8s-<n>" or "dra-<n>" */
        return gs_u64_parse_str(num, UINT64_MAX / 2, ret);
}

struct gs_slice *gs_ledger_find(const struct gs_ledger *l, const char *id)
{
        for (size_t i = 0; i < l->n_slices; i++)
                if (strcmp(l->slices[i].id, id) == 0)
                        return &l->slices[i];
        return NULL;
}

int gs_ledger_add(struct gs_ledger *l, const struct gs_slice *s, struct gs_error **err)
{
        int r = gs_slice_validate(s, err);
        if (r < 0)
                return r;
        if (gs_ledger_find(l, s->id))
                return gs_error_set(err, -EEXIST, "slice %s already exists", s->id);
        if (l->n_slices >= GS_LEDGER_MAX_SLICES)
                return gs_error_set(err, -ENOSPC, "the ledger holds its limit of %d slices",
                                    GS_LEDGER_MAX_SLICES);
        if (l->n_slices == l->cap) {
                size_t ncap = l->cap ? l->cap * 2 : 16;
                struct gs_slice *n = gs_realloc(l->slices, ncap * sizeof(*n));
                if (!n)
                        return gs_error_set(err, -ENOMEM, "out of memory");
                l->slices = n;
                l->cap = ncap;
        }
        char *units = NULL;
        if (s->units && !(units = strdup(s->units)))
                return gs_error_set(err, -ENOMEM, "out of memory");
        l->slices[l->n_slices] = *s;
        l->slices[l->n_slices++].units = units;
        return 0;
}

int gs_ledger_remove(struct gs_ledger *l, const char *id)
{
        struct gs_slice *s = gs_ledger_find(l, id);
        if (!s)
                return -ENOENT;
        size_t i = (size_t)(s - l->slices);
        free(s->units);
        memmove(&l->slices[i], &l->slices[i + 1], (l->n_slices - i - 1) * sizeof(*s));
        l->n_slices--;
        return 0;
}

/* ---- encoding ---- */

struct sbuf {
        char *data;
        size_t len, cap;
        bool oom;
};

GS_PRINTF(2, 3) static void sbuf_printf(struct sbuf *b, const char *fmt, ...)
{
        if (b->oom)
                return;
        for (;;) {
                va_list ap;
                va_start(ap, fmt);
                int n = vsnprintf(b->data ? b->data + b->len : NULL, b->data ? b->cap - b->len : 0,
                                  fmt, ap);
                va_end(ap);
                if (n < 0) {
                        b->oom = true;
                        return;
                }
                if (b->data && (size_t)n < b->cap - b->len) {
                        b->len += (size_t)n;
                        return;
                }
                size_t ncap = GS_MAX(b->cap * 2, b->len + (size_t)n + 256);
                char *d = gs_realloc(b->data, ncap);
                if (!d) {
                        b->oom = true;
                        return;
                }
                b->data = d;
                b->cap = ncap;
        }
}

int gs_ledger_encode(const struct gs_ledger *l, char **ret_buf, size_t *ret_len)
{
        struct sbuf b = { 0 };
        sbuf_printf(&b, "%s %d\nnext_id %" PRIu64 "\n", LEDGER_MAGIC, GS_LEDGER_VERSION, l->next_id);
        for (size_t i = 0; i < l->n_slices; i++) {
                const struct gs_slice *s = &l->slices[i];
                sbuf_printf(&b,
                            "slice id=%s milli=%" PRIu32 " memory=%" PRIu64
                            " policy=%s pid=%d start=%" PRIu64 " uid=%u created=%" PRId64,
                            s->id, s->milli, s->memory_cap,
                            gs_compute_policy_name(s->policy), (int)s->pid,
                            s->start_time, (unsigned)s->uid, s->created);
                if (s->name[0])
                        sbuf_printf(&b, " name=%s", s->name);
                if (s->kind == GS_SLICE_KUBE)
                        sbuf_printf(&b, " kind=k8s");
                if (s->kind == GS_SLICE_DRA)
                        sbuf_printf(&b, " kind=dra claim=%s request=%s", s->claim.uid,
                                    s->claim.request);
                if (s->kind == GS_SLICE_DRA && s->claim.share[0])
                        sbuf_printf(&b, " share=%s", s->claim.share);
                if (s->kind == GS_SLICE_DRA && s->claim.ns[0])
                        sbuf_printf(&b, " claim_ns=%s claim_name=%s", s->claim.ns,
                                    s->claim.name);
                if (s->overuse != GS_OVERUSE_DEFAULT)
                        sbuf_printf(&b, " overuse=%s", gs_overuse_policy_name(s->overuse));
                for (unsigned g = 0; g < s->n_gpus; g++)
                        sbuf_printf(&b, " gpu=%u,%s", s->gpus[g].index, s->gpus[g].uuid);
                if (s->units && *s->units)
                        sbuf_printf(&b, " units=%s", s->units);
                if (s->overcommitted)
                        sbuf_printf(&b, " overcommit=1");
                sbuf_printf(&b, "\n");
        }
        if (!b.oom)
                sbuf_printf(&b, "sum %016" PRIx64 "\n", gs_ledger_checksum(b.data, b.len));
        sbuf_printf(&b, "end %zu\n", l->n_slices);
        if (b.oom) {
                gs_free(b.data);
                return -ENOMEM;
        }
        *ret_buf = b.data;
        *ret_len = b.len;
        return 0;
}

/* ---- decoding ---- */

static bool parse_u64(const char *s, uint64_t max, uint64_t *ret)
{
        return gs_u64_parse_str(s, max, ret) == 0;
}

static bool parse_i64(const char *s, int64_t *ret)
{
        return gs_i64_parse_str(s, -INT64_MAX, INT64_MAX, ret) == 0;
}

static bool copy_token(char *dst, size_t size, const char *src)
{
        if (!token_ok(src, 1, size - 1))
                return false;
        memcpy(dst, src, strlen(src) + 1);
        return true;
}

/* One `key=value` token of a slice line into s. `seen` tracks keys. */
static int slice_token(struct gs_slice *s, char *tok, unsigned *seen, unsigned lineno,
                       struct gs_error **err)
{
        static const char *const keys[] = { "id",  "milli", "memory",  "policy", "pid",  "start",
                                            "uid", "created", "name", "gpu",    "kind",
                                            "units", "claim", "request", "share",
                                            "overuse", "claim_ns", "claim_name", "overcommit" };
        char *eq = strchr(tok, '=');
        if (!eq)
                return gs_error_set(err, -EINVAL, "line %u: token '%.40s' is not key=value", lineno,
                                    tok);
        *eq = '\0';
        const char *v = eq + 1;
        unsigned k;
        for (k = 0; k < GS_ARRAY_SIZE(keys); k++)
                if (strcmp(tok, keys[k]) == 0)
                        break;
        if (k == GS_ARRAY_SIZE(keys))
                return gs_error_set(err, -EINVAL, "line %u: unknown key '%.40s'", lineno, tok);
        if (k != 9 && (*seen & (1u << k)))
                return gs_error_set(err, -EINVAL, "line %u: key '%s' repeated", lineno, tok);
        *seen |= 1u << k;
        uint64_t u = 0;
        bool ok = true;
        switch (k) {
        case 0: ok = copy_token(s->id, sizeof(s->id), v); break;
        case 1: ok = parse_u64(v, 1000u * GS_SLICE_MAX_GPUS, &u); s->milli = (uint32_t)u; break;
        case 2: ok = parse_u64(v, UINT64_MAX, &s->memory_cap); break;
        case 3: ok = gs_compute_policy_parse_str(v, &s->policy) == 0; break;
        case 4: ok = parse_u64(v, INT32_MAX, &u); s->pid = (pid_t)u; break;
        case 5: ok = parse_u64(v, UINT64_MAX, &s->start_time); break;
        case 6: ok = parse_u64(v, UINT32_MAX - 1u, &u); s->uid = (uid_t)u; break;
        case 7: ok = parse_i64(v, &s->created); break;
        case 8: ok = copy_token(s->name, sizeof(s->name), v); break;
        case 9: {
                char *comma = strchr(v, ',');
                if (!comma || s->n_gpus >= GS_SLICE_MAX_GPUS) {
                        ok = false;
                        break;
                }
                *comma = '\0';
                struct gs_slice_gpu *g = &s->gpus[s->n_gpus];
                ok = parse_u64(v, GS_MAX_GPUS - 1, &u) &&
                     copy_token(g->uuid, sizeof(g->uuid), comma + 1);
                g->index = (unsigned)u;
                if (ok)
                        s->n_gpus++;
                break;
        }
        case 10:
                ok = strcmp(v, "k8s") == 0 || strcmp(v, "dra") == 0;
                s->kind = strcmp(v, "dra") == 0 ? GS_SLICE_DRA : GS_SLICE_KUBE;
                break;
        case 11:
                ok = !s->units && (s->units = strdup(v)) != NULL;
                break;
        case 12: ok = copy_token(s->claim.uid, sizeof(s->claim.uid), v); break;
        case 13: ok = copy_token(s->claim.request, sizeof(s->claim.request), v); break;
        case 14: ok = copy_token(s->claim.share, sizeof(s->claim.share), v); break;
        case 15: ok = gs_overuse_policy_parse_str(v, &s->overuse) == 0; break;
        case 16:
                ok = gs_ledger_dns_label_ok(v);
                if (ok)
                        memcpy(s->claim.ns, v, strlen(v) + 1);
                break;
        case 17:
                ok = gs_ledger_dns_subdomain_ok(v);
                if (ok)
                        memcpy(s->claim.name, v, strlen(v) + 1);
                break;
        case 18:
                ok = strcmp(v, "1") == 0;
                s->overcommitted = ok;
                break;
        }
        if (!ok)
                return gs_error_set(err, -EINVAL, "line %u: bad value for '%s'", lineno, tok);
        return 0;
}

static int parse_slice_line(struct gs_ledger *l, char *rest, unsigned lineno, struct gs_error **err)
{
        struct gs_slice s = { 0 };
        unsigned seen = 0;
        while (rest) {
                char *sp = strchr(rest, ' ');
                if (sp)
                        *sp = '\0';
                int r = slice_token(&s, rest, &seen, lineno, err);
                if (r < 0) {
                        free(s.units);
                        return r;
                }
                rest = sp ? sp + 1 : NULL;
        }
        const unsigned required = 0x2FFu; /* every key but name (8), kind (10) and above */
        if ((seen & required) != required) {
                free(s.units);
                return gs_error_set(err, -EINVAL, "line %u: slice lacks a required key", lineno);
        }
        int r = gs_ledger_add(l, &s, err);
        free(s.units);
        if (r < 0) {
                gs_error_wrap(err, "line %u", lineno);
                return r == -ENOMEM ? r : -EINVAL;
        }
        return 0;
}

/* The `sum <16 hex digits>` line at `line`: the checksum of the `prefix`
 * bytes before it (the original text: decoding writes into its copy). */
static int check_sum(const char *line, const char *prefix, size_t len, unsigned lineno,
                     struct gs_error **err)
{
        uint64_t want = 0;
        const char *hex = line + 4;
        bool ok = strlen(hex) == 16;
        for (size_t i = 0; ok && i < 16; i++) {
                char c = hex[i];
                unsigned d = c >= '0' && c <= '9' ? (unsigned)(c - '0')
                             : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10) : 16u;
                ok = d < 16;
                want = want << 4 | d;
        }
        if (!ok)
                return gs_error_set(err, -EINVAL, "line %u: expected 'sum' and 16 hex digits",
                                    lineno);
        uint64_t have = gs_ledger_checksum(prefix, len);
        if (have != want)
                return gs_error_set(err, -EINVAL,
                                    "line %u: checksum %016" PRIx64 " does not match the records "
                                    "above it (%016" PRIx64 "): the ledger was edited or damaged",
                                    lineno, want, have);
        return 0;
}

static int decode_lines(struct gs_ledger *l, char *text, const char *orig, bool *ret_summed,
                        struct gs_error **err)
{
        unsigned lineno = 0;
        bool ended = false, summed = false;
        char *line = text;
        while (*line) {
                char *nl = strchr(line, '\n');
                if (!nl)
                        return gs_error_set(err, -EINVAL, "line %u: missing newline (truncated?)",
                                            lineno + 1);
                *nl = '\0';
                lineno++;
                if (nl - line > LEDGER_MAX_LINE)
                        return gs_error_set(err, -EINVAL, "line %u: longer than %d bytes", lineno,
                                            LEDGER_MAX_LINE);
                uint64_t u;
                if (ended)
                        return gs_error_set(err, -EINVAL, "line %u: data after 'end'", lineno);
                if (lineno == 1) {
                        if (strncmp(line, LEDGER_MAGIC " ", sizeof(LEDGER_MAGIC)) != 0)
                                return gs_error_set(err, -EINVAL, "not a gpuslice ledger (line 1)");
                        if (!parse_u64(line + sizeof(LEDGER_MAGIC), 1000000, &u) ||
                            u != GS_LEDGER_VERSION)
                                return gs_error_set(err, -EINVAL,
                                                    "unsupported ledger version '%.20s' (this "
                                                    "gpusliced reads version %d)",
                                                    line + sizeof(LEDGER_MAGIC), GS_LEDGER_VERSION);
                } else if (lineno == 2) {
                        if (strncmp(line, "next_id ", 8) != 0 ||
                            !parse_u64(line + 8, UINT64_MAX / 2, &u) || u == 0)
                                return gs_error_set(err, -EINVAL, "line 2: expected 'next_id N'");
                        l->next_id = u;
                } else if (summed && strncmp(line, "end ", 4) != 0) {
                        return gs_error_set(err, -EINVAL, "line %u: only 'end' may follow 'sum'",
                                            lineno);
                } else if (strncmp(line, "slice ", 6) == 0) {
                        int r = parse_slice_line(l, line + 6, lineno, err);
                        if (r < 0)
                                return r;
                } else if (strncmp(line, "sum ", 4) == 0) {
                        /* Checked, and then only `end` may follow. */
                        int r = check_sum(line, orig, (size_t)(line - text), lineno, err);
                        if (r < 0)
                                return r;
                        summed = true;
                } else if (strncmp(line, "end ", 4) == 0) {
                        if (!parse_u64(line + 4, GS_LEDGER_MAX_SLICES, &u) || u != l->n_slices)
                                return gs_error_set(err, -EINVAL,
                                                    "line %u: 'end' count does not match %zu slices",
                                                    lineno, l->n_slices);
                        ended = true;
                } else {
                        return gs_error_set(err, -EINVAL, "line %u: unknown record '%.20s'", lineno,
                                            line);
                }
                line = nl + 1;
        }
        if (!ended)
                return gs_error_set(err, -EINVAL, "no 'end' line (truncated file)");
        *ret_summed = summed;
        /* An id at or above next_id would be handed out again. Kubernetes
         * ids of ledgers written before both kinds shared next_id move it
         * on instead. */
        for (size_t i = 0; i < l->n_slices; i++) {
                uint64_t n;
                const char *id = l->slices[i].id;
                if (id[0] == 's' && parse_u64(id + 1, UINT64_MAX, &n) && n >= l->next_id)
                        return gs_error_set(err, -EINVAL, "slice %s is not below next_id %" PRIu64,
                                            id, l->next_id);
                if (strncmp(id, "k8s-", 4) == 0 && parse_u64(id + 4, UINT64_MAX / 2 - 1, &n) &&
                    n >= l->next_id)
                        l->next_id = n + 1;
                if (strncmp(id, "dra-", 4) == 0 && parse_u64(id + 4, UINT64_MAX / 2 - 1, &n) &&
                    n >= l->next_id)
                        return gs_error_set(err, -EINVAL, "slice %s is not below next_id %" PRIu64,
                                            id, l->next_id);
        }
        return 0;
}

int gs_ledger_check_shares(const struct gs_ledger *l, struct gs_error **err)
{
        /* Per GPU uuid (indexes may change across reboots; uuids do not):
         * the sum of its shares and the whole-GPU slice holding it. */
        struct seen {
                const char *uuid;
                uint32_t milli;
                const struct gs_slice *whole;
                const struct gs_slice *first;
        } gpus[GS_MAX_GPUS];
        unsigned n_gpus = 0;
        for (size_t i = 0; i < l->n_slices; i++) {
                const struct gs_slice *s = &l->slices[i];
                bool whole = gs_slice_is_whole(s);
                for (unsigned g = 0; g < s->n_gpus; g++) {
                        const char *uuid = s->gpus[g].uuid;
                        struct seen *e = NULL;
                        for (unsigned k = 0; k < n_gpus && !e; k++)
                                if (strcmp(gpus[k].uuid, uuid) == 0)
                                        e = &gpus[k];
                        if (!e && n_gpus == GS_MAX_GPUS)
                                return gs_error_set(err, -EINVAL,
                                                    "slice %s: more than %d GPUs in the ledger",
                                                    s->id, GS_MAX_GPUS);
                        if (!e) {
                                e = &gpus[n_gpus++];
                                *e = (struct seen){ .uuid = uuid, .first = s };
                        } else if ((e->whole || whole) && !s->overcommitted) {
                                return gs_error_set(err, -EINVAL,
                                                    "slice %s shares GPU %s with slice %s, but "
                                                    "a whole-GPU slice holds its GPU alone",
                                                    s->id, uuid,
                                                    e->whole ? e->whole->id : e->first->id);
                        }
                        if (whole && !e->whole)
                                e->whole = s;
                        if (whole || s->overcommitted)
                                continue;
                        e->milli += s->milli;
                        if (e->milli > GS_MILLI_PER_GPU)
                                return gs_error_set(err, -EINVAL,
                                                    "slice %s: the shares on GPU %s add up to "
                                                    "%" PRIu32 "m with it, more than %um",
                                                    s->id, uuid, e->milli, GS_MILLI_PER_GPU);
                }
        }
        return 0;
}

int gs_ledger_decode(struct gs_ledger *l, const char *buf, size_t len, struct gs_error **err)
{
        if (len > GS_LEDGER_MAX_BYTES)
                return gs_error_set(err, -EINVAL, "ledger larger than %u bytes", GS_LEDGER_MAX_BYTES);
        if (memchr(buf, '\0', len))
                return gs_error_set(err, -EINVAL, "ledger contains a NUL byte");
        if (len == 0)
                return gs_error_set(err, -EINVAL, "ledger is empty");
        char *text = gs_malloc(len + 1);
        if (!text)
                return gs_error_set(err, -ENOMEM, "out of memory");
        memcpy(text, buf, len);
        text[len] = '\0';
        struct gs_ledger n;
        gs_ledger_init(&n);
        bool summed = false;
        int r = decode_lines(&n, text, buf, &summed, err);
        gs_free(text);
        if (r == 0)
                r = gs_ledger_check_shares(&n, err);
        if (r < 0) {
                gs_ledger_done(&n);
                return r;
        }
        n.unsummed = !summed;
        gs_ledger_done(l);
        *l = n;
        return 0;
}

int gs_ledger_load(struct gs_ledger *l, const char *path, struct gs_error **err)
{
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        int r = gs_file_read(path, GS_LEDGER_MAX_BYTES, &buf, &len, err);
        if (r < 0)
                return r == -ENOENT ? r : gs_error_wrap(err, "ledger");
        r = gs_ledger_decode(l, buf, len, err);
        if (r < 0) {
                gs_error_wrap(err, "corrupt state file %s", path);
                return r;
        }
        return 0;
}

int gs_ledger_save(const struct gs_ledger *l, const char *path, struct gs_error **err)
{
        char *text = NULL;
        size_t len = 0;
        if (gs_ledger_encode(l, &text, &len) < 0)
                return gs_error_set(err, -ENOMEM, "out of memory");
        int r = gs_file_replace(path, text, len, 0600, err);
        gs_free(text);
        if (r < 0)
                gs_error_wrap(err, "cannot save the state file");
        return r;
}
