/* test_store_log.c - the LMDB store's log mode (wal=on): a random history
 * checked against a model through many checkpoints, scans merging the
 * tables with LMDB, recovery after SIGKILL (every acknowledged write is
 * there), a torn last record, the lock that gives one log-mode process
 * the store alone, and a full store (the log counts against max_map_size,
 * deletes still work, an older log past the limit can be replayed). */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include "cmocka_main.h"
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/lmdb/lmdb_store.h"
#include "store/store.h"
#include "store_ops.h"
#include "testutil.h"
#include "unico.h"

static char dir[256];

static int setup(void **state) {
  (void)state;
  return tu_scratch("test_store_log", dir, sizeof dir);
}

static int teardown(void **state) {
  (void)state;
  return tu_rmtree(dir);
}

static int try_open(ustore **s, const char *sub, const char *query,
                    ustore_err *e) {
  char url[512];
  snprintf(url, sizeof url, "lmdb:%s/%s%s%s", dir, sub, query ? "?" : "",
           query ? query : "");
  *s = NULL;
  return ustore_open(s, url, e);
}

static ustore *open_store(const char *sub, const char *query) {
  ustore *s;
  ustore_err e = {{0}};
  int rc = try_open(&s, sub, query, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", sub, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  return s;
}

/* ---- a random history against a model ---- */

#define NKEYS 300

typedef struct model {
  int exists[NKEYS];
  uint64_t ver[NKEYS];
  char val[NKEYS][48];
} model;

static uint64_t rng = 88172645463325252ULL;
static uint64_t rnd(void) { return tu_xorshift64(&rng); }

static void keyname(int i, char *out) { snprintf(out, 16, "k%03d", i); }

typedef struct scan_acc {
  const model *m;
  int next; /* the model key expected next */
  int seen;
  int bad;
} scan_acc;

static int next_live(const model *m, int from) {
  while (from < NKEYS && !m->exists[from]) from++;
  return from;
}

static int scan_cb(void *ctx, const uint8_t *k, size_t kl, const uint8_t *v,
                   size_t vl, uint64_t ver) {
  scan_acc *a = ctx;
  char want[16];
  a->next = next_live(a->m, a->next);
  if (a->next >= NKEYS) {
    fprintf(stderr, "scan: extra key %.*s\n", (int)kl, (const char *)k);
    a->bad++;
    return 0;
  }
  keyname(a->next, want);
  if (kl != strlen(want) || memcmp(k, want, kl) != 0 ||
      ver != a->m->ver[a->next] || vl != strlen(a->m->val[a->next]) ||
      memcmp(v, a->m->val[a->next], vl) != 0) {
    fprintf(stderr, "scan: got %.*s v%llu, want %s v%llu\n", (int)kl,
            (const char *)k, (unsigned long long)ver, want,
            (unsigned long long)a->m->ver[a->next]);
    a->bad++;
  }
  a->next++;
  a->seen++;
  return 0;
}

/* Every key's value and version, a full scan, and a scan that starts after
 * a key, all agree with the model. */
static void verify(ustore *s, const model *m) {
  ustore_err e = {{0}};
  ubuf v = UBUF_INIT;
  for (int i = 0; i < NKEYS; i++) {
    char k[16];
    uint64_t ver = 0;
    keyname(i, k);
    int rc = s->vt->get(s, k, strlen(k), &v, &ver, &e);
    assert_int_equal(rc, m->exists[i] ? UNICO_OK : UNICO_ENOTFOUND);
    if (m->exists[i]) {
      assert_int_equal(ver, m->ver[i]);
      assert_int_equal(v.len, strlen(m->val[i]));
      assert_memory_equal(v.p, m->val[i], v.len);
    }
  }
  ubuf_free(&v);
  scan_acc a = {m, 0, 0, 0};
  assert_int_equal(s->vt->scan(s, "k", 1, NULL, 0, scan_cb, &a, &e), 0);
  assert_int_equal(a.bad, 0);
  assert_int_equal(next_live(m, a.next), NKEYS);
  int from = (int)(rnd() % NKEYS);
  char after[16];
  keyname(from, after);
  scan_acc b = {m, from + 1, 0, 0};
  assert_int_equal(s->vt->scan(s, "k", 1, after, strlen(after), scan_cb, &b, &e), 0);
  assert_int_equal(b.bad, 0);
  assert_int_equal(next_live(m, b.next), NKEYS);
}

static void random_history(ustore *s, model *m, int steps) {
  for (int step = 0; step < steps; step++) {
    int n = 1 + (int)(rnd() % 3), idx[3];
    char keys[3][16], vals[3][48];
    ustore_op ops[3];
    for (int j = 0; j < n; j++) { /* distinct keys */
      do idx[j] = (int)(rnd() % NKEYS);
      while ((j > 0 && idx[j] == idx[0]) || (j > 1 && idx[j] == idx[1]));
      keyname(idx[j], keys[j]);
      snprintf(vals[j], sizeof vals[j], "v%d-%d", step, j);
      int kind = (int)(rnd() % 6);
      int i = idx[j];
      switch (kind) {
      case 0: ops[j] = op(keys[j], USTORE_ANY, 0, USTORE_PUT, vals[j]); break;
      case 1: ops[j] = op(keys[j], USTORE_ABSENT, 0, USTORE_PUT, vals[j]); break;
      case 2: /* right version most of the time */
        ops[j] = op(keys[j], USTORE_VERSION, m->ver[i] + (rnd() % 4 == 0),
                    USTORE_PUT, vals[j]);
        break;
      case 3: ops[j] = op(keys[j], USTORE_ANY, 0, USTORE_DEL, NULL); break;
      case 4: ops[j] = op(keys[j], USTORE_PRESENT, 0, USTORE_DEL, NULL); break;
      default: ops[j] = op(keys[j], USTORE_PRESENT, 0, USTORE_CHECK, NULL); break;
      }
    }
    /* the model's verdict */
    int ok = 1, fail[3] = {0, 0, 0};
    for (int j = 0; j < n; j++) {
      int i = idx[j], f = 0;
      switch (ops[j].expect) {
      case USTORE_ABSENT: f = m->exists[i]; break;
      case USTORE_VERSION: f = !m->exists[i] || m->ver[i] != ops[j].expect_version; break;
      case USTORE_PRESENT: f = !m->exists[i]; break;
      default: break;
      }
      fail[j] = f;
      if (f) ok = 0;
    }
    ustore_err e = {{0}};
    int rc = s->vt->txn(s, ops, (size_t)n, &e);
    if (rc != (ok ? UNICO_OK : USTORE_NOT_APPLIED))
      fprintf(stderr, "step %d: rc %d (%s), model says %d\n", step, rc, e.msg, ok);
    assert_int_equal(rc, ok ? UNICO_OK : USTORE_NOT_APPLIED);
    for (int j = 0; j < n; j++) {
      int i = idx[j];
      if (!ok) {
        assert_int_equal(ops[j].failed, fail[j]);
        if (fail[j] && m->exists[i]) {
          assert_int_equal(ops[j].cur_version, m->ver[i]);
          assert_int_equal(ops[j].cur.len, strlen(m->val[i]));
        }
      } else if (ops[j].action == USTORE_PUT) {
        m->ver[i] = m->exists[i] ? m->ver[i] + 1 : 1;
        m->exists[i] = 1;
        memcpy(m->val[i], vals[j], sizeof m->val[i]);
      } else if (ops[j].action == USTORE_DEL) {
        m->exists[i] = 0;
        m->ver[i] = 0;
      }
      ubuf_free(&ops[j].cur);
    }
    if (step % 997 == 0) verify(s, m);
  }
}

static void test_log_model(void **state) {
  (void)state;
  static model m;
  memset(&m, 0, sizeof m);
  /* a tiny wal_size: the active table freezes and is checkpointed often */
  ustore *s = open_store("model", "wal=on&wal_size=8KiB&sync=off");
  random_history(s, &m, 12000);
  verify(s, &m);
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(s, &st);
  fprintf(stderr, "log mode: %llu requests, %llu batches, %llu checkpoints\n",
          (unsigned long long)st.requests, (unsigned long long)st.batches,
          (unsigned long long)st.checkpoints);
  assert_true(st.checkpoints >= 5);
  s->vt->close(s); /* checkpoints the rest */
  /* plain mode reads what log mode wrote, and log mode again after it */
  s = open_store("model", NULL);
  verify(s, &m);
  random_history(s, &m, 2000);
  s->vt->close(s);
  s = open_store("model", "wal=on");
  verify(s, &m);
  s->vt->close(s);
}

/* ---- SIGKILL: every acknowledged write survives ---- */

#define KILL_THREADS 4

static int ack_fd, kill_round, kill_deferred;
static ustore *kill_store;

static void kill_ack(int t, int i) {
  int32_t msg[2] = {t, i}; /* 8 bytes: one atomic pipe write */
  if (write(ack_fd, msg, sizeof msg) != (ssize_t)sizeof msg) _exit(4);
}

/* Deferred durability: the write returns at once, and is acknowledged
 * only from the watch, as an event-loop server would answer. */
typedef struct kill_watch {
  ustore_watch w; /* first */
  int t, i;
} kill_watch;

static void kill_durable(ustore_watch *w, int rc, const char *msg) {
  kill_watch *k = (kill_watch *)w;
  (void)msg;
  if (rc != UNICO_OK) _exit(5);
  kill_ack(k->t, k->i);
  free(k);
}

static void *kill_writer(void *p) {
  int t = (int)(intptr_t)p;
  for (int i = 0;; i++) {
    char k[32], v[32];
    snprintf(k, sizeof k, "c/%d/%d/%07d", kill_round, t, i);
    snprintf(v, sizeof v, "val-%d-%d", t, i);
    ustore_op o[2] = {op(k, USTORE_ABSENT, 0, USTORE_PUT, v),
                      op("counter", USTORE_ANY, 0, USTORE_PUT, v)};
    ustore_err e = {{0}};
    if (kill_deferred) ustore_defer_begin();
    if (kill_store->vt->txn(kill_store, o, 2, &e) != UNICO_OK) _exit(3);
    if (!kill_deferred) {
      kill_ack(t, i);
      continue;
    }
    uint64_t seq = ustore_defer_end();
    if (seq == 0) _exit(6); /* log mode with sync on defers every write */
    kill_watch *kw = calloc(1, sizeof *kw);
    if (!kw) _exit(7);
    kw->w.seq = seq;
    kw->w.cb = kill_durable;
    kw->t = t;
    kw->i = i;
    if (ustore_watch_durable(kill_store, &kw->w) == 0) kill_durable(&kw->w, UNICO_OK, NULL);
    if (i % 64 == 63) tu_sleep_us(1000); /* let the syncer keep up */
  }
  return NULL;
}

static void test_log_sigkill(void **state) {
  (void)state;
  /* rounds 3 and 4: deferred durability (4 with checkpoints running) */
  for (int round = 0; round < 5; round++) {
    int pfd[2];
    assert_int_equal(pipe(pfd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(pfd[0]);
      ack_fd = pfd[1];
      kill_round = round;
      kill_deferred = round >= 3;
      ustore_err e = {{0}};
      char q[64];
      snprintf(q, sizeof q, "wal=on&wal_size=%dKiB", round == 1 || round == 4 ? 32 : 4096);
      if (try_open(&kill_store, "kill", q, &e)) _exit(2);
      pthread_t th[KILL_THREADS];
      for (int t = 0; t < KILL_THREADS; t++)
        pthread_create(&th[t], NULL, kill_writer, (void *)(intptr_t)t);
      for (;;) pause();
    }
    close(pfd[1]);
    int *acked[KILL_THREADS];
    int nack[KILL_THREADS] = {0};
    for (int t = 0; t < KILL_THREADS; t++) acked[t] = calloc(1 << 20, sizeof(int));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int killed = 0;
    for (;;) {
      int32_t msg[2];
      ssize_t r = read(pfd[0], msg, sizeof msg);
      if (r <= 0) break;
      assert_int_equal(r, sizeof msg);
      assert_true(msg[0] >= 0 && msg[0] < KILL_THREADS && msg[1] < (1 << 20));
      acked[msg[0]][nack[msg[0]]++] = msg[1];
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if (!killed && (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 > 400 + 300 * (round % 3)) {
        kill(pid, SIGKILL); /* acks already in the pipe are still read */
        killed = 1;
      }
    }
    int st;
    waitpid(pid, &st, 0);
    assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    close(pfd[0]);
    /* Reopen (plain mode: recovery replays the log) and look for each. */
    ustore *s = open_store("kill", NULL);
    ustore_err e = {{0}};
    ubuf v = UBUF_INIT;
    int total = 0;
    for (int t = 0; t < KILL_THREADS; t++) {
      for (int j = 0; j < nack[t]; j++) {
        char k[32], want[32];
        uint64_t ver = 0;
        snprintf(k, sizeof k, "c/%d/%d/%07d", round, t, acked[t][j]);
        snprintf(want, sizeof want, "val-%d-%d", t, acked[t][j]);
        int rc = s->vt->get(s, k, strlen(k), &v, &ver, &e);
        if (rc) fprintf(stderr, "round %d: acknowledged %s is missing\n", round, k);
        assert_int_equal(rc, UNICO_OK);
        assert_int_equal(ver, 1);
        assert_int_equal(v.len, strlen(want));
        assert_memory_equal(v.p, want, v.len);
      }
      total += nack[t];
      free(acked[t]);
    }
    ubuf_free(&v);
    fprintf(stderr, "round %d%s: %d acknowledged writes, all present\n", round,
            round >= 3 ? " (deferred)" : "", total);
    assert_true(total > 0);
    s->vt->close(s);
  }
}

/* ---- a torn last record ---- */

static void find_log(const char *sub, char *out, size_t n) {
  assert_true(n >= 1024);
  char d[512];
  snprintf(d, sizeof d, "%s/%s", dir, sub);
  DIR *dd = opendir(d);
  assert_non_null(dd);
  struct dirent *de;
  out[0] = 0;
  while ((de = readdir(dd)))
    if (!strncmp(de->d_name, "log-", 4))
      snprintf(out, n, "%.500s/%.255s", d, de->d_name);
  closedir(dd);
  assert_true(out[0] != 0);
}

static void test_log_torn_tail(void **state) {
  (void)state;
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) { /* ten writes, then die without closing */
    ustore *s;
    ustore_err e = {{0}};
    if (try_open(&s, "torn", "wal=on", &e)) _exit(2);
    for (int i = 0; i < 10; i++) {
      char k[16];
      snprintf(k, sizeof k, "t%02d", i);
      ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, "value");
      if (s->vt->cas(s, &o, &e)) _exit(3);
    }
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* Damage the last record: find where the zeros begin, flip a byte just
   * before. */
  char path[1024];
  find_log("torn", path, sizeof path);
  int fd = open(path, O_RDWR);
  assert_true(fd >= 0);
  static uint8_t buf[1 << 16];
  ssize_t n = pread(fd, buf, sizeof buf, 0);
  assert_true(n > 100);
  ssize_t end = n;
  while (end > 0 && buf[end - 1] == 0) end--;
  assert_true(end > 20);
  buf[end - 1] ^= 0xff;
  assert_int_equal(pwrite(fd, buf + end - 1, 1, end - 1), 1);
  close(fd);
  ustore *s = open_store("torn", NULL);
  ustore_err e = {{0}};
  for (int i = 0; i < 10; i++) {
    char k[16];
    snprintf(k, sizeof k, "t%02d", i);
    assert_int_equal(s->vt->get(s, k, strlen(k), NULL, NULL, &e),
                     i < 9 ? UNICO_OK : UNICO_ENOTFOUND);
  }
  s->vt->close(s);
  /* the log files are gone after recovery */
  char d[512];
  snprintf(d, sizeof d, "%s/torn", dir);
  DIR *dd = opendir(d);
  struct dirent *de;
  while ((de = readdir(dd))) assert_true(strncmp(de->d_name, "log-", 4) != 0);
  closedir(dd);
}

/* ---- one log-mode process owns the store ---- */

/* The names of the log files in dir/sub, joined, into out. */
static void list_logs_of(const char *sub, char *out, size_t n) {
  char d[512];
  snprintf(d, sizeof d, "%s/%s", dir, sub);
  DIR *dd = opendir(d);
  assert_non_null(dd);
  struct dirent *de;
  *out = 0;
  while ((de = readdir(dd)))
    if (!strncmp(de->d_name, "log-", 4) && strlen(out) + strlen(de->d_name) + 2 < n) {
      strcat(out, de->d_name);
      strcat(out, " ");
    }
  closedir(dd);
}

static void holder(const char *query, int ready_fd, int go_fd) {
  ustore *s;
  ustore_err e = {{0}};
  if (try_open(&s, "lock", query, &e)) _exit(2);
  char c = 1;
  if (write(ready_fd, &c, 1) != 1) _exit(3);
  if (read(go_fd, &c, 1) < 0) _exit(4); /* until the parent is done */
  s->vt->close(s);
  _exit(0);
}

/* The holder of held_by keeps the store; we_try must be refused. With
 * unlink_lock, unico.lock is removed first (as a cleaner of old files in
 * /tmp does): a new file of that name must not hand the store to a second
 * owner, whose recovery would delete the holder's live log. */
static void check_refused_as(const char *held_by, const char *we_try,
                             int unlink_lock) {
  int ready[2], go[2];
  assert_int_equal(pipe(ready), 0);
  assert_int_equal(pipe(go), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(ready[0]);
    close(go[1]);
    holder(held_by, ready[1], go[0]);
  }
  close(ready[1]);
  close(go[0]);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  char lock[512], logs_before[512] = "", logs_after[512] = "";
  snprintf(lock, sizeof lock, "%s/lock/unico.lock", dir);
  if (unlink_lock) {
    assert_int_equal(unlink(lock), 0);
    list_logs_of("lock", logs_before, sizeof logs_before);
  }
  ustore *s;
  ustore_err e = {{0}};
  int rc = try_open(&s, "lock", we_try, &e);
  if (rc == UNICO_OK) s->vt->close(s);
  assert_int_equal(rc, UNICO_EBUSY);
  assert_null(s);
  fprintf(stderr, "refused as expected: %s\n", e.msg);
  assert_non_null(strstr(e.msg, "wal=on"));
  if (unlink_lock) { /* the holder's log is as it was */
    list_logs_of("lock", logs_after, sizeof logs_after);
    assert_string_equal(logs_before, logs_after);
  }
  close(go[1]);
  int st;
  waitpid(pid, &st, 0);
  assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  close(ready[0]);
}

static void check_refused(const char *held_by, const char *we_try) {
  check_refused_as(held_by, we_try, 0);
}

static void test_log_lock(void **state) {
  (void)state;
  check_refused(NULL, "wal=on");     /* plain process holds it */
  check_refused("wal=on", NULL);     /* log-mode process owns it */
  check_refused("wal=on", "wal=on");
  /* and once they are gone, anyone may open it */
  ustore *s = open_store("lock", "wal=on");
  s->vt->close(s);
}

/* Issue 32: unico.lock unlinked under its holder. */
static void test_log_lock_unlinked(void **state) {
  (void)state;
  check_refused_as("wal=on", NULL, 1);
  check_refused_as("wal=on", "wal=on", 1);
  check_refused_as(NULL, "wal=on", 1);
  ustore *s = open_store("lock", "wal=on");
  s->vt->close(s);
}

/* ---- the store's files removed under an open store (issue 32) ---- */

static int put1(ustore *s, const char *k, const char *v, ustore_err *e) {
  ustore_op o = op(k, USTORE_ANY, 0, USTORE_PUT, v);
  return s->vt->cas(s, &o, e);
}

static void test_files_removed(void **state) {
  (void)state;
  static const char *const queries[] = {"wal=on", NULL};
  for (int q = 0; q < 2; q++) {
    char d[512];
    const char *reason;
    ustore_err e = {{0}};
    snprintf(d, sizeof d, "%s/gone%d", dir, q);
    ustore *s = open_store(q ? "gone1" : "gone0", queries[q]);
    assert_int_equal(put1(s, "k1", "v1", &e), UNICO_OK);
    assert_int_equal(ustore_health(s, &reason, &e), UNICO_OK);
    assert_null(reason);
    assert_int_equal(tu_rmtree(d), 0);
    assert_int_equal(ustore_health(s, &reason, &e), UNICO_EUNAVAILABLE);
    assert_string_equal(reason, USTORE_HEALTH_REMOVED);
    assert_non_null(strstr(e.msg, "was removed"));
    /* writes are refused (health noticed it; so does the leader within a
     * second on its own) */
    assert_int_equal(put1(s, "k2", "v2", &e), UNICO_EUNAVAILABLE);
    fprintf(stderr, "refused as expected: %s\n", e.msg);
    ubuf v = UBUF_INIT; /* reads are answered */
    uint64_t ver;
    assert_int_equal(s->vt->get(s, "k1", 2, &v, &ver, &e), UNICO_OK);
    ubuf_free(&v);
    assert_int_equal(ustore_close_checked(s, &e), UNICO_EUNAVAILABLE);
  }
  /* without a health check: the leader notices within a second */
  {
    char d[512];
    ustore_err e = {{0}};
    snprintf(d, sizeof d, "%s/gone2", dir);
    ustore *s = open_store("gone2", NULL);
    assert_int_equal(put1(s, "k1", "v1", &e), UNICO_OK);
    assert_int_equal(tu_rmtree(d), 0);
    tu_sleep_ms(1100);
    assert_int_equal(put1(s, "k2", "v2", &e), UNICO_EUNAVAILABLE);
    s->vt->close(s);
  }
  /* the data file alone */
  {
    char f[512];
    const char *reason;
    ustore_err e = {{0}};
    snprintf(f, sizeof f, "%s/gone3/data.mdb", dir);
    ustore *s = open_store("gone3", NULL);
    assert_int_equal(unlink(f), 0);
    assert_int_equal(ustore_health(s, &reason, &e), UNICO_EUNAVAILABLE);
    assert_string_equal(reason, USTORE_HEALTH_REMOVED);
    assert_non_null(strstr(e.msg, "data.mdb"));
    s->vt->close(s);
  }
}

/* Log mode, the log file unlinked: writes are refused, but a clean close
 * checkpoints what the log held; nothing is lost. */
static void test_log_file_removed(void **state) {
  (void)state;
  const char *reason;
  ustore_err e = {{0}};
  ustore *s = open_store("logrm", "wal=on");
  assert_int_equal(put1(s, "k1", "v1", &e), UNICO_OK);
  char logs[512], path[1024];
  list_logs_of("logrm", logs, sizeof logs);
  *strchr(logs, ' ') = 0;
  snprintf(path, sizeof path, "%s/logrm/%s", dir, logs);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(ustore_health(s, &reason, &e), UNICO_EUNAVAILABLE);
  assert_string_equal(reason, USTORE_HEALTH_REMOVED);
  assert_non_null(strstr(e.msg, "log file"));
  assert_int_equal(put1(s, "k2", "v2", &e), UNICO_EUNAVAILABLE);
  assert_int_equal(ustore_close_checked(s, &e), UNICO_OK);
  s = open_store("logrm", "wal=on");
  ubuf v = UBUF_INIT;
  uint64_t ver;
  assert_int_equal(s->vt->get(s, "k1", 2, &v, &ver, &e), UNICO_OK);
  assert_int_equal(s->vt->get(s, "k2", 2, &v, &ver, &e), UNICO_ENOTFOUND);
  ubuf_free(&v);
  s->vt->close(s);
}

/* A store opened by a relative path stays healthy when the process
 * changes its working directory. */
static void test_files_chdir(void **state) {
  (void)state;
  char cwd[4096], sub[512];
  const char *reason;
  ustore_err e = {{0}};
  assert_non_null(getcwd(cwd, sizeof cwd));
  snprintf(sub, sizeof sub, "%s/rel", dir);
  assert_int_equal(mkdir(sub, 0777), 0);
  assert_int_equal(chdir(sub), 0);
  ustore *s;
  assert_int_equal(ustore_open(&s, "lmdb:store?wal=on", &e), UNICO_OK);
  assert_int_equal(chdir("/"), 0);
  assert_int_equal(ustore_health(s, &reason, &e), UNICO_OK);
  tu_sleep_ms(1100);
  assert_int_equal(put1(s, "k1", "v1", &e), UNICO_OK);
  assert_int_equal(ustore_close_checked(s, &e), UNICO_OK);
  assert_int_equal(chdir(cwd), 0);
}

static void test_log_rewrites(void **state) {
  (void)state;
  /* The same few keys written over and over: the table stays tiny, the log
   * grows; the log's size alone must bring checkpoints (replay stays
   * bounded), and the last values win. */
  ustore *s = open_store("rewrite", "wal=on&wal_size=16KiB&sync=off");
  char v[64];
  for (int i = 0; i < 20000; i++) {
    char k[8];
    snprintf(k, sizeof k, "h%d", i % 4);
    snprintf(v, sizeof v, "value-%06d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", i);
    ustore_op o = op(k, USTORE_ANY, 0, USTORE_PUT, v);
    ustore_err e = {{0}};
    assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  }
  ustore_lmdb_stats st;
  ustore_lmdb_stats_get(s, &st);
  fprintf(stderr, "rewrites: %llu checkpoints\n", (unsigned long long)st.checkpoints);
  assert_true(st.checkpoints >= 10);
  s->vt->close(s);
  s = open_store("rewrite", NULL);
  ubuf got = UBUF_INIT;
  uint64_t ver = 0;
  ustore_err e = {{0}};
  assert_int_equal(s->vt->get(s, "h3", 2, &got, &ver, &e), UNICO_OK);
  assert_int_equal(ver, 5000);
  snprintf(v, sizeof v, "value-%06d-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 19999);
  assert_int_equal(got.len, strlen(v));
  assert_memory_equal(got.p, v, got.len);
  ubuf_free(&got);
  s->vt->close(s);
}

/* ---- a full store ---- */

/* Puts of 1.5 KB values under prefix until the store is full; returns how
 * many were acknowledged, and the refusal in *e. The refused one left
 * nothing behind. */
static int fill_up(ustore *s, const char *prefix, int max, ustore_err *e) {
  char big[1500], k[32];
  memset(big, 'f', sizeof big - 1);
  big[sizeof big - 1] = 0;
  int i, rc = UNICO_OK;
  for (i = 0; i < max; i++) {
    snprintf(k, sizeof k, "%s%06d", prefix, i);
    ustore_op o = op(k, USTORE_ABSENT, 0, USTORE_PUT, big);
    rc = s->vt->cas(s, &o, e);
    if (rc) break;
  }
  if (i < max) {
    assert_int_equal(rc, UNICO_EFULL);
    assert_int_equal(s->vt->get(s, k, strlen(k), NULL, NULL, e), UNICO_ENOTFOUND);
  }
  return i;
}

static void check_present(ustore *s, const char *prefix, int from, int to) {
  for (int i = from; i < to; i++) {
    char k[32];
    ustore_err e = {{0}};
    snprintf(k, sizeof k, "%s%06d", prefix, i);
    int rc = s->vt->get(s, k, strlen(k), NULL, NULL, &e);
    if (rc) fprintf(stderr, "acknowledged %s: %d %s\n", k, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
  }
}

static void test_log_full(void **state) {
  (void)state;
  /* The log counts against max_map_size: writes are refused before they
   * are acknowledged, what was acknowledged fits (the store reopens with
   * the same options), and deletes work on the full store. */
  const char *q = "wal=on&map_size=1MiB&max_map_size=1MiB&sync=off";
  ustore *s = open_store("full", q);
  ustore_err e = {{0}};
  int n = fill_up(s, "f", 5000, &e);
  fprintf(stderr, "log mode: full after %d puts of 1.5 KB\n", n);
  assert_true(n > 100 && n < 5000);
  assert_non_null(strstr(e.msg, "max_map_size=2MiB"));
  for (int i = 0; i < 20; i++) {
    char k[32];
    snprintf(k, sizeof k, "f%06d", i);
    ustore_op o = op(k, USTORE_VERSION, 1, USTORE_DEL, NULL);
    int rc = s->vt->cas(s, &o, &e);
    if (rc) fprintf(stderr, "delete %d: %d %s\n", i, rc, e.msg);
    assert_int_equal(rc, UNICO_OK);
  }
  ustore_op o = op("small", USTORE_ABSENT, 0, USTORE_PUT, "fits again");
  assert_int_equal(s->vt->cas(s, &o, &e), UNICO_OK);
  s->vt->close(s);
  ustore *r;
  int rc = try_open(&r, "full", q, &e);
  if (rc) fprintf(stderr, "reopen: %d %s\n", rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  check_present(r, "f", 20, n);
  assert_int_equal(r->vt->get(r, "f000000", 7, NULL, NULL, &e), UNICO_ENOTFOUND);
  r->vt->close(r);
}

static void test_log_over_limit(void **state) {
  (void)state;
  /* A log that an older version let grow past max_map_size: the open
   * refuses with store_full and names a URL that replays it; that works. */
  int pfd[2];
  assert_int_equal(pipe(pfd), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    ustore *s;
    ustore_err e = {{0}};
    if (try_open(&s, "over", "wal=on&sync=off", &e)) _exit(2);
    int n = fill_up(s, "f", 2000, &e); /* 3 MB, no checkpoint */
    if (write(pfd[1], &n, sizeof n) != sizeof n) _exit(3);
    for (;;) pause();
  }
  close(pfd[1]);
  int n = 0;
  assert_int_equal(read(pfd[0], &n, sizeof n), sizeof n);
  close(pfd[0]);
  kill(pid, SIGKILL);
  int st;
  waitpid(pid, &st, 0);
  assert_int_equal(n, 2000);
  ustore *s;
  ustore_err e = {{0}};
  assert_int_equal(try_open(&s, "over", "max_map_size=1MiB", &e), UNICO_EFULL);
  fprintf(stderr, "over the limit: %s\n", e.msg);
  const char *m = "open the store as ", *p = strstr(e.msg, m);
  assert_non_null(p);
  char url[256];
  snprintf(url, sizeof url, "%s", p + strlen(m));
  *strchr(url, ' ') = 0; /* " to replay it" */
  int rc = ustore_open(&s, url, &e);
  if (rc) fprintf(stderr, "open %s: %d %s\n", url, rc, e.msg);
  assert_int_equal(rc, UNICO_OK);
  check_present(s, "f", 0, n);
  s->vt->close(s);
}

static void test_log_options(void **state) {
  (void)state;
  const char *bad[] = {"wal=maybe", "wal_size=1", "wal_size=abc",
                       "sync_delay_us=-1", "sync_delay_us=100001",
                       "sync_delay_us=1ms"};
  const char *named[] = {"wal", "wal_size", "wal_size", "sync_delay_us",
                         "sync_delay_us", "sync_delay_us"};
  for (int i = 0; i < 6; i++) {
    ustore *s;
    ustore_err e = {{0}};
    assert_int_equal(try_open(&s, "opts", bad[i], &e), UNICO_EINVAL);
    assert_null(s);
    assert_non_null(strstr(e.msg, named[i]));
  }
}

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_log_model),
      cmocka_unit_test(test_log_sigkill),
      cmocka_unit_test(test_log_torn_tail),
      cmocka_unit_test(test_log_lock),
      cmocka_unit_test(test_log_lock_unlinked),
      cmocka_unit_test(test_files_removed),
      cmocka_unit_test(test_log_file_removed),
      cmocka_unit_test(test_files_chdir),
      cmocka_unit_test(test_log_rewrites),
      cmocka_unit_test(test_log_options),
      cmocka_unit_test(test_log_full),
      cmocka_unit_test(test_log_over_limit),
  };
  return ucm_done(ucm_run_group("tests", tests, setup, teardown));
}
