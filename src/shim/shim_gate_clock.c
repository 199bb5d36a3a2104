/* SPDX-License-Identifier: Apache-2.0 */
/* The gate's clock and timed waits. A gated launch compares CLOCK_MONOTONIC with its
 * lease's end and its queue's estimated end; clock_gettime, even through
 * the vDSO, is most of what such a launch would cost. Where the kernel
 * itself keeps CLOCK_MONOTONIC on the TSC (its clocksource is "tsc": an
 * invariant TSC, synchronised across CPUs, which the kernel checked), the
 * fast path reads the TSC instead and converts it with a per-thread anchor
 * (a (TSC, CLOCK_MONOTONIC) pair read together) and the process's
 * calibration (ns per tick, measured against CLOCK_MONOTONIC over a span
 * that doubles, from 20 ms up). An anchor serves at most 50 ms, and every
 * lease change re-anchors (shim_gate_enter), so NTP's slew (<= 500 ppm)
 * and the calibration's error stay within microseconds. Each re-anchor
 * checks the old anchor against the clock: off by more than 200 us, the TSC
 * is given up for the process (logged) and launches read clock_gettime, as
 * they do before the first calibration and on every other machine. */
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shim.h"
#include "shim_gate.h"

#define MS (1000ull * 1000)
#define CAL_MIN_SPAN_NS (20 * MS) /* first calibration after this span */
#define ANCHOR_SPAN_NS (50 * MS)  /* an anchor serves this long */
#define ANCHOR_MAX_ERR_NS 5000    /* the TSC reads around the clock read, at most this apart */
#define CHECK_MAX_ERR_NS (200 * 1000) /* an anchor off by more: the TSC is given up */

/* CLOCK_MONOTONIC and the timed waits on a lease page's futex. */
uint64_t shim_gate_now(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void shim_gate_futex_wait(_Atomic uint32_t *f, uint32_t val, uint64_t ns)
{
        struct timespec ts = { .tv_sec = (time_t)(ns / 1000000000ull), .tv_nsec = (long)(ns % 1000000000ull) };
        syscall(SYS_futex, (uint32_t *)f, FUTEX_WAIT, val, &ts, NULL, 0);
}

void shim_gate_futex_wake(_Atomic uint32_t *f)
{
        syscall(SYS_futex, (uint32_t *)f, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#if defined(__x86_64__)

/* 0: not looked at yet; 1: usable; -1: not usable (not x86-64 "tsc", or
 * given up). */
static _Atomic int state;
/* The first sample (written before `state` is set to 1, read after it is
 * seen 1). */
static uint64_t cal_tsc, cal_ns;
static _Atomic uint64_t cal_mult; /* ns per tick << 32; 0: not calibrated */
static _Atomic uint64_t cal_span; /* the span cal_mult was measured over */
/* A sample whose two TSC reads are further apart than this (before the
 * calibration; the thread was preempted) is not taken. */
#define CAL_MAX_TICKS (1ull << 17)

static uint64_t rdtsc(void)
{
        return __builtin_ia32_rdtsc();
}

/* CLOCK_MONOTONIC into *ret_ns and the TSC at the middle of its read into
 * *ret_tsc; returns the ticks between the two TSC reads. */
static uint64_t sample(uint64_t *ret_tsc, uint64_t *ret_ns)
{
        uint64_t a = rdtsc();
        *ret_ns = shim_gate_now();
        uint64_t b = rdtsc();
        *ret_tsc = a + (b - a) / 2;
        return b - a;
}

static bool clocksource_is_tsc(void)
{
        int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource",
                      O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        char buf[16] = { 0 };
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        return n >= 3 && memcmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

void shim_clock_start(void)
{
        if (atomic_load(&state) != 0)
                return; /* once per process; a fork child keeps it (the same TSC) */
        bool ok = clocksource_is_tsc();
        for (int i = 0; ok && i < 8; i++) {
                if (sample(&cal_tsc, &cal_ns) <= CAL_MAX_TICKS) {
                        atomic_store_explicit(&state, 1, memory_order_release);
                        return;
                }
        }
        atomic_store(&state, -1);
        shim_log("compute: the launch path reads clock_gettime (the clocksource is not the TSC)");
}

static void give_up(const char *why)
{
        int was = 1;
        if (!atomic_compare_exchange_strong(&state, &was, -1))
                return;
        atomic_store(&cal_mult, 0);
        shim_log("compute: %s: the launch path reads clock_gettime from now on", why);
}

/* A new (tsc, ns) sample: a calibration over twice the span of the last
 * one (or the first, after CAL_MIN_SPAN_NS) replaces it. */
static void refine(uint64_t tsc, uint64_t ns)
{
        uint64_t span = ns - cal_ns;
        if (span < CAL_MIN_SPAN_NS || span / 2 < atomic_load_explicit(&cal_span, memory_order_relaxed) ||
            tsc <= cal_tsc)
                return;
        uint64_t m = (uint64_t)(((unsigned __int128)span << 32) / (tsc - cal_tsc));
        uint64_t old = atomic_load_explicit(&cal_mult, memory_order_relaxed);
        if (!m || (old && (m > old + old / 100 || m < old - old / 100))) {
                give_up("the TSC's rate against CLOCK_MONOTONIC moved by more than 1%");
                return;
        }
        atomic_store_explicit(&cal_span, span, memory_order_relaxed);
        atomic_store_explicit(&cal_mult, m, memory_order_relaxed);
}

uint64_t shim_clock_anchor(struct shim_gate_tls *tp)
{
        if (atomic_load_explicit(&state, memory_order_acquire) != 1) {
                tp->dmax = 0;
                return shim_gate_now();
        }
        uint64_t tsc, ns, width = sample(&tsc, &ns);
        if (tp->dmax && tsc - tp->tsc0 < tp->dmax) {
                int64_t off = (int64_t)(tp->ns0 + (((tsc - tp->tsc0) * tp->mult) >> 32) - ns);
                if (off > (int64_t)CHECK_MAX_ERR_NS || off < -(int64_t)CHECK_MAX_ERR_NS)
                        give_up("the TSC drifted more than 200 us from CLOCK_MONOTONIC");
        }
        tp->dmax = 0;
        if (width <= CAL_MAX_TICKS)
                refine(tsc, ns);
        uint64_t m = atomic_load_explicit(&cal_mult, memory_order_relaxed);
        if (m && atomic_load_explicit(&state, memory_order_relaxed) == 1 && width <= CAL_MAX_TICKS &&
            ((width * m) >> 32) <= ANCHOR_MAX_ERR_NS) {
                tp->tsc0 = tsc;
                tp->ns0 = ns;
                tp->mult = m;
                tp->dmax = (uint64_t)(((unsigned __int128)ANCHOR_SPAN_NS << 32) / m);
        }
        return ns;
}

#else /* no TSC: clock_gettime */

void shim_clock_start(void)
{
}

uint64_t shim_clock_anchor(struct shim_gate_tls *tp)
{
        tp->dmax = 0;
        return shim_gate_now();
}

#endif
