/* SPDX-License-Identifier: Apache-2.0 */
/* The API-server client: requests, retries, the token. See apiserver.h.
 * The config loaders (in-cluster, kubeconfig) are in apiserver_config.c. */
#include "apiserver.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "apiserver_internal.h"
#include "log.h"
#include "macro.h"
#include "number.h"

struct apiserver {
        CURL *curl;
        char *server; /* no trailing '/' */
        char *ca_file;
        char *ca_pem;
        size_t ca_pem_len;
        char *token_file;
        char *token;          /* the token sent, NULL: none */
        struct stat token_st; /* the token file it was read from */
        char *user_agent;
        unsigned timeout_ms, connect_timeout_ms, max_tries, backoff_ms, max_retry_after_ms;
        size_t max_response;
        char errbuf[CURL_ERROR_SIZE];
};

/* One answer being received. */
struct response {
        const char *method, *path; /* for messages */
        char *body;
        size_t len, cap, max;
        bool too_big, oom;
        bool has_retry_after;
        uint64_t retry_after_s;
};

/* The outcome of one attempt. */
struct attempt {
        CURLcode cc;
        long status; /* 0: no answer */
};

/* curl_global_init is not thread-safe and must run once per process; it is
 * the only process-wide state of the client. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init(void)
{
        curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static uint64_t now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms)
{
        struct timespec ts = { .tv_sec = (time_t)(ms / 1000u),
                               .tv_nsec = (long)(ms % 1000u) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

/* --- the token ------------------------------------------------------------ */

static bool same_file_state(const struct stat *a, const struct stat *b)
{
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
               a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
}

/* A bearer token is one HTTP header value: printable ASCII, no space. */
static bool token_chars_ok(const char *t, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if ((unsigned char)t[i] <= 0x20 || (unsigned char)t[i] >= 0x7f)
                        return false;
        return true;
}

static bool blank(char c)
{
        return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Read the token file (following links: a projected service-account volume
 * swaps a "..data" link on rotation), trimmed of surrounding white space,
 * into *ret, and the state of the file read into *ret_st. */
static int token_read(const char *path, char **ret, struct stat *ret_st, struct gs_error **err)
{
        char *buf = NULL;
        size_t n = 0, start = 0;
        struct stat st;
        int r = apiserver_file_read("token file", path, APISERVER_MAX_TOKEN, &buf, &n, &st, err);
        if (r < 0)
                return r;
        while (start < n && blank(buf[start]))
                start++;
        while (n > start && blank(buf[n - 1]))
                n--;
        char *tok = NULL;
        if (n == start)
                r = gs_error_set(err, -EACCES, "token file %s: empty", path);
        else if (!token_chars_ok(buf + start, n - start))
                r = gs_error_set(err, -EACCES,
                                 "token file %s: not one bearer token (spaces or "
                                 "control characters)",
                                 path);
        else if (!(tok = strndup(buf + start, n - start)))
                r = gs_error_set(err, -ENOMEM, "token file %s: out of memory", path);
        explicit_bzero(buf, n);
        free(buf);
        if (r < 0)
                return r;
        *ret = tok;
        *ret_st = st;
        return 0;
}

static void token_set(struct apiserver *a, char *tok)
{
        if (a->token) {
                explicit_bzero(a->token, strlen(a->token));
                free(a->token);
        }
        a->token = tok;
}

/* Re-read the token file when it changed since the last read (its inode,
 * size or mtime), or always when `force` (after a 401). A file that cannot
 * be read while an older token is known keeps the older one, with a
 * warning: the server decides whether it is still good. */
static int token_refresh(struct apiserver *a, bool force, struct gs_error **err)
{
        if (!a->token_file)
                return 0;
        struct stat st;
        if (!force && a->token && stat(a->token_file, &st) == 0 &&
            same_file_state(&st, &a->token_st))
                return 0;
        char *tok = NULL;
        _cleanup_error_ struct gs_error *e = NULL;
        int r = token_read(a->token_file, &tok, &st, &e);
        if (r < 0) {
                if (!a->token)
                        return gs_error_set(err, r == -ENOMEM ? r : -EACCES, "%s", gs_error_msg(e));
                gs_log_warn("apiserver: %s; keeping the token read before", gs_error_msg(e));
                return 0;
        }
        if (a->token && strcmp(a->token, tok) != 0)
                gs_log_info("apiserver: token file %s changed; using the new token", a->token_file);
        token_set(a, tok);
        a->token_st = st;
        return 0;
}

/* --- one attempt ---------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
        struct response *r = ud;
        size_t n = size * nmemb;
        if (n > r->max - r->len) {
                r->too_big = true;
                return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
        }
        if (r->len + n + 1 > r->cap) {
                size_t cap = r->cap ? r->cap : 16384;
                while (cap < r->len + n + 1)
                        cap *= 2;
                if (cap > r->max + 1)
                        cap = r->max + 1;
                char *bigger = realloc(r->body, cap);
                if (!bigger) {
                        r->oom = true;
                        return 0;
                }
                r->body = bigger;
                r->cap = cap;
        }
        memcpy(r->body + r->len, p, n);
        r->len += n;
        r->body[r->len] = '\0';
        return n;
}

/* Whether header line p (n bytes) is `name:`; *ret_value is the value,
 * trimmed, and *ret_len its length. */
static bool header_is(const char *p, size_t n, const char *name, const char **ret_value,
                      size_t *ret_len)
{
        size_t k = strlen(name);
        if (n <= k || strncasecmp(p, name, k) != 0 || p[k] != ':')
                return false;
        const char *v = p + k + 1, *end = p + n;
        while (v < end && (*v == ' ' || *v == '\t'))
                v++;
        while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
                end--;
        *ret_value = v;
        *ret_len = (size_t)(end - v);
        return true;
}

/* Copy at most `size - 1` bytes of s (n bytes) into out, control bytes
 * replaced by '?': the server's words go into logs and messages. */
static void sanitize(char *out, size_t size, const char *s, size_t n)
{
        size_t o = 0;
        for (size_t i = 0; i < n && o + 1 < size; i++)
                out[o++] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
        out[o] = '\0';
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
        struct response *r = ud;
        size_t n = size * nmemb;
        const char *v;
        size_t vlen;
        if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
                r->has_retry_after = false; /* a new response (after a 100 Continue) */
        } else if (header_is(p, n, "Retry-After", &v, &vlen)) {
                /* Seconds only: the API server never sends an HTTP date. */
                r->has_retry_after = gs_u64_parse(v, vlen, 86400, &r->retry_after_s) == 0;
        } else if (header_is(p, n, "Warning", &v, &vlen)) {
                /* e.g. deprecated APIs, or fields dropped under fieldValidation=Warn. */
                char w[512];
                sanitize(w, sizeof(w), v, vlen);
                gs_log_warn("apiserver: %s %s: the server warns: %s", r->method, r->path, w);
        }
        return n;
}

static void response_reset(struct response *r)
{
        r->len = 0;
        if (r->body)
                r->body[0] = '\0';
        r->too_big = r->oom = r->has_retry_after = false;
        r->retry_after_s = 0;
}

static struct curl_slist *request_headers(const struct apiserver *a, const char *content_type)
{
        struct curl_slist *h = NULL, *t;
        char line[128];
        const char *fixed[] = { "Accept: application/json", "Expect:", NULL };
        for (size_t i = 0; fixed[i]; i++) {
                if (!(t = curl_slist_append(h, fixed[i])))
                        goto fail;
                h = t;
        }
        if (content_type) {
                snprintf(line, sizeof(line), "Content-Type: %s", content_type);
                if (!(t = curl_slist_append(h, line)))
                        goto fail;
                h = t;
        }
        if (a->token) {
                char *auth = NULL;
                if (asprintf(&auth, "Authorization: Bearer %s", a->token) < 0)
                        goto fail;
                t = curl_slist_append(h, auth);
                explicit_bzero(auth, strlen(auth));
                free(auth);
                if (!t)
                        goto fail;
                h = t;
        }
        return h;
fail:
        curl_slist_free_all(h);
        return NULL;
}

/* Set up the reused handle for one attempt. Connections, TLS sessions and
 * the DNS cache survive curl_easy_reset. */
static CURLcode setup(struct apiserver *a, const char *method, const char *url, const char *body,
                      size_t body_len, struct curl_slist *headers, uint64_t timeout_ms,
                      struct response *resp)
{
        CURL *c = a->curl;
        curl_easy_reset(c);
        CURLcode cc = CURLE_OK;
#define SET(opt, val)                                           \
        do {                                                    \
                if (cc == CURLE_OK)                             \
                        cc = curl_easy_setopt(c, (opt), (val)); \
        } while (0)
        SET(CURLOPT_URL, url);
#if LIBCURL_VERSION_NUM >= 0x075500
        SET(CURLOPT_PROTOCOLS_STR, "https");
#else
        SET(CURLOPT_PROTOCOLS, (long)CURLPROTO_HTTPS);
#endif
        SET(CURLOPT_NOSIGNAL, 1L);
        SET(CURLOPT_ERRORBUFFER, a->errbuf);
        SET(CURLOPT_CONNECTTIMEOUT_MS, (long)GS_MIN(timeout_ms, (uint64_t)a->connect_timeout_ms));
        SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
        SET(CURLOPT_TCP_KEEPALIVE, 1L);
        SET(CURLOPT_USERAGENT, a->user_agent);
        SET(CURLOPT_HTTPHEADER, headers);
        SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)a->max_response);
        SET(CURLOPT_WRITEFUNCTION, on_body);
        SET(CURLOPT_WRITEDATA, resp);
        SET(CURLOPT_HEADERFUNCTION, on_header);
        SET(CURLOPT_HEADERDATA, resp);
        if (a->ca_file)
                SET(CURLOPT_CAINFO, a->ca_file);
        if (a->ca_pem) {
                struct curl_blob blob = { .data = a->ca_pem,
                                          .len = a->ca_pem_len,
                                          .flags = CURL_BLOB_COPY };
                SET(CURLOPT_CAINFO_BLOB, &blob);
        }
        if (strcmp(method, "GET") == 0) {
                SET(CURLOPT_HTTPGET, 1L);
        } else {
                SET(CURLOPT_CUSTOMREQUEST, method);
                if (body) {
                        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
                        SET(CURLOPT_POSTFIELDS, body);
                }
        }
#undef SET
        return cc;
}

static struct attempt attempt_once(struct apiserver *a, const char *method, const char *url,
                                   const char *body, size_t body_len, const char *content_type,
                                   uint64_t timeout_ms, struct response *resp)
{
        struct attempt at = { .cc = CURLE_OUT_OF_MEMORY };
        response_reset(resp);
        a->errbuf[0] = '\0';
        struct curl_slist *headers = request_headers(a, content_type);
        if (!headers)
                return at;
        at.cc = setup(a, method, url, body, body_len, headers, timeout_ms, resp);
        if (at.cc == CURLE_OK)
                at.cc = curl_easy_perform(a->curl);
        if (at.cc == CURLE_OK)
                curl_easy_getinfo(a->curl, CURLINFO_RESPONSE_CODE, &at.status);
        curl_easy_setopt(a->curl, CURLOPT_HTTPHEADER, NULL);
        curl_slist_free_all(headers);
        return at;
}

/* --- outcomes --------------------------------------------------------------- */

static const char *status_text(long s)
{
        switch (s) {
        case 200: return "OK";
        case 201: return "Created";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 405: return "Method Not Allowed";
        case 406: return "Not Acceptable";
        case 409: return "Conflict";
        case 410: return "Gone";
        case 413: return "Request Entity Too Large";
        case 415: return "Unsupported Media Type";
        case 422: return "Unprocessable Entity";
        case 429: return "Too Many Requests";
        case 500: return "Internal Server Error";
        case 502: return "Bad Gateway";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        default: return s >= 200 && s < 300 ? "Success" : "HTTP error";
        }
}

static int status_errno(long s, const char *reason)
{
        if (s == 409)
                return reason && strcmp(reason, "AlreadyExists") == 0 ? -EEXIST : -ESTALE;
        switch (s) {
        case 400:
        case 422: return -EINVAL;
        case 401: return -EACCES;
        case 403: return -EPERM;
        case 404: return -ENOENT;
        case 413: return -EFBIG;
        case 429: return -EBUSY;
        default: return s >= 500 && s < 600 ? -EIO : -EPROTO;
        }
}

static bool curl_retryable(CURLcode cc)
{
        switch (cc) {
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_COULDNT_CONNECT:
        case CURLE_OPERATION_TIMEDOUT: /* retried only while time is left */
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
        case CURLE_SSL_CONNECT_ERROR: /* e.g. a reset during the handshake */ return true;
        default: return false;
        }
}

static bool status_retryable(long s)
{
        return s == 429 || (s >= 500 && s < 600);
}

static void tries_note(char *out, size_t size, unsigned tries)
{
        if (tries > 1)
                snprintf(out, size, " (%u tries)", tries);
        else
                out[0] = '\0';
}

/* The error of a transfer that produced no usable answer. */
static int transport_error(struct apiserver *a, const char *method, const char *path,
                           const struct attempt *at, const struct response *resp,
                           uint64_t timeout_ms, unsigned tries, struct gs_error **err)
{
        char note[32], detail[CURL_ERROR_SIZE];
        tries_note(note, sizeof(note), tries);
        sanitize(detail, sizeof(detail), a->errbuf[0] ? a->errbuf : curl_easy_strerror(at->cc),
                 strlen(a->errbuf[0] ? a->errbuf : curl_easy_strerror(at->cc)));
        if (resp->too_big || at->cc == CURLE_FILESIZE_EXCEEDED)
                return gs_error_set(err, -EFBIG,
                                    "%s %s: the answer is larger than the limit of %zu bytes "
                                    "(%zu MiB); transfer aborted",
                                    method, path, a->max_response, a->max_response >> 20);
        if (resp->oom || at->cc == CURLE_OUT_OF_MEMORY)
                return gs_error_set(err, -ENOMEM, "%s %s: out of memory", method, path);
        switch (at->cc) {
        case CURLE_OPERATION_TIMEDOUT:
                return gs_error_set(err, -ETIMEDOUT,
                                    "%s %s: no answer from %s within %llu ms%s: %s", method, path,
                                    a->server, (unsigned long long)timeout_ms, note, detail);
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
                return gs_error_set(err,
                                    at->cc == CURLE_COULDNT_CONNECT ? -ECONNREFUSED : -EHOSTUNREACH,
                                    "%s %s: cannot connect to %s%s: %s", method, path, a->server,
                                    note, detail);
        case CURLE_PEER_FAILED_VERIFICATION:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_CERTPROBLEM:
                return gs_error_set(err, -EPROTO,
                                    "%s %s: TLS with %s failed%s: %s (check the CA: ca.crt, "
                                    "certificate-authority or certificate-authority-data)",
                                    method, path, a->server, note, detail);
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
                return gs_error_set(err, -ECONNRESET, "%s %s: connection to %s lost%s: %s", method,
                                    path, a->server, note, detail);
        default: return gs_error_set(err, -EIO, "%s %s: %s%s", method, path, detail, note);
        }
}

/* The error of an answer that is not 2xx, with the server's Status message
 * ({"kind":"Status","message":...,"reason":...}) when it sent one. */
static int http_error(const char *method, const char *path, long status,
                      const struct response *resp, unsigned tries, struct gs_error **err)
{
        char msg[1024] = "", reason[64] = "", note[32];
        tries_note(note, sizeof(note), tries);
        json_t *st = resp->len ? json_loadb(resp->body, resp->len, 0, NULL) : NULL;
        const char *m = json_string_value(json_object_get(st, "message"));
        const char *rs = json_string_value(json_object_get(st, "reason"));
        if (m && json_is_object(st)) {
                sanitize(msg, sizeof(msg), m, strlen(m));
                if (rs)
                        sanitize(reason, sizeof(reason), rs, strlen(rs));
        } else if (resp->len) {
                sanitize(msg, 256, resp->body, resp->len);
        }
        json_decref(st);
        return gs_error_set(err, status_errno(status, reason), "%s %s: %ld %s%s%s%s", method, path,
                            status, status_text(status), msg[0] ? ": " : "", msg, note);
}

/* How long to wait before the next try: Retry-After on a 429 (bounded),
 * the doubling backoff otherwise. */
static uint64_t retry_wait(const struct apiserver *a, const struct attempt *at,
                           const struct response *resp, uint64_t backoff)
{
        if (at->status == 429 && resp->has_retry_after)
                return GS_MIN(resp->retry_after_s * 1000u, (uint64_t)a->max_retry_after_ms);
        return backoff;
}

static void log_retry(const char *method, const char *path, const struct attempt *at, uint64_t wait,
                      unsigned next_try, unsigned max_tries)
{
        char what[64];
        if (at->cc != CURLE_OK)
                snprintf(what, sizeof(what), "%s", curl_easy_strerror(at->cc));
        else
                snprintf(what, sizeof(what), "%ld %s", at->status, status_text(at->status));
        gs_log_warn("apiserver: %s %s: %s; retrying in %llu ms (try %u of %u)", method, path, what,
                    (unsigned long long)wait, next_try, max_tries);
}

static int body_json(const char *method, const char *path, long status, const struct response *resp,
                     json_t **ret_json, struct gs_error **err)
{
        if (!ret_json)
                return 0;
        if (resp->len == 0) {
                *ret_json = NULL;
                return 0;
        }
        json_error_t je;
        json_t *j = json_loadb(resp->body, resp->len, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(j)) {
                json_decref(j);
                return gs_error_set(err, -EBADMSG,
                                    "%s %s: %ld %s, but the body is not a JSON object%s%s", method,
                                    path, status, status_text(status), j ? "" : ": ",
                                    j ? "" : je.text);
        }
        *ret_json = j;
        return 0;
}

static bool path_ok(const char *path)
{
        if (!path || path[0] != '/')
                return false;
        for (const char *p = path; *p; p++)
                if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f)
                        return false;
        return true;
}

int apiserver_request(struct apiserver *a, const char *method, const char *path, const json_t *body,
                      long *ret_status, json_t **ret_json, struct gs_error **err)
{
        if (ret_status)
                *ret_status = 0;
        if (!path_ok(path))
                return gs_error_set(err, -EINVAL,
                                    "%s %s: the path must start with / and be URL-escaped", method,
                                    path ? path : "(null)");
        _cleanup_free_ char *url = NULL, *data = NULL;
        if (asprintf(&url, "%s%s", a->server, path) < 0) {
                url = NULL;
                return gs_error_set(err, -ENOMEM, "%s %s: out of memory", method, path);
        }
        size_t data_len = 0;
        if (body) {
                if (!(data = json_dumps(body, JSON_COMPACT)))
                        return gs_error_set(err, -ENOMEM, "%s %s: cannot encode the body", method,
                                            path);
                data_len = strlen(data);
        }
        const char *ctype = !body                          ? NULL
                            : strcmp(method, "PATCH") == 0 ? "application/merge-patch+json"
                                                           : "application/json";
        struct response resp = { .method = method, .path = path, .max = a->max_response };
        const uint64_t start = now_ms(), deadline = start + a->timeout_ms;
        uint64_t backoff = a->backoff_ms;
        unsigned tries = 0;
        bool reauthed = false;
        int r;
        for (;;) {
                r = token_refresh(a, false, err);
                if (r < 0) {
                        gs_error_wrap(err, "%s %s", method, path);
                        break;
                }
                uint64_t now = now_ms();
                uint64_t left = deadline > now ? deadline - now : 1;
                tries++;
                struct attempt at =
                        attempt_once(a, method, url, data, data_len, ctype, left, &resp);
                if (ret_status)
                        *ret_status = at.status;
                gs_log_debug("apiserver: %s %s: %ld (curl %d) after %llu ms", method, path,
                             at.status, (int)at.cc, (unsigned long long)(now_ms() - now));
                bool transport = at.cc != CURLE_OK;
                if (!transport && at.status >= 200 && at.status < 300) {
                        r = body_json(method, path, at.status, &resp, ret_json, err);
                        break;
                }
                if (!transport && at.status == 401 && !reauthed && a->token_file) {
                        /* Expired or rotated: read the token again and retry once. */
                        reauthed = true;
                        tries--;
                        r = token_refresh(a, true, err);
                        if (r < 0) {
                                gs_error_wrap(err, "%s %s: 401 Unauthorized", method, path);
                                break;
                        }
                        continue;
                }
                bool again = transport ? curl_retryable(at.cc) && !resp.too_big && !resp.oom
                                       : status_retryable(at.status);
                uint64_t wait = retry_wait(a, &at, &resp, backoff);
                now = now_ms();
                if (again && tries < a->max_tries && now + wait < deadline) {
                        log_retry(method, path, &at, wait, tries + 1, a->max_tries);
                        sleep_ms(wait);
                        backoff *= 2;
                        continue;
                }
                r = transport ? transport_error(a, method, path, &at, &resp, a->timeout_ms, tries,
                                                err)
                              : http_error(method, path, at.status, &resp, tries, err);
                break;
        }
        free(resp.body);
        return r;
}

/* --- helpers ---------------------------------------------------------------- */

int apiserver_get(struct apiserver *a, const char *path, json_t **ret_json, struct gs_error **err)
{
        return apiserver_request(a, "GET", path, NULL, NULL, ret_json, err);
}

/* path + "?" or "&" + name=escaped(value). */
static int add_query(CURL *c, char **path, const char *name, const char *value)
{
        if (!value)
                return 0;
        char *esc = curl_easy_escape(c, value, 0);
        if (!esc)
                return -ENOMEM;
        char *joined = NULL;
        int n = asprintf(&joined, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', name, esc);
        curl_free(esc);
        if (n < 0)
                return -ENOMEM;
        free(*path);
        *path = joined;
        return 0;
}

int apiserver_list(struct apiserver *a, const char *path, const char *label_selector,
                   const char *field_selector, json_t **ret_json, struct gs_error **err)
{
        _cleanup_free_ char *p = strdup(path ? path : "");
        if (!p || add_query(a->curl, &p, "labelSelector", label_selector) < 0 ||
            add_query(a->curl, &p, "fieldSelector", field_selector) < 0)
                return gs_error_set(err, -ENOMEM, "GET %s: out of memory", path);
        return apiserver_request(a, "GET", p, NULL, NULL, ret_json, err);
}

static int write_call(struct apiserver *a, const char *method, const char *path, const json_t *obj,
                      json_t **ret_json, struct gs_error **err)
{
        _cleanup_free_ char *p = strdup(path ? path : "");
        if (!p || add_query(a->curl, &p, "fieldValidation", "Strict") < 0)
                return gs_error_set(err, -ENOMEM, "%s %s: out of memory", method, path);
        return apiserver_request(a, method, p, obj, NULL, ret_json, err);
}

int apiserver_create(struct apiserver *a, const char *path, const json_t *obj, json_t **ret_json,
                     struct gs_error **err)
{
        return write_call(a, "POST", path, obj, ret_json, err);
}

int apiserver_replace(struct apiserver *a, const char *path, const json_t *obj, json_t **ret_json,
                      struct gs_error **err)
{
        return write_call(a, "PUT", path, obj, ret_json, err);
}

int apiserver_patch_merge(struct apiserver *a, const char *path, const json_t *patch,
                          json_t **ret_json, struct gs_error **err)
{
        return write_call(a, "PATCH", path, patch, ret_json, err);
}

int apiserver_delete(struct apiserver *a, const char *path, struct gs_error **err)
{
        return apiserver_request(a, "DELETE", path, NULL, NULL, NULL, err);
}

/* --- the client --------------------------------------------------------------- */

const char *apiserver_server(const struct apiserver *a)
{
        return a->server;
}

struct apiserver *apiserver_free(struct apiserver *a)
{
        if (!a)
                return NULL;
        if (a->curl)
                curl_easy_cleanup(a->curl);
        token_set(a, NULL);
        free(a->server);
        free(a->ca_file);
        free(a->ca_pem);
        free(a->token_file);
        free(a->user_agent);
        free(a);
        return NULL;
}

static int dup_opt(const char *s, char **ret)
{
        *ret = NULL;
        if (s && !(*ret = strdup(s)))
                return -ENOMEM;
        return 0;
}

int apiserver_new(const struct apiserver_config *cfg, struct apiserver **ret, struct gs_error **err)
{
        const char *server = cfg->server;
        if (!server || strncmp(server, "https://", 8) != 0 || !server[8])
                return gs_error_set(err, -EINVAL,
                                    "API server %s: not an https:// URL (a token is never sent in "
                                    "clear)",
                                    server ? server : "(none)");
        if (!path_ok(server + 7))
                return gs_error_set(err, -EINVAL, "API server %s: spaces or control characters",
                                    server);
        if (cfg->token && (!cfg->token[0] || !token_chars_ok(cfg->token, strlen(cfg->token))))
                return gs_error_set(err, -EINVAL, "API server %s: the token is empty or has spaces",
                                    server);
        pthread_once(&curl_once, curl_init);
        if (curl_init_result != CURLE_OK)
                return gs_error_set(err, -EIO, "libcurl: %s", curl_easy_strerror(curl_init_result));
        _cleanup_apiserver_ struct apiserver *a = calloc(1, sizeof(*a));
        if (!a)
                return gs_error_set(err, -ENOMEM, "API server %s: out of memory", server);
        size_t n = strlen(server);
        while (n > 8 && server[n - 1] == '/')
                n--;
        a->server = strndup(server, n);
        a->curl = curl_easy_init();
        if (!a->server || !a->curl || dup_opt(cfg->ca_file, &a->ca_file) < 0 ||
            dup_opt(cfg->token_file, &a->token_file) < 0 || dup_opt(cfg->token, &a->token) < 0 ||
            dup_opt(cfg->user_agent ? cfg->user_agent : "gpuslice", &a->user_agent) < 0)
                return gs_error_set(err, -ENOMEM, "API server %s: out of memory", server);
        if (cfg->ca_pem && cfg->ca_pem_len) {
                if (!(a->ca_pem = malloc(cfg->ca_pem_len)))
                        return gs_error_set(err, -ENOMEM, "API server %s: out of memory", server);
                memcpy(a->ca_pem, cfg->ca_pem, cfg->ca_pem_len);
                a->ca_pem_len = cfg->ca_pem_len;
        }
        a->timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : APISERVER_TIMEOUT_MS;
        a->connect_timeout_ms =
                cfg->connect_timeout_ms ? cfg->connect_timeout_ms : APISERVER_CONNECT_TIMEOUT_MS;
        a->max_tries = cfg->max_tries ? cfg->max_tries : APISERVER_MAX_TRIES;
        a->backoff_ms = cfg->backoff_ms ? cfg->backoff_ms : APISERVER_BACKOFF_MS;
        a->max_retry_after_ms =
                cfg->max_retry_after_ms ? cfg->max_retry_after_ms : APISERVER_MAX_RETRY_AFTER_MS;
        a->max_response = cfg->max_response ? cfg->max_response : APISERVER_MAX_RESPONSE;
        *ret = TAKE_PTR(a);
        return 0;
}
