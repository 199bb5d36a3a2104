/* SPDX-License-Identifier: Apache-2.0 */
/* gs-loadgen: a small HTTP/1.1 load generator for the gpuslice examples.
 *
 * N connections (one thread each, keep-alive) send GET requests to one URL
 * for a fixed duration, either back to back (saturation, the default) or at a
 * fixed total rate (open loop: latency is measured from when each request was
 * due, so a slow server is not hidden by a generator that waits for it). At
 * the end it prints one machine-readable line:
 *
 *   loadgen name=NAME requests=N errors=E seconds=S rps=R p50_ms=A p99_ms=B max_ms=C
 *
 * Only requests that completed with a 2xx status before the deadline count.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "example_util.h"

#define MAX_CONNECTIONS 256
#define MAX_SAMPLES_PER_THREAD (8u << 20)
#define MAX_HOST 255
#define MAX_PATH_LEN 1024
#define RESP_BUF 16384

struct lg_config {
        char host[MAX_HOST + 1];
        char port[8];
        char path[MAX_PATH_LEN + 1];
        const char *name;
        uint64_t duration_ns;
        unsigned connections;
        double rate; /* total requests per second; 0 = as fast as possible */
};

struct worker {
        pthread_t thread;
        const struct lg_config *cfg;
        const struct addrinfo *addr;
        unsigned index;
        uint64_t start_ns;
        uint64_t deadline_ns;
        uint64_t *samples; /* latency of each successful request, ns */
        size_t n_samples;
        size_t cap_samples;
        uint64_t errors;
};

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t)
{
        struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
                               .tv_nsec = (long)(t % 1000000000ull) };

        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
                ;
}

static int connect_to(const struct addrinfo *ai)
{
        struct timeval tv = { .tv_sec = 10 };
        int one = 1;
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);

        if (fd < 0)
                return -1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static int send_all(int fd, const char *buf, size_t len)
{
        while (len > 0) {
                ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                buf += n;
                len -= (size_t)n;
        }
        return 0;
}

/* Find header `name` (case-insensitive) in the header block hdr; returns a
 * pointer to its value or NULL. */
static const char *find_header(const char *hdr, const char *name)
{
        size_t nl = strlen(name);

        for (const char *p = strstr(hdr, "\r\n"); p; p = strstr(p + 2, "\r\n")) {
                if (strncasecmp(p + 2, name, nl) == 0 && p[2 + nl] == ':') {
                        const char *v = p + 3 + nl;

                        while (*v == ' ' || *v == '\t')
                                v++;
                        return v;
                }
        }
        return NULL;
}

/* Read one HTTP response from fd. Returns the status code (> 0), or -1 on a
 * transport error. *ret_close says the server will close the connection. */
static int read_response(int fd, bool *ret_close)
{
        char buf[RESP_BUF + 1];
        size_t have = 0, body_len = 0, head_len;
        const char *end, *cl, *conn;
        char *stop;
        unsigned long status;

        for (;;) {
                ssize_t n = recv(fd, buf + have, RESP_BUF - have, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                have += (size_t)n;
                buf[have] = '\0';
                end = strstr(buf, "\r\n\r\n");
                if (end)
                        break;
                if (have == RESP_BUF)
                        return -1; /* headers too large */
        }
        head_len = (size_t)(end - buf) + 4;
        if (strncmp(buf, "HTTP/1.", 7) != 0 || have < 12)
                return -1;
        status = strtoul(buf + 9, &stop, 10);
        if (stop != buf + 12 || status < 100 || status > 599)
                return -1;
        buf[head_len - 2] = '\0'; /* keep one CRLF so find_header sees the last line */
        cl = find_header(buf, "Content-Length");
        if (cl) {
                unsigned long long v = strtoull(cl, &stop, 10);

                if (stop == cl || v > (1ull << 30))
                        return -1;
                body_len = (size_t)v;
        } else {
                *ret_close = true; /* no length: the body ends when the server closes */
        }
        conn = find_header(buf, "Connection");
        if (conn && strncasecmp(conn, "close", 5) == 0)
                *ret_close = true;
        /* Drain the rest of the body. */
        for (size_t got = have - head_len; got < body_len;) {
                size_t want = GS_EX_MIN(body_len - got, (size_t)RESP_BUF);
                ssize_t n = recv(fd, buf, want, 0);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return -1;
                got += (size_t)n;
        }
        return (int)status;
}

static void record(struct worker *w, uint64_t latency)
{
        if (w->n_samples == w->cap_samples) {
                size_t cap = w->cap_samples ? w->cap_samples * 2 : 4096;
                uint64_t *s;

                if (cap > MAX_SAMPLES_PER_THREAD)
                        return; /* enough samples for percentiles; keep counting nothing more */
                s = realloc(w->samples, cap * sizeof(*s));
                if (!s)
                        return;
                w->samples = s;
                w->cap_samples = cap;
        }
        w->samples[w->n_samples++] = latency;
}

static void *worker_main(void *arg)
{
        struct worker *w = arg;
        const struct lg_config *c = w->cfg;
        char req[MAX_PATH_LEN + MAX_HOST + 128];
        int req_len = snprintf(req, sizeof(req),
                               "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUser-Agent: gs-loadgen\r\n"
                               "Accept: */*\r\n\r\n",
                               c->path, c->host, c->port);
        /* Per-connection interval in open-loop mode; start staggered. */
        uint64_t interval = c->rate > 0 ? (uint64_t)(1e9 * c->connections / c->rate) : 0;
        uint64_t due = w->start_ns + (interval ? interval * w->index / c->connections : 0);
        int fd = -1;

        while (due < w->deadline_ns) {
                bool close_after = false;
                uint64_t t0, t1;
                int status;

                if (interval)
                        sleep_until(due);
                if (now_ns() >= w->deadline_ns)
                        break;
                if (fd < 0)
                        fd = connect_to(w->addr);
                if (fd < 0) {
                        w->errors++;
                        sleep_until(now_ns() + 10000000ull); /* 10 ms before retrying */
                        due = interval ? due + interval : now_ns();
                        continue;
                }
                t0 = now_ns();
                status = send_all(fd, req, (size_t)req_len) < 0 ? -1 : read_response(fd, &close_after);
                t1 = now_ns();
                if (t1 <= w->deadline_ns) {
                        if (status >= 200 && status < 300)
                                record(w, t1 - (interval ? due : t0));
                        else
                                w->errors++;
                }
                if (status < 0 || close_after) {
                        close(fd);
                        fd = -1;
                }
                due = interval ? due + interval : t1;
        }
        if (fd >= 0)
                close(fd);
        return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
        uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

        return x < y ? -1 : x > y;
}

static double percentile_ms(const uint64_t *s, size_t n, double p)
{
        size_t i;

        if (n == 0)
                return 0;
        i = (size_t)(p * (double)(n - 1) + 0.5);
        return (double)s[i] / 1e6;
}

static int parse_url(const char *url, struct lg_config *c)
{
        const char *p, *host_end, *colon, *slash;
        size_t hl;

        if (strncmp(url, "http://", 7) != 0)
                return -EINVAL;
        p = url + 7;
        slash = strchr(p, '/');
        host_end = slash ? slash : p + strlen(p);
        colon = memchr(p, ':', (size_t)(host_end - p));
        hl = (size_t)((colon ? colon : host_end) - p);
        if (hl == 0 || hl > MAX_HOST)
                return -EINVAL;
        memcpy(c->host, p, hl);
        c->host[hl] = '\0';
        if (colon) {
                size_t pl = (size_t)(host_end - colon - 1);

                if (pl == 0 || pl >= sizeof(c->port) || strspn(colon + 1, "0123456789") < pl)
                        return -EINVAL;
                memcpy(c->port, colon + 1, pl);
                c->port[pl] = '\0';
        } else {
                snprintf(c->port, sizeof(c->port), "80");
        }
        if (!slash)
                slash = "/";
        if (strlen(slash) > MAX_PATH_LEN || strpbrk(slash, " \r\n"))
                return -EINVAL;
        snprintf(c->path, sizeof(c->path), "%s", slash);
        return 0;
}

static void usage(FILE *out)
{
        fputs("usage: gs-loadgen [--duration T] [--connections N] [--rate R] [--name NAME] URL\n"
              "Sends GET URL over N keep-alive connections for T (default 5s), back to back\n"
              "or at R requests/s in total, then prints one line:\n"
              "  loadgen name=NAME requests=N errors=E seconds=S rps=R p50_ms=A p99_ms=B max_ms=C\n",
              out);
}

static int parse_args(int argc, char **argv, struct lg_config *c)
{
        static const struct option opts[] = {
                { "duration", required_argument, NULL, 'd' },
                { "connections", required_argument, NULL, 'c' },
                { "rate", required_argument, NULL, 'r' },
                { "name", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        uint64_t v;
        char *end;
        int opt;

        *c = (struct lg_config){ .duration_ns = 5000000000ull, .connections = 4, .name = "-" };
        while ((opt = getopt_long(argc, argv, "d:c:r:n:h", opts, NULL)) != -1) {
                switch (opt) {
                case 'd':
                        if (ex_parse_duration_ns(optarg, &c->duration_ns) < 0 ||
                            c->duration_ns == 0 || c->duration_ns > 3600000000000ull) {
                                fprintf(stderr, "loadgen: bad --duration %s (e.g. 5s, 500ms)\n", optarg);
                                return 2;
                        }
                        break;
                case 'c':
                        if (ex_parse_u64(optarg, &v) < 0 || v == 0 || v > MAX_CONNECTIONS) {
                                fprintf(stderr, "loadgen: bad --connections %s (1..%u)\n", optarg,
                                        MAX_CONNECTIONS);
                                return 2;
                        }
                        c->connections = (unsigned)v;
                        break;
                case 'r':
                        errno = 0;
                        c->rate = strtod(optarg, &end);
                        if (errno || end == optarg || *end || c->rate < 0 || c->rate > 1e7) {
                                fprintf(stderr, "loadgen: bad --rate %s (requests/s, 0 = max)\n", optarg);
                                return 2;
                        }
                        break;
                case 'n':
                        c->name = optarg;
                        break;
                case 'h':
                        usage(stdout);
                        return -1;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind != argc - 1 || parse_url(argv[optind], c) < 0) {
                fprintf(stderr, "loadgen: expected one URL http://HOST[:PORT]/PATH\n");
                usage(stderr);
                return 2;
        }
        return 0;
}

int main(int argc, char **argv)
{
        static struct worker workers[MAX_CONNECTIONS];
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        struct addrinfo *ai = NULL;
        struct lg_config cfg;
        uint64_t start, errors = 0, *all;
        size_t n = 0, k = 0;
        unsigned started = 0;
        double secs;
        int rc = parse_args(argc, argv, &cfg);

        if (rc != 0)
                return rc < 0 ? 0 : rc;
        signal(SIGPIPE, SIG_IGN);
        rc = getaddrinfo(cfg.host, cfg.port, &hints, &ai);
        if (rc != 0) {
                fprintf(stderr, "loadgen: %s: %s\n", cfg.host, gai_strerror(rc));
                return 1;
        }
        start = now_ns();
        for (unsigned i = 0; i < cfg.connections; i++) {
                workers[i] = (struct worker){ .cfg = &cfg, .addr = ai, .index = i,
                                              .start_ns = start,
                                              .deadline_ns = start + cfg.duration_ns };
                if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) != 0)
                        break;
                started++;
        }
        for (unsigned i = 0; i < started; i++) {
                pthread_join(workers[i].thread, NULL);
                n += workers[i].n_samples;
                errors += workers[i].errors;
        }
        freeaddrinfo(ai);
        all = malloc((n ? n : 1) * sizeof(*all));
        if (!all) {
                fputs("loadgen: out of memory\n", stderr);
                return 1;
        }
        for (unsigned i = 0; i < started; i++) {
                if (workers[i].n_samples)
                        memcpy(all + k, workers[i].samples, workers[i].n_samples * sizeof(*all));
                k += workers[i].n_samples;
                free(workers[i].samples);
        }
        qsort(all, n, sizeof(*all), cmp_u64);
        secs = (double)cfg.duration_ns / 1e9;
        printf("loadgen name=%s requests=%zu errors=%" PRIu64 " seconds=%.3f rps=%.1f "
               "p50_ms=%.3f p99_ms=%.3f max_ms=%.3f\n",
               cfg.name, n, errors, secs, (double)n / secs, percentile_ms(all, n, 0.50),
               percentile_ms(all, n, 0.99), n ? (double)all[n - 1] / 1e6 : 0.0);
        free(all);
        return started == cfg.connections && n > 0 ? 0 : 1;
}
