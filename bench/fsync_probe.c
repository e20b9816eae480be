/* fsync_probe.c - how long one durable commit costs on this disk: the
 * median (and p10/p90/p99) of N rounds of "write 4 KiB at the end of a file,
 * then fdatasync", in microseconds. Every engine of unico-bench pays at
 * least one of these per commit (or per group of commits).
 * Usage: fsync_probe DIR [N]   (a scratch file is made in DIR and removed) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fsync_probe DIR [N]\n");
    return 2;
  }
  int n = argc > 2 ? atoi(argv[2]) : 1000;
  if (n < 1) n = 1;
  char path[4096];
  snprintf(path, sizeof path, "%s/fsync_probe.%ld", argv[1], (long)getpid());
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    fprintf(stderr, "fsync_probe: %s: %s\n", path, strerror(errno));
    return 1;
  }
  double *us = malloc((size_t)n * sizeof *us);
  char block[4096];
  memset(block, 'x', sizeof block);
  int rc = 0;
  for (int i = 0; i < n && us; i++) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    if (write(fd, block, sizeof block) != (ssize_t)sizeof block || fdatasync(fd)) {
      fprintf(stderr, "fsync_probe: %s\n", strerror(errno));
      rc = 1;
      break;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    us[i] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
  }
  close(fd);
  unlink(path);
  if (!us || rc) return 1;
  qsort(us, (size_t)n, sizeof *us, cmp);
  printf("fdatasync of 4KiB appends: n=%d median=%.0fus p10=%.0fus p90=%.0fus p99=%.0fus\n", n,
         us[n / 2], us[n / 10], us[n * 9 / 10], us[n * 99 / 100]);
  free(us);
  return 0;
}
