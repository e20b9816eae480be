/* import.c - `unico import TABLE FILE|-` (see import.h and docs/cli.md).
 *
 * The file is streamed: a batch of lines is read, each record's keys are
 * computed (unico_record_keys, which also validates it), and the batch is
 * inserted by a pool of threads, each record one unico_insert, so one
 * record is all or nothing and concurrent inserts share the store's syncs.
 *
 * Duplicates inside the file are resolved deterministically, first line
 * wins: every record gets a wave, 1 + the highest wave of an earlier record
 * of the batch that shares its primary key or a unique value with it. The
 * waves run one after the other, so a later duplicate always runs after
 * the earlier record has committed and is refused by the store as a
 * conflict naming that record; batches run in order, so the same holds
 * across batches. Records of one wave share no key and cannot refuse each
 * other. (Limit groups are not ordered this way: which records of one
 * batch meet a limit first is up to the threads.)
 *
 * Memory is bounded by the batch, plus one entry per inserted record (its
 * primary key -> the line that created it, so the report can say where a
 * duplicate's owner came from) and one per refused record (the report is
 * grouped and sorted, so it is written at the end). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "import.h"
#include "report.h"

#define WHO "unico"
#define PK_KEY "PRIMARY KEY"

/* ------------------------------------------------------------ options */

static const char *const OPTION_NAMES[] = {"--on-conflict", "--report",
                                           "--threads", "--batch",
                                           "--progress"};

int ucli_import_is_option(const char *name) {
  for (size_t i = 0; i < sizeof OPTION_NAMES / sizeof OPTION_NAMES[0]; i++)
    if (!strcmp(name, OPTION_NAMES[i])) return 1;
  return 0;
}

/* A decimal integer in [1, max], or -1. */
static long parse_count(const char *s, long max) {
  if (*s < '0' || *s > '9') return -1;
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || *end || v < 1 || v > max) return -1;
  return v;
}

int ucli_import_set_option(ucli_import_opts *o, const char *name,
                           const char *val) {
  if (!strcmp(name, "--on-conflict")) {
    if (!strcmp(val, "skip"))
      o->abort_on_refusal = 0;
    else if (!strcmp(val, "abort"))
      o->abort_on_refusal = 1;
    else
      return ucli_usage_error(WHO, "--on-conflict must be skip or abort, got \"%s\"", val);
  } else if (!strcmp(name, "--report")) {
    if (!*val) return ucli_usage_error(WHO, "--report needs a file name (or - for standard output)");
    o->report_path = val;
  } else if (!strcmp(name, "--threads")) {
    long v = parse_count(val, UCLI_IMPORT_MAX_THREADS);
    if (v < 0)
      return ucli_usage_error(WHO, "--threads needs an integer from 1 to %d, got \"%s\"",
                              UCLI_IMPORT_MAX_THREADS, val);
    o->threads = (int)v;
  } else if (!strcmp(name, "--batch")) {
    long v = parse_count(val, UCLI_IMPORT_MAX_BATCH);
    if (v < 0)
      return ucli_usage_error(WHO, "--batch needs an integer from 1 to %d, got \"%s\"",
                              UCLI_IMPORT_MAX_BATCH, val);
    o->batch = (size_t)v;
  } else if (!strcmp(name, "--progress")) {
    if (!strcmp(val, "auto")) o->progress = UCLI_PROGRESS_AUTO;
    else if (!strcmp(val, "bar")) o->progress = UCLI_PROGRESS_BAR;
    else if (!strcmp(val, "lines")) o->progress = UCLI_PROGRESS_LINES;
    else if (!strcmp(val, "none")) o->progress = UCLI_PROGRESS_NONE;
    else
      return ucli_usage_error(WHO, "--progress must be auto, bar, lines or none, got \"%s\"", val);
  } else {
    return ucli_usage_error(WHO, "unknown option %s", name);
  }
  return 0;
}

/* ------------------------------------------------------------ string map */

/* Open addressing, string keys (owned or borrowed), uint64_t values. */
typedef struct smap {
  char **keys;
  uint64_t *vals;
  size_t cap, n; /* cap a power of 2, or 0 */
  int own;       /* free the keys */
} smap;

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h ^ (h >> 29);
}

static size_t smap_slot(const smap *m, const char *key) {
  size_t i = (size_t)hash_str(key) & (m->cap - 1);
  while (m->keys[i] && strcmp(m->keys[i], key)) i = (i + 1) & (m->cap - 1);
  return i;
}

/* 1 and *val when key is present, else 0. */
static int smap_get(const smap *m, const char *key, uint64_t *val) {
  if (!m->n) return 0;
  size_t i = smap_slot(m, key);
  if (!m->keys[i]) return 0;
  *val = m->vals[i];
  return 1;
}

static int smap_grow(smap *m) {
  size_t ncap = m->cap ? m->cap * 2 : 1024;
  char **nk = calloc(ncap, sizeof *nk);
  uint64_t *nv = malloc(ncap * sizeof *nv);
  if (!nk || !nv) {
    free(nk);
    free(nv);
    return -1;
  }
  smap old = *m;
  m->keys = nk;
  m->vals = nv;
  m->cap = ncap;
  for (size_t i = 0; i < old.cap; i++) {
    if (!old.keys[i]) continue;
    size_t j = smap_slot(m, old.keys[i]);
    m->keys[j] = old.keys[i];
    m->vals[j] = old.vals[i];
  }
  free(old.keys);
  free(old.vals);
  return 0;
}

/* Set key to val. An owning map takes key (freed at once if the key was
 * there already, or on failure). 0, or -1 out of memory. */
static int smap_put(smap *m, char *key, uint64_t val) {
  if ((m->n + 1) * 2 > m->cap && smap_grow(m)) {
    if (m->own) free(key);
    return -1;
  }
  size_t i = smap_slot(m, key);
  if (m->keys[i]) {
    if (m->own) free(key);
  } else {
    m->keys[i] = key;
    m->n++;
  }
  m->vals[i] = val;
  return 0;
}

/* Empty the map, keeping its table. */
static void smap_reset(smap *m) {
  for (size_t i = 0; m->n && i < m->cap; i++) {
    if (m->own) free(m->keys[i]);
    m->keys[i] = NULL;
  }
  m->n = 0;
}

static void smap_free(smap *m) {
  smap_reset(m);
  free(m->keys);
  free(m->vals);
  memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ state */

enum { ST_PENDING, ST_INSERTED, ST_DUP, ST_INVALID, ST_LIMIT, ST_BUSY, ST_ERROR };
static const char *const KIND[] = {"pending", "inserted", "duplicate", "invalid",
                                   "limit", "busy", "error"};

/* One record of the batch being imported. */
typedef struct irec {
  uint64_t line;    /* 1-based line number in the file */
  size_t off, len;  /* its text in the batch arena */
  char *pk;         /* the primary key, compact JSON (unico_record_keys) */
  char **keys;      /* "PRIMARY KEY\x1fPK", then "CONSTRAINT\x1fVALUE" */
  size_t nkeys;
  int wave;         /* 0: not to be run */
  int state;        /* ST_* */
  int rc;
  unico_result res; /* the refusal, until moved into the report */
} irec;

/* A record that was not imported, kept for the report. */
typedef struct refusal {
  int kind; /* ST_* */
  int rc;
  uint64_t line;
  char *pk, *constraint, *value, *owner, *message, *column; /* or NULL */
} refusal;

typedef struct imp {
  unico *u;
  const char *table;
  const char *path;
  int abort_mode, nthreads;
  size_t batch_max;
  ucli_progress progress;
  FILE *in, *rep;

  /* the batch */
  irec *recs;
  size_t n;
  char *arena;
  size_t alen, acap;
  size_t *idx;

  /* the pool */
  pthread_t *th;
  int nstarted;
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  int sync_ready;
  unsigned gen;
  int quit, job, finished;
  const size_t *jidx;
  size_t jn;
  atomic_size_t next;
  atomic_int stop;           /* take no more records */
  atomic_uint_fast64_t ndone; /* records finished (progress) */

  /* the whole import */
  uint64_t read, inserted, count[ST_ERROR + 1];
  smap owners; /* primary key -> line that inserted it */
  smap waves;  /* per batch: key -> highest wave */
  refusal *refs;
  size_t nrefs, caprefs;
  uint64_t first_line; /* lowest refused line (abort mode) */
  int first_rc;
  int aborted;
  int fatal_rc; /* the import stopped on this error (store, memory, input) */
  char fatal_msg[512];
  uint64_t fatal_line;

  /* progress */
  double t0, last_draw;
  long long total_bytes; /* -1: unknown */
  uint64_t bytes_read;
  int drawn;
} imp;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int classify(int rc) {
  switch (rc) {
  case UNICO_OK: return ST_INSERTED;
  case UNICO_ECONFLICT: return ST_DUP;
  case UNICO_ELIMIT: return ST_LIMIT;
  case UNICO_EBUSY: return ST_BUSY;
  default: return unico_exit_code(rc) == 7 ? ST_ERROR : ST_INVALID;
  }
}

/* Stop the import on an error that is not one record's fault. */
static void fatal(imp *im, int rc, uint64_t line, const char *fmt, ...) {
  if (im->fatal_rc) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(im->fatal_msg, sizeof im->fatal_msg, fmt, ap);
  va_end(ap);
  im->fatal_rc = rc;
  im->fatal_line = line;
  atomic_store(&im->stop, 1);
}

/* JSON text in the compact form used for every comparison, or NULL. */
static char *dump_any(const json_t *j) {
  return j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
}

static char *norm_json(const char *text) {
  if (!text) return NULL;
  json_t *j = json_loads(text, JSON_DECODE_ANY, NULL);
  char *s = j ? dump_any(j) : strdup(text);
  json_decref(j);
  return s;
}

/* "a\x1fb", malloc'd. */
static char *join2(const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  char *s = malloc(la + lb + 2);
  if (!s) return NULL;
  memcpy(s, a, la);
  s[la] = '\x1f';
  memcpy(s + la + 1, b, lb + 1);
  return s;
}

static void rec_clear(irec *r) {
  free(r->pk);
  for (size_t k = 0; k < r->nkeys; k++) free(r->keys[k]);
  free(r->keys);
  unico_result_clear(&r->res);
  r->pk = NULL;
  r->keys = NULL;
  r->nkeys = 0;
}

/* ------------------------------------------------------------ workers */

enum { JOB_KEYS, JOB_INSERT };

static void set_invalid(irec *r, int rc, const char *msg) {
  unico_result_clear(&r->res);
  r->rc = r->res.rc = rc;
  snprintf(r->res.message, sizeof r->res.message, "%s", msg);
  r->state = classify(rc);
}

/* The keys of one record (and whether it is valid at all). */
static void do_keys(imp *im, irec *r) {
  const char *text = im->arena + r->off;
  if (strlen(text) != r->len) {
    set_invalid(r, UNICO_EINVAL, "the line contains a NUL byte");
    goto refused;
  }
  int rc = unico_record_keys(im->u, im->table, text, &r->res);
  if (rc) {
    r->rc = rc;
    r->state = classify(rc);
    goto refused;
  }
  json_t *o = json_loads(r->res.json, 0, NULL);
  json_t *keys = json_object_get(o, "keys");
  size_t nk = json_array_size(keys);
  r->pk = dump_any(json_object_get(o, "pk"));
  r->keys = calloc(nk + 1, sizeof *r->keys);
  int ok = r->pk && r->keys;
  if (ok) r->keys[r->nkeys++] = join2(PK_KEY, r->pk);
  for (size_t k = 0; ok && k < nk; k++) {
    json_t *e = json_array_get(keys, k);
    const char *kind = json_string_value(json_object_get(e, "kind"));
    if (!kind || strcmp(kind, "unique")) continue;
    char *v = dump_any(json_object_get(e, "value"));
    const char *c = json_string_value(json_object_get(e, "constraint"));
    r->keys[r->nkeys++] = v && c ? join2(c, v) : NULL;
    free(v);
  }
  for (size_t k = 0; ok && k < r->nkeys; k++) ok = r->keys[k] != NULL;
  json_decref(o);
  unico_result_clear(&r->res);
  if (!ok) {
    set_invalid(r, UNICO_ENOMEM, "out of memory");
    goto refused;
  }
  return;
refused:
  if (r->state == ST_ERROR) atomic_store(&im->stop, 1);
  atomic_fetch_add(&im->ndone, 1);
}

static void do_insert(imp *im, irec *r) {
  int rc = unico_insert(im->u, im->table, im->arena + r->off, NULL, &r->res);
  r->rc = rc;
  r->state = classify(rc);
  if (rc == UNICO_OK)
    unico_result_clear(&r->res);
  else if (r->state == ST_ERROR || im->abort_mode)
    atomic_store(&im->stop, 1);
  atomic_fetch_add(&im->ndone, 1);
}

static void *worker(void *arg) {
  imp *im = arg;
  unsigned seen = 0;
  for (;;) {
    pthread_mutex_lock(&im->mu);
    while (im->gen == seen && !im->quit) pthread_cond_wait(&im->work, &im->mu);
    if (im->quit) {
      pthread_mutex_unlock(&im->mu);
      return NULL;
    }
    seen = im->gen;
    int job = im->job;
    const size_t *jidx = im->jidx;
    size_t jn = im->jn;
    pthread_mutex_unlock(&im->mu);
    while (!atomic_load(&im->stop)) {
      size_t k = atomic_fetch_add(&im->next, 1);
      if (k >= jn) break;
      irec *r = &im->recs[jidx[k]];
      if (job == JOB_KEYS)
        do_keys(im, r);
      else
        do_insert(im, r);
    }
    pthread_mutex_lock(&im->mu);
    if (++im->finished == im->nstarted) pthread_cond_signal(&im->done);
    pthread_mutex_unlock(&im->mu);
  }
}

/* ------------------------------------------------------------ progress */

static void fmt_duration(char *buf, size_t n, double s) {
  long t = s < 0 ? 0 : (long)(s + 0.5);
  if (t >= 3600)
    snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  else if (t >= 60)
    snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
  else
    snprintf(buf, n, "%ld s", t);
}

/* Redraw the bar (at most 10 times a second) or print a line (every 5
 * seconds); final: the last state, ending the bar's line. */
static void progress(imp *im, int final) {
  if (im->progress == UCLI_PROGRESS_NONE) return;
  double t = now_s();
  int bar = im->progress == UCLI_PROGRESS_BAR;
  if (!final && t - im->last_draw < (bar ? 0.1 : 5.0)) return;
  if (final && !bar) return; /* the summary says the rest */
  im->last_draw = t;
  double el = t - im->t0;
  uint64_t done = atomic_load(&im->ndone);
  double rate = el > 0 ? (double)done / el : 0;
  /* The total is estimated from the bytes read so far. */
  double total = -1;
  if (im->total_bytes > 0 && im->bytes_read > 0)
    total = (double)im->read * (double)im->total_bytes / (double)im->bytes_read;
  if (final || (total >= 0 && total < (double)done)) total = (double)done;
  char eta[32] = "", elapsed[32];
  fmt_duration(elapsed, sizeof elapsed, el);
  if (total >= 0 && rate > 0) fmt_duration(eta, sizeof eta, (total - (double)done) / rate);
  if (bar) {
    char b[31];
    double frac = total > 0 ? (double)done / total : 0;
    int fill = (int)(frac * 30);
    for (int i = 0; i < 30; i++) b[i] = i < fill ? '#' : (total >= 0 ? '.' : ' ');
    b[30] = 0;
    if (total >= 0)
      fprintf(stderr, "\r[%s] %3d%%  %" PRIu64 "/%s%.0f records  %.0f/s  %s %s\033[K",
              b, (int)(frac * 100), done, final ? "" : "~", total, rate,
              final ? "in" : "ETA", final ? elapsed : eta);
    else
      fprintf(stderr, "\r%" PRIu64 " records  %.0f/s  %s\033[K", done, rate, elapsed);
    if (final) fputc('\n', stderr);
  } else if (total >= 0) {
    fprintf(stderr, "import: %" PRIu64 " of ~%.0f records, %.0f/s, %s elapsed, ETA %s\n",
            done, total, rate, elapsed, eta);
  } else {
    fprintf(stderr, "import: %" PRIu64 " records, %.0f/s, %s elapsed\n", done, rate, elapsed);
  }
  fflush(stderr);
  im->drawn = 1;
}

/* ------------------------------------------------------------ the pool */

static int pool_start(imp *im) {
  pthread_condattr_t ca;
  if (pthread_condattr_init(&ca)) return -1;
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  int bad = pthread_mutex_init(&im->mu, NULL);
  if (!bad && pthread_cond_init(&im->work, NULL)) {
    pthread_mutex_destroy(&im->mu);
    bad = 1;
  }
  if (!bad && pthread_cond_init(&im->done, &ca)) {
    pthread_cond_destroy(&im->work);
    pthread_mutex_destroy(&im->mu);
    bad = 1;
  }
  pthread_condattr_destroy(&ca);
  if (bad) return -1;
  im->sync_ready = 1;
  im->th = calloc((size_t)im->nthreads, sizeof *im->th);
  if (!im->th) return -1;
  for (int i = 0; i < im->nthreads; i++) {
    if (pthread_create(&im->th[i], NULL, worker, im)) break;
    im->nstarted++;
  }
  return im->nstarted ? 0 : -1;
}

static void pool_stop(imp *im) {
  if (!im->sync_ready) return;
  pthread_mutex_lock(&im->mu);
  im->quit = 1;
  pthread_cond_broadcast(&im->work);
  pthread_mutex_unlock(&im->mu);
  for (int i = 0; i < im->nstarted; i++) pthread_join(im->th[i], NULL);
  free(im->th);
  pthread_cond_destroy(&im->work);
  pthread_cond_destroy(&im->done);
  pthread_mutex_destroy(&im->mu);
}

/* Run job on the records idx[0..n) with every thread; returns when all
 * are done (or the import is stopping), drawing progress meanwhile. */
static void pool_run(imp *im, int job, const size_t *idx, size_t n) {
  if (!n) return;
  pthread_mutex_lock(&im->mu);
  im->job = job;
  im->jidx = idx;
  im->jn = n;
  atomic_store(&im->next, 0);
  im->finished = 0;
  im->gen++;
  pthread_cond_broadcast(&im->work);
  while (im->finished < im->nstarted) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_nsec += 100000000L;
    if (ts.tv_nsec >= 1000000000L) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&im->done, &im->mu, &ts);
    if (im->finished < im->nstarted) {
      pthread_mutex_unlock(&im->mu);
      progress(im, 0);
      pthread_mutex_lock(&im->mu);
    }
  }
  pthread_mutex_unlock(&im->mu);
}

/* ------------------------------------------------------------ results */

/* A store error's message may end in advice for one write: "retry it with
 * the same operation id". An import gives its inserts no operation id, and
 * a record whose write failed is not retried: the import stops. What fits
 * is to run it again, which inserts what is missing and reports the
 * records that are in as PRIMARY KEY duplicates; that advice replaces the
 * other one, and is added to an outcome left unknown. malloc'd, or NULL. */
static char *import_message(int rc, const char *msg) {
  static const char advice[] =
      "run the import again once the cause is fixed: the records already in "
      "are then reported as PRIMARY KEY duplicates, the others inserted";
  size_t n = strlen(msg);
  const char *same = strstr(msg, "same operation id");
  if (!same) same = strstr(msg, "same op id");
  if (same) { /* cut from the "retry" before it */
    const char *r = NULL;
    for (const char *p = msg; (p = strstr(p, "retry")) && p < same; p++) r = p;
    n = (size_t)((r ? r : same) - msg);
    while (n && strchr(" :;,", msg[n - 1])) n--;
  } else if (rc != UNICO_EUNKNOWN) {
    return strdup(msg);
  }
  char *out = malloc(n + sizeof advice + 2);
  if (out) snprintf(out, n + sizeof advice + 2, "%.*s%s%s", (int)n, msg,
                    n ? "; " : "", advice);
  return out;
}

/* Move the refusal of r into the report. */
static int add_refusal(imp *im, irec *r) {
  if (im->nrefs == im->caprefs) {
    size_t nc = im->caprefs ? im->caprefs * 2 : 256;
    refusal *nr = realloc(im->refs, nc * sizeof *nr);
    if (!nr) return -1;
    im->refs = nr;
    im->caprefs = nc;
  }
  refusal *f = &im->refs[im->nrefs];
  memset(f, 0, sizeof *f);
  f->kind = r->state;
  f->rc = r->rc;
  f->line = r->line;
  f->pk = r->pk;
  r->pk = NULL;
  const char *msg = r->res.message[0] ? r->res.message : unico_strerror(r->rc);
  f->message = r->state == ST_ERROR ? import_message(r->rc, msg) : strdup(msg);
  if (r->res.constraint[0]) f->constraint = strdup(r->res.constraint);
  if (r->res.column[0]) f->column = strdup(r->res.column);
  f->value = norm_json(r->res.value);
  f->owner = norm_json(r->res.owner);
  if (!f->message) return -1;
  im->nrefs++;
  im->count[r->state]++;
  if (!im->first_line || r->line < im->first_line) {
    im->first_line = r->line;
    im->first_rc = r->rc;
  }
  if (r->state == ST_ERROR)
    fatal(im, r->rc, r->line, "%s", f->message);
  return 0;
}

/* Account for the outcome of the records idx[0..n). */
static void collect(imp *im, const size_t *idx, size_t n) {
  for (size_t k = 0; k < n; k++) {
    irec *r = &im->recs[idx[k]];
    if (r->state == ST_PENDING) continue;
    if (r->state == ST_INSERTED) {
      im->inserted++;
      char *pk = r->pk;
      r->pk = NULL;
      if (smap_put(&im->owners, pk, r->line))
        fatal(im, UNICO_ENOMEM, r->line, "out of memory");
    } else if (add_refusal(im, r)) {
      fatal(im, UNICO_ENOMEM, r->line, "out of memory");
    }
  }
}

/* ------------------------------------------------------------ a batch */

/* Read up to batch_max records into the batch. *eof at the end of input. */
static void read_batch(imp *im, char **buf, size_t *cap, uint64_t *lineno,
                       int *eof) {
  im->n = 0;
  im->alen = 0;
  while (im->n < im->batch_max) {
    errno = 0;
    ssize_t got = getline(buf, cap, im->in);
    if (got < 0) {
      if (ferror(im->in))
        fatal(im, UNICO_EINVAL, *lineno + 1, "cannot read %s: %s",
              strcmp(im->path, "-") ? im->path : "standard input",
              strerror(errno ? errno : EIO));
      *eof = 1;
      return;
    }
    (*lineno)++;
    im->bytes_read += (uint64_t)got;
    size_t len = (size_t)got;
    char *s = *buf;
    if (*lineno == 1 && len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3)) {
      s += 3; /* a UTF-8 byte order mark */
      len -= 3;
    }
    while (len && (s[len - 1] == '\n' || s[len - 1] == '\r')) len--;
    size_t i = 0;
    while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' ||
                       s[i] == '\f' || s[i] == '\v'))
      i++;
    if (i == len) continue; /* a blank line */
    if (im->alen + len + 1 > im->acap) {
      size_t nc = im->acap ? im->acap : 1 << 20;
      while (nc < im->alen + len + 1) nc *= 2;
      char *na = realloc(im->arena, nc);
      if (!na) {
        fatal(im, UNICO_ENOMEM, *lineno, "out of memory");
        return;
      }
      im->arena = na;
      im->acap = nc;
    }
    memcpy(im->arena + im->alen, s, len);
    im->arena[im->alen + len] = 0;
    irec *r = &im->recs[im->n++];
    memset(r, 0, sizeof *r);
    r->line = *lineno;
    r->off = im->alen;
    r->len = len;
    im->alen += len + 1;
    im->read++;
  }
}

/* Validate, order and insert the records of the batch. */
static void run_batch(imp *im) {
  for (size_t i = 0; i < im->n; i++) im->idx[i] = i;
  pool_run(im, JOB_KEYS, im->idx, im->n);

  /* Invalid records are refused now. In abort mode the first one ends the
   * import: only the records before it are run, and it is reported only if
   * none of them is refused (the records after it are not attempted). */
  size_t runnable = im->n;
  for (size_t i = 0; i < im->n && !im->fatal_rc; i++) {
    irec *r = &im->recs[i];
    if (r->state == ST_PENDING) continue;
    if (r->state == ST_ERROR || !im->abort_mode)
      collect(im, &i, 1);
    else if (runnable == im->n)
      runnable = i;
  }
  if (im->fatal_rc) return;

  /* Waves: a record runs after every earlier one it shares a key with. */
  int maxw = 0;
  smap_reset(&im->waves);
  for (size_t i = 0; i < runnable; i++) {
    irec *r = &im->recs[i];
    if (r->state != ST_PENDING) continue;
    uint64_t w = 0, v;
    for (size_t k = 0; k < r->nkeys; k++)
      if (smap_get(&im->waves, r->keys[k], &v) && v > w) w = v;
    r->wave = (int)w + 1;
    for (size_t k = 0; k < r->nkeys; k++)
      if (smap_put(&im->waves, r->keys[k], (uint64_t)r->wave)) {
        fatal(im, UNICO_ENOMEM, r->line, "out of memory");
        return;
      }
    if (r->wave > maxw) maxw = r->wave;
  }
  /* In abort mode a refusal at line L stops the wave (the records before
   * it in the wave have been taken: they are taken in line order), and the
   * later waves run only their records before L, so that when the import
   * stops every record before the first refused one has been inserted. */
  for (int w = 1; w <= maxw && !im->fatal_rc; w++) {
    uint64_t limit = im->abort_mode && im->first_line ? im->first_line : UINT64_MAX;
    size_t n = 0;
    for (size_t i = 0; i < runnable; i++) {
      const irec *r = &im->recs[i];
      if (r->wave == w && r->state == ST_PENDING && r->line < limit) im->idx[n++] = i;
    }
    atomic_store(&im->stop, 0);
    pool_run(im, JOB_INSERT, im->idx, n);
    collect(im, im->idx, n);
  }
  if (runnable < im->n && !im->nrefs && !im->fatal_rc) collect(im, &runnable, 1);
  if (im->abort_mode && im->nrefs) im->aborted = 1;
}

/* ------------------------------------------------------------ the report */

static int cmp_str(const char *a, const char *b) {
  return strcmp(a ? a : "", b ? b : "");
}

/* Duplicates by (constraint, value, owner, line); others by line. */
static int cmp_refusal(const void *pa, const void *pb) {
  const refusal *a = pa, *b = pb;
  int da = a->kind == ST_DUP, db = b->kind == ST_DUP;
  if (da != db) return da ? -1 : 1;
  int c = 0;
  if (da) {
    c = cmp_str(a->constraint, b->constraint);
    if (!c) c = cmp_str(a->value, b->value);
    if (!c) c = cmp_str(a->owner, b->owner);
  }
  if (c) return c;
  return a->line < b->line ? -1 : a->line > b->line;
}

typedef struct ritem {
  uint64_t line; /* the first line of the item */
  size_t first, n; /* refusals[first .. first+n) */
} ritem;

static int cmp_item(const void *pa, const void *pb) {
  const ritem *a = pa, *b = pb;
  return a->line < b->line ? -1 : a->line > b->line;
}

static json_t *load_or_null(const char *text) {
  json_t *j = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
  return j ? j : json_null();
}

static json_t *item_json(const imp *im, const ritem *it) {
  const refusal *f = &im->refs[it->first];
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "kind", json_string(KIND[f->kind]));
  if (f->kind == ST_DUP) {
    uint64_t oline;
    json_object_set_new(o, "constraint", json_string(f->constraint ? f->constraint : ""));
    json_object_set_new(o, "value", load_or_null(f->value));
    json_object_set_new(o, "owner", load_or_null(f->owner));
    json_object_set_new(o, "owner_line",
                        f->owner && smap_get(&im->owners, f->owner, &oline)
                            ? json_integer((json_int_t)oline)
                            : json_null());
    json_t *d = json_array();
    for (size_t k = 0; k < it->n; k++)
      json_array_append_new(d, json_pack("{s:I,s:o}", "line", (json_int_t)f[k].line,
                                         "pk", load_or_null(f[k].pk)));
    json_object_set_new(o, "duplicates", d);
    return o;
  }
  json_object_set_new(o, "line", json_integer((json_int_t)f->line));
  json_object_set_new(o, "pk", load_or_null(f->pk));
  if (f->kind == ST_ERROR) json_object_set_new(o, "error", json_string(unico_errname(f->rc)));
  json_object_set_new(o, "message", ucli_json_text(f->message));
  if (f->constraint) json_object_set_new(o, "constraint", json_string(f->constraint));
  if (f->value) json_object_set_new(o, "value", load_or_null(f->value));
  if (f->column) json_object_set_new(o, "column", json_string(f->column));
  return o;
}

/* Write the report: one line per duplicated value, one per other refused
 * record, in the order of their first line. 0, or -1 on a write error. */
static int write_report(imp *im) {
  if (!im->nrefs) return 0;
  qsort(im->refs, im->nrefs, sizeof *im->refs, cmp_refusal);
  ritem *items = malloc(im->nrefs * sizeof *items);
  if (!items) return -1;
  size_t ni = 0;
  for (size_t i = 0; i < im->nrefs;) {
    size_t j = i + 1;
    const refusal *a = &im->refs[i];
    while (a->kind == ST_DUP && j < im->nrefs && im->refs[j].kind == ST_DUP &&
           !cmp_str(a->constraint, im->refs[j].constraint) &&
           !cmp_str(a->value, im->refs[j].value) && !cmp_str(a->owner, im->refs[j].owner))
      j++;
    items[ni++] = (ritem){a->line, i, j - i};
    i = j;
  }
  qsort(items, ni, sizeof *items, cmp_item);
  int rc = 0;
  for (size_t i = 0; i < ni && !rc; i++) {
    json_t *o = item_json(im, &items[i]);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    if (!s || fprintf(im->rep, "%s\n", s) < 0) rc = -1;
    free(s);
    json_decref(o);
  }
  free(items);
  if (fflush(im->rep)) rc = -1;
  return rc;
}

/* ------------------------------------------------------------ the import */

/* The exit code: the first refusal's in abort mode; otherwise the worst
 * class present: store error 7, invalid 1, limit 4, busy 6, duplicate 3. */
static int exit_rc(const imp *im) {
  if (im->fatal_rc) return im->fatal_rc;
  if (im->abort_mode && im->nrefs) return im->first_rc;
  if (im->count[ST_INVALID]) return UNICO_EINVAL;
  if (im->count[ST_LIMIT]) return UNICO_ELIMIT;
  if (im->count[ST_BUSY]) return UNICO_EBUSY;
  if (im->count[ST_DUP]) return UNICO_ECONFLICT;
  return UNICO_OK;
}

/* "2 duplicates, 1 invalid" */
static void describe_counts(const imp *im, char *buf, size_t n) {
  static const int order[] = {ST_DUP, ST_INVALID, ST_LIMIT, ST_BUSY, ST_ERROR};
  static const char *const names[] = {"duplicate", "invalid", "at a limit",
                                      "busy", "store error"};
  size_t used = 0;
  buf[0] = 0;
  for (size_t i = 0; i < 5 && used < n; i++) {
    uint64_t c = im->count[order[i]];
    if (!c) continue;
    int w = snprintf(buf + used, n - used, "%s%" PRIu64 " %s%s", used ? ", " : "",
                     c, names[i], order[i] == ST_DUP && c > 1 ? "s" : "");
    if (w < 0) break;
    used += (size_t)w;
  }
}

static int summary(imp *im, int report_failed) {
  double secs = now_s() - im->t0;
  uint64_t refused = im->nrefs;
  uint64_t attempted = im->inserted + refused;
  int rc = exit_rc(im);
  int code = unico_exit_code(rc);
  if (report_failed && !code) code = 7;
  json_t *o = json_object();
  json_object_set_new(o, "table", json_string(im->table));
  json_object_set_new(o, "read", json_integer((json_int_t)im->read));
  json_object_set_new(o, "inserted", json_integer((json_int_t)im->inserted));
  json_object_set_new(o, "duplicates", json_integer((json_int_t)im->count[ST_DUP]));
  json_object_set_new(o, "invalid", json_integer((json_int_t)im->count[ST_INVALID]));
  json_object_set_new(o, "limit", json_integer((json_int_t)im->count[ST_LIMIT]));
  json_object_set_new(o, "busy", json_integer((json_int_t)im->count[ST_BUSY]));
  json_object_set_new(o, "errors", json_integer((json_int_t)im->count[ST_ERROR]));
  json_object_set_new(o, "not_attempted", json_integer((json_int_t)(im->read - attempted)));
  json_object_set_new(o, "seconds", json_real((double)(long long)(secs * 1000 + 0.5) / 1000));
  json_object_set_new(o, "records_per_second",
                      json_integer(secs > 0 ? (json_int_t)((double)attempted / secs + 0.5) : 0));
  int stopped = im->aborted || im->fatal_rc;
  json_object_set_new(o, "aborted", json_boolean(stopped));
  uint64_t at = im->fatal_rc ? im->fatal_line : im->first_line;
  json_object_set_new(o, "aborted_line",
                      stopped && at ? json_integer((json_int_t)at) : json_null());
  char msg[600], what[200];
  describe_counts(im, what, sizeof what);
  if (im->fatal_rc) {
    snprintf(msg, sizeof msg, "the import stopped at line %" PRIu64 ": %s", im->fatal_line,
             im->fatal_msg);
  } else if (report_failed) {
    snprintf(msg, sizeof msg, "the report could not be written to %s",
             im->rep == stdout ? "standard output" : "its file");
  } else if (im->aborted) {
    snprintf(msg, sizeof msg,
             "the import stopped at line %" PRIu64 " (--on-conflict abort): %" PRIu64
             " of %" PRIu64 " records read were not imported (%s)",
             im->first_line, im->read - im->inserted, im->read, what);
  } else {
    snprintf(msg, sizeof msg, "%" PRIu64 " of %" PRIu64 " records were not imported (%s)",
             refused, im->read, what);
  }
  if (code) {
    json_object_set_new(o, "error",
                        json_string(report_failed && !rc ? "unavailable" : unico_errname(rc)));
    json_object_set_new(o, "code", json_integer(code));
    json_object_set_new(o, "message", json_string(msg));
  }
  char *s = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(12));
  if (s) printf("%s\n", s);
  fflush(stdout);
  free(s);
  json_decref(o);
  if (code) fprintf(stderr, "%s: import: %s\n", WHO, msg);
  return code;
}

/* Open the report file to write it, without truncating it: an old report
 * is replaced only once the input has been read to its end (empty_report),
 * so that nothing the input could be is emptied before it is read. A report
 * file that is the input itself (in is its stat, NULL if unknown), under
 * any name (the same path, a symbolic or a hard link, another path to it,
 * or the file standard input reads), is refused. 0, or the exit code of
 * the usage error printed. */
static int open_report(imp *im, const char *path, const struct stat *in) {
  int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0)
    return ucli_usage_error(WHO, "cannot create the report file %s: %s", path,
                            strerror(errno));
  struct stat rs;
  /* (a character device, /dev/null, may be both) */
  if (in && !S_ISCHR(in->st_mode) && fstat(fd, &rs) == 0 &&
      rs.st_dev == in->st_dev && rs.st_ino == in->st_ino) {
    close(fd);
    if (!strcmp(im->path, "-"))
      return ucli_usage_error(WHO, "--report %s is the file standard input reads: "
                              "writing the report would overwrite the input; "
                              "choose another report file", path);
    return ucli_usage_error(WHO, "--report %s is the input file %s: writing the "
                            "report would overwrite the input; choose another "
                            "report file", path, im->path);
  }
  if (!(im->rep = fdopen(fd, "w"))) {
    int err = errno;
    close(fd);
    return ucli_usage_error(WHO, "cannot create the report file %s: %s", path,
                            strerror(err));
  }
  return 0;
}

/* Empty the report file (an old report in it), now that the input has been
 * read; a file that is not a regular one is left as it is. 0, or -1. */
static int empty_report(imp *im) {
  struct stat rs;
  int fd = fileno(im->rep);
  if (fstat(fd, &rs) || !S_ISREG(rs.st_mode)) return 0;
  return ftruncate(fd, 0);
}

int ucli_import(unico *u, const char *table, const char *path,
                const ucli_import_opts *o) {
  static const ucli_import_opts defaults = UCLI_IMPORT_OPTS_INIT;
  imp im;
  unico_result res = UNICO_RESULT_INIT;
  char *buf = NULL;
  size_t bufcap = 0;
  int code = 0;
  if (!o) o = &defaults;
  memset(&im, 0, sizeof im);
  im.u = u;
  im.table = table;
  im.path = path;
  im.abort_mode = o->abort_on_refusal;
  im.nthreads = o->threads > 0 ? o->threads : UCLI_IMPORT_THREADS;
  im.batch_max = o->batch > 0 ? o->batch : UCLI_IMPORT_BATCH;
  im.progress = o->progress;
  im.owners.own = 1;
  im.total_bytes = -1;
  if (im.progress == UCLI_PROGRESS_AUTO)
    im.progress = isatty(STDERR_FILENO) ? UCLI_PROGRESS_BAR : UCLI_PROGRESS_LINES;

  /* Everything that can be wrong before a record is read. */
  struct stat st;
  im.in = strcmp(path, "-") ? fopen(path, "r") : stdin;
  if (!im.in) {
    code = ucli_usage_error(WHO, "cannot read %s: %s", path, strerror(errno));
    goto leave;
  }
  int have_st = fstat(fileno(im.in), &st) == 0;
  if (have_st) {
    if (S_ISDIR(st.st_mode)) {
      code = ucli_usage_error(WHO, "cannot read %s: %s", path, strerror(EISDIR));
      goto leave;
    }
    if (S_ISREG(st.st_mode)) im.total_bytes = (long long)st.st_size;
  }
  im.rep = stdout;
  if (o->report_path && strcmp(o->report_path, "-") &&
      (code = open_report(&im, o->report_path, have_st ? &st : NULL)))
    goto leave;
  /* An unknown table (or no schema) is one error, not one per record. An
   * empty object is refused either for the table or for its missing
   * primary key; only the first is the library's "does not exist". */
  int rc = unico_record_keys(u, table, "{}", &res);
  if (rc && (unico_exit_code(rc) != 1 || strstr(res.message, "does not exist"))) {
    code = ucli_report_error(WHO, rc, &res);
    goto leave;
  }
  unico_result_clear(&res);

  im.recs = calloc(im.batch_max, sizeof *im.recs);
  im.idx = calloc(im.batch_max, sizeof *im.idx);
  if (!im.recs || !im.idx || pool_start(&im)) {
    code = ucli_report_error(WHO, UNICO_ENOMEM, NULL);
    goto leave;
  }

  im.t0 = im.last_draw = now_s();
  uint64_t lineno = 0;
  int eof = 0;
  while (!eof && !im.fatal_rc && !im.aborted) {
    read_batch(&im, &buf, &bufcap, &lineno, &eof);
    if (im.n && !im.fatal_rc) run_batch(&im);
    for (size_t i = 0; i < im.n; i++) rec_clear(&im.recs[i]);
    progress(&im, 0);
  }
  progress(&im, 1);
  int report_failed = (im.rep != stdout && empty_report(&im)) || write_report(&im) != 0;
  if (report_failed)
    fprintf(stderr, "%s: import: cannot write the report: %s\n", WHO, strerror(errno));
  code = summary(&im, report_failed);

leave:
  pool_stop(&im);
  if (im.rep && im.rep != stdout && fclose(im.rep) && !code) {
    fprintf(stderr, "%s: import: cannot write the report: %s\n", WHO, strerror(errno));
    code = 7;
  }
  if (im.in && im.in != stdin) fclose(im.in);
  for (size_t i = 0; i < im.nrefs; i++) {
    refusal *f = &im.refs[i];
    free(f->pk);
    free(f->constraint);
    free(f->value);
    free(f->owner);
    free(f->message);
    free(f->column);
  }
  free(im.refs);
  free(im.recs);
  free(im.idx);
  free(im.arena);
  free(buf);
  smap_free(&im.owners);
  smap_free(&im.waves);
  unico_result_clear(&res);
  return code;
}
