/* fuzz_http.c - libFuzzer target for the requests of `unico serve`: each
 * input is the raw bytes a client sends on one connection (one request or
 * several, pipelined), parsed by libmicrohttpd and answered by server/http.c
 * (routing and %-decoding of the path, the query string's v= values, the
 * If-Match, Unico-Hold, Authorization, Content-Length and Transfer-Encoding
 * headers, bodies: JSON records, patches, holds, DDL) on an LMDB store in a
 * temporary directory (sync=off) that lives as long as the process.
 *
 * The daemon has no thread and no listening socket: the input is written
 * into one end of a socketpair handed to MHD_add_connection, MHD_run()
 * turns until the answers stop coming, then the client end is closed and
 * MHD_run() turns until the connection is gone. Whatever answers come back
 * must be HTTP/1.x status lines with a status unico serve can send.
 *
 * The server asks for a token ("Authorization: Bearer fuzz"), caps bodies
 * at 4096 bytes and headers at 8192, so those paths are reached by inputs
 * of a fuzzer's size. The store starts with the schema below.
 *
 * Linked with tests/fuzz/replay.c instead of libFuzzer it replays the
 * corpus: a test in every build (UNICO_FUZZ_VERBOSE=1 prints the answers). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server.h"
#include "testutil.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

static const char *const SCHEMA =
    "CREATE TABLE users (id text PRIMARY KEY, username text, email text, "
    "phone text, age int, CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold, "
    "UNIQUE (username) NORMALIZE casefold, UNIQUE (phone));"
    "CREATE TABLE subs (poll_id text, name text, option text, n bigint, "
    "PRIMARY KEY (poll_id, name), CONSTRAINT per_option LIMIT 2 PER (poll_id, option));"
    "CREATE TABLE things (id int PRIMARY KEY, u uuid, at timestamp, ok boolean, "
    "x double, UNIQUE (u), UNIQUE (at, ok));";

static userv *srv;
static struct MHD_Daemon *daemon_;
static char dir[64];

static void rm_dir(void) {
  if (!dir[0]) return;
  if (tu_rmtree(dir)) fprintf(stderr, "fuzz_http: cannot remove %s\n", dir);
}

static void at_exit(void) {
  if (daemon_) MHD_stop_daemon(daemon_);
  if (srv) {
    unico_close(atomic_load(&srv->store));
    utokens *ts = atomic_load(&srv->tokens);
    if (ts) free(ts->t[0].tok);
    free(ts);
    umetrics_destroy(&srv->m);
    pthread_mutex_destroy(&srv->open_lock);
    pthread_cond_destroy(&srv->open_cond);
    pthread_mutex_destroy(&srv->conns_lock);
    pthread_mutex_destroy(&srv->watch_lock);
    pthread_cond_destroy(&srv->watch_cond);
    free(srv);
  }
  rm_dir();
}

static void die(const char *what, const char *msg) {
  fprintf(stderr, "fuzz_http: %s: %s\n", what, msg);
  exit(1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%.40s/unico-fuzz-http-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) die("mkdtemp", strerror(errno));
  atexit(at_exit);
  srv = calloc(1, sizeof *srv);
  if (!srv) die("calloc", "out of memory");
  umetrics_init(&srv->m);
  pthread_mutex_init(&srv->open_lock, NULL);
  pthread_cond_init(&srv->open_cond, NULL);
  pthread_mutex_init(&srv->conns_lock, NULL);
  pthread_mutex_init(&srv->watch_lock, NULL);
  pthread_cond_init(&srv->watch_cond, NULL);
  srv->log_fd = -1;
  srv->cfg.max_connections = 16;
  srv->cfg.max_body = 4096;
  srv->cfg.max_header = 8192;
  srv->cfg.idle_timeout = 30;
  srv->cfg.request_timeout = 30;
  srv->cfg.drain_timeout = 1;
  utokens *ts = calloc(1, sizeof *ts);
  if (!ts || !(ts->t[0].tok = strdup("fuzz"))) die("strdup", "out of memory");
  ts->t[0].len = 4;
  ts->n = 1;
  atomic_store(&srv->tokens, ts);
  char url[128];
  snprintf(url, sizeof url, "lmdb:%s?sync=off", dir);
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  if (unico_open(&u, url, NULL, &res)) die("unico_open", res.message);
  if (unico_schema_apply(u, SCHEMA, &res)) die("schema", res.message);
  unico_result_clear(&res);
  atomic_store(&srv->store, u);
  /* No thread, no listening socket: MHD_run() below does all the work.
   * The options are those of serve.c, at the sizes above. */
  daemon_ = MHD_start_daemon(
      MHD_USE_NO_LISTEN_SOCKET, 0, userv_accept, srv, userv_on_request, srv,
      MHD_OPTION_NOTIFY_COMPLETED, userv_on_completed, srv,
      MHD_OPTION_NOTIFY_CONNECTION, userv_on_connection, srv,
      MHD_OPTION_UNESCAPE_CALLBACK, userv_unescape_none, srv,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)srv->cfg.max_header,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg.idle_timeout, MHD_OPTION_END);
  if (!daemon_) die("MHD_start_daemon", "failed");
  return 0;
}

/* Each answer's status line: "HTTP/1.x NNN " with a status that a client's
 * bytes may earn on a healthy store (docs/http.md; and those libmicrohttpd
 * sends itself: 100 Continue, 400, 413, 414, 431, 501, 505). Never 500,
 * 503 or 507: the store is local, open, and nearly empty. */
static void check_answers(const char *out, size_t n) {
  static const int ok[] = {100, 200, 201, 204, 400, 401, 403, 404, 405, 409, 412,
                           413, 414, 415, 421, 422, 431, 501, 505};
  for (const char *p = out; (p = memmem(p, n - (size_t)(p - out), "HTTP/1.", 7));
       p += 7) {
    if (p != out && p[-1] != '\n') continue; /* inside a body */
    if ((size_t)(out + n - p) < 13) break;
    int st = atoi(p + 9);
    size_t i;
    for (i = 0; i < sizeof ok / sizeof *ok; i++)
      if (st == ok[i]) break;
    if (i == sizeof ok / sizeof *ok) {
      fprintf(stderr, "fuzz_http: unexpected status line: %.40s\n", p);
      abort();
    }
  }
  /* One client alone on the store: nothing can keep changing under it, so
   * a call that gave up after its retries ("busy": "the record kept
   * changing under 1000 attempts") spun on something that never changes
   * (and took seconds). The message starts the body's JSON: an echoed
   * input cannot forge it (its quotes would be escaped). */
  static const char busy[] = "{\"error\":\"busy\",\"message\":\"the ";
  for (const char *p = out; (p = memmem(p, n - (size_t)(p - out), busy, sizeof busy - 1));
       p++) {
    const char *w = p + sizeof busy - 1, *end = out + n;
    while (w < end && *w >= 'a' && *w <= 'z') w++;
    if (end - w >= 20 && !memcmp(w, " kept changing under", 20)) {
      fprintf(stderr, "fuzz_http: a call retried until it gave up:\n%.*s\n", (int)n, out);
      abort();
    }
  }
}

static void drain(int fd, char *out, size_t cap, size_t *n, int *got, int *eof) {
  for (;;) {
    char buf[4096];
    ssize_t k = read(fd, buf, sizeof buf);
    if (k > 0) {
      size_t c = (size_t)k < cap - *n ? (size_t)k : cap - *n;
      memcpy(out + *n, buf, c);
      *n += c;
      *got = 1;
      continue;
    }
    if (k == 0) *eof = 1;
    return;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  int sv[2];
  if (!daemon_) LLVMFuzzerInitialize(NULL, NULL);
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) abort();
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  struct sockaddr_in peer;
  memset(&peer, 0, sizeof peer);
  peer.sin_family = AF_INET;
  peer.sin_port = htons(40000);
  peer.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (MHD_add_connection(daemon_, sv[1], (const struct sockaddr *)&peer,
                         sizeof peer) != MHD_YES) {
    close(sv[0]);
    return 0;
  }
  static char out[1 << 16];
  size_t nout = 0, sent = 0;
  int eof = 0, idle = 0;
  /* Turn until everything is sent and read, and three turns in a row
   * brought no answer byte: the server waits for the client. */
  for (int turn = 0; turn < 10000 && !eof && idle < 3; turn++) {
    if (sent < size) {
      ssize_t w = write(sv[0], data + sent, size - sent);
      if (w > 0) sent += (size_t)w;
      else if (w < 0 && errno != EAGAIN) break; /* the server closed */
    }
    MHD_run(daemon_);
    int got = 0;
    drain(sv[0], out, sizeof out, &nout, &got, &eof);
    int unread = 0;
    if (ioctl(sv[1], FIONREAD, &unread)) unread = 0;
    idle = got || sent < size || unread > 0 ? 0 : idle + 1;
  }
  /* The client goes: the server sees the end, answers what it can and
   * closes the connection. */
  shutdown(sv[0], SHUT_WR);
  for (int turn = 0; turn < 10000 && !eof; turn++) {
    int got = 0;
    MHD_run(daemon_);
    drain(sv[0], out, sizeof out, &nout, &got, &eof);
  }
  close(sv[0]);
  for (int turn = 0; turn < 1000 && atomic_load(&srv->m.connections) > 0; turn++)
    MHD_run(daemon_);
  if (atomic_load(&srv->m.connections) != 0) {
    fprintf(stderr, "fuzz_http: the connection was never closed\n");
    abort();
  }
  if (atomic_load(&srv->inflight) != 0) {
    fprintf(stderr, "fuzz_http: a request was never completed\n");
    abort();
  }
  if (getenv("UNICO_FUZZ_VERBOSE")) /* to see what a seed earns */
    fprintf(stderr, "---- %zu bytes in, %zu out:\n%.*s\n", size, nout, (int)nout, out);
  check_answers(out, nout);
  /* A schema changed by PUT /v1/_schema goes back to the one above (as
   * far as the store lets it), so that later inputs find the tables. */
  if (memmem(data, size, "_schema", 7)) {
    unico_result res = UNICO_RESULT_INIT;
    (void)unico_schema_apply(atomic_load(&srv->store), SCHEMA, &res);
    unico_result_clear(&res);
  }
  return 0;
}
