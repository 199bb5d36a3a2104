/* SPDX-License-Identifier: Apache-2.0 */
/* Force-included (-include, src/shim/CMakeLists.txt) at the top of every
 * translation unit of libgpuslice.so, the src/core files it compiles in too.
 *
 * The shim is named in /etc/ld.so.preload of every container of a slice, so
 * it must load under the OLDEST glibc a container may carry: it requires no
 * symbol version newer than GLIBC_2.17 (the manylinux2014 baseline; checked
 * by tests/shim/check_glibc.py). Linked against a newer glibc, a reference
 * binds to the symbol's default (newest) version; the pins below bind it to
 * the oldest version of the same ABI instead. Only the symbols the shim uses
 * whose default version is newer than 2.17 are pinned: a new one shows up
 * in the check, and gets its pin here.
 *
 * Where the pinned symbol lived before glibc 2.34 (dl* in libdl.so.2,
 * pthread_* in libpthread.so.0), the library must list that file in
 * DT_NEEDED (CMakeLists.txt links both without --as-needed): the version
 * reference itself names libc.so.6, which defines every one of these
 * versions, and the dynamic linker then finds the symbol in whichever loaded
 * object defines it with that version. */
#ifndef SHIM_GLIBC_H
#define SHIM_GLIBC_H

#if defined(__x86_64__)
#define SHIM_GLIBC_BASE "GLIBC_2.2.5" /* x86_64's first symbol version */
#define SHIM_GLIBC_2_3_3 "GLIBC_2.3.3"
#define SHIM_GLIBC_2_12 "GLIBC_2.12"
#elif defined(__aarch64__)
/* aarch64's glibc starts at 2.17: every symbol's oldest version is that. */
#define SHIM_GLIBC_BASE "GLIBC_2.17"
#define SHIM_GLIBC_2_3_3 "GLIBC_2.17"
#define SHIM_GLIBC_2_12 "GLIBC_2.17"
#endif

#ifdef SHIM_GLIBC_BASE
#define SHIM_GLIBC_PIN(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)

/* libdl before 2.34 (libc since, default GLIBC_2.34). dlsym, dlvsym, dlopen
 * and dlmopen are not pinned: the shim defines them itself and reaches
 * glibc's through libc's symbol table (shim_dlsym.c, shim_elf.c). */
SHIM_GLIBC_PIN(dlclose, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(dlerror, SHIM_GLIBC_BASE);

/* libpthread before 2.34 (libc since, default GLIBC_2.34). */
SHIM_GLIBC_PIN(pthread_create, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_once, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_attr_setstacksize, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_mutexattr_init, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_mutexattr_destroy, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_mutexattr_setpshared, SHIM_GLIBC_BASE);
SHIM_GLIBC_PIN(pthread_mutexattr_setrobust, SHIM_GLIBC_2_12); /* new in 2.12 */
SHIM_GLIBC_PIN(pthread_mutex_consistent, SHIM_GLIBC_2_12);    /* new in 2.12 */
SHIM_GLIBC_PIN(pthread_condattr_setclock, SHIM_GLIBC_2_3_3);  /* new in 2.3.3 */
/* libpthread before 2.32 (libc since, default GLIBC_2.32). */
SHIM_GLIBC_PIN(pthread_sigmask, SHIM_GLIBC_BASE);

/* fstat is a libc symbol only since 2.33 (GLIBC_2.33); before, <sys/stat.h>
 * made it an inline call of __fxstat, and no older fstat exists to pin.
 * Every fstat of the shim (src/core/slice_conf.c's included) is renamed to
 * shim_glibc_fstat (shim_glibc.c: the fstat system call, whose struct stat
 * is glibc's on x86_64 and aarch64; other architectures keep glibc's fstat
 * and their pins are yet to be written). This declaration comes before
 * <sys/stat.h>'s, and the asm name of the first declaration sticks. */
struct stat;
__attribute__((visibility("hidden"))) extern int
fstat(int fd, struct stat *buf) __asm__("shim_glibc_fstat");
#endif /* SHIM_GLIBC_BASE */

#endif
