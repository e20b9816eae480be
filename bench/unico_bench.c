/* unico_bench.c - unico-bench: the same workloads, with the same UNIQUE
 * constraints, on unico's embedded store, PostgreSQL and SQLite, with every
 * operation's outcome checked (so the benchmark is a correctness test too).
 *
 *   unico-bench [--engine unico|postgres|sqlite[,...]] [--workload W[,...]|all]
 *               [--threads 1,2,4,...] [--duration S] [--warmup S]
 *               [--store URL | --store-base DIR] [--pg CONNINFO] [--pg-pid PID]
 *               [--sqlite PATH] [--csv FILE] [--ack-log FILE] [--preload N]
 *               [--dataset-min N] [--label NAME[,...]]
 *               [--keep] [--no-check]
 *   unico-bench verify --store URL --ack-log FILE
 *
 * Workloads (DESIGN.md section 6; table users(id, email, phone, provider,
 * external_id, name) with uniques on email (case-insensitive), phone and
 * (provider, external_id)):
 *   signup        insert a user; 10% of the inserts reuse a value this thread
 *                 inserted before (email in another case, phone or
 *                 (provider, external_id)) and must be refused on exactly
 *                 that constraint
 *   email-change  preload N users per thread (200, and at least 10000 in
 *                 all: --preload, --dataset-min); each op moves one of the
 *                 thread's users to a fresh email
 *   mixed         preload; 70% lookup by email (must find the right id),
 *                 20% insert, 10% email change
 *   hot           8 hot emails shared by all threads; each op inserts a user
 *                 holding a random one; the winner deletes it at once. Both
 *                 the attempts and the deletes are ops; a second holder of a
 *                 value at any moment is an error.
 * Every (engine, workload, threads) point starts from an empty dataset.
 * Exit status: 0 when every outcome was the expected one, 1 when any was
 * not (or a check failed), 2 on usage or setup errors. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "unico.h"

/* ---- helpers shared with the engines ---------------------------------- */

const char *const bench_cons_name[4] = {"email", "phone", "provider,external_id", "primary key"};

int bench_cons_from_text(const char *t) {
  if (!t) return CONS_UNKNOWN;
  if (strstr(t, "email")) return CONS_EMAIL;
  if (strstr(t, "phone")) return CONS_PHONE;
  if (strstr(t, "users_ext") || strstr(t, "provider") || strstr(t, "external_id")) return CONS_EXT;
  if (strstr(t, "PRIMARY") || strstr(t, "pkey") || strstr(t, "users.id")) return CONS_PK;
  return CONS_UNKNOWN;
}

void bench_sleep_backoff(int attempt) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  long cap = 100000L << (attempt < 5 ? attempt : 5); /* 0.1 .. 3.2 ms */
  long ns = cap / 2 + (long)((unsigned long)now.tv_nsec % (unsigned long)(cap / 2));
  struct timespec d = {0, ns};
  nanosleep(&d, NULL);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb;
  (void)ftw;
  return (flag == FTW_DP ? rmdir(p) : unlink(p)) && errno != ENOENT ? -1 : 0;
}

int bench_rm_rf(const char *path) {
  struct stat st;
  if (lstat(path, &st)) return errno == ENOENT ? 0 : -1;
  return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int bench_mkdir_p(const char *path) {
  char p[4096];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++) {
    if (*s != '/') continue;
    *s = 0;
    if (mkdir(p, 0777) && errno != EEXIST) return -1;
    *s = '/';
  }
  return mkdir(p, 0777) && errno != EEXIST ? -1 : 0;
}

/* ---- latency histogram: log-linear, 32 sub-buckets per power of two ---- */

#define H_SUB_BITS 5
#define H_SUB (1u << H_SUB_BITS)
#define H_BUCKETS (64u * H_SUB)

static unsigned h_index(uint64_t v) {
  if (v < 2 * H_SUB) return (unsigned)v;
  unsigned e = (unsigned)(63 - __builtin_clzll(v)) - H_SUB_BITS;
  return e * H_SUB + (unsigned)(v >> e);
}

static double h_value(unsigned i) { /* the middle of bucket i */
  if (i < 2 * H_SUB) return i;
  unsigned e = i / H_SUB - 1;
  uint64_t m = i - e * H_SUB;
  return ((double)(m << e) + (double)(((m + 1) << e) - 1)) / 2;
}

static double h_percentile(const uint64_t *h, uint64_t total, double p) {
  if (!total) return 0;
  uint64_t rank = (uint64_t)ceil(p * (double)total), c = 0;
  if (rank < 1) rank = 1;
  for (unsigned i = 0; i < H_BUCKETS; i++) {
    c += h[i];
    if (c >= rank) return h_value(i);
  }
  return h_value(H_BUCKETS - 1);
}

/* ---- options and global state ------------------------------------------ */

enum { PH_START, PH_WARMUP, PH_MEASURE, PH_STOP };
enum { W_SIGNUP, W_EMAIL_CHANGE, W_MIXED, W_HOT, W_N };
static const char *const WORKLOADS[W_N] = {"signup", "email-change", "mixed", "hot"};
#define HOT_K 8
#define TRACK_CAP 8192

static bench_config cfg;
static double duration = 5, warmup = 1;
static int preload_per_thread = 200;
static int dataset_min = 10000; /* preloaded users in all, at least */
static const char *csv_path, *ack_path;
static int ack_fd = -1;
static int do_check = 1;
static char run_tag[16];
static const char *const PROVIDERS[4] = {"google", "github", "apple", "facebook"};

static _Atomic int phase;
static _Atomic int error_printed;
static _Atomic uint64_t point_errors;
static int async_depth; /* --async N: writes in flight per thread (0: none) */
static _Atomic int holders[HOT_K];

typedef struct tracked {
  uint64_t id;    /* serial of the id (and of phone and external_id) */
  uint64_t email; /* serial of the current email */
  int busy;       /* --async: an update of it is in flight */
} tracked;

typedef struct worker {
  int t;
  int workload;
  const bench_engine *eng;
  const char *label; /* the engine's name in output (--label) */
  pthread_t th;
  pthread_barrier_t *barrier;
  void *conn;
  char open_err[512];
  uint64_t rng;
  uint64_t next_id, next_email;
  tracked *users;
  size_t nusers;
  uint64_t ops, conflicts, retries, wins, errors;
  uint64_t *hist;
  /* --async: the writes in flight and what their answers update (hist,
   * counters, users), under mu, since answers arrive on other threads */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int inflight;
  struct pending *slots, **free_slots;
  int nfree;
  size_t track_next;
} worker;

static uint64_t rnd(worker *w) { /* xorshift64* */
  w->rng ^= w->rng >> 12;
  w->rng ^= w->rng << 25;
  w->rng ^= w->rng >> 27;
  return w->rng * 2685821657736338717ULL;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_s(double s) {
  if (s <= 0) return;
  struct timespec d = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&d, &d) && errno == EINTR) {
  }
}

/* Context switches of this process (every thread), voluntary and not. */
static double ctxsw_self(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_nvcsw + (double)ru.ru_nivcsw;
}

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
         (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* ---- values ------------------------------------------------------------ */

static void email_of(char *dst, size_t n, int t, uint64_t serial) {
  snprintf(dst, n, "User.%s.%d.%llu@Example.COM", run_tag, t, (unsigned long long)serial);
}

static void make_user(bench_user *u, int t, uint64_t id, uint64_t email) {
  snprintf(u->id, sizeof u->id, "%s-t%d-%llu", run_tag, t, (unsigned long long)id);
  email_of(u->email, sizeof u->email, t, email);
  snprintf(u->phone, sizeof u->phone, "+1-%s-%d-%llu", run_tag, t, (unsigned long long)id);
  u->provider = PROVIDERS[id % 4];
  snprintf(u->external_id, sizeof u->external_id, "x%s-%d-%llu", run_tag, t, (unsigned long long)id);
  snprintf(u->name, sizeof u->name, "User %d.%llu", t, (unsigned long long)id);
}

static void case_change(char *s, int upper) {
  for (; *s; s++) {
    if (upper && *s >= 'a' && *s <= 'z') *s = (char)(*s - 'a' + 'A');
    if (!upper && *s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
  }
}

static void track(worker *w, uint64_t id, uint64_t email) {
  size_t i = w->nusers < TRACK_CAP ? w->nusers++ : (size_t)(rnd(w) % TRACK_CAP);
  w->users[i].id = id;
  w->users[i].email = email;
}

/* ---- checking ---------------------------------------------------------- */

static void report_error(worker *w, const char *what, const bench_user *u, const bench_outcome *o) {
  w->errors++;
  atomic_fetch_add(&point_errors, 1);
  if (atomic_exchange(&error_printed, 1)) return;
  static const char *const ST[] = {"ok", "unique conflict", "not found", "error"};
  fprintf(stderr,
          "unico-bench: %s: UNEXPECTED OUTCOME (thread %d, %s): got %s%s%s%s%s\n"
          "  record: id=%s email=%s phone=%s provider=%s external_id=%s\n"
          "  detail: %s\n  (further errors of this point are counted, not printed)\n",
          w->label, w->t, what, ST[o->st], o->st == ST_CONFLICT ? " on " : "",
          o->st == ST_CONFLICT ? (o->cons >= 0 ? bench_cons_name[o->cons] : "an unknown constraint") : "",
          o->owner[0] ? " owned by " : "", o->owner, u ? u->id : "-", u ? u->email : "-",
          u ? u->phone : "-", u ? u->provider : "-", u ? u->external_id : "-",
          o->msg[0] ? o->msg : "-");
}

static int measuring(void) { return atomic_load_explicit(&phase, memory_order_relaxed) == PH_MEASURE; }

/* Account one operation that started at t0 (ns) in phase m. */
static void account(worker *w, int m, uint64_t t0, const bench_outcome *o) {
  if (!m) return;
  uint64_t d = now_ns() - t0;
  w->hist[h_index(d)]++;
  w->ops++;
  w->retries += (uint64_t)o->retries;
  if (o->st == ST_CONFLICT) w->conflicts++;
}

static void clear_outcome(bench_outcome *o) {
  o->st = ST_ERROR;
  o->cons = CONS_UNKNOWN;
  o->retries = 0;
  o->owner[0] = o->found_id[0] = o->msg[0] = 0;
}

static void ack(const char *id) {
  if (ack_fd < 0) return;
  char line[80];
  int n = snprintf(line, sizeof line, "%s\n", id);
  /* One write(2) on an O_APPEND fd: the line is whole or absent. */
  if (write(ack_fd, line, (size_t)n) != n) {
    perror("unico-bench: ack-log write");
    _exit(2);
  }
}

/* ---- workloads: one call is one step (one or two operations) ----------- */

static void do_insert_fresh(worker *w, bench_user *u, bench_outcome *o, const char *what) {
  uint64_t id = w->next_id++, em = w->next_email++;
  make_user(u, w->t, id, em);
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(o);
  w->eng->insert(w->conn, u, o);
  account(w, m, t0, o);
  if (o->st != ST_OK) {
    report_error(w, what, u, o);
    return;
  }
  track(w, id, em);
  if (w->workload == W_SIGNUP) ack(u->id);
}

/* Make u take one of prev's unique values (which: the return, a CONS_*):
 * its email in another letter case, its phone, or its (provider,
 * external_id). */
static int collide_with(worker *w, bench_user *u, const bench_user *prev) {
  int c = (int)(rnd(w) % 3);
  if (c == CONS_EMAIL) {
    memcpy(u->email, prev->email, sizeof u->email);
    case_change(u->email, (int)(rnd(w) & 1)); /* same value under casefold */
  } else if (c == CONS_PHONE) {
    memcpy(u->phone, prev->phone, sizeof u->phone);
  } else {
    u->provider = prev->provider;
    memcpy(u->external_id, prev->external_id, sizeof u->external_id);
  }
  return c;
}

static void step_signup(worker *w, bench_user *u, bench_outcome *o) {
  if (w->nusers == 0 || rnd(w) % 10 != 0) {
    do_insert_fresh(w, u, o, "signup insert of fresh values (must succeed)");
    return;
  }
  /* A deliberate collision with a user this thread inserted before. */
  const tracked *old = &w->users[rnd(w) % w->nusers];
  bench_user prev;
  make_user(&prev, w->t, old->id, old->email);
  make_user(u, w->t, w->next_id++, w->next_email++);
  int c = collide_with(w, u, &prev);
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(o);
  w->eng->insert(w->conn, u, o);
  account(w, m, t0, o);
  if (o->st != ST_CONFLICT || o->cons != c || (o->owner[0] && strcmp(o->owner, prev.id))) {
    char what[160];
    snprintf(what, sizeof what, "signup reusing the %s of %s (must be a unique conflict on it%s)",
             bench_cons_name[c], prev.id, o->owner[0] ? ", owned by that record" : "");
    report_error(w, what, u, o);
  }
}

static void step_email_change(worker *w, bench_user *u, bench_outcome *o) {
  tracked *x = &w->users[rnd(w) % w->nusers];
  uint64_t em = w->next_email++;
  make_user(u, w->t, x->id, em);
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(o);
  w->eng->update_email(w->conn, u->id, u->email, o);
  account(w, m, t0, o);
  if (o->st != ST_OK) report_error(w, "update to a fresh email (must succeed)", u, o);
  else x->email = em;
}

static void step_lookup(worker *w, bench_user *u, bench_outcome *o) {
  const tracked *x = &w->users[rnd(w) % w->nusers];
  make_user(u, w->t, x->id, x->email);
  char spelled[sizeof u->email];
  memcpy(spelled, u->email, sizeof spelled);
  case_change(spelled, (int)(rnd(w) & 1));
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(o);
  w->eng->lookup_email(w->conn, spelled, o);
  account(w, m, t0, o);
  if (o->st != ST_OK || strcmp(o->found_id, u->id)) {
    if (o->st == ST_OK) snprintf(o->msg, sizeof o->msg, "found id %s", o->found_id);
    report_error(w, "lookup of a current email in another case (must find its record)", u, o);
  }
}

static void step_mixed(worker *w, bench_user *u, bench_outcome *o) {
  unsigned r = (unsigned)(rnd(w) % 100);
  if (r < 70) step_lookup(w, u, o);
  else if (r < 90) do_insert_fresh(w, u, o, "insert of fresh values (must succeed)");
  else step_email_change(w, u, o);
}

static void step_hot(worker *w, bench_user *u, bench_outcome *o) {
  int h = (int)(rnd(w) % HOT_K);
  make_user(u, w->t, w->next_id++, w->next_email++);
  snprintf(u->email, sizeof u->email, "Hot.%s.%d@Example.COM", run_tag, h);
  unsigned sp = (unsigned)(rnd(w) % 3);
  if (sp) case_change(u->email, sp == 1);
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(o);
  w->eng->insert(w->conn, u, o);
  account(w, m, t0, o);
  if (o->st == ST_CONFLICT && o->cons == CONS_EMAIL) return;
  if (o->st != ST_OK) {
    report_error(w, "insert of a hot email (must succeed or conflict on email)", u, o);
    return;
  }
  if (m) w->wins++;
  /* We hold the value until the delete: nobody else may win it meanwhile. */
  if (atomic_fetch_add(&holders[h], 1) != 0) {
    snprintf(o->msg, sizeof o->msg, "hot email %d has another holder at the same time", h);
    report_error(w, "insert of a hot email: two winners at once", u, o);
  }
  atomic_fetch_sub(&holders[h], 1);
  m = measuring();
  t0 = now_ns();
  clear_outcome(o);
  w->eng->remove(w->conn, u->id, o);
  account(w, m, t0, o);
  if (o->st != ST_OK) report_error(w, "delete of the winner's record (must succeed)", u, o);
}

/* ---- --async: N writes in flight per thread ----------------------------
 * signup, email-change and mixed with their writes submitted (the engine's
 * submit_*) and counted when answered; mixed's lookups stay synchronous. A
 * user with an update in flight is busy: no lookup or update picks it until
 * the answer (its email is unknown till then). Answers arrive on other
 * threads, so what they change (counters, histogram, users) is under w->mu. */

enum { AK_INSERT, AK_UPDATE };

typedef struct pending {
  bench_async a; /* first: the engine hands it back */
  worker *w;
  int kind;      /* AK_* */
  int m;         /* measuring when submitted */
  uint64_t t0;
  uint64_t id, email; /* insert: the serials; update: the new email's */
  size_t user;   /* update: the index in w->users */
  int expect;    /* insert: -1 must succeed, else the CONS_* it must hit */
  char prev_id[48];
  bench_user u;
} pending;

static void async_done(bench_async *a, const bench_outcome *o) {
  pending *p = (pending *)a;
  worker *w = p->w;
  pthread_mutex_lock(&w->mu);
  account(w, p->m, p->t0, o);
  if (p->kind == AK_UPDATE) {
    tracked *x = &w->users[p->user];
    if (o->st != ST_OK) report_error(w, "update to a fresh email (must succeed)", &p->u, o);
    else x->email = p->email;
    x->busy = 0;
  } else if (p->expect < 0) {
    if (o->st != ST_OK) {
      report_error(w, "insert of fresh values (must succeed)", &p->u, o);
    } else {
      /* (no rnd() here: the worker's thread draws from it) */
      size_t i = w->nusers < TRACK_CAP ? w->nusers++ : w->track_next++ % TRACK_CAP;
      while (w->users[i].busy) i = w->track_next++ % TRACK_CAP;
      w->users[i].id = p->id;
      w->users[i].email = p->email;
      if (w->workload == W_SIGNUP) ack(p->u.id);
    }
  } else if (o->st != ST_CONFLICT || o->cons != p->expect ||
             (o->owner[0] && strcmp(o->owner, p->prev_id))) {
    char what[160];
    snprintf(what, sizeof what, "signup reusing the %s of %s (must be a unique conflict on it)",
             bench_cons_name[p->expect], p->prev_id);
    report_error(w, what, &p->u, o);
  }
  w->free_slots[w->nfree++] = p;
  w->inflight--;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

/* A user no update has in flight, or -1 (a few tries). With w->mu. */
static long pick_idle(worker *w) {
  for (int i = 0; i < 16 && w->nusers; i++) {
    size_t k = (size_t)(rnd(w) % w->nusers);
    if (!w->users[k].busy) return (long)k;
  }
  return -1;
}

/* mixed's lookup, synchronous: a user's current email in another case. */
static void async_lookup(worker *w, tracked x) {
  bench_user u;
  bench_outcome o;
  make_user(&u, w->t, x.id, x.email);
  char spelled[sizeof u.email];
  memcpy(spelled, u.email, sizeof spelled);
  case_change(spelled, (int)(rnd(w) & 1));
  int m = measuring();
  uint64_t t0 = now_ns();
  clear_outcome(&o);
  w->eng->lookup_email(w->conn, spelled, &o);
  pthread_mutex_lock(&w->mu);
  account(w, m, t0, &o);
  if (o.st != ST_OK || strcmp(o.found_id, u.id)) {
    if (o.st == ST_OK) snprintf(o.msg, sizeof o.msg, "found id %s", o.found_id);
    report_error(w, "lookup of a current email in another case (must find its record)", &u, &o);
  }
  pthread_mutex_unlock(&w->mu);
}

static void run_async(worker *w) {
  bench_outcome o;
  while (atomic_load_explicit(&phase, memory_order_relaxed) != PH_STOP) {
    unsigned r = (unsigned)(rnd(w) % 100);
    int kind = w->workload == W_SIGNUP ? AK_INSERT
               : w->workload == W_EMAIL_CHANGE ? AK_UPDATE
               : r < 70 ? -1 : r < 90 ? AK_INSERT : AK_UPDATE;
    pthread_mutex_lock(&w->mu);
    long k = kind == AK_INSERT ? 0 : pick_idle(w);
    if (k < 0) { /* every user tried is busy: wait for an answer */
      if (w->inflight) pthread_cond_wait(&w->cv, &w->mu);
      pthread_mutex_unlock(&w->mu);
      continue;
    }
    if (kind < 0) {
      tracked x = w->users[k];
      pthread_mutex_unlock(&w->mu);
      async_lookup(w, x);
      continue;
    }
    while (w->inflight >= async_depth) pthread_cond_wait(&w->cv, &w->mu);
    pending *p = w->free_slots[--w->nfree];
    w->inflight++;
    p->w = w;
    p->a.done = async_done;
    p->kind = kind;
    p->expect = -1;
    int collide = kind == AK_INSERT && w->workload == W_SIGNUP && w->nusers > 0 &&
                  rnd(w) % 10 == 0;
    tracked old = collide ? w->users[rnd(w) % w->nusers] : (tracked){0, 0, 0};
    if (kind == AK_UPDATE) {
      p->user = (size_t)k;
      w->users[k].busy = 1;
      p->id = w->users[k].id;
    }
    pthread_mutex_unlock(&w->mu);
    p->email = w->next_email++;
    if (kind == AK_INSERT) p->id = w->next_id++;
    make_user(&p->u, w->t, p->id, p->email);
    if (collide) { /* a deliberate collision with an answered insert */
      bench_user prev;
      make_user(&prev, w->t, old.id, old.email);
      snprintf(p->prev_id, sizeof p->prev_id, "%s", prev.id);
      p->expect = collide_with(w, &p->u, &prev);
    }
    p->m = measuring();
    p->t0 = now_ns();
    int rc = kind == AK_INSERT
                 ? w->eng->submit_insert(w->conn, &p->u, &p->a)
                 : w->eng->submit_update_email(w->conn, p->u.id, p->u.email, &p->a);
    if (rc) {
      clear_outcome(&o);
      snprintf(o.msg, sizeof o.msg, "the engine could not submit the write");
      async_done(&p->a, &o);
    }
  }
  pthread_mutex_lock(&w->mu); /* every answer in before the thread ends */
  while (w->inflight > 0) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg) {
  worker *w = arg;
  w->conn = w->eng->conn_open(w->open_err, sizeof w->open_err);
  pthread_barrier_wait(w->barrier); /* all connected */
  pthread_barrier_wait(w->barrier); /* main checked the connections */
  bench_user u;
  bench_outcome o;
  if (w->conn && async_depth) run_async(w);
  while (w->conn && atomic_load_explicit(&phase, memory_order_relaxed) != PH_STOP) {
    switch (w->workload) {
    case W_SIGNUP: step_signup(w, &u, &o); break;
    case W_EMAIL_CHANGE: step_email_change(w, &u, &o); break;
    case W_MIXED: step_mixed(w, &u, &o); break;
    default: step_hot(w, &u, &o); break;
    }
  }
  if (w->conn) w->eng->conn_close(w->conn);
  w->conn = NULL;
  return NULL;
}

/* ---- one point ---------------------------------------------------------- */

static FILE *csv;
static int any_failure;

static void print_header(void) {
  printf("%-9s %-13s %7s %11s %9s %9s %9s %10s %7s %10s %7s %9s %8s %s\n", "engine", "workload",
         "threads", "ops/s", "p50_us", "p99_us", "p99.9_us", "cpu_us/op", "csw/op", "ops", "errors",
         "conflicts", "retries", "note");
  fflush(stdout);
}

/* Returns 0, or -1 when the point could not run at all. */
static int run_point(const bench_engine *eng, const char *label, int wl, int threads) {
  char tag[64], err[1024] = "";
  snprintf(tag, sizeof tag, "%s-t%d", WORKLOADS[wl], threads);
  atomic_store(&point_errors, 0);
  atomic_store(&error_printed, 0);
  atomic_store(&phase, PH_START);
  for (int i = 0; i < HOT_K; i++) atomic_store(&holders[i], 0);

  if (eng->point_begin(&cfg, tag, err, sizeof err)) {
    fprintf(stderr, "unico-bench: %s %s: %s\n", label, tag, err);
    eng->point_end(&cfg);
    return -1;
  }
  int pre = (wl == W_EMAIL_CHANGE || wl == W_MIXED) ? preload_per_thread : 0;
  /* Preloads have at least dataset_min users in all, so that no engine
   * plans for a toy table (PostgreSQL would scan 200 rows rather than use
   * the index, and keep the plan while the table grows). */
  if (pre && pre * threads < dataset_min) pre = (dataset_min + threads - 1) / threads;
  if (pre < 1 && (wl == W_EMAIL_CHANGE || wl == W_MIXED)) pre = 1;
  worker *ws = calloc((size_t)threads, sizeof *ws);
  bench_user *load = pre ? calloc((size_t)threads * (size_t)pre, sizeof *load) : NULL;
  if (!ws || (pre && !load)) {
    fprintf(stderr, "unico-bench: out of memory\n");
    exit(2);
  }
  uint64_t seed = now_ns() ^ ((uint64_t)getpid() << 32);
  for (int t = 0; t < threads; t++) {
    worker *w = &ws[t];
    w->t = t;
    w->workload = wl;
    w->eng = eng;
    w->label = label;
    w->rng = (seed + (uint64_t)t * 0x9E3779B97F4A7C15ULL) | 1;
    w->users = calloc(TRACK_CAP, sizeof *w->users);
    w->hist = calloc(H_BUCKETS, sizeof *w->hist);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (async_depth) {
      w->slots = calloc((size_t)async_depth, sizeof *w->slots);
      w->free_slots = calloc((size_t)async_depth, sizeof *w->free_slots);
      for (int i = 0; w->slots && w->free_slots && i < async_depth; i++)
        w->free_slots[w->nfree++] = &w->slots[i];
    }
    if (!w->users || !w->hist || (async_depth && w->nfree != async_depth)) {
      fprintf(stderr, "unico-bench: out of memory\n");
      exit(2);
    }
    for (int i = 0; i < pre; i++) {
      make_user(&load[(size_t)t * (size_t)pre + (size_t)i], t, (uint64_t)i, (uint64_t)i);
      track(w, (uint64_t)i, (uint64_t)i);
    }
    w->next_id = w->next_email = (uint64_t)pre;
  }
  int rc = 0;
  if (eng->load(load, (size_t)threads * (size_t)pre, err, sizeof err)) {
    fprintf(stderr, "unico-bench: %s %s: %s\n", label, tag, err);
    rc = -1;
  }
  free(load);

  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, NULL, (unsigned)threads + 1);
  int started = 0;
  if (!rc) {
    for (int t = 0; t < threads; t++) {
      ws[t].barrier = &barrier;
      if (pthread_create(&ws[t].th, NULL, worker_main, &ws[t])) {
        fprintf(stderr, "unico-bench: pthread_create failed\n");
        exit(2);
      }
    }
    started = 1;
    pthread_barrier_wait(&barrier);
    for (int t = 0; t < threads; t++) {
      if (!ws[t].conn) {
        fprintf(stderr, "unico-bench: %s %s: thread %d: %s\n", label, tag, t, ws[t].open_err);
        rc = -1;
        break;
      }
    }
    if (rc) atomic_store(&phase, PH_STOP);
    else atomic_store(&phase, PH_WARMUP);
    pthread_barrier_wait(&barrier);
  }
  double cpu0 = 0, cpu1 = 0, srv0 = -1, srv1 = -1;
  double csw0 = 0, csw1 = 0, scsw0 = -1, scsw1 = -1;
  double ser0 = -1, ser1 = -1; /* the serial part's clock (serial_us_per_op) */
  uint64_t t0 = 0, t1 = 0;
  if (!rc) {
    sleep_s(warmup);
    cpu0 = cpu_s();
    csw0 = ctxsw_self();
    srv0 = eng->server_cpu_us ? eng->server_cpu_us() : -1;
    scsw0 = eng->server_ctxsw ? eng->server_ctxsw() : -1;
    ser0 = eng->serial_us ? eng->serial_us() : -1;
    t0 = now_ns();
    atomic_store(&phase, PH_MEASURE);
    sleep_s(duration);
    atomic_store(&phase, PH_STOP);
    t1 = now_ns();
    ser1 = eng->serial_us ? eng->serial_us() : -1;
    cpu1 = cpu_s();
    csw1 = ctxsw_self();
    srv1 = eng->server_cpu_us ? eng->server_cpu_us() : -1;
    scsw1 = eng->server_ctxsw ? eng->server_ctxsw() : -1;
  }
  if (started)
    for (int t = 0; t < threads; t++) pthread_join(ws[t].th, NULL);
  pthread_barrier_destroy(&barrier);
  if (eng->point_end(&cfg)) {
    fprintf(stderr, "unico-bench: %s %s: the check after the point failed\n", label, tag);
    atomic_fetch_add(&point_errors, 1);
  }

  if (!rc) {
    uint64_t *h = calloc(H_BUCKETS, sizeof *h);
    uint64_t ops = 0, conflicts = 0, retries = 0, wins = 0;
    for (int t = 0; t < threads; t++) {
      for (unsigned i = 0; i < H_BUCKETS; i++) h[i] += ws[t].hist[i];
      ops += ws[t].ops;
      conflicts += ws[t].conflicts;
      retries += ws[t].retries;
      wins += ws[t].wins;
    }
    uint64_t errors = atomic_load(&point_errors);
    double secs = (double)(t1 - t0) / 1e9;
    double ops_s = secs > 0 ? (double)ops / secs : 0;
    double cpu_us = (cpu1 - cpu0) * 1e6;
    if (srv0 >= 0 && srv1 >= 0) cpu_us += srv1 - srv0;
    double cpu_op = ops ? cpu_us / (double)ops : 0;
    double csw = csw1 - csw0;
    if (scsw0 >= 0 && scsw1 >= 0) csw += scsw1 - scsw0;
    double csw_op = ops ? csw / (double)ops : 0;
    /* the serial part per operation (the leader's time between the two
     * reads, over the operations measured there; lookups included, which
     * take no part in it): its inverse is the ceiling on any machine */
    char serial[32] = "";
    if (ser0 >= 0 && ser1 >= ser0 && ops)
      snprintf(serial, sizeof serial, "%.3f", (ser1 - ser0) / (double)ops);
    double p50 = h_percentile(h, ops, 0.50) / 1e3, p99 = h_percentile(h, ops, 0.99) / 1e3,
           p999 = h_percentile(h, ops, 0.999) / 1e3;
    char note[96] = "";
    if (wl == W_HOT) snprintf(note, sizeof note, "wins=%llu", (unsigned long long)wins);
    if (srv0 >= 0) snprintf(note + strlen(note), sizeof note - strlen(note), "%sserver cpu incl.",
                            note[0] ? " " : "");
    if (serial[0]) snprintf(note + strlen(note), sizeof note - strlen(note), "%sserial_us=%s",
                            note[0] ? " " : "", serial);
    printf("%-9s %-13s %7d %11.0f %9.1f %9.1f %9.1f %10.1f %7.2f %10llu %7llu %9llu %8llu %s\n",
           label, WORKLOADS[wl], threads, ops_s, p50, p99, p999, cpu_op, csw_op,
           (unsigned long long)ops, (unsigned long long)errors, (unsigned long long)conflicts,
           (unsigned long long)retries, note);
    fflush(stdout);
    if (csv) {
      fprintf(csv, "%s,%s,%d,%.1f,%.1f,%.1f,%.1f,%.2f,%llu,%llu,%llu,%llu,%.3f,%s\n", label,
              WORKLOADS[wl], threads, ops_s, p50, p99, p999, cpu_op, (unsigned long long)ops,
              (unsigned long long)errors, (unsigned long long)conflicts,
              (unsigned long long)retries, csw_op, serial);
      fflush(csv);
    }
    free(h);
    if (errors) any_failure = 1;
  } else if (atomic_load(&point_errors)) {
    any_failure = 1;
  }
  for (int t = 0; t < threads; t++) {
    free(ws[t].users);
    free(ws[t].hist);
    free(ws[t].slots);
    free(ws[t].free_slots);
    pthread_mutex_destroy(&ws[t].mu);
    pthread_cond_destroy(&ws[t].cv);
  }
  free(ws);
  return rc;
}

/* ---- verify: every acknowledged id is in the store, and check passes ---- */

static int verify(const char *url, const char *log) {
  FILE *f = fopen(log, "r");
  if (!f) {
    fprintf(stderr, "unico-bench verify: %s: %s\n", log, strerror(errno));
    return 2;
  }
  unico *u = NULL;
  unico_result r = UNICO_RESULT_INIT;
  if (unico_open(&u, url, NULL, &r)) {
    fprintf(stderr, "unico-bench verify: %s: %s\n", url, r.message);
    fclose(f);
    unico_result_clear(&r);
    return 2;
  }
  char line[256], pk[300];
  unsigned long long acked = 0, found = 0, missing = 0, partial = 0;
  int status = 0;
  while (fgets(line, sizeof line, f)) {
    size_t n = strlen(line);
    if (n == 0 || line[n - 1] != '\n') { /* a torn last line: cannot be (one write) */
      partial++;
      continue;
    }
    line[n - 1] = 0;
    if (!line[0]) continue;
    acked++;
    snprintf(pk, sizeof pk, "\"%s\"", line);
    int rc = unico_get(u, "users", pk, &r);
    if (rc == UNICO_OK) {
      found++;
    } else {
      missing++;
      if (missing <= 10)
        fprintf(stderr, "unico-bench verify: acknowledged record %s: %s (%s)\n", line,
                unico_errname(rc), r.message);
      if (rc != UNICO_ENOTFOUND) status = 2;
    }
  }
  fclose(f);
  int crc = unico_check(u, &r);
  printf("{\"acked\":%llu,\"found\":%llu,\"missing\":%llu,\"partial_lines\":%llu,\"check_ok\":%s,"
         "\"check\":%s}\n",
         acked, found, missing, partial, crc ? "false" : "true", r.json ? r.json : "null");
  if (crc) fprintf(stderr, "unico-bench verify: unico_check: %s: %s\n", unico_errname(crc), r.message);
  unico_result_clear(&r);
  unico_close(u);
  if (status) return status;
  return missing || partial || crc ? 1 : 0;
}

/* ---- main --------------------------------------------------------------- */

static void usage(FILE *to) {
  fprintf(to,
          "usage: unico-bench [options]\n"
          "       unico-bench verify --store URL --ack-log FILE\n"
          "options:\n"
          "  --engine LIST       unico, postgres, sqlite (comma-separated; default unico)\n"
          "  --workload LIST     signup, email-change, mixed, hot, or all (default all)\n"
          "  --threads LIST      thread counts (default 1,2,4,8,16,32,64)\n"
          "  --duration S        measured seconds per point (default 5)\n"
          "  --warmup S          unmeasured seconds before each point (default 1)\n"
          "  --store URL         unico: use this store as is for every point\n"
          "  --store-base DIR    unico/sqlite: a fresh store per point under DIR\n"
          "                      (default ./unico-bench-data; DIR?k=v adds store options)\n"
          "  --pg CONNINFO       postgres: libpq connection string\n"
          "  --pg-pid PID        postgres: postmaster pid (server CPU); default: derived\n"
          "  --sqlite PATH       sqlite: database file, recreated for every point\n"
          "  --preload N         users per thread preloaded (email-change, mixed; default 200)\n"
          "  --dataset-min N     ... but at least N users in all (default 10000)\n"
          "  --csv FILE          append one line per point (header when new)\n"
          "  --ack-log FILE      signup: append each acknowledged id (for verify)\n"
          "  --label NAME[,...]  the engine's name in the table, the CSV and messages\n"
          "                      (one per --engine, e.g. unico-log; default: the engine's)\n"
          "  --fresh             (the default) every point starts from an empty dataset\n"
          "  --keep              keep per-point data directories/files\n"
          "  --no-check          unico: skip unico_check after each point\n"
          "  --typed             unico: writes hand over typed column values\n"
          "                      (unico_insert_values...) instead of JSON text\n"
          "  --async N           writes through asynchronous calls (unico_submit), N in\n"
          "                      flight per thread, each counted when answered durable\n"
          "                      (signup, email-change, mixed; mixed's lookups wait)\n"
          "verify: unico_get every id of the ack log (all must exist), then unico_check;\n"
          "        prints counts as JSON; exit 0 when all is well, 1 when not, 2 on setup errors\n");
}

static int parse_list(const char *s, int *out, int max) {
  int n = 0;
  char *end;
  while (*s && n < max) {
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 1024) return -1;
    out[n++] = (int)v;
    s = end;
    if (*s == ',') s++;
    else if (*s) return -1;
  }
  return n;
}

int main(int argc, char **argv) {
  const char *engines = "unico", *workloads = "all", *threads_s = "1,2,4,8,16,32,64";
  const char *labels = NULL;
  static char base_buf[4096];
  cfg.store_base = "unico-bench-data";
  if (argc > 1 && !strcmp(argv[1], "verify")) {
    const char *url = NULL, *log = NULL;
    for (int i = 2; i < argc; i++) {
      if (!strcmp(argv[i], "--store") && i + 1 < argc) url = argv[++i];
      else if (!strcmp(argv[i], "--ack-log") && i + 1 < argc) log = argv[++i];
      else {
        usage(stderr);
        return 2;
      }
    }
    if (!url || !log) {
      usage(stderr);
      return 2;
    }
    return verify(url, log);
  }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define OPT(name) (!strcmp(a, name) && v && (i++, 1))
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (OPT("--engine")) engines = v;
    else if (OPT("--workload")) workloads = v;
    else if (OPT("--threads")) threads_s = v;
    else if (OPT("--duration")) duration = atof(v);
    else if (OPT("--warmup")) warmup = atof(v);
    else if (OPT("--store")) cfg.store_url = v;
    else if (OPT("--store-base")) cfg.store_base = v;
    else if (OPT("--pg")) cfg.pg_conninfo = v;
    else if (OPT("--pg-pid")) cfg.pg_pid = atol(v);
    else if (OPT("--sqlite")) cfg.sqlite_path = v;
    else if (OPT("--preload")) preload_per_thread = atoi(v);
    else if (OPT("--dataset-min")) dataset_min = atoi(v);
    else if (OPT("--csv")) csv_path = v;
    else if (OPT("--ack-log")) ack_path = v;
    else if (OPT("--label")) labels = v;
    else if (OPT("--async")) async_depth = atoi(v);
    else if (!strcmp(a, "--keep")) cfg.keep = 1;
    else if (!strcmp(a, "--fresh")) continue; /* always: a new dataset per point */
    else if (!strcmp(a, "--no-check")) do_check = 0;
    else if (!strcmp(a, "--typed")) cfg.typed = 1;
    else {
      fprintf(stderr, "unico-bench: unknown or incomplete option %s\n", a);
      usage(stderr);
      return 2;
    }
#undef OPT
  }
  if (async_depth < 0 || async_depth > 65536) {
    fprintf(stderr, "unico-bench: --async takes a number of writes in flight per thread, 1 to 65536\n");
    return 2;
  }
  if (duration <= 0 || warmup < 0) {
    fprintf(stderr, "unico-bench: --duration must be > 0 and --warmup >= 0\n");
    return 2;
  }
  /* "DIR?k=v": the query goes to every per-point store URL. */
  snprintf(base_buf, sizeof base_buf, "%s", cfg.store_base);
  char *q = strchr(base_buf, '?');
  if (q) {
    *q = 0;
    cfg.store_query = q + 1;
  }
  cfg.store_base = base_buf;
  cfg.no_check = !do_check;

  int threads[64];
  int nthreads = parse_list(threads_s, threads, 64);
  if (nthreads < 1) {
    fprintf(stderr, "unico-bench: bad --threads list %s\n", threads_s);
    return 2;
  }
  int wls[W_N], nwl = 0;
  if (!strcmp(workloads, "all")) {
    for (int i = 0; i < W_N; i++) wls[nwl++] = i;
  } else {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", workloads);
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
      int k = -1;
      for (int i = 0; i < W_N; i++)
        if (!strcmp(s, WORKLOADS[i])) k = i;
      if (k < 0 || nwl >= W_N) {
        fprintf(stderr, "unico-bench: unknown workload %s (signup, email-change, mixed, hot)\n", s);
        return 2;
      }
      wls[nwl++] = k;
    }
  }
  const bench_engine *engs[3];
  int neng = 0;
  {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", engines);
    for (char *s = strtok(buf, ","); s; s = strtok(NULL, ",")) {
      const bench_engine *e = NULL;
      if (!strcmp(s, "unico")) e = &bench_engine_unico;
#ifdef BENCH_HAVE_PG
      else if (!strcmp(s, "postgres") || !strcmp(s, "pg")) e = &bench_engine_pg;
#endif
#ifdef BENCH_HAVE_SQLITE
      else if (!strcmp(s, "sqlite")) e = &bench_engine_sqlite;
#endif
      if (!e || neng >= 3) {
        fprintf(stderr, "unico-bench: unknown engine %s (built with: unico%s%s)\n", s,
#ifdef BENCH_HAVE_PG
                ", postgres",
#else
                "",
#endif
#ifdef BENCH_HAVE_SQLITE
                ", sqlite"
#else
                ""
#endif
        );
        return 2;
      }
      engs[neng++] = e;
    }
  }
  if (async_depth) {
    for (int e = 0; e < neng; e++)
      if (!engs[e]->submit_insert || !engs[e]->submit_update_email) {
        fprintf(stderr, "unico-bench: --async: engine %s has no asynchronous writes\n",
                engs[e]->name);
        return 2;
      }
    for (int i = 0; i < nwl; i++)
      if (wls[i] == W_HOT) {
        fprintf(stderr, "unico-bench: --async runs signup, email-change and mixed, not hot\n");
        return 2;
      }
  }
  /* --label: one name per engine, in the same order. */
  static char label_buf[256];
  const char *label_of[3];
  for (int e = 0; e < neng; e++) label_of[e] = engs[e]->name;
  if (labels) {
    snprintf(label_buf, sizeof label_buf, "%s", labels);
    int n = 0;
    char *save = NULL;
    for (char *s = strtok_r(label_buf, ",", &save); s; s = strtok_r(NULL, ",", &save), n++)
      if (n < neng) label_of[n] = s;
    int bad = n != neng;
    for (int e = 0; e < neng && !bad; e++)
      bad = !label_of[e][0] || strlen(label_of[e]) > 32 || strpbrk(label_of[e], " \t\",\n");
    if (bad) {
      fprintf(stderr, "unico-bench: --label %s: expected one name per engine (%d), "
                      "comma-separated, without spaces or quotes, at most 32 characters each\n",
              labels, neng);
      return 2;
    }
  }
  if (ack_path) {
    ack_fd = open(ack_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (ack_fd < 0) {
      fprintf(stderr, "unico-bench: %s: %s\n", ack_path, strerror(errno));
      return 2;
    }
  }
  if (csv_path) {
    csv = fopen(csv_path, "a");
    if (!csv) {
      fprintf(stderr, "unico-bench: %s: %s\n", csv_path, strerror(errno));
      return 2;
    }
    fseek(csv, 0, SEEK_END);
    if (ftell(csv) == 0)
      fprintf(csv, "engine,workload,threads,ops_per_s,p50_us,p99_us,p999_us,cpu_us_per_op,ops,"
                   "errors,conflicts,retries,ctxsw_per_op,serial_us_per_op\n");
  }
  /* A tag in every id and value, so runs never collide in a reused store. */
  snprintf(run_tag, sizeof run_tag, "%08llx",
           (unsigned long long)((now_ns() ^ ((uint64_t)getpid() << 20)) & 0xffffffffu));
  setvbuf(stdout, NULL, _IOLBF, 0);
  print_header();
  int setup_failed = 0;
  for (int e = 0; e < neng; e++)
    for (int k = 0; k < nwl; k++)
      for (int t = 0; t < nthreads; t++)
        if (run_point(engs[e], label_of[e], wls[k], threads[t])) setup_failed = 1;
  if (csv) fclose(csv);
  if (ack_fd >= 0) close(ack_fd);
  if (any_failure) {
    fprintf(stderr, "unico-bench: FAILED: some outcomes were not the expected ones\n");
    return 1;
  }
  return setup_failed ? 2 : 0;
}
