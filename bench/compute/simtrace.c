/* SPDX-License-Identifier: Apache-2.0 */
/* gs-simtrace: a timeline of simgpu's device 0: the compute benchmark's
 * ground truth on simgpu (every 1 ms), and a diagnostic for tuning the
 * compute gate (every 100 us, compute_bench.py --trace).
 *
 *   gs-simtrace OUT [PERIOD_US]   (SIMGPU_* environment as for simgpu-smi)
 *
 * Every PERIOD_US (default 100) it advances simgpu's device 0 to the present
 * under the state lock (what any simgpu call does) and records the time, the
 * device's cumulative busy ns and, per live process, its cumulative busy ns
 * and the device time it has queued. On SIGTERM/SIGINT it writes OUT, one
 * line per sample: "t busy pid:busy:queued ...". */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_state.h"

#define MAXS 400000
#define MAXP 16

struct sample {
        uint64_t t, busy;
        int32_t pid[MAXP];
        uint64_t pbusy[MAXP], pq[MAXP];
        unsigned n;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
        (void)sig;
        stop = 1;
}

int main(int argc, char **argv)
{
        if (argc < 2) {
                fprintf(stderr, "usage: gs-simtrace OUT [PERIOD_US]\n");
                return 2;
        }
        long period_us = 100;
        if (argc > 2) {
                char *end = NULL;
                errno = 0;
                period_us = strtol(argv[2], &end, 10);
                if (errno || !end || *end || period_us < 10 || period_us > 100000)
                        return 2;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        struct sim_config cfg;
        if (sim_config_load(&cfg))
                return 2;
        struct sim_attach a = { .fd = -1 };
        for (int i = 0; i < 200 && sim_state_attach(&a, &cfg, false); i++) {
                struct timespec ts = { 0, 50000000 };
                nanosleep(&ts, NULL);
        }
        if (!a.st) {
                fprintf(stderr, "gs-simtrace: no simgpu state\n");
                return 1;
        }
        struct sample *s = calloc(MAXS, sizeof(*s));
        if (!s)
                return 1;
        size_t n = 0;
        struct sim_state *st = a.st;
        while (!stop && n < MAXS) {
                struct sample *x = &s[n++];
                sim_lock(st);
                x->t = sim_now_ns();
                sim_advance(st, 0, x->t);
                x->busy = st->dev[0].busy_ns;
                for (int p = 0; p < SIM_MAX_PROCS && x->n < MAXP; p++) {
                        const struct sim_proc_rec *pr = &st->proc[p];
                        if (pr->state != SIM_PROC_ALIVE || !pr->nctx[0])
                                continue;
                        uint64_t q = 0;
                        for (int c = 0; c < SIM_MAX_CTXS; c++) {
                                const struct sim_ctx_rec *cx = &st->ctx[c];
                                if (cx->in_use && cx->proc == p && cx->dev == 0)
                                        q += sim_pending_ns(st, c, UINT64_MAX);
                        }
                        x->pid[x->n] = pr->pid;
                        x->pbusy[x->n] = pr->busy[0];
                        x->pq[x->n] = q;
                        x->n++;
                }
                sim_unlock(st);
                struct timespec ts = { 0, period_us * 1000 };
                nanosleep(&ts, NULL);
        }
        FILE *f = fopen(argv[1], "w");
        if (!f)
                return 1;
        for (size_t i = 0; i < n; i++) {
                fprintf(f, "%llu %llu", (unsigned long long)s[i].t, (unsigned long long)s[i].busy);
                for (unsigned k = 0; k < s[i].n; k++)
                        fprintf(f, " %d:%llu:%llu", s[i].pid[k], (unsigned long long)s[i].pbusy[k],
                                (unsigned long long)s[i].pq[k]);
                fputc('\n', f);
        }
        fclose(f);
        return 0;
}
