/* SPDX-License-Identifier: Apache-2.0 */
/* gpusliced's state, shared by the daemon's front-ends: local_api.c (the
 * local API's connections), slices.c (requests, following processes),
 * arbiter_server.c (the compute arbiter's service); and by the program in
 * src/gpusliced (main.c: flags, start-up; kubelet.c: the device plugin of
 * --kubelet in its own thread). The node layer
 * (src/node) owns the ledger, the inventory and every slice's files; its
 * lock is held by the event loop while it serves a batch of events and by
 * the plugin's thread while it serves a call, so the two never over-commit
 * a GPU together. */
#ifndef GS_DAEMON_H
#define GS_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "event_loop.h"
#include "inventory.h"
#include "ledger.h"
#include "local_proto.h"
#include "node.h"
#include "placement.h"

#define DAEMON_DIR_MAX 1024           /* longest state directory */
#define DAEMON_PATH_MAX 1200          /* state directory + a file inside */
#define DAEMON_MAX_CONNS 128          /* simultaneous client connections */
#define DAEMON_MAX_CONNS_PER_UID 32   /* of them from one non-root uid */
#define DAEMON_RESERVED_CONNS 16      /* the last ones: root and slices' processes only */
#define DAEMON_FRAME_DEADLINE_MS 5000 /* a started frame must complete within */
#define DAEMON_IDLE_MS 30000          /* an idle connection is closed after */
#define DAEMON_MAX_OUT (4u << 20)     /* unsent reply bytes per connection */

#define DAEMON_STOPPED_KEPT 64         /* ids of stopped slices remembered for their release */
#define DAEMON_STOP_GRACE_MS 10000    /* stop: SIGTERM, then SIGKILL after (default) */
#define DAEMON_STOP_GRACE_MAX_MS 3600000

/* A local slice whose process is gone (or that its owner released) while
 * a process of it may still hold GPU memory: it stays in the ledger, so
 * no placement over-commits its GPU, until the watchdog's NVML sample
 * shows none of its processes holding memory (slices_drain.c). */
struct drain {
        char id[GS_SLICE_ID_MAX + 1];
        int64_t since_ms; /* monotonic */
        char why[64];     /* why it is to be freed: "its process exited" */
};

/* A slice's process, followed through its pidfd. What the daemon knows of
 * it beyond the ledger lives here, in memory only. */
struct follow {
        struct node_watch w;
        char id[GS_SLICE_ID_MAX + 1];
        pid_t up_pid;             /* the `gpuslice up` supervising it (create's up_spec); 0: none */
        uid_t up_uid;             /* its uid (SO_PEERCRED at create) */
        int up_pidfd;             /* pins up_pid; -1 when none */
        char *up_spec;            /* the spec that `up` runs (malloc'd); NULL: none */
        int64_t kill_at_ms;       /* stopping (GS_MSG_STOP): SIGKILL due then; 0: not stopping */
};

struct conn {
        struct node_watch w;
        uid_t uid;                /* peer credentials (SO_PEERCRED) */
        pid_t pid;
        uint8_t *in;              /* GS_PROTO_HEADER_SIZE + GS_PROTO_MAX_REQUEST */
        size_t in_len;
        uint8_t *out;
        size_t out_len, out_off;
        int64_t frame_started_ms; /* first byte of an incomplete frame, 0 if none */
        int64_t last_active_ms;
        bool closing;             /* close once `out` is sent */
};

struct nvml;
struct wd_state;
struct events;
struct node_http;

/* --kubelet: the device plugin's settings (strings point into argv). */
struct kubelet_args {
        bool enabled;
        const char *plugin_dir;           /* NULL: kube_plugin.h's default */
        const char *pod_resources_socket;
        const char *cdi_kind;
        const char *shim_path;
        int64_t release_grace_s;          /* < 0: default */
        unsigned pod_poll_ms, health_poll_ms; /* 0: default */
};

struct daemon;

/* A front-end gpusliced runs in a thread of its own (the device plugin,
 * the DRA driver): stopped by closing stop_wr, and it tells the event loop
 * when it ends (done), which stops the daemon if nobody asked. */
struct daemon_thread {
        const char *what;                 /* for logs: "kubelet device plugin" */
        int (*run)(struct daemon *d, int stop_fd, struct gs_error **err);
        pthread_t thread;
        int stop_rd, stop_wr, done_wr;
        struct node_watch done;
        bool running;
        bool failed;                      /* it stopped on an error */
};

/* --dra: the DRA driver's settings (strings point into argv). */
struct dra_args {
        bool enabled;
        const char *node_name;            /* NULL: $NODE_NAME, else the host name */
        const char *kubeconfig;           /* NULL: in-cluster */
        const char *cdi_dir;              /* NULL: dra_driver.h's default */
        const char *registry_dir;         /* NULL: dra_plugin.h's default */
        const char *plugin_dir;
};

struct daemon {
        char state_dir[DAEMON_DIR_MAX];
        char socket_path[DAEMON_PATH_MAX];   /* at most 107 bytes in use (sun_path) */
        enum gs_placement_policy policy;
        enum gs_compute_policy compute_policy; /* --compute-policy: for requests without one */
        struct node *node;                     /* ledger, inventory, slice files, the lock */
        struct arbsrv *arb;                    /* arbiter_server.c; NULL until started */
        bool sim;
        char sim_dir[GS_PATH_MAX];
        const char *sysfs;                     /* --sysfs; NULL: /sys */
        struct nvml *nvml;                     /* under the node's lock */
        struct node_loop loop;
        struct node_watch listen;
        struct node_watch sig;
        struct conn *conns[DAEMON_MAX_CONNS];
        struct follow *follows[GS_LEDGER_MAX_SLICES];
        size_t n_follows;
        struct drain *drains[GS_LEDGER_MAX_SLICES]; /* slices_drain.c */
        size_t n_drains;
        char stopped[DAEMON_STOPPED_KEPT][GS_SLICE_ID_MAX + 1]; /* ring: slices freed by a stop */
        size_t n_stopped;                     /* how many were ever added */
        struct kubelet_args kube;
        struct daemon_thread kube_thread;     /* --kubelet */
        struct dra_args dra;
        struct daemon_thread dra_thread;      /* --dra */
        struct wd_state *wd;                  /* watchdog.c; NULL when off */
        struct events *events;                /* events.c: the watchdog's events */
        struct evictions *evictions;          /* evictions.h: set before the watchdog
                                               * starts when the API server is reachable */
        struct daemon_thread evict_thread;    /* gpusliced's evictor */
        bool report_node;                     /* --report-node */
        struct daemon_thread report_thread;
        const char *metrics_listen;           /* --metrics-listen ADDR:PORT; NULL: off */
        struct node_http *metrics;            /* metrics.c; NULL when off */
};

/* ---- slices.c ---- */

/* After loading the ledger: free local slices whose process is gone
 * (dead, or the pid now names another process), follow the live ones
 * again. Returns 0 or a negative errno (logged). */
int slices_reconcile(struct daemon *d);

/* Answer one request (m) from connection c: fills `reply` (a builder of type
 * GS_MSG_REPLY|type) or returns a negative errno with *err set. */
int slices_handle(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                  struct gs_proto_builder *reply, struct gs_error **err);

/* The loop's tick for stops (GS_MSG_STOP): SIGKILL the processes whose
 * grace period is over. Returns when it is next due (absolute, node_now_ms),
 * or -1 when no stop is pending. */
int64_t slices_stop_tick(struct daemon *d, int64_t now);

/* Close every pidfd (shutdown; the slices stay in the ledger). */
void slices_unfollow_all(struct daemon *d);

/* ---- slices_drain.c ---- */

/* Local slice id's process is gone, or its owner released it (no longer
 * followed): free it now if none of its processes holds GPU memory by
 * NVML (the watchdog samples at once), else keep it `draining` until the
 * watchdog sees that memory freed. Without the watchdog (--watch-interval
 * 0): freed now. 0, or the release's negative errno. */
int slices_drain(struct daemon *d, const char *id, const char *why);

/* Mark id draining without a sample (reconcile, before the watchdog
 * starts). 0 or -ENOMEM. */
int slices_drain_add(struct daemon *d, const char *id);

/* Whether slice id is draining. */
bool slices_draining(const struct daemon *d, const char *id);

/* Whether slice id drains after its process and its pid now names another
 * process (a draining slice may outlive its process by hours): that pid is
 * no longer the slice's. */
bool slices_drain_stale(const struct daemon *d, const char *id);

/* Forget id (the slice left the ledger); forget_all: every one (shutdown). */
void slices_drain_forget(struct daemon *d, const char *id);
void slices_drain_forget_all(struct daemon *d);

/* Once the watchdog has started (or is off): without a watchdog, free the
 * draining slices now, since nothing would ever see them drained. */
void slices_drain_start(struct daemon *d);

/* The node's observer: a slice left the ledger (any front-end freed it):
 * end its compute lease and stop following its process. */
void slices_removed(void *ctx, const struct gs_slice *s, const char *why);

/* ---- metrics.c ---- */

/* --metrics-listen: serve Prometheus metrics (/metrics, docs/metrics.md) on
 * d->metrics_listen from a thread of their own (http_server.h); each scrape
 * reads the node under its lock. Call it once the arbiter service runs. 0,
 * or a negative errno (logged). */
int metrics_start(struct daemon *d);

/* Stop serving; call it without the node's lock. No-op when off. */
void metrics_stop(struct daemon *d);

/* The text of one scrape (what /metrics serves, docs/metrics.md): takes
 * the node's lock once, so call it without; any thread. 0 and *ret
 * (malloc'd, the caller frees) with its length, or -ENOMEM, or the
 * builder's error (-E2BIG past 8 MiB; logged). */
int metrics_text(struct daemon *d, char **ret, size_t *len);

/* ---- local_api.c ---- */

/* Bind and listen on d->socket_path (refusing when another daemon answers
 * there), mode 0660 as root, else 0600, and watch it on d->loop. */
int local_api_listen(struct daemon *d, struct gs_error **err);

/* Close connections and remove the socket. */
void local_api_shutdown(struct daemon *d);

#endif /* GS_DAEMON_H */
