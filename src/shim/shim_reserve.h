/* SPDX-License-Identifier: Apache-2.0 */
/* Memory the driver keeps for a slice's process without an allocation call:
 * imports of other processes' memory (shim_ipc.c), context limits
 * (shim_limits.c) and modules' __device__ variables (shim_module.c). */
#ifndef SHIM_RESERVE_H
#define SHIM_RESERVE_H

#include "shim.h"

/* Table kinds of these charges (shim_table.c; after shim.h's enum
 * shim_kind, below 32 for shim_table_drop_ctx's mask). */
#define SHIM_K_IPC 24    /* key = imported address, aux = opens not yet closed */
#define SHIM_K_LIMITS 25 /* key = context, bytes = what its limits reserve */
#define SHIM_K_MODULE 26 /* key = module, bytes = its global segment */

/* The driver's entry point `name` (an unhooked one), through the driver's
 * own cuGetProcAddress; NULL when it has none. Thread-safe. */
void *shim_drv_proc(const char *name);
/* The calling thread's current context (0 if none or unknown). */
uint64_t shim_current_ctx(void);
/* Context ctx is gone with everything in it (called where shim_mem_ctx_gone
 * is): gives back what its limits, modules and imports were charged. */
void shim_reserve_ctx_gone(uint64_t ctx);

#endif /* SHIM_RESERVE_H */
