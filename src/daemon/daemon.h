/* gpusliced's state, shared by its files: main.c (flags, start-up),
 * server.c (the event loop and connections), slices.c (requests, the
 * ledger's files, following processes), nvml.c (inventory), kubelet.c (the
 * kubelet device plugin of --kubelet, in its own thread). The event loop's
 * thread owns everything but the ledger, the inventory and NVML, which it
 * shares with the plugin's thread under `lock`: every request is served
 * whole under the lock, so the two never over-commit a GPU together. */
#ifndef GS_DAEMON_H
#define GS_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "inventory.h"
#include "ledger.h"
#include "local_proto.h"
#include "placement.h"

#define DAEMON_DIR_MAX 1024           /* longest state directory */
#define DAEMON_PATH_MAX 1200          /* state directory + a file inside */
#define DAEMON_MAX_CONNS 128          /* simultaneous client connections */
#define DAEMON_FRAME_DEADLINE_MS 5000 /* a started frame must complete within */
#define DAEMON_IDLE_MS 120000         /* an idle connection is closed after */
#define DAEMON_MAX_OUT (4u << 20)     /* unsent reply bytes per connection */

enum watch_kind { WATCH_LISTEN, WATCH_SIGNAL, WATCH_CONN, WATCH_PIDFD, WATCH_KUBE,
                  WATCH_ARB /* arbiter_server.c's timer and shim connections */ };

/* Everything registered with epoll starts with a watch. */
struct watch {
        enum watch_kind kind;
        int fd;
};

/* A slice's process, followed through its pidfd. */
struct follow {
        struct watch w;
        char id[GS_SLICE_ID_MAX + 1];
};

struct conn {
        struct watch w;
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

struct daemon {
        char state_dir[DAEMON_DIR_MAX];
        char socket_path[DAEMON_PATH_MAX];   /* at most 107 bytes in use (sun_path) */
        char ledger_path[DAEMON_PATH_MAX];
        enum gs_placement_policy policy;
        enum gs_compute_policy compute_policy; /* --compute-policy: for requests without one */
        struct arbsrv *arb;                    /* arbiter_server.c; NULL until started */
        bool sim;
        char sim_dir[GS_PATH_MAX];
        struct gs_inventory inv;
        struct gs_ledger ledger;
        struct nvml *nvml;
        int epfd;
        int lock_fd;
        struct watch listen;
        struct watch sig;
        struct conn *conns[DAEMON_MAX_CONNS];
        struct follow *follows[GS_LEDGER_MAX_SLICES];
        size_t n_follows;
        bool stop;
        /* Held by the event loop while it serves events, and by the
         * plugin's hooks: guards ledger, inv and nvml. Lock order: the
         * plugin's own lock, then this one; the event loop never calls into
         * the plugin. */
        pthread_mutex_t lock;
        struct kubelet_args kube;
        char kube_state_dir[DAEMON_DIR_MAX + 8]; /* <state_dir>/kube */
        struct watch kube_done;               /* readable when the plugin's thread ends */
        int kube_stop_fd;                     /* write end: closed to stop the plugin */
        int kube_stop_rd;
        int kube_done_wr;
        pthread_t kube_thread;
        bool kube_running;
        bool kube_failed;                     /* the plugin stopped on an error */
};

/* ---- slices.c ---- */

/* After loading the ledger: free slices whose process is gone (dead, or
 * the pid now names another process), follow the live ones again, and
 * persist the result. Returns 0 or a negative errno (logged). */
int slices_reconcile(struct daemon *d);

/* Answer one request (m) from connection c: fills `reply` (a builder of type
 * GS_MSG_REPLY|type) or returns a negative errno with *err set. */
int slices_handle(struct daemon *d, const struct conn *c, const struct gs_proto_msg *m,
                  struct gs_proto_builder *reply, struct gs_error **err);

/* The process followed by f has exited: free its slice and persist. */
void slices_process_exited(struct daemon *d, struct follow *f);

/* Close every pidfd (shutdown; the slices stay in the ledger). */
void slices_unfollow_all(struct daemon *d);

/* Config path and slice directory of a slice (local or Kubernetes). */
void slices_conf_path(const struct daemon *d, const struct gs_slice *s, char *buf, size_t size);
void slices_dir_path(const struct daemon *d, const struct gs_slice *s, char *buf, size_t size);

/* ---- kubelet.c ---- */

/* Start the kubelet device plugin in its own thread (--kubelet), linked to
 * the ledger through its hooks. 0, or a negative errno (logged). */
int kubelet_start(struct daemon *d);

/* Stop the plugin's thread and wait for it (no-op when not running). */
void kubelet_stop(struct daemon *d);

/* ---- server.c ---- */

/* Bind and listen on d->socket_path (refusing when another daemon answers
 * there), mode 0660 as root, else 0600. */
int server_listen(struct daemon *d, struct gs_error **err);

/* Register a watch with epoll for input. 0 or -errno. */
int server_watch(struct daemon *d, struct watch *w, uint32_t events);

/* Run the event loop until SIGTERM/SIGINT. Returns 0. */
int server_run(struct daemon *d);

/* Close connections and remove the socket. */
void server_shutdown(struct daemon *d);

#endif /* GS_DAEMON_H */
