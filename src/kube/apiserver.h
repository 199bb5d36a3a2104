/* SPDX-License-Identifier: Apache-2.0 */
/* gpuslice's one client of the Kubernetes API server: HTTPS (libcurl) and
 * JSON (jansson), bounded in time and size, with retry and backoff, and a
 * bearer token that is re-read when it rotates. The DRA driver, the
 * watchdog's evictions and the extender all speak to Kubernetes through it
 * and nothing else does.
 *
 * Configuration comes from the pod's service account (in-cluster), from a
 * kubeconfig file (--kubeconfig), or is filled in by hand (tests).
 *
 * Threads: a `struct apiserver` is used by one thread at a time (it holds
 * one curl handle and the cached token); give each thread its own client.
 * Clients share no state, except that the first apiserver_new() runs
 * curl_global_init() once for the process (pthread_once). No signal is
 * used for timeouts (CURLOPT_NOSIGNAL).
 *
 * Errors follow the project's convention (docs/internals/error-handling.md):
 * 0 on success, a negative errno on failure with *err naming the method,
 * the path, the HTTP status and the server's Status message, e.g.
 * `PUT /apis/resource.k8s.io/v1/resourceslices/x: 409 Conflict: Operation
 * cannot be fulfilled on ...: the object has been modified; ...`. */
#ifndef GS_APISERVER_H
#define GS_APISERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

#define APISERVER_TIMEOUT_MS 5000         /* whole call, retries included */
#define APISERVER_CONNECT_TIMEOUT_MS 2000 /* one TCP + TLS connect */
#define APISERVER_MAX_RESPONSE (8u << 20) /* bytes of one response body */
#define APISERVER_MAX_TRIES 3             /* attempts per call (a 401 adds one) */
#define APISERVER_BACKOFF_MS 100          /* first wait; doubles per retry */
#define APISERVER_MAX_RETRY_AFTER_MS 2000 /* most of a 429's Retry-After honoured */
#define APISERVER_MAX_TOKEN 65536         /* bytes of a token file */
#define APISERVER_MAX_KUBECONFIG (1u << 20)

/* The service account directory of a pod (ca.crt, token). */
#define APISERVER_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* Where and how to reach the API server. Strings are borrowed: the caller
 * keeps them alive while apiserver_new() runs (which copies them). Zero
 * numbers mean the defaults above. A config filled by the loaders below
 * owns its strings (in `owned`) and is released with apiserver_config_done;
 * a config filled by hand has owned == NULL and needs no release. */
struct apiserver_config {
        const char *server;     /* "https://host:port" (a path prefix is allowed) */
        const char *ca_file;    /* PEM CA bundle to verify the server, or NULL */
        const char *ca_pem;     /* or PEM bytes (certificate-authority-data) */
        size_t ca_pem_len;      /* neither: the system's CA store */
        const char *token_file; /* bearer token, re-read when it changes */
        const char *token;      /* or a fixed bearer token; neither: anonymous */
        const char *user_agent; /* NULL: "gpuslice" */
        unsigned timeout_ms;    /* whole call, retries and waits included */
        unsigned connect_timeout_ms;
        unsigned max_tries;  /* attempts on a connection error, 429 or 5xx */
        unsigned backoff_ms; /* wait before the second attempt, doubled after */
        unsigned max_retry_after_ms;
        size_t max_response; /* bytes; a bigger answer fails with -EFBIG */
        /* Private to the loaders: the strings they allocated. */
        char **owned;
        size_t n_owned;
};

/* The in-cluster config of a pod: https://$KUBERNETES_SERVICE_HOST:
 * $KUBERNETES_SERVICE_PORT, sa_dir/ca.crt and sa_dir/token (sa_dir NULL:
 * APISERVER_SA_DIR; tests point it elsewhere). The files are not read here
 * (the token is read per request). 0, or -ENOENT/-EINVAL with *err saying
 * which variable is missing or wrong, -ENOMEM. *ret is written only on
 * success and must be released with apiserver_config_done. */
int apiserver_config_in_cluster(const char *sa_dir, struct apiserver_config *ret,
                                struct gs_error **err);

/* The config of a kubeconfig file (at most APISERVER_MAX_KUBECONFIG bytes):
 * the context named `context`, or the file's current-context when NULL;
 * its cluster's server, certificate-authority (a path, relative to the
 * file's directory) or certificate-authority-data (base64 PEM); its user's
 * tokenFile (preferred, re-read as it rotates) or token. Client
 * certificates, exec and auth-provider plugins, basic auth, proxies and
 * insecure-skip-tls-verify are not supported and are refused with a
 * message saying so. 0, or a negative errno with *err naming the file and
 * the entry (-ENOENT: no such file, context, cluster or user; -EINVAL:
 * malformed; -EOPNOTSUPP: unsupported). *ret as for the in-cluster config. */
int apiserver_config_from_kubeconfig(const char *path, const char *context,
                                     struct apiserver_config *ret, struct gs_error **err);

/* The parser behind apiserver_config_from_kubeconfig, over `len` bytes of
 * text (not NUL-terminated); `name` is used in messages and relative paths
 * are resolved against `base_dir` (NULL: left relative). Reads no file.
 * Same results. Exposed for the fuzz target. */
int apiserver_kubeconfig_parse(const char *name, const char *text, size_t len, const char *base_dir,
                               const char *context, struct apiserver_config *ret,
                               struct gs_error **err);

/* Free the strings a loader allocated and zero *cfg; accepts NULL and a
 * config filled by hand (frees nothing then). */
void apiserver_config_done(struct apiserver_config *cfg);

struct apiserver;

/* A client for cfg (copied; cfg may be released after). Checks the server
 * URL (https only: a token is never sent in clear) and reads nothing yet.
 * 0, -EINVAL (bad URL or options, *err says which), -ENOMEM. */
int apiserver_new(const struct apiserver_config *cfg, struct apiserver **ret,
                  struct gs_error **err);

/* Free a client and its connections; accepts NULL, returns NULL. */
struct apiserver *apiserver_free(struct apiserver *a);
static inline void apiserver_freep(struct apiserver **a)
{
        *a = apiserver_free(*a);
}
#define _cleanup_apiserver_ _cleanup_(apiserver_freep)

/* The server URL this client speaks to (for messages). */
const char *apiserver_server(const struct apiserver *a);

/* One API call: `method` ("GET", "POST", "PUT", "PATCH", "DELETE") on
 * `path` (starting with "/", query included, already URL-escaped), with
 * `body` (NULL: none) sent as application/json, or as
 * application/merge-patch+json when method is "PATCH".
 *
 * Bounded: the whole call, retries and waits included, ends within the
 * configured timeout; each connect within the connect timeout; a response
 * body over max_response aborts the transfer (-EFBIG, the message names
 * the limit). Retried, up to max_tries attempts with a backoff that starts
 * at backoff_ms and doubles: connection errors, 429 (waiting Retry-After
 * seconds when given, at most max_retry_after_ms) and 5xx. A 401 re-reads
 * the token file and retries once. Other 4xx are never retried. Retrying a
 * POST whose first answer was lost can answer 409 AlreadyExists.
 *
 * On a 2xx answer returns 0 and, when ret_json is non-NULL, stores the
 * body (a JSON object; NULL for an empty body) in *ret_json for the caller
 * to json_decref. Otherwise returns a negative errno with *err set:
 *   404 -ENOENT, 409 AlreadyExists -EEXIST, 409 Conflict -ESTALE,
 *   400/422 -EINVAL, 401 -EACCES, 403 -EPERM, 429 -EBUSY, 5xx -EIO,
 *   other statuses -EPROTO; no answer in time -ETIMEDOUT, no connection
 *   -ECONNREFUSED, TLS failure -EPROTO, too large -EFBIG, body not a JSON
 *   object -EBADMSG, token unreadable -EACCES, out of memory -ENOMEM.
 * *ret_status (when non-NULL) receives the last HTTP status, or 0 when no
 * answer came, on success and on failure alike: it is the one output
 * written on failure, for callers that handle 404 or 409 themselves. */
int apiserver_request(struct apiserver *a, const char *method, const char *path, const json_t *body,
                      long *ret_status, json_t **ret_json, struct gs_error **err);

/* GET path; *ret_json as apiserver_request. */
int apiserver_get(struct apiserver *a, const char *path, json_t **ret_json, struct gs_error **err);

/* GET a collection, filtered by label_selector and field_selector (each
 * NULL or e.g. "spec.nodeName=node-a"; escaped here). *ret_json is the
 * list object ({"items": [...], "metadata": {"resourceVersion": ...}}). */
int apiserver_list(struct apiserver *a, const char *path, const char *label_selector,
                   const char *field_selector, json_t **ret_json, struct gs_error **err);

/* POST obj to the collection `path` (create). The write helpers ask for
 * fieldValidation=Strict, so an unknown field fails the call (400) instead
 * of being dropped with a warning, as servers since 1.27 do by default.
 * *ret_json (optional) is the created object, with its resourceVersion. */
int apiserver_create(struct apiserver *a, const char *path, const json_t *obj, json_t **ret_json,
                     struct gs_error **err);

/* PUT obj to the object `path` (replace). A stale metadata.resourceVersion
 * answers 409 Conflict: -ESTALE. */
int apiserver_replace(struct apiserver *a, const char *path, const json_t *obj, json_t **ret_json,
                      struct gs_error **err);

/* PATCH the object `path` with a JSON merge patch (RFC 7386). */
int apiserver_patch_merge(struct apiserver *a, const char *path, const json_t *patch,
                          json_t **ret_json, struct gs_error **err);

/* DELETE the object `path`. -ENOENT when it is already gone. */
int apiserver_delete(struct apiserver *a, const char *path, struct gs_error **err);

#endif /* GS_APISERVER_H */
