/* conns.c - the open connections of `unico serve`: the --max-connections
 * cap (refused at accept, in every threading model) and the watchdog that
 * closes a connection whose request has not fully arrived --request-timeout
 * seconds after its first byte (libmicrohttpd's own timeout is an idle one:
 * a client trickling a header line a second would never meet it). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <linux/tcp.h> /* struct tcp_info with tcpi_bytes_received */
#include <netinet/in.h>

#include "server.h"

#define WATCH_TICK_MS 100

/* Bytes the kernel received on fd since it connected (Linux 4.1 and
 * later); UINT64_MAX when it cannot tell. */
static uint64_t bytes_received(int fd) {
  struct tcp_info ti;
  socklen_t len = sizeof ti;
  memset(&ti, 0, sizeof ti);
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) ||
      len < offsetof(struct tcp_info, tcpi_bytes_received) + sizeof ti.tcpi_bytes_received)
    return UINT64_MAX;
  return ti.tcpi_bytes_received;
}

/* ------------------------------------------------------------------ */
/* the MHD callbacks: accept policy and connection start and end */

enum MHD_Result userv_accept(void *cls, const struct sockaddr *addr, socklen_t len) {
  userv *s = cls;
  (void)addr;
  (void)len;
  /* Counted at MHD_CONNECTION_NOTIFY_STARTED: event loops accepting at the
   * same moment may each pass, so the cap can be passed by a connection
   * or two for as long as they last; it never hangs a client (MHD's own
   * limit, per loop, stops accepting instead, which leaves clients waiting
   * in the kernel's backlog: serve.c sets it out of reach). */
  if (atomic_load_explicit(&s->m.connections, memory_order_relaxed) <
      (int64_t)s->cfg.max_connections)
    return MHD_YES;
  atomic_fetch_add_explicit(&s->m.connections_refused, 1, memory_order_relaxed);
  return MHD_NO;
}

void userv_on_connection(void *cls, struct MHD_Connection *c, void **sock_ctx,
                         enum MHD_ConnectionNotificationCode toe) {
  userv *s = cls;
  if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
    atomic_fetch_add_explicit(&s->m.connections, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->m.connections_total, 1, memory_order_relaxed);
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    uconn *uc = ci ? calloc(1, sizeof *uc) : NULL;
    *sock_ctx = uc; /* none (out of memory): no deadline on this one */
    if (!uc) return;
    uc->fd = ci->connect_fd;
    atomic_init(&uc->start_base, 0); /* the kernel counts from the connect */
    atomic_init(&uc->start_us, userv_now_us());
    atomic_init(&uc->gen, 1);
    atomic_init(&uc->receiving, 1);
    pthread_mutex_lock(&s->conns_lock);
    uc->next = s->conns;
    if (s->conns) s->conns->prev = uc;
    s->conns = uc;
    pthread_mutex_unlock(&s->conns_lock);
  } else {
    atomic_fetch_sub_explicit(&s->m.connections, 1, memory_order_relaxed);
    uconn *uc = *sock_ctx;
    if (!uc) return;
    /* MHD closes the socket after this returns: once off the list, the
     * watchdog no longer touches uc->fd. */
    pthread_mutex_lock(&s->conns_lock);
    if (uc->prev) uc->prev->next = uc->next;
    else s->conns = uc->next;
    if (uc->next) uc->next->prev = uc->prev;
    pthread_mutex_unlock(&s->conns_lock);
    free(uc);
    *sock_ctx = NULL;
  }
}

uconn *userv_conn_of(struct MHD_Connection *c) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return ci ? ci->socket_context : NULL;
}

void userv_conn_received(uconn *uc) {
  if (uc) atomic_store(&uc->receiving, 0);
}

void userv_conn_next(uconn *uc) {
  if (!uc) return;
  atomic_store(&uc->start_base, bytes_received(uc->fd));
  atomic_store(&uc->start_us, userv_now_us());
  atomic_fetch_add(&uc->gen, 1);
  atomic_store(&uc->receiving, 1);
}

/* ------------------------------------------------------------------ */
/* the watchdog */

/* One look at every connection awaiting or receiving a request. The first
 * byte of a request is seen as the kernel's byte count moving past its
 * count when the request began to be awaited; it is dated to the look
 * before (so a request may be cut up to one tick early, never late).
 * Where the count is unknown, the request is dated to the moment it began
 * to be awaited. */
static void watch_once(userv *s, uint64_t now, uint64_t limit_us) {
  pthread_mutex_lock(&s->conns_lock);
  for (uconn *uc = s->conns; uc; uc = uc->next) {
    if (!atomic_load(&uc->receiving)) continue;
    unsigned g = atomic_load(&uc->gen);
    if (g != uc->seen_gen) { /* a new request is awaited */
      uc->seen_gen = g;
      uc->base = atomic_load(&uc->start_base);
      uc->sample_us = atomic_load(&uc->start_us);
      uc->first_us = uc->base == UINT64_MAX ? uc->sample_us : 0;
      uc->cut = 0;
    }
    if (!uc->first_us) {
      if (bytes_received(uc->fd) == uc->base) {
        uc->sample_us = now; /* still nothing of this request */
        continue;
      }
      uc->first_us = uc->sample_us;
    }
    if (!uc->cut && now - uc->first_us > limit_us) {
      /* MHD's next read sees the end of the stream and closes it */
      shutdown(uc->fd, SHUT_RDWR);
      uc->cut = 1;
      atomic_fetch_add_explicit(&s->m.request_timeouts, 1, memory_order_relaxed);
    }
  }
  pthread_mutex_unlock(&s->conns_lock);
}

static void *watch_main(void *arg) {
  userv *s = arg;
  uint64_t limit_us = (uint64_t)s->cfg.request_timeout * 1000000u;
  pthread_mutex_lock(&s->watch_lock);
  while (!s->watch_stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WATCH_TICK_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&s->watch_cond, &s->watch_lock, &ts);
    if (s->watch_stop) break;
    pthread_mutex_unlock(&s->watch_lock);
    watch_once(s, userv_now_us(), limit_us);
    pthread_mutex_lock(&s->watch_lock);
  }
  pthread_mutex_unlock(&s->watch_lock);
  return NULL;
}

int userv_watch_start(userv *s) {
  s->watch_stop = 0;
  return pthread_create(&s->watch, NULL, watch_main, s);
}

void userv_watch_stop(userv *s) {
  pthread_mutex_lock(&s->watch_lock);
  s->watch_stop = 1;
  pthread_cond_signal(&s->watch_cond);
  pthread_mutex_unlock(&s->watch_lock);
  pthread_join(s->watch, NULL);
}
