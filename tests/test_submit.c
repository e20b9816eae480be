/* test_submit.c - asynchronous writes (unico_submit): every submitted write
 * is answered exactly once with what the blocking call answers (records,
 * conflicts, bad input), in log mode after its sync and so after
 * unico_submit() has returned, and never before: a writer killed with
 * SIGKILL while it submits leaves every write it was told of, and no value
 * two records hold. */
#include "cmocka_main.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"
#include "unico.h"

static const char DDL[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, n int,\n"
    "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold);\n";

/* What one write was answered. */
typedef struct answer {
  atomic_int calls;
  int rc;
  char constraint[UNICO_CONSTRAINT_NAME_MAX + 1];
  char json[128];
} answer;

typedef struct run {
  answer *a;
  atomic_int done;
} run;

typedef struct done_ctx {
  run *r;
  int i;
} done_ctx;

static void on_done(void *ctx, const unico_result *res) {
  done_ctx *d = ctx;
  answer *a = &d->r->a[d->i];
  a->rc = res->rc;
  snprintf(a->constraint, sizeof a->constraint, "%s", res->constraint);
  snprintf(a->json, sizeof a->json, "%s", res->json ? res->json : "");
  atomic_fetch_add(&a->calls, 1);
  atomic_fetch_add(&d->r->done, 1);
}

static void wait_done(run *r, int n) {
  for (int i = 0; i < 20000 && atomic_load(&r->done) < n; i++) tu_sleep_ms(1);
  assert_int_equal(atomic_load(&r->done), n);
}

#define N 400

/* Two threads submit N inserts each; every fourth reuses (in another
 * letter case) the email of the insert before it, so exactly one of each
 * such pair wins. */
typedef struct sub_thread {
  unico *u;
  run *r;
  done_ctx *ctx;
  int base;
  int later; /* how many answers came after unico_submit returned */
} sub_thread;

static void *submitter(void *arg) {
  sub_thread *t = arg;
  for (int i = 0; i < N; i++) {
    int k = t->base + i;
    char rec[160];
    int e = k % 4 == 3 ? k - 1 : k;
    snprintf(rec, sizeof rec, "{\"id\":\"u%d\",\"email\":\"%s%d@x.org\",\"n\":%d}",
             k, k % 4 == 3 ? "USER" : "user", e, k);
    unico_write w = {.kind = UNICO_WRITE_INSERT, .table = "users", .json = rec};
    t->ctx[k].r = t->r;
    t->ctx[k].i = k;
    int p = unico_submit(t->u, &w, on_done, &t->ctx[k]);
    assert_true(p == 0 || p == 1);
    t->later += p;
  }
  return NULL;
}

static void submit_pairs(const char *query, int expect_later) {
  char dir[512], url[600];
  assert_int_equal(tu_scratch("submit", dir, sizeof dir), 0);
  snprintf(url, sizeof url, "lmdb:%s%s", dir, query);
  unico *u = tu_open(url, DDL);
  assert_non_null(u);
  run r = {calloc(2 * N, sizeof(answer)), 0};
  done_ctx *ctx = calloc(2 * N, sizeof *ctx);
  assert_non_null(r.a);
  sub_thread t[2] = {{u, &r, ctx, 0, 0}, {u, &r, ctx, N, 0}};
  pthread_t th[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&th[i], NULL, submitter, &t[i]), 0);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  wait_done(&r, 2 * N);
  if (expect_later) assert_true(t[0].later + t[1].later > 0);
  else assert_int_equal(t[0].later + t[1].later, 0);
  unico_result g = UNICO_RESULT_INIT;
  for (int k = 0; k < 2 * N; k++) {
    answer *a = &r.a[k];
    char pk[32], want[64];
    assert_int_equal(atomic_load(&a->calls), 1);
    snprintf(pk, sizeof pk, "\"u%d\"", k);
    int rc = unico_get(u, "users", pk, &g);
    if (k % 4 == 3) { /* the second of a pair: refused, nothing stored */
      assert_int_equal(a->rc, UNICO_ECONFLICT);
      assert_string_equal(a->constraint, "users_email");
      assert_int_equal(rc, UNICO_ENOTFOUND);
    } else {
      snprintf(want, sizeof want, "{\"pk\":\"u%d\",\"version\":1}", k);
      assert_int_equal(a->rc, UNICO_OK);
      assert_string_equal(a->json, want);
      assert_int_equal(rc, UNICO_OK);
    }
  }
  unico_result_clear(&g);
  unico_close(u);
  free(r.a);
  free(ctx);
  tu_rmtree(dir);
}

/* Log mode: answers wait for their sync, so some come after the call. */
static void test_submit_log_mode(void **state) {
  (void)state;
  submit_pairs("?wal=on", 1);
}

/* Nothing to wait for (no sync): every answer before the call returns. */
static void test_submit_no_sync(void **state) {
  (void)state;
  submit_pairs("?wal=on&sync=off", 0);
}

/* Updates and deletes, bad input and a bad kind: answered as the blocking
 * calls answer them. */
static void test_submit_kinds(void **state) {
  (void)state;
  char dir[512], url[600];
  assert_int_equal(tu_scratch("submit-kinds", dir, sizeof dir), 0);
  snprintf(url, sizeof url, "lmdb:%s?wal=on", dir);
  unico *u = tu_open(url, DDL);
  assert_non_null(u);
  run r = {calloc(8, sizeof(answer)), 0};
  done_ctx ctx[8];
  for (int i = 0; i < 8; i++) ctx[i] = (done_ctx){&r, i};
  unico_write_options o = UNICO_WRITE_OPTIONS_INIT;
  o.if_version = 1;
  unico_write w[] = {
      {.kind = UNICO_WRITE_INSERT, .table = "users",
       .json = "{\"id\":\"a\",\"email\":\"a@x\"}"},
      {.kind = UNICO_WRITE_UPDATE, .table = "users",
       .json = "{\"email\":\"b@x\"}", .pk_json = "\"a\"", .opts = &o},
      {.kind = UNICO_WRITE_UPDATE, .table = "users",
       .json = "{\"email\":\"c@x\"}", .pk_json = "\"a\"", .opts = &o},
      {.kind = UNICO_WRITE_INSERT, .table = "users",
       .json = "{\"id\":\"b\",\"n\":\"x\"}"},
      {.kind = UNICO_WRITE_INSERT, .table = "nope", .json = "{\"id\":\"b\"}"},
      {.kind = UNICO_WRITE_DELETE, .table = "users", .pk_json = "\"a\""},
      {.kind = UNICO_WRITE_DELETE, .table = "users", .pk_json = "\"a\""},
      {.kind = 9, .table = "users", .json = "{}"}};
  /* one at a time: each is decided on what the ones before it left */
  for (int i = 0; i < 8; i++) {
    assert_true(unico_submit(u, &w[i], on_done, &ctx[i]) >= 0);
    wait_done(&r, i + 1);
  }
  static const int want[] = {UNICO_OK,     UNICO_OK,     UNICO_EVERSION,
                             UNICO_EINVAL, UNICO_EINVAL, UNICO_OK,
                             UNICO_ENOTFOUND, UNICO_EINVAL};
  for (int i = 0; i < 8; i++) {
    if (r.a[i].rc != want[i]) fprintf(stderr, "write %d: rc %d\n", i, r.a[i].rc);
    assert_int_equal(r.a[i].rc, want[i]);
    assert_int_equal(atomic_load(&r.a[i].calls), 1);
  }
  assert_string_equal(r.a[1].json, "{\"pk\":\"a\",\"version\":2}");
  assert_int_equal(unico_submit(u, &w[0], NULL, NULL), UNICO_EINVAL);
  assert_int_equal(unico_submit(u, NULL, on_done, &ctx[0]), UNICO_EINVAL);
  unico_close(u);
  free(r.a);
  tu_rmtree(dir);
}

/* ------------------------------------------------------------------ */
/* SIGKILL: a child submits inserts as fast as it can (every third email
 * taken before) and appends the id of each answered insert to a file from
 * the callback; the parent kills it, reopens the store and finds every id
 * it was told of, no refused one, and unico_check clean. */

static int ack_fd;

static void on_ack(void *ctx, const unico_result *res) {
  long k = (long)(intptr_t)ctx;
  char line[48];
  int n = snprintf(line, sizeof line, "%c%ld\n",
                   res->rc == UNICO_OK ? '+' : res->rc == UNICO_ECONFLICT ? '=' : '?', k);
  if (write(ack_fd, line, (size_t)n) != n) _exit(3);
}

static void child_submit(const char *url, long from) {
  unico *u = tu_open(url, DDL);
  if (!u) _exit(2);
  for (long k = from;; k++) {
    char rec[160];
    long e = k % 3 == 2 ? k - 1 : k;
    snprintf(rec, sizeof rec, "{\"id\":\"k%ld\",\"email\":\"e%ld@x.org\"}", k, e);
    unico_write w = {.kind = UNICO_WRITE_INSERT, .table = "users", .json = rec};
    if (unico_submit(u, &w, on_ack, (void *)(intptr_t)k) < 0) _exit(4);
  }
}

static void test_submit_sigkill(void **state) {
  (void)state;
  char dir[512], url[600];
  assert_int_equal(tu_scratch("submit-kill", dir, sizeof dir), 0);
  snprintf(url, sizeof url, "lmdb:%s?wal=on", dir);
  long from = 0, acked_total = 0;
  for (int round = 0; round < 4; round++) {
    char acks[600];
    snprintf(acks, sizeof acks, "%s-acks-%d", dir, round);
    int fd = open(acks, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    assert_true(fd >= 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      ack_fd = fd;
      child_submit(url, from);
    }
    close(fd);
    tu_sleep_ms(300 + 100 * round);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st));
    /* every answer the child gave before it died */
    static char buf[1 << 22];
    size_t len = 0;
    ssize_t m;
    fd = open(acks, O_RDONLY);
    assert_true(fd >= 0);
    while ((m = read(fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)m;
    close(fd);
    unlink(acks);
    buf[len] = 0;
    unico *u = tu_open(url, NULL);
    assert_non_null(u);
    unico_result g = UNICO_RESULT_INIT;
    long acked = 0, hi = from;
    for (char *p = buf; *p;) {
      char *nl = strchr(p, '\n');
      if (!nl) break; /* a line cut by the kill */
      *nl = 0;
      long k = atol(p + 1);
      char pk[32];
      snprintf(pk, sizeof pk, "\"k%ld\"", k);
      int rc = unico_get(u, "users", pk, &g);
      if (p[0] == '+') {
        if (rc) fprintf(stderr, "round %d: k%ld acknowledged, then lost\n", round, k);
        assert_int_equal(rc, UNICO_OK);
        acked++;
      } else {
        assert_int_equal(p[0], '='); /* refused: the email was taken */
        assert_int_equal(rc, UNICO_ENOTFOUND);
      }
      if (k >= hi) hi = k + 1;
      p = nl + 1;
    }
    assert_true(acked > 0);
    acked_total += acked;
    assert_int_equal(unico_check(u, &g), UNICO_OK);
    unico_result_clear(&g);
    unico_close(u);
    from = hi + 1000000; /* (ids the dead child may have committed unacked) */
  }
  fprintf(stderr, "submit-kill: %ld inserts acknowledged over 4 kills\n", acked_total);
  tu_rmtree(dir);
}

int main(int argc, char **argv) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_submit_log_mode),
      cmocka_unit_test(test_submit_no_sync),
      cmocka_unit_test(test_submit_kinds),
      cmocka_unit_test(test_submit_sigkill),
  };
  ucm_init(argc, argv);
  return ucm_done(ucm_run_group("submit", tests, NULL, NULL));
}
