/* SPDX-License-Identifier: Apache-2.0 */
/* Where one of simgpu's entry points leads: they are trampolines (endbr64;
 * jmp rel32 on x86-64, bti c; b imm26 on aarch64), for the tests that check
 * what cuGetProcAddress answers (tests/sim/test_procaddr.c,
 * tests/shim/procaddr_sim_test.c). Header-only.
 *
 *   ct_trampoline_target(fn)  the jump's target; NULL when fn is not such a
 *                             trampoline; fn itself on other architectures
 */
#ifndef GS_TESTS_TRAMPOLINE_H
#define GS_TESTS_TRAMPOLINE_H

#include <stdint.h>
#include <string.h>

static inline void *ct_trampoline_target(void *fn)
{
        const unsigned char *p = fn;
#if defined(__x86_64__)
        static const unsigned char endbr64[4] = { 0xf3, 0x0f, 0x1e, 0xfa };
        if (memcmp(p, endbr64, 4) != 0 || p[4] != 0xe9)
                return NULL;
        int32_t rel;
        memcpy(&rel, p + 5, 4);
        return (void *)(p + 9 + rel);
#elif defined(__aarch64__)
        uint32_t bti, b;
        memcpy(&bti, p, 4);
        memcpy(&b, p + 4, 4);
        if (bti != 0xd503245fu || (b & 0xfc000000u) != 0x14000000u)
                return NULL;
        int32_t imm = (int32_t)(b << 6) >> 6;
        return (void *)(p + 4 + (intptr_t)imm * 4);
#else
        (void)p;
        return fn;
#endif
}

#endif /* GS_TESTS_TRAMPOLINE_H */
