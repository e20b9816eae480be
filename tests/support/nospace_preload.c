/* nospace_preload.c - a full disk for one directory, by LD_PRELOAD, where a
 * small file system cannot be mounted (tests/store_health.py).
 *
 * While the file $UNICO_NOSPACE_FLAG exists, every write to a file under
 * the directory $UNICO_NOSPACE_DIR (pwrite, write, writev, pwritev, and
 * their 64-bit names) fails with ENOSPC, as on a full file system; once it
 * is removed they work again. Syncs, reads and everything else pass. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

/* Whether a write to fd must fail now. */
static int full(int fd) {
  const char *dir = getenv("UNICO_NOSPACE_DIR");
  const char *flag = getenv("UNICO_NOSPACE_FLAG");
  if (!dir || !flag || fd < 0 || access(flag, F_OK) != 0) return 0;
  char link[64], path[PATH_MAX];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  size_t dl = strlen(dir);
  return strncmp(path, dir, dl) == 0 && (path[dl] == '/' || path[dl] == 0);
}

#define REAL(name, type)                                                 \
  static __typeof__(type) real_;                                         \
  if (!real_) *(void **)&real_ = dlsym(RTLD_NEXT, name);                 \
  if (!real_) {                                                          \
    errno = ENOSYS;                                                      \
    return -1;                                                           \
  }

ssize_t pwrite(int fd, const void *b, size_t n, off_t off) {
  REAL("pwrite", ssize_t (*)(int, const void *, size_t, off_t));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, b, n, off);
}

ssize_t pwrite64(int fd, const void *b, size_t n, off64_t off) {
  REAL("pwrite64", ssize_t (*)(int, const void *, size_t, off64_t));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, b, n, off);
}

ssize_t write(int fd, const void *b, size_t n) {
  REAL("write", ssize_t (*)(int, const void *, size_t));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, b, n);
}

ssize_t writev(int fd, const struct iovec *v, int n) {
  REAL("writev", ssize_t (*)(int, const struct iovec *, int));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, v, n);
}

ssize_t pwritev(int fd, const struct iovec *v, int n, off_t off) {
  REAL("pwritev", ssize_t (*)(int, const struct iovec *, int, off_t));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, v, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *v, int n, off64_t off) {
  REAL("pwritev64", ssize_t (*)(int, const struct iovec *, int, off64_t));
  if (full(fd)) return errno = ENOSPC, -1;
  return real_(fd, v, n, off);
}
