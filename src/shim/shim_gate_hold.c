/* Measuring a hold: the device time this process's work took under one
 * lease, with CUDA events at the hold's boundaries (never one per launch).
 *
 * The first launch on each (context, stream) in a hold records a start
 * event on that stream just before it. When
 * the hold ends, an end event is recorded on every stream used and the
 * hold is queued; the background thread waits for the end events, and the
 * hold's busy time is, per context, the span from the earliest start to
 * the latest end (the union of the streams' spans). On simgpu events carry
 * simulated device timestamps, so this is exact for a saturating slice.
 *
 * The unit probe: at most every PROBE_EVERY_NS, one admitted launch is
 * wrapped in a pair of events; its elapsed time (read without blocking by
 * the background thread) is one launch's device time, from which the gate
 * estimates how much work a thread has queued. */
#include <string.h>

#include "shim.h"
#include "shim_gate.h"

#define MAX_STREAMS 32
#define MAX_DRAINS 4

struct hstream {
        CUcontext ctx;
        CUdevice dev;
        CUstream stream;
        CUevent start, end;
        CUevent mark; /* recorded when the stream was last seen empty */
        bool ended;   /* the stream was destroyed: `end` recorded then */
};

struct hrec {
        uint64_t key, gen, launches;
        int src;
        unsigned n;
        bool unmeasured; /* a stream used in the hold is not in s[] */
        struct hstream s[MAX_STREAMS];
};

#define PROBE_EVERY_NS (10ull * 1000 * 1000)

static struct {
        int state; /* 0 idle, 1 armed (pre recorded), 2 in flight */
        CUcontext ctx;
        CUdevice dev;
        CUevent pre, post;
        uint64_t next_at;
} pr;

pthread_mutex_t shim_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hrec open_rec;
static struct hrec drains[MAX_DRAINS];
static unsigned n_drains;
static bool draining; /* a hold's events are in use outside the lock */
static pthread_cond_t drain_cv = PTHREAD_COND_INITIALIZER;
static bool warned_streams;

static CUevent new_event(void)
{
        CUevent e = NULL;
        if (!shim_gate_cu.event_create || shim_gate_cu.event_create(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
                return NULL;
        return e;
}

static void drop_event(CUevent *e)
{
        if (*e && shim_gate_cu.event_destroy)
                shim_gate_cu.event_destroy(*e);
        *e = NULL;
}

static void drop_rec(struct hrec *r)
{
        for (unsigned i = 0; i < r->n; i++) {
                drop_event(&r->s[i].start);
                drop_event(&r->s[i].end);
                drop_event(&r->s[i].mark);
        }
        memset(r, 0, sizeof(*r));
}

bool shim_hold_stream(uint64_t key, CUstream stream)
{
        if (open_rec.key != key) {
                drop_rec(&open_rec);
                open_rec.key = key;
        }
        CUcontext ctx = NULL;
        if (!shim_gate_cu.ctx_get || shim_gate_cu.ctx_get(&ctx) != CUDA_SUCCESS || !ctx) {
                open_rec.unmeasured = true;
                return false;
        }
        for (unsigned i = 0; i < open_rec.n; i++)
                if (open_rec.s[i].ctx == ctx && open_rec.s[i].stream == stream)
                        return false;
        if (open_rec.n == MAX_STREAMS) {
                if (!warned_streams)
                        shim_log("compute: more than %d streams in one hold; the rest are not measured",
                                 MAX_STREAMS);
                warned_streams = true;
                open_rec.unmeasured = true;
                return false;
        }
        CUevent e = new_event();
        if (!e || shim_gate_cu.event_record(e, stream) != CUDA_SUCCESS) {
                drop_event(&e);
                open_rec.unmeasured = true;
                return false;
        }
        CUdevice dev = -1;
        if (shim_x.cuCtxGetDevice)
                shim_x.cuCtxGetDevice(&dev);
        struct hstream *h = &open_rec.s[open_rec.n++];
        *h = (struct hstream){ .ctx = ctx, .dev = dev, .stream = stream, .start = e };
        return true;
}

static void probe_drop(void)
{
        drop_event(&pr.pre);
        drop_event(&pr.post);
        pr.state = 0;
}

bool shim_probe_arm(CUstream stream, uint64_t now)
{
        bool armed = false;
        pthread_mutex_lock(&shim_hold_mu);
        if (pr.state != 0 || now < pr.next_at || !shim_gate_cu.ctx_get)
                goto out;
        pr.next_at = now + PROBE_EVERY_NS;
        CUcontext ctx = NULL;
        if (shim_gate_cu.ctx_get(&ctx) != CUDA_SUCCESS || !ctx)
                goto out;
        pr.ctx = ctx;
        pr.dev = -1;
        if (shim_x.cuCtxGetDevice)
                shim_x.cuCtxGetDevice(&pr.dev);
        pr.pre = new_event();
        pr.post = new_event();
        if (!pr.pre || !pr.post || shim_gate_cu.event_record(pr.pre, stream) != CUDA_SUCCESS) {
                probe_drop();
                goto out;
        }
        pr.state = 1;
        armed = true;
out:
        pthread_mutex_unlock(&shim_hold_mu);
        return armed;
}

void shim_probe_after(CUstream stream)
{
        pthread_mutex_lock(&shim_hold_mu);
        if (pr.state == 1) {
                if (shim_gate_cu.event_record(pr.post, stream) == CUDA_SUCCESS)
                        pr.state = 2;
                else
                        probe_drop();
        }
        pthread_mutex_unlock(&shim_hold_mu);
}

uint64_t shim_probe_poll(void)
{
        uint64_t ns = 0;
        pthread_mutex_lock(&shim_hold_mu);
        if (pr.state == 2 && shim_gate_cu.event_query && shim_gate_cu.event_query(pr.post) != CUDA_ERROR_NOT_READY) {
                float ms = 0;
                if (shim_gate_cu.elapsed(&ms, pr.pre, pr.post) == CUDA_SUCCESS && ms > 0)
                        ns = (uint64_t)((double)ms * 1e6 + 0.5);
                probe_drop();
        }
        pthread_mutex_unlock(&shim_hold_mu);
        return ns;
}

void shim_hold_mark(uint64_t key)
{
        if (open_rec.key != key)
                return;
        for (unsigned i = 0; i < open_rec.n; i++) {
                struct hstream *h = &open_rec.s[i];
                CUcontext popped;
                if (h->ended || h->stream == CU_STREAM_PER_THREAD || shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        continue;
                if (!h->mark)
                        h->mark = new_event();
                if (h->mark && shim_gate_cu.event_record(h->mark, h->stream) != CUDA_SUCCESS)
                        drop_event(&h->mark);
                shim_gate_cu.ctx_pop(&popped);
        }
}

void shim_hold_close(uint64_t key, uint64_t gen, int src, uint64_t launches, bool at_mark)
{
        if (!key)
                return;
        if (open_rec.key != key) {
                /* Joined but launched nothing: still owes its (empty) report. */
                drop_rec(&open_rec);
                open_rec.key = key;
        }
        open_rec.gen = gen;
        open_rec.src = src;
        open_rec.launches = launches;
        for (unsigned i = 0; i < open_rec.n; i++) {
                struct hstream *h = &open_rec.s[i];
                if (h->ended)
                        continue;
                if (at_mark && h->mark) {
                        h->end = h->mark;
                        h->mark = NULL;
                        continue;
                }
                /* The per-thread stream of the thread closing the hold is not
                 * the launching thread's: the legacy stream waits for it. */
                CUstream s = h->stream == CU_STREAM_PER_THREAD ? CU_STREAM_LEGACY : h->stream;
                CUcontext popped;
                if (shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        continue;
                h->end = new_event();
                if (h->end && shim_gate_cu.event_record(h->end, s) != CUDA_SUCCESS)
                        drop_event(&h->end);
                shim_gate_cu.ctx_pop(&popped);
        }
        if (n_drains == MAX_DRAINS) {
                /* Nobody drains (should not happen): forget the oldest. */
                drop_rec(&drains[0]);
                memmove(&drains[0], &drains[1], sizeof(drains[0]) * (MAX_DRAINS - 1));
                n_drains--;
        }
        drains[n_drains++] = open_rec;
        memset(&open_rec, 0, sizeof(open_rec));
}

int shim_hold_idle(uint64_t key)
{
        if (open_rec.key != key)
                return 1; /* joined, nothing launched yet */
        if (open_rec.unmeasured || !shim_gate_cu.stream_query)
                return -1;
        int idle = 1;
        for (unsigned i = 0; i < open_rec.n && idle == 1; i++) {
                struct hstream *h = &open_rec.s[i];
                if (h->ended)
                        continue;
                if (h->stream == CU_STREAM_PER_THREAD)
                        return -1;
                CUcontext popped;
                if (shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                        return -1;
                CUresult r = shim_gate_cu.stream_query(h->stream);
                shim_gate_cu.ctx_pop(&popped);
                idle = r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_READY ? 0 : -1;
        }
        return idle;
}

static double elapsed_ms(CUevent a, CUevent b, bool *ok)
{
        float ms = 0;
        if (!a || !b || shim_gate_cu.elapsed(&ms, a, b) != CUDA_SUCCESS) {
                *ok = false;
                return 0;
        }
        return (double)ms;
}

static uint64_t ms_to_ns(double ms)
{
        return ms <= 0 ? 0 : (uint64_t)(ms * 1e6 + 0.5);
}

/* Busy ns of a drained hold: per context, latest end minus earliest start. */
static uint64_t rec_busy(struct hrec *r)
{
        uint64_t total = 0;
        bool done[MAX_STREAMS] = { false };
        for (unsigned i = 0; i < r->n; i++) {
                if (done[i])
                        continue;
                CUevent ref = r->s[i].start;
                double lo = 0, hi = 0;
                for (unsigned j = i; j < r->n; j++) {
                        if (r->s[j].ctx != r->s[i].ctx)
                                continue;
                        done[j] = true;
                        bool ok = true;
                        double s = elapsed_ms(ref, r->s[j].start, &ok);
                        double e = elapsed_ms(ref, r->s[j].end, &ok);
                        if (!ok)
                                continue;
                        lo = s < lo ? s : lo;
                        hi = e > hi ? e : hi;
                }
                total += ms_to_ns(hi - lo);
        }
        return total;
}

bool shim_hold_drain_one(uint64_t *gen, int *src, uint64_t *busy, uint64_t *launches)
{
        pthread_mutex_lock(&shim_hold_mu);
        if (n_drains == 0) {
                pthread_mutex_unlock(&shim_hold_mu);
                return false;
        }
        struct hrec r = drains[0];
        memmove(&drains[0], &drains[1], sizeof(drains[0]) * (MAX_DRAINS - 1));
        n_drains--;
        memset(&drains[n_drains], 0, sizeof(drains[0]));
        draining = true;
        pthread_mutex_unlock(&shim_hold_mu);

        for (unsigned i = 0; i < r.n; i++)
                if (r.s[i].end)
                        shim_gate_cu.event_sync(r.s[i].end);
        *busy = rec_busy(&r);
        *gen = r.gen;
        *src = r.src;
        *launches = r.launches;
        drop_rec(&r);
        pthread_mutex_lock(&shim_hold_mu);
        draining = false;
        pthread_cond_broadcast(&drain_cv);
        pthread_mutex_unlock(&shim_hold_mu);
        return true;
}

static void end_stream(struct hstream *h)
{
        CUcontext popped;
        if (h->ended || shim_gate_cu.ctx_push(h->ctx) != CUDA_SUCCESS)
                return;
        h->end = new_event();
        if (h->end && shim_gate_cu.event_record(h->end, h->stream == CU_STREAM_PER_THREAD ? CU_STREAM_LEGACY
                                                                                   : h->stream) != CUDA_SUCCESS)
                drop_event(&h->end);
        shim_gate_cu.ctx_pop(&popped);
        h->ended = true;
}

void shim_hold_stream_gone(CUstream stream)
{
        pthread_mutex_lock(&shim_hold_mu);
        for (unsigned i = 0; i < open_rec.n; i++)
                if (open_rec.s[i].stream == stream && stream != NULL && stream != CU_STREAM_LEGACY &&
                    stream != CU_STREAM_PER_THREAD)
                        end_stream(&open_rec.s[i]);
        pthread_mutex_unlock(&shim_hold_mu);
}

/* Removes the streams of a context (or of every context on a device) from
 * a hold, destroying their events. Lock held. */
static void forget_in(struct hrec *r, CUcontext ctx, CUdevice dev)
{
        unsigned k = 0;
        for (unsigned i = 0; i < r->n; i++) {
                struct hstream *h = &r->s[i];
                if (ctx ? h->ctx == ctx : h->dev == dev) {
                        drop_event(&h->start);
                        drop_event(&h->end);
                        drop_event(&h->mark);
                        continue;
                }
                r->s[k++] = *h;
        }
        r->n = k;
}

void shim_hold_forget(CUcontext ctx, CUdevice dev)
{
        pthread_mutex_lock(&shim_hold_mu);
        while (draining)
                pthread_cond_wait(&drain_cv, &shim_hold_mu);
        forget_in(&open_rec, ctx, dev);
        if (pr.state && (ctx ? pr.ctx == ctx : pr.dev == dev))
                probe_drop();
        for (unsigned i = 0; i < n_drains; i++)
                forget_in(&drains[i], ctx, dev);
        pthread_mutex_unlock(&shim_hold_mu);
}

void shim_hold_reset(void)
{
        /* Fork child: the events belong to the parent's contexts. */
        pthread_mutex_init(&shim_hold_mu, NULL);
        pthread_cond_init(&drain_cv, NULL);
        draining = false;
        memset(&open_rec, 0, sizeof(open_rec));
        memset(drains, 0, sizeof(drains));
        n_drains = 0;
        memset(&pr, 0, sizeof(pr));
}
