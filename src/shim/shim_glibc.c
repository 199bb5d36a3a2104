/* SPDX-License-Identifier: Apache-2.0 */
/* What shim_glibc.h renames: the C library functions the shim cannot take
 * from a glibc older than the one it is built on. */
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* fstat, under its asm name shim_glibc_fstat (shim_glibc.h): fills *buf for
 * the open descriptor fd and returns 0, or returns -1 with errno set; the
 * fstat of <sys/stat.h>, made by the system call itself (whose struct stat
 * is glibc's on x86_64 and aarch64, the architectures the shim pins). */
#ifdef SHIM_GLIBC_BASE
int fstat(int fd, struct stat *buf)
{
        return (int)syscall(SYS_fstat, fd, buf);
}
#endif
