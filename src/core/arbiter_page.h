/* SPDX-License-Identifier: Apache-2.0 */
/* The writer side of a compute lease page (include/gpuslice/arbiter_proto.h):
 * one implementation of the seqlock write for the daemon's pages and the
 * shim's local-enforcement page. */
#ifndef GS_ARBITER_PAGE_H
#define GS_ARBITER_PAGE_H

#include <stdint.h>

#include "gpuslice/arbiter_proto.h"

/* Publish lease {gen, start_ns, until_ns} on page `p` by the writer protocol
 * (seq odd, fields, seq even), then bump the futex word and wake every
 * waiter, in any process (a shared futex). The caller is the only writer
 * (it holds the page's lock, or owns the page). A seq left odd by a writer
 * that died mid-write is repaired, so readers never see a torn lease as
 * consistent nor spin on an odd seq forever. */
void gs_arb_page_write(struct gs_arb_page *p, uint64_t gen, uint64_t start_ns, uint64_t until_ns);

#endif /* GS_ARBITER_PAGE_H */
