/* gpusliced's state, shared by its files: main.c (flags, start-up),
 * server.c (the event loop and connections), slices.c (requests, the
 * ledger's files, following processes), nvml.c (inventory). One thread owns
 * all of it, so requests are serialised and a GPU is never over-committed. */
#ifndef GS_DAEMON_H
#define GS_DAEMON_H

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

enum watch_kind { WATCH_LISTEN, WATCH_SIGNAL, WATCH_CONN, WATCH_PIDFD };

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

struct daemon {
        char state_dir[DAEMON_DIR_MAX];
        char socket_path[DAEMON_PATH_MAX];   /* at most 107 bytes in use (sun_path) */
        char ledger_path[DAEMON_PATH_MAX];
        enum gs_placement_policy policy;
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
