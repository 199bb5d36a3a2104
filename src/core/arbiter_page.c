/* SPDX-License-Identifier: Apache-2.0 */
/* Writing a compute lease page; see arbiter_page.h. */
#include "arbiter_page.h"

#include <limits.h>
#include <linux/futex.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

void gs_arb_page_write(struct gs_arb_page *p, uint64_t gen, uint64_t start_ns, uint64_t until_ns)
{
        uint64_t s = atomic_load_explicit(&p->seq, memory_order_relaxed);
        if (s & 1u)
                s++; /* a previous writer died mid-write */
        atomic_store_explicit(&p->seq, s + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        atomic_store_explicit(&p->gen, gen, memory_order_relaxed);
        atomic_store_explicit(&p->start_ns, start_ns, memory_order_relaxed);
        atomic_store_explicit(&p->until_ns, until_ns, memory_order_relaxed);
        atomic_store_explicit(&p->seq, s + 2, memory_order_release);
        atomic_fetch_add_explicit(&p->futex, 1u, memory_order_release);
        /* A shared futex (not FUTEX_PRIVATE): the waiters are other
         * processes mapping the same file. */
        (void)syscall(SYS_futex, (uint32_t *)&p->futex, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
