/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes quantities, parsed exactly.
 *
 * The grammar is Kubernetes' (k8s.io/apimachinery resource.Quantity):
 *
 *   quantity  ::= sign? number suffix
 *   number    ::= digits | digits "." digits? | "." digits
 *   suffix    ::= "" | binarySI | decimalSI | ("e" | "E") sign? digits
 *   binarySI  ::= Ki | Mi | Gi | Ti | Pi | Ei
 *   decimalSI ::= m | k | M | G | T | P | E
 *
 * No floating point anywhere: the significant digits are kept in a 128-bit
 * integer with a power of ten and a power of two beside it, and converting
 * to a unit (milli, bytes) is exact integer arithmetic with overflow checks.
 * A value that does not land on a whole unit (0.0005 GPU, 1.1 bytes) is
 * rejected, never rounded. */
#include "quantity.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

typedef unsigned __int128 u128;

#define QTY_MAX_DIGITS 38      /* 10^38 < 2^127: the digits never overflow */
#define QTY_MAX_EXPONENT 1000  /* |e| above this is nonsense, not a quantity */
#define QTY_QUOTE_CHARS 48

/* Why a string is not a quantity, or why its value is not acceptable. */
enum qty_status {
        QTY_OK = 0,
        QTY_EMPTY,
        QTY_TOO_LONG,
        QTY_SPACE,
        QTY_SYNTAX,
        QTY_SUFFIX,          /* digits fine, suffix unknown */
        QTY_TOO_MANY_DIGITS,
        QTY_EXPONENT_RANGE,
};

/* value = digits × 10^exp10 × 2^exp2, with digits free of trailing zeros
 * (or zero). */
struct qty {
        bool negative;
        u128 digits;
        int exp10;
        unsigned exp2;
        const char *suffix;  /* where the suffix starts in the input */
};

static const struct {
        const char *name;
        int exp10;
        unsigned exp2;
} suffixes[] = {
        { "", 0, 0 },    { "m", -3, 0 },  { "k", 3, 0 },   { "M", 6, 0 },
        { "G", 9, 0 },   { "T", 12, 0 },  { "P", 15, 0 },  { "E", 18, 0 },
        { "Ki", 0, 10 }, { "Mi", 0, 20 }, { "Gi", 0, 30 }, { "Ti", 0, 40 },
        { "Pi", 0, 50 }, { "Ei", 0, 60 },
};

static bool is_digit(char c) { return c >= '0' && c <= '9'; }

/* Parse the exponent after "e"/"E" at s (sign optional, then digits to the
 * end of the string). */
static enum qty_status parse_exponent(const char *s, int *ret)
{
        bool neg = false;
        int v = 0;

        if (*s == '+' || *s == '-')
                neg = *s++ == '-';
        if (!*s)
                return QTY_SYNTAX;
        for (; *s; s++) {
                if (!is_digit(*s))
                        return QTY_SYNTAX;
                v = v * 10 + (*s - '0');
                if (v > QTY_MAX_EXPONENT)
                        return QTY_EXPONENT_RANGE;
        }
        *ret = neg ? -v : v;
        return QTY_OK;
}

/* Parse the digits of a number at *sp into q, advancing *sp past them. */
static enum qty_status parse_number(const char **sp, struct qty *q)
{
        const char *s = *sp;
        unsigned n_sig = 0, n_digits = 0;
        bool fraction = false;

        for (;; s++) {
                if (*s == '.' && !fraction) {
                        fraction = true;
                        continue;
                }
                if (!is_digit(*s))
                        break;
                unsigned d = (unsigned)(*s - '0');
                n_digits++;
                if (n_sig == 0 && d == 0) {
                        if (fraction)
                                q->exp10--;
                        continue;
                }
                if (n_sig < QTY_MAX_DIGITS) {
                        q->digits = q->digits * 10 + d;
                        n_sig++;
                        if (fraction)
                                q->exp10--;
                } else if (d != 0) {
                        return QTY_TOO_MANY_DIGITS;
                } else if (!fraction) {
                        q->exp10++; /* an integer's trailing zero */
                }
        }
        if (n_digits == 0)
                return QTY_SYNTAX;
        *sp = s;
        return QTY_OK;
}

static enum qty_status qty_parse(const char *s, struct qty *q)
{
        *q = (struct qty){ 0 };
        if (!s || !*s)
                return QTY_EMPTY;
        size_t len = strnlen(s, GS_QUANTITY_MAX_LEN + 1);
        if (len > GS_QUANTITY_MAX_LEN)
                return QTY_TOO_LONG;
        for (size_t i = 0; i < len; i++)
                if (s[i] == ' ' || (s[i] >= '\t' && s[i] <= '\r'))
                        return QTY_SPACE;

        if (*s == '+' || *s == '-')
                q->negative = *s++ == '-';
        enum qty_status st = parse_number(&s, q);
        if (st != QTY_OK)
                return st;
        q->suffix = s;

        /* "1E" is exa; "1E3" and "1e-3" are exponents. */
        if ((*s == 'e' || *s == 'E') && s[1]) {
                int e = 0;
                st = parse_exponent(s + 1, &e);
                if (st == QTY_EXPONENT_RANGE)
                        return st;
                if (st == QTY_OK) {
                        q->exp10 += e;
                        goto normalise;
                }
        }
        for (size_t i = 0; i < GS_ARRAY_SIZE(suffixes); i++) {
                if (strcmp(s, suffixes[i].name) == 0) {
                        q->exp10 += suffixes[i].exp10;
                        q->exp2 = suffixes[i].exp2;
                        goto normalise;
                }
        }
        /* "1.2.3", "--1", "1x": a suffix that does not start with a letter
         * is a malformed number, one that does is an unknown unit. */
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))
                return QTY_SUFFIX;
        return QTY_SYNTAX;

normalise:
        if (q->digits == 0) {
                q->exp10 = 0;
                q->exp2 = 0;
                return QTY_OK;
        }
        while (q->digits % 10 == 0) {
                q->digits /= 10;
                q->exp10++;
        }
        return QTY_OK;
}

/* Convert q to an integer count of 10^-scale10 units (scale10 = 3 for
 * milli, 0 for bytes). Returns 0, -ERANGE when above max, -EDOM when the
 * value is not a whole number of units. q must be non-negative. */
static int qty_to_units(const struct qty *q, int scale10, uint64_t max, uint64_t *ret)
{
        u128 v = q->digits;
        int e = q->exp10 + scale10;
        int shift = (int)q->exp2;

        if (v == 0) {
                *ret = 0;
                return 0;
        }
        if (e < 0) {
                /* Divide by 10^-e = 5^-e × 2^-e; 2^exp2 has no factor 5. */
                for (int i = 0; i < -e; i++) {
                        if (v % 5 != 0)
                                return -EDOM;
                        v /= 5;
                }
                shift += e;
        } else {
                for (int i = 0; i < e; i++) {
                        if (v > max / 10)
                                return -ERANGE;
                        v *= 10;
                }
        }
        if (shift >= 0) {
                for (int i = 0; i < shift; i++) {
                        if (v > max >> 1)
                                return -ERANGE;
                        v <<= 1;
                }
        } else {
                if (-shift >= 127 || (v & (((u128)1 << -shift) - 1)) != 0)
                        return -EDOM;
                v >>= -shift;
        }
        if (v > max)
                return -ERANGE;
        *ret = (uint64_t)v;
        return 0;
}

const char *gs_quote(const char *s, char *buf, size_t size)
{
        size_t o = 0;

        if (size == 0)
                return buf;
        if (!s)
                s = "";
        for (size_t i = 0; s[i]; i++) {
                unsigned char c = (unsigned char)s[i];
                char tmp[8];
                if (i >= QTY_QUOTE_CHARS) {
                        snprintf(tmp, sizeof(tmp), "...");
                } else if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
                        tmp[0] = (char)c;
                        tmp[1] = '\0';
                } else {
                        snprintf(tmp, sizeof(tmp), "\\x%02x", c);
                }
                size_t n = strlen(tmp);
                if (o + n >= size)
                        break;
                memcpy(buf + o, tmp, n);
                o += n;
                if (i >= QTY_QUOTE_CHARS)
                        break;
        }
        buf[o] = '\0';
        return buf;
}

/* The reason a string is not a quantity, for a message; buf holds it when
 * it names the input's suffix. */
static const char *status_reason(enum qty_status st, const struct qty *q, char *buf,
                                 size_t size)
{
        char quoted[GS_QUOTE_MAX];

        switch (st) {
        case QTY_EMPTY:
                return "it is empty";
        case QTY_TOO_LONG:
                return "it is too long";
        case QTY_SPACE:
                return "it contains white space";
        case QTY_TOO_MANY_DIGITS:
                return "it has too many significant digits";
        case QTY_EXPONENT_RANGE:
                return "its exponent is out of range";
        case QTY_SUFFIX:
                snprintf(buf, size, "unknown suffix \"%s\"",
                         gs_quote(q->suffix, quoted, sizeof(quoted)));
                return buf;
        default:
                return "it is not a number";
        }
}

#define GPU_ACCEPTED                                                                       \
        "below one GPU use 1m..999m (or 0.001..0.999); from one GPU up use whole GPUs (1, 2, " \
        "1000m), at most 8"

#define REASON(st, q) status_reason((st), (q), (char[GS_QUOTE_MAX + 32]){ 0 }, GS_QUOTE_MAX + 32)

static int gpu_error(struct gs_error **err, const char *field, const char *value,
                     const char *reason)
{
        char q[GS_QUOTE_MAX];
        return gs_error_set(err, -EINVAL, "%s: \"%s\" is not a valid GPU quantity (%s): %s",
                            field ? field : "gpu", gs_quote(value, q, sizeof(q)), reason,
                            GPU_ACCEPTED);
}

int gs_gpu_quantity_parse(const char *field, const char *value, uint32_t *ret_milli,
                          struct gs_error **err)
{
        struct qty q;
        uint64_t milli = 0;

        enum qty_status st = qty_parse(value, &q);
        if (st != QTY_OK)
                return gpu_error(err, field, value, REASON(st, &q));
        if (q.negative && q.digits != 0)
                return gpu_error(err, field, value, "it is negative");
        int r = qty_to_units(&q, 3, (uint64_t)GS_QUANTITY_MAX_SLICE_GPUS * GS_MILLI_PER_GPU,
                             &milli);
        if (r == -ERANGE)
                return gpu_error(err, field, value, "more than 8 GPUs, the most one slice holds");
        if (r == -EDOM)
                return gpu_error(err, field, value, "finer than 1m, a thousandth of a GPU");
        if (milli == 0)
                return gpu_error(err, field, value, "it is zero");
        if (milli > GS_MILLI_PER_GPU && milli % GS_MILLI_PER_GPU != 0)
                return gpu_error(err, field, value, "above one GPU only whole GPUs are allowed");
        *ret_milli = (uint32_t)milli;
        return 0;
}

#define MEMORY_ACCEPTED                                                                  \
        "use a whole number of bytes, optionally with a suffix Ki Mi Gi Ti Pi Ei (powers of " \
        "1024) or k M G T P E (powers of 1000), e.g. 6Gi, 512Mi, 1.5Gi, 2G"

static int memory_error(struct gs_error **err, const char *field, const char *value,
                        const char *reason)
{
        char q[GS_QUOTE_MAX];
        return gs_error_set(err, -EINVAL, "%s: \"%s\" is not a valid memory quantity (%s): %s",
                            field ? field : "memory", gs_quote(value, q, sizeof(q)), reason,
                            MEMORY_ACCEPTED);
}

int gs_memory_quantity_parse(const char *field, const char *value, uint64_t *ret_bytes,
                             struct gs_error **err)
{
        struct qty q;
        uint64_t bytes = 0;

        enum qty_status st = qty_parse(value, &q);
        if (st != QTY_OK)
                return memory_error(err, field, value, REASON(st, &q));
        if (strcmp(q.suffix, "m") == 0)
                return memory_error(err, field, value, "m means milli, not a memory unit");
        if (q.negative && q.digits != 0)
                return memory_error(err, field, value, "it is negative");
        int r = qty_to_units(&q, 0, UINT64_MAX, &bytes);
        if (r == -ERANGE)
                return memory_error(err, field, value, "it is larger than 16Ei");
        if (r == -EDOM)
                return memory_error(err, field, value, "not a whole number of bytes");
        if (bytes == 0)
                return memory_error(err, field, value, "it is zero");
        *ret_bytes = bytes;
        return 0;
}

/* A plain number of at most 19 digits, the form HAMi users write in MiB. */
static bool plain_number(const char *s)
{
        size_t n = strspn(s, "0123456789");
        return n > 0 && n <= 19 && s[n] == '\0';
}

int gs_memory_minimum_check(const char *field, const char *value, uint64_t bytes,
                            struct gs_error **err)
{
        char q[GS_QUOTE_MAX], hint[64] = "";

        if (bytes >= GS_MEMORY_MIN)
                return 0;
        if (!field)
                field = "memory";
        if (bytes >= 64 && (!value || plain_number(value)))
                snprintf(hint, sizeof(hint), "; did you mean %" PRIu64 "Mi?", bytes);
        if (!value)
                return gs_error_set(err, -EINVAL, "%s: %" PRIu64 " bytes is below the 64Mi "
                                    "minimum%s", field, bytes, hint);
        return gs_error_set(err, -EINVAL, "%s: %s is %" PRIu64 " bytes, below the 64Mi minimum%s",
                            field, gs_quote(value, q, sizeof(q)), bytes, hint);
}

int gs_memory_size_parse(const char *field, const char *value, uint64_t *ret_bytes,
                         struct gs_error **err)
{
        uint64_t bytes = 0;
        int r = gs_memory_quantity_parse(field, value, &bytes, err);
        if (r < 0)
                return r;
        r = gs_memory_minimum_check(field, value, bytes, err);
        if (r < 0)
                return r;
        *ret_bytes = bytes;
        return 0;
}

#define CPU_ACCEPTED "use millicores (1m, 500m) or cores (0.5, 2), at most 100000 cores"

static int cpu_error(struct gs_error **err, const char *field, const char *value,
                     const char *reason)
{
        char q[GS_QUOTE_MAX];
        return gs_error_set(err, -EINVAL, "%s: \"%s\" is not a valid CPU quantity (%s): %s",
                            field ? field : "cpu", gs_quote(value, q, sizeof(q)), reason,
                            CPU_ACCEPTED);
}

int gs_cpu_quantity_parse(const char *field, const char *value, uint32_t *ret_milli,
                          struct gs_error **err)
{
        struct qty q;
        uint64_t milli = 0;

        enum qty_status st = qty_parse(value, &q);
        if (st != QTY_OK)
                return cpu_error(err, field, value, REASON(st, &q));
        if (q.negative && q.digits != 0)
                return cpu_error(err, field, value, "it is negative");
        int r = qty_to_units(&q, 3, GS_CPU_MAX_MILLI, &milli);
        if (r == -ERANGE)
                return cpu_error(err, field, value, "too many cores");
        if (r == -EDOM)
                return cpu_error(err, field, value, "finer than 1m, a thousandth of a core");
        if (milli == 0)
                return cpu_error(err, field, value, "it is zero");
        *ret_milli = (uint32_t)milli;
        return 0;
}

static int format_result(int n, size_t size)
{
        if (n < 0)
                return -EINVAL;
        if ((size_t)n >= size)
                return -ENOSPC;
        return n;
}

int gs_gpu_quantity_format(uint32_t milli, char *buf, size_t size)
{
        int n;
        if (milli != 0 && milli % GS_MILLI_PER_GPU == 0)
                n = snprintf(buf, size, "%u", milli / GS_MILLI_PER_GPU);
        else if (milli == 0)
                n = snprintf(buf, size, "0");
        else
                n = snprintf(buf, size, "%um", milli);
        return format_result(n, size);
}

int gs_cpu_quantity_format(uint32_t milli, char *buf, size_t size)
{
        return gs_gpu_quantity_format(milli, buf, size);
}

int gs_memory_quantity_format(uint64_t bytes, char *buf, size_t size)
{
        static const char *const units[] = { "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei" };
        unsigned u = 0;

        while (bytes != 0 && u + 1 < GS_ARRAY_SIZE(units) && bytes % 1024 == 0) {
                bytes /= 1024;
                u++;
        }
        int n = snprintf(buf, size, "%llu%s", (unsigned long long)bytes, units[u]);
        return format_result(n, size);
}

uint64_t gs_default_memory_cap(uint32_t milli, uint64_t gpu_memory)
{
        if (milli >= GS_MILLI_PER_GPU)
                return gpu_memory;
        /* milli < 1000, so the product fits in 74 bits and the quotient in 64. */
        u128 share = (u128)gpu_memory * milli / GS_MILLI_PER_GPU;
        uint64_t cap = (uint64_t)share;
        return cap - cap % GS_MEM_GRANULARITY;
}
