/* SPDX-License-Identifier: Apache-2.0 */
/* gs-serve: a small model-serving API for the gpuslice examples.
 *
 * It stands in for a real inference server: at start it loads a "model" (a
 * block of device memory of a configured size, filled on the GPU with the
 * project kernel gs_fill) and then answers every GET /predict by running the
 * kernel gs_busy for a configured device time and synchronising, as a real
 * model's forward pass would. It uses the CUDA driver API only (cuda.h), so it
 * runs unchanged on a real GPU and on simgpu, inside or outside a gpuslice
 * slice.
 *
 * Endpoints: GET /predict (JSON), GET /healthz ("ok"), GET /stats (JSON).
 * Requests are served by a pool of threads sharing one CUDA context; each
 * thread submits work on its own stream. SIGTERM or SIGINT stops it cleanly
 * (exit status 0).
 *
 * Flags (each also read from the environment variable in brackets):
 *   --port N            TCP port on 127.0.0.1 (or --listen-any) [SERVE_PORT]
 *   --model-size SIZE   device memory of the model, e.g. 1Gi [SERVE_MODEL_SIZE]
 *   --device-time T     device time per request, e.g. 5ms, 500us [SERVE_DEVICE_TIME]
 *   --threads N         request threads [SERVE_THREADS]
 *   --ptx PATH          PTX of the project kernels [GS_KERNELS_PTX]
 *   --device N          CUDA device index (default 0)
 */
#include <cuda.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "example_util.h"

#ifndef GS_DEFAULT_KERNELS_PTX
#define GS_DEFAULT_KERNELS_PTX ""
#endif

#define MAX_THREADS 64
#define MAX_PTX_BYTES (16u << 20)

struct serve_config {
        unsigned port;
        uint64_t model_bytes;
        uint64_t device_ns;
        unsigned threads;
        int device;
        bool listen_any;
        const char *ptx_path;
};

/* Process-wide state shared by the request threads. */
static struct {
        CUdevice dev;
        CUcontext ctx;
        CUmodule mod;
        CUfunction f_busy;
        CUfunction f_fill;
        CUdeviceptr model;
        struct serve_config cfg;
        struct timespec started;
        atomic_uint_fast64_t requests;
        atomic_uint_fast64_t errors;
        atomic_uint_fast64_t device_ns_total;
        atomic_bool ready;
        pthread_mutex_t streams_lock;
        CUstream streams[MAX_THREADS];
        unsigned n_streams;
} g = { .streams_lock = PTHREAD_MUTEX_INITIALIZER };

static __thread CUstream t_stream;
static __thread bool t_bound;

static const char *cu_name(CUresult r)
{
        const char *s = NULL;

        if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
                return "CUDA_ERROR_UNKNOWN";
        return s;
}

static int die_cu(const char *what, CUresult r)
{
        fprintf(stderr, "serve: %s failed: %s (%d)\n", what, cu_name(r), (int)r);
        return 1;
}

/* Make the shared context current in the calling thread and give the thread
 * its own stream, once. */
static CUresult thread_bind(void)
{
        CUresult r;

        if (t_bound)
                return CUDA_SUCCESS;
        r = cuCtxSetCurrent(g.ctx);
        if (r != CUDA_SUCCESS)
                return r;
        pthread_mutex_lock(&g.streams_lock);
        if (g.n_streams < MAX_THREADS) {
                r = cuStreamCreate(&t_stream, CU_STREAM_NON_BLOCKING);
                if (r == CUDA_SUCCESS)
                        g.streams[g.n_streams++] = t_stream;
        } else {
                t_stream = NULL; /* more threads than expected: share the default stream */
        }
        pthread_mutex_unlock(&g.streams_lock);
        if (r == CUDA_SUCCESS)
                t_bound = true;
        return r;
}

/* One inference: run gs_busy for the configured device time on the thread's
 * stream and wait for it. */
static CUresult run_inference(void)
{
        unsigned long long ns = g.cfg.device_ns;
        void *args[] = { &ns };
        CUresult r = thread_bind();

        if (r != CUDA_SUCCESS)
                return r;
        r = cuLaunchKernel(g.f_busy, 1, 1, 1, 1, 1, 1, 0, t_stream, args, NULL);
        if (r != CUDA_SUCCESS)
                return r;
        return cuStreamSynchronize(t_stream);
}

static uint64_t now_ns(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *ctype,
                             const char *body)
{
        struct MHD_Response *resp =
                MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;

        if (!resp)
                return MHD_NO;
        MHD_add_response_header(resp, "Content-Type", ctype);
        ret = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result handle_predict(struct MHD_Connection *conn)
{
        char body[256];
        uint64_t t0 = now_ns();
        CUresult r = run_inference();
        uint64_t dt = now_ns() - t0;
        uint64_t n;

        if (r != CUDA_SUCCESS) {
                atomic_fetch_add(&g.errors, 1);
                snprintf(body, sizeof(body), "{\"ok\":false,\"error\":\"%s\"}\n", cu_name(r));
                return reply(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "application/json", body);
        }
        n = atomic_fetch_add(&g.requests, 1) + 1;
        atomic_fetch_add(&g.device_ns_total, g.cfg.device_ns);
        snprintf(body, sizeof(body),
                 "{\"ok\":true,\"request\":%" PRIu64 ",\"label\":%" PRIu64
                 ",\"latency_us\":%" PRIu64 "}\n",
                 n, n % 3, dt / 1000);
        return reply(conn, MHD_HTTP_OK, "application/json", body);
}

static enum MHD_Result handle_stats(struct MHD_Connection *conn)
{
        char body[512];
        struct timespec ts;
        double up;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        up = (double)(ts.tv_sec - g.started.tv_sec) +
             (double)(ts.tv_nsec - g.started.tv_nsec) / 1e9;
        snprintf(body, sizeof(body),
                 "{\"requests\":%" PRIu64 ",\"errors\":%" PRIu64 ",\"model_bytes\":%" PRIu64
                 ",\"device_ns_per_request\":%" PRIu64 ",\"device_ns_total\":%" PRIu64
                 ",\"uptime_s\":%.3f,\"pid\":%ld}\n",
                 (uint64_t)atomic_load(&g.requests), (uint64_t)atomic_load(&g.errors),
                 g.cfg.model_bytes, g.cfg.device_ns, (uint64_t)atomic_load(&g.device_ns_total),
                 up, (long)getpid());
        return reply(conn, MHD_HTTP_OK, "application/json", body);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
        (void)cls;
        (void)version;
        (void)upload_data;
        (void)con_cls;
        if (*upload_data_size != 0) {
                *upload_data_size = 0; /* bodies are ignored */
                return MHD_YES;
        }
        if (strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0)
                return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain",
                             "method not allowed\n");
        if (strcmp(url, "/predict") == 0)
                return handle_predict(conn);
        if (strcmp(url, "/healthz") == 0)
                return atomic_load(&g.ready)
                               ? reply(conn, MHD_HTTP_OK, "text/plain", "ok\n")
                               : reply(conn, MHD_HTTP_SERVICE_UNAVAILABLE, "text/plain",
                                       "loading\n");
        if (strcmp(url, "/stats") == 0)
                return handle_stats(conn);
        return reply(conn, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
}

static char *read_file(const char *path, size_t *ret_len)
{
        FILE *f = fopen(path, "rbe");
        char *buf = NULL;
        size_t n;

        if (!f)
                return NULL;
        buf = malloc(MAX_PTX_BYTES + 1);
        if (buf) {
                n = fread(buf, 1, MAX_PTX_BYTES + 1, f);
                if (n > MAX_PTX_BYTES || ferror(f)) {
                        free(buf);
                        buf = NULL;
                        errno = EFBIG;
                } else {
                        buf[n] = '\0';
                        *ret_len = n;
                }
        }
        fclose(f);
        return buf;
}

/* Load the project kernels and the "model": allocate model_bytes of device
 * memory and fill it on the device. Returns 0 or an exit status. */
static int load_model(void)
{
        size_t ptx_len = 0;
        char *ptx = read_file(g.cfg.ptx_path, &ptx_len);
        CUresult r;
        unsigned value = 0x5eed;
        size_t count;
        void *args[3];

        if (!ptx) {
                fprintf(stderr, "serve: cannot read the kernels' PTX %s: %s\n", g.cfg.ptx_path,
                        strerror(errno));
                return 1;
        }
        r = cuModuleLoadData(&g.mod, ptx);
        free(ptx);
        if (r != CUDA_SUCCESS)
                return die_cu("cuModuleLoadData", r);
        r = cuModuleGetFunction(&g.f_busy, g.mod, "gs_busy");
        if (r == CUDA_SUCCESS)
                r = cuModuleGetFunction(&g.f_fill, g.mod, "gs_fill");
        if (r != CUDA_SUCCESS)
                return die_cu("cuModuleGetFunction", r);
        if (g.cfg.model_bytes == 0)
                return 0;
        r = cuMemAlloc(&g.model, g.cfg.model_bytes);
        if (r != CUDA_SUCCESS) {
                char size[32];

                ex_format_bytes(g.cfg.model_bytes, size, sizeof(size));
                fprintf(stderr, "serve: cannot load a %s model: cuMemAlloc: %s\n", size,
                        cu_name(r));
                return 1;
        }
        count = g.cfg.model_bytes / sizeof(unsigned);
        args[0] = &g.model;
        args[1] = &value;
        args[2] = &count;
        r = cuLaunchKernel(g.f_fill, 1024, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
        if (r == CUDA_SUCCESS)
                r = cuCtxSynchronize();
        if (r != CUDA_SUCCESS)
                return die_cu("filling the model (gs_fill)", r);
        return 0;
}

static void usage(FILE *out)
{
        fputs("usage: gs-serve [--port N] [--model-size SIZE] [--device-time T] [--threads N]\n"
              "                [--ptx PATH] [--device N] [--listen-any]\n"
              "A small inference server: loads a model of SIZE device memory, answers\n"
              "GET /predict by running T of device time, GET /healthz and GET /stats.\n"
              "Environment: SERVE_PORT, SERVE_MODEL_SIZE, SERVE_DEVICE_TIME, SERVE_THREADS,\n"
              "GS_KERNELS_PTX. SIZE: 512Mi, 1Gi, bytes. T: 5ms, 500us, 1s, ns.\n",
              out);
}

static int set_opt(struct serve_config *c, int opt, const char *v)
{
        uint64_t x;

        switch (opt) {
        case 'p':
                if (ex_parse_u64(v, &x) < 0 || x == 0 || x > 65535)
                        break;
                c->port = (unsigned)x;
                return 0;
        case 'm':
                if (ex_parse_bytes(v, &c->model_bytes) < 0)
                        break;
                return 0;
        case 't':
                if (ex_parse_duration_ns(v, &c->device_ns) < 0)
                        break;
                return 0;
        case 'n':
                if (ex_parse_u64(v, &x) < 0 || x == 0 || x > MAX_THREADS)
                        break;
                c->threads = (unsigned)x;
                return 0;
        case 'd':
                if (ex_parse_u64(v, &x) < 0 || x > 63)
                        break;
                c->device = (int)x;
                return 0;
        case 'x':
                c->ptx_path = v;
                return 0;
        default:
                break;
        }
        fprintf(stderr, "serve: invalid value %s for --%s\n", v,
                opt == 'p' ? "port" : opt == 'm' ? "model-size" : opt == 't' ? "device-time" :
                opt == 'n' ? "threads" : opt == 'd' ? "device" : "ptx");
        return -EINVAL;
}

static int parse_args(int argc, char **argv, struct serve_config *c)
{
        static const struct option opts[] = {
                { "port", required_argument, NULL, 'p' },
                { "model-size", required_argument, NULL, 'm' },
                { "device-time", required_argument, NULL, 't' },
                { "threads", required_argument, NULL, 'n' },
                { "ptx", required_argument, NULL, 'x' },
                { "device", required_argument, NULL, 'd' },
                { "listen-any", no_argument, NULL, 'a' },
                { "help", no_argument, NULL, 'h' },
                { NULL, 0, NULL, 0 },
        };
        static const struct { const char *env; int opt; } envs[] = {
                { "SERVE_PORT", 'p' }, { "SERVE_MODEL_SIZE", 'm' },
                { "SERVE_DEVICE_TIME", 't' }, { "SERVE_THREADS", 'n' },
                { "GS_KERNELS_PTX", 'x' },
        };
        int opt;

        *c = (struct serve_config){ .port = 8080, .model_bytes = 256ull << 20,
                                    .device_ns = 5000000, .threads = 8,
                                    .ptx_path = GS_DEFAULT_KERNELS_PTX };
        for (size_t i = 0; i < sizeof(envs) / sizeof(envs[0]); i++) {
                const char *v = getenv(envs[i].env);

                if (v && *v && set_opt(c, envs[i].opt, v) < 0)
                        return 2;
        }
        while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (opt == 'h') {
                        usage(stdout);
                        return -1;
                }
                if (opt == 'a') {
                        c->listen_any = true;
                        continue;
                }
                if (opt == '?' || set_opt(c, opt, optarg) < 0) {
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "serve: unexpected argument %s\n", argv[optind]);
                return 2;
        }
        if (!c->ptx_path || !*c->ptx_path) {
                fputs("serve: no kernels: pass --ptx PATH or set GS_KERNELS_PTX\n", stderr);
                return 2;
        }
        return 0;
}

static int init_cuda(void)
{
        char name[128] = "";
        CUresult r = cuInit(0);

        if (r != CUDA_SUCCESS)
                return die_cu("cuInit", r);
        r = cuDeviceGet(&g.dev, g.cfg.device);
        if (r != CUDA_SUCCESS)
                return die_cu("cuDeviceGet", r);
        cuDeviceGetName(name, sizeof(name), g.dev);
        r = cuDevicePrimaryCtxRetain(&g.ctx, g.dev);
        if (r != CUDA_SUCCESS)
                return die_cu("cuDevicePrimaryCtxRetain", r);
        r = cuCtxSetCurrent(g.ctx);
        if (r != CUDA_SUCCESS)
                return die_cu("cuCtxSetCurrent", r);
        return 0;
}

static void shutdown_cuda(void)
{
        cuCtxSetCurrent(g.ctx);
        for (unsigned i = 0; i < g.n_streams; i++)
                cuStreamDestroy(g.streams[i]);
        if (g.model)
                cuMemFree(g.model);
        if (g.mod)
                cuModuleUnload(g.mod);
        if (g.ctx)
                cuDevicePrimaryCtxRelease(g.dev);
}

static struct MHD_Daemon *start_http(void)
{
        struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)g.cfg.port) };

        addr.sin_addr.s_addr = htonl(g.cfg.listen_any ? INADDR_ANY : INADDR_LOOPBACK);
        return MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL_LINUX_ONLY |
                                        MHD_USE_ERROR_LOG,
                                (uint16_t)g.cfg.port, NULL, NULL, on_request, NULL,
                                MHD_OPTION_THREAD_POOL_SIZE, (unsigned)g.cfg.threads,
                                MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                                MHD_OPTION_CONNECTION_LIMIT, (unsigned)256,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
                                MHD_OPTION_END);
}

int main(int argc, char **argv)
{
        struct MHD_Daemon *http = NULL;
        char size[32], dtime[32];
        sigset_t stop;
        int rc, sig = 0;

        setvbuf(stdout, NULL, _IOLBF, 0);
        rc = parse_args(argc, argv, &g.cfg);
        if (rc != 0)
                return rc < 0 ? 0 : rc;

        /* Block the stop signals before any thread starts, so that every
         * thread inherits the mask and main alone waits for them. */
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigaddset(&stop, SIGINT);
        pthread_sigmask(SIG_BLOCK, &stop, NULL);
        signal(SIGPIPE, SIG_IGN);

        clock_gettime(CLOCK_MONOTONIC, &g.started);
        rc = init_cuda();
        if (rc == 0)
                rc = load_model();
        if (rc != 0) {
                shutdown_cuda();
                return rc;
        }
        http = start_http();
        if (!http) {
                fprintf(stderr, "serve: cannot listen on port %u\n", g.cfg.port);
                shutdown_cuda();
                return 1;
        }
        atomic_store(&g.ready, true);
        ex_format_bytes(g.cfg.model_bytes, size, sizeof(size));
        ex_format_duration(g.cfg.device_ns, dtime, sizeof(dtime));
        printf("serve: model %s loaded on device %d, %s device time per request, "
               "%u threads, listening on http://%s:%u (pid %ld)\n",
               size, g.cfg.device, dtime, g.cfg.threads,
               g.cfg.listen_any ? "0.0.0.0" : "127.0.0.1", g.cfg.port, (long)getpid());

        sigwait(&stop, &sig);
        atomic_store(&g.ready, false);
        MHD_stop_daemon(http);
        shutdown_cuda();
        printf("serve: stopped on %s after %" PRIu64 " requests (%" PRIu64 " errors)\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", (uint64_t)atomic_load(&g.requests),
               (uint64_t)atomic_load(&g.errors));
        return 0;
}
