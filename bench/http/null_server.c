/* null_server.c - the ceiling of HTTP on this machine: libmicrohttpd, set
 * up like `unico serve` (epoll with a pool of threads, or a thread per
 * connection), answering every request with 201 and a fixed small JSON
 * body after reading it whole, and doing nothing else. bench/http/load.sh
 * runs wrk against it beside `unico serve` ("null" rows): what is left
 * between the two is unico's work.
 *
 *   unico-null-server PORT [THREADS]   PORT 0: any free one; THREADS 0: a
 *                                      thread per connection (default 2)
 * Prints "listening PORT" once ready; stops on SIGTERM or SIGINT. */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;
static void on_signal(int sig) {
  (void)sig;
  stop = 1;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c,
                              const char *url, const char *method,
                              const char *version, const char *data,
                              size_t *size, void **ctx) {
  static const char body[] = "{\"id\":\"u0\",\"version\":1}";
  static int seen;
  (void)cls, (void)url, (void)method, (void)version, (void)data;
  if (*ctx == NULL) { /* headers: wait for the body */
    *ctx = &seen;
    return MHD_YES;
  }
  if (*size) { /* a piece of the body: read, dropped */
    *size = 0;
    return MHD_YES;
  }
  struct MHD_Response *r = MHD_create_response_from_buffer(
      sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, "Content-Type", "application/json");
  MHD_add_response_header(r, "ETag", "\"1\"");
  enum MHD_Result ret = MHD_queue_response(c, 201, r);
  MHD_destroy_response(r);
  return ret;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: unico-null-server PORT [THREADS]\n");
    return 2;
  }
  int port = atoi(argv[1]);
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC;
  flags |= threads == 0 ? MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL
                        : MHD_USE_EPOLL;
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, (uint16_t)port, NULL, NULL, answer, NULL,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
      threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
      (unsigned)threads, MHD_OPTION_END);
  if (!d) {
    fprintf(stderr, "unico-null-server: cannot listen on port %d\n", port);
    return 1;
  }
  signal(SIGTERM, on_signal);
  signal(SIGINT, on_signal);
  const union MHD_DaemonInfo *info =
      MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  printf("listening %u\n", info ? (unsigned)info->port : (unsigned)port);
  fflush(stdout);
  while (!stop) pause();
  MHD_stop_daemon(d);
  return 0;
}
