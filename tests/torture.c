/* torture.c - threads and processes race for shared UNIQUE values, for the
 * last places of LIMIT groups and for values reserved by holds, under a
 * per-thread journal, with and without SIGKILL; verify() then proves the
 * invariants of DESIGN.md section 4 (1, 2, 3 and 5) from the journals and a
 * freshly opened store. Public API only. Modes: concurrency, crash, verify.
 *
 * Journal contract (one file per writer thread, "journal-*.log" in DIR; each
 * line is one JSON object written by a single write(2)):
 *   {"ev":"intent","seq":S,"pk":P,"kind":"insert|update|delete","op":OPID,
 *    "from":V,"body"|"patch":{...},"expect":BODY|null[,"adopt":STATE]}
 *     is written BEFORE the call: "from" is the version the writer believes
 *     P has, "expect" the body P has if the call applies (null: absent),
 *     "adopt" (janitor only) the state P was verified to have just before.
 *   {"ev":"ack","seq":S,"pk":P,"rc":RC,"err":NAME,"version":V,
 *    "present":B,"body":BODY|null,"busy":N[,"held":true]}
 *     is written AFTER the call: the outcome and the state (version, body)
 *     the writer now believes P has (a success's resulting version and
 *     body; after a refusal the unchanged belief).
 *   {"ev":"replay","seq":S,"pk":P,"rc":RC,"version":V}
 *     after some successes: the same call repeated with the same op id
 *     (it must return the first outcome and change nothing).
 *   {"ev":"hold","seq":S,"pk":P,"what":W,"rc":RC}
 *     a hold taken or given up by the writer of P around its write seq S
 *     (W: "reserve" of the value the write takes, "release" after it,
 *     "abandon" for one reserved and left to expire); it changes no
 *     record, verify counts it. "held" in an ack: the write was refused
 *     because another writer's live hold reserves a value it takes.
 *   {"ev":"settle","pk":P,"adopt":STATE}   (crash-mode janitor only)
 *     the state P was verified to have after its writer was killed with an
 *     intent unacked; from here on P must keep exactly that state.
 * Every pk is written by one thread only, so its events are totally ordered
 * by that thread's journal; files are read in name order, which is also the
 * order in which the crash mode's janitor journals follow the rounds. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "torture.h"
#include "unico.h"

static int g_retry_unknown;

static const char SCHEMA[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "team text, stamp text, "
    "CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold, "
    "UNIQUE (phone), CONSTRAINT users_team LIMIT 3 PER (team));";

const char *const kind_names[3] = {"insert", "update", "delete"};

/* ------------------------------------------------------------------ */
/* small utilities */

/* A seeded PRNG (splitmix64, testutil.h) per thread: tu_rng. */

static uint64_t mix_seed(uint64_t seed, int a, int b, int c) {
  tu_rng r = {seed ^ ((uint64_t)(unsigned)a << 40) ^
              ((uint64_t)(unsigned)b << 20) ^ (uint64_t)(unsigned)c};
  return tu_rng_next(&r);
}

int fmt(char *buf, size_t n, const char *f, ...) {
  va_list ap;
  va_start(ap, f);
  int w = vsnprintf(buf, n, f, ap);
  va_end(ap);
  return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* --store-base: the store is BASE + a fresh table name chosen once per run
 * (for remote stores such as dynamodb://HOST:PORT/); NULL: lmdb:DIR/store. */
static const char *g_store_base;
static char g_store_name[96];

/* How verify, the probe, repair and the janitor open the store. In crash
 * mode on a store running the claims protocol (g_claims_store) they wait
 * VERIFIER_GRACE_MS after the kill and then use it as the grace period:
 * the killed writers' operations can never finish, so their pending
 * claims and intents may be fenced at once rather than after 5 s, and a
 * round stays short. */
#define VERIFIER_GRACE_MS 300
unico_options g_vopts = UNICO_OPTIONS_INIT;
int g_claims_store;

/* The URL of the store the run uses. 0, or -1 when it does not fit. */
int store_url(char *buf, size_t n, const char *dir) {
  if (g_store_base && !strncmp(g_store_base, "dynamodb", 8))
    /* (the run's native tables apart from other runs') */
    return fmt(buf, n, "%s%s?table_prefix=%s.", g_store_base, g_store_name,
               g_store_name);
  if (g_store_base && (!strncmp(g_store_base, "cassandra://", 12) ||
                       !strncmp(g_store_base, "cassandras://", 13))) {
    /* (the base ends in "table="; the run's native tables apart, under a
     * prefix short enough for Cassandra's 48 characters: its pid and
     * time, the name's last two parts) */
    const char *tail = g_store_name, *u;
    for (int i = 0; i < 3 && (u = strchr(tail, '_')); i++) tail = u + 1;
    return fmt(buf, n, "%s%s&table_prefix=ut_%s_", g_store_base, g_store_name,
               tail);
  }
  if (g_store_base) return fmt(buf, n, "%s%s", g_store_base, g_store_name);
  return fmt(buf, n, "lmdb:%s/store", dir);
}

/* Whether a file name is a journal's, "journal-*.log". */
int is_journal(const char *name) {
  size_t l = strlen(name);
  return !strncmp(name, "journal-", 8) && l >= 12 &&
         !strcmp(name + l - 4, ".log");
}

/* The JSON text of a string (a one-column text primary key); malloc'd. */
char *json_str_text(const char *s) {
  json_t *j = json_string(s);
  char *t = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(j);
  return t;
}

/* Append o as one line with a single write(2). Steals o. 0 or -1. */
static int jput(int fd, json_t *o) {
  char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!s) return -1;
  size_t n = strlen(s);
  char *line = realloc(s, n + 2);
  if (!line) {
    free(s);
    return -1;
  }
  line[n] = '\n';
  line[n + 1] = 0;
  ssize_t w = write(fd, line, n + 1);
  free(line);
  return w == (ssize_t)(n + 1) ? 0 : -1;
}

/* Watchdog: a phase that takes longer than WATCHDOG_S is reported as a hang
 * (the children of the current phase are killed) instead of a silent stall. */
static volatile sig_atomic_t wd_pgid;

static void on_alarm(int sig) {
  static const char m[] =
      "torture: WATCHDOG: a phase made no progress for too long: HANG "
      "(a stuck store lock?)\n";
  (void)sig;
  ssize_t w = write(2, m, sizeof m - 1);
  (void)w;
  if (wd_pgid > 0) kill(-(pid_t)wd_pgid, SIGKILL);
  _exit(3);
}

static void watchdog(unsigned seconds) { alarm(seconds); }

/* ------------------------------------------------------------------ */
/* the workload: one thread */

/* What a worker thread believes of one of its primary keys. */
typedef struct pkstate {
  char pk[96];
  int present;
  uint64_t version;
  uint64_t top; /* the highest version seen of the key: an insert is above */
  json_t *body; /* owned; NULL when absent */
} pkstate;

typedef struct worker {
  const char *dir;
  unico *u; /* shared by the process's threads */
  int round; /* crash mode: >= 1 and part of every name; 0 otherwise */
  int proc, thr;
  long nops; /* operations to run; < 0: until killed */
  uint64_t seed;
  int failed; /* an unexpected result was met (printed) */
  char prefix[64];
} worker;

static void random_email(tu_rng *r, char *buf, size_t n) {
  fmt(buf, n, "user%u@example.com", tu_rng_below(r, NVALUES));
  for (char *p = buf; *p; p++)
    if (isalpha((unsigned char)*p) && tu_rng_below(r, 2))
      *p = (char)toupper((unsigned char)*p);
}

static void random_phone(tu_rng *r, char *buf, size_t n) {
  fmt(buf, n, "+1555000%02u", tu_rng_below(r, NVALUES));
}

/* body with patch applied (null removes a column), as unico_update does. */
static json_t *apply_patch(json_t *body, json_t *patch) {
  json_t *n = json_deep_copy(body);
  const char *k;
  json_t *v;
  if (!n) return NULL;
  json_object_foreach(patch, k, v) {
    if (json_is_null(v))
      json_object_del(n, k);
    else
      json_object_set(n, k, v);
  }
  return n;
}

static void wfail(worker *w, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static void wfail(worker *w, const char *f, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(msg, sizeof msg, f, ap);
  va_end(ap);
  fprintf(stderr, "torture: FAIL [%s] %s\n", w->prefix, msg);
  w->failed = 1;
}

/* Whether a UNICO_EBUSY answer means a live hold reserves a value the
 * write takes (a refusal, final until the hold ends) rather than an
 * operation in flight (retried). The result carries no reason code, so
 * the message written by report_held() (src/api/write.c) tells. */
int busy_by_hold(int rc, const unico_result *res) {
  return rc == UNICO_EBUSY && res->message[0] &&
         strstr(res->message, "reserved by a hold") != NULL;
}

/* One write, presenting the hold token `hold` (NULL: none), retried on
 * UNICO_EBUSY with the same op id (so applied at most once); *busy counts
 * the retries. A write refused by a live hold is not retried: the hold
 * may live for seconds. Returns the last rc. */
static int call(worker *w, int kind, const char *pktext, const char *argtext,
                uint64_t from, const char *op, const char *hold,
                unico_result *res, int *busy) {
  for (;;) {
    int rc;
    unico_write_options wo = UNICO_WRITE_OPTIONS_INIT;
    wo.op_id = op;
    wo.if_version = from;
    wo.holds = &hold;
    wo.nholds = hold ? 1 : 0;
    switch (kind) {
    case K_INSERT:
      rc = unico_insert_with(w->u, TABLE, argtext, &wo, res);
      break;
    case K_UPDATE:
      rc = unico_update_with(w->u, TABLE, pktext, argtext, &wo, res);
      break;
    default:
      rc = unico_delete(w->u, TABLE, pktext, from, op, res);
      break;
    }
    if (g_retry_unknown && *busy < UNKNOWN_RETRIES &&
        (rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE)) {
      (*busy)++;
      tu_sleep_ms(5);
      continue;
    }
    if (busy_by_hold(rc, res)) return rc;
    if (rc != UNICO_EBUSY || *busy >= BUSY_RETRIES) return rc;
    (*busy)++;
    tu_sleep_ms(1);
  }
}

/* A team (limit group) for a record, or NULL for none (1 time in 2). */
static const char *random_team(tu_rng *r) {
  static const char *const teams[NTEAMS] = {"red", "green", "blue", "gold"};
  return tu_rng_below(r, 2) ? teams[tu_rng_below(r, NTEAMS)] : NULL;
}

/* Journal a hold event (see the top of this file). 0 or -1. */
static int jhold(int fd, unsigned long seq, const char *pk, const char *what,
                 int rc) {
  return jput(fd, json_pack("{s:s,s:I,s:s,s:s,s:i}", "ev", "hold", "seq",
                            (json_int_t)seq, "pk", pk, "what", what, "rc", rc));
}

/* Reserve value of constraint con for ttl_ms under op id op (a repeat after
 * an unknown outcome answers the first time's token). On UNICO_OK *token
 * gets the hold's token (malloc'd). Returns the rc. */
static int reserve(worker *w, const char *con, const char *value,
                   uint64_t ttl_ms, const char *op, char **token) {
  unico_result res = UNICO_RESULT_INIT;
  json_t *a = json_pack("[s]", value);
  char *vt = a ? json_dumps(a, JSON_COMPACT) : NULL;
  int rc, tries = 0;
  json_decref(a);
  *token = NULL;
  if (!vt) return UNICO_ENOMEM;
  for (;;) {
    rc = unico_reserve(w->u, TABLE, con, vt, ttl_ms, op, &res);
    if (!(g_retry_unknown && tries++ < UNKNOWN_RETRIES &&
          (rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE)))
      break;
    unico_result_clear(&res);
    tu_sleep_ms(5);
  }
  if (rc == UNICO_OK) {
    json_t *o = json_loads(res.json ? res.json : "", 0, NULL);
    const char *t = json_string_value(json_object_get(o, "token"));
    *token = t ? strdup(t) : NULL;
    json_decref(o);
    if (!*token) rc = UNICO_ENOMEM;
  } else if (rc != UNICO_ECONFLICT && rc != UNICO_EBUSY) {
    wfail(w, "reserve %s [\"%s\"] (op %s): rc %d (%s): %s", con, value, op,
          rc, unico_errname(rc), res.message);
  }
  unico_result_clear(&res);
  free(vt);
  return rc;
}

/* Give up the hold with this token. UNICO_ENOTFOUND after a repeat (an
 * unknown outcome that applied) counts as released. Returns the rc. */
static int release(worker *w, const char *token) {
  int rc, tries = 0;
  for (;;) {
    rc = unico_release_hold(w->u, token, NULL);
    if (!(g_retry_unknown && tries++ < UNKNOWN_RETRIES &&
          (rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE)))
      break;
    tu_sleep_ms(5);
  }
  return rc == UNICO_ENOTFOUND && tries > 1 ? UNICO_OK : rc;
}

/* One operation on one of the thread's keys, journaled. 0, or -1 after a
 * failure was reported (the thread must stop). */
static int step(worker *w, tu_rng *r, int fd, pkstate *ps, unsigned long seq) {
  pkstate *p = &ps[tu_rng_below(r, KPKS)];
  char op[128], stamp[24], email[64], phone[32];
  json_t *arg = NULL, *expect = NULL;
  char *argtext = NULL, *pktext = NULL, *token = NULL;
  int kind, rc = UNICO_OK, ret = -1, busy = 0, held = 0;
  double t_hold = 0; /* when the hold the write presents was asked for */
  uint64_t from = p->version; /* the version the write is conditioned on */
  unico_result res = UNICO_RESULT_INIT;

  if (fmt(op, sizeof op, "%s-%lu", w->prefix, seq)) {
    wfail(w, "operation id too long");
    return -1;
  }
  fmt(stamp, sizeof stamp, "%016" PRIx64, tu_rng_next(r));
  if (!p->present) {
    kind = K_INSERT;
    random_email(r, email, sizeof email);
    arg = json_pack("{s:s,s:s,s:s}", "id", p->pk, "email", email, "stamp",
                    stamp);
    unsigned ph = tu_rng_below(r, 10);
    if (arg && ph < 8) {
      random_phone(r, phone, sizeof phone);
      json_object_set_new(arg, "phone", json_string(phone));
    } else if (arg && ph == 8) {
      json_object_set_new(arg, "phone", json_null());
    }
    const char *team = random_team(r);
    if (arg && team) json_object_set_new(arg, "team", json_string(team));
    expect = arg ? json_incref(arg) : NULL;
  } else if (tu_rng_below(r, 55) < 40) {
    kind = K_UPDATE;
    arg = json_pack("{s:s}", "stamp", stamp);
    unsigned what = tu_rng_below(r, 100);
    if (arg && what < 55) {
      random_email(r, email, sizeof email);
      json_object_set_new(arg, "email", json_string(email));
    }
    if (arg && what >= 35 && what < 80) {
      random_phone(r, phone, sizeof phone);
      json_object_set_new(arg, "phone", json_string(phone));
    } else if (arg && what >= 80) {
      json_object_set_new(arg, "phone", json_null());
    }
    if (arg && tu_rng_below(r, 10) < 3) { /* move to another group, or none */
      const char *team = random_team(r);
      json_object_set_new(arg, "team", team ? json_string(team) : json_null());
    }
    expect = arg ? apply_patch(p->body, arg) : NULL;
  } else {
    kind = K_DELETE;
  }
  if (kind != K_DELETE && (!arg || !expect)) {
    wfail(w, "out of memory building a request");
    goto leave;
  }
  argtext = arg ? json_dumps(arg, JSON_COMPACT) : NULL;
  pktext = json_str_text(p->pk);
  /* A value reserved and left to expire: others meet it held, then free
   * (after the run verify finds every such value free again). */
  if (tu_rng_below(r, 24) == 0) {
    char val[64], hop[160], *tok = NULL;
    int phone_hold = (int)tu_rng_below(r, 2);
    if (phone_hold) random_phone(r, val, sizeof val);
    else random_email(r, val, sizeof val);
    fmt(hop, sizeof hop, "%s-abandon", op);
    int hrc = reserve(w, phone_hold ? C_PHONE : C_EMAIL, val,
                      50 + tu_rng_below(r, ABANDON_TTL_MS - 49), hop, &tok);
    free(tok);
    if (jhold(fd, seq, p->pk, "abandon", hrc) || w->failed) goto leave;
  }
  /* The email the write takes, reserved first: the write presents the
   * token, and while the hold lives nobody else may take the value. */
  const char *wemail = kind == K_DELETE ? NULL
                       : json_string_value(json_object_get(arg, "email"));
  if (wemail && tu_rng_below(r, 10) == 0) {
    char hop[160];
    fmt(hop, sizeof hop, "%s-hold", op);
    t_hold = tu_now_s();
    int hrc = reserve(w, C_EMAIL, wemail, HOLD_TTL_MS, hop, &token);
    if (jhold(fd, seq, p->pk, "reserve", hrc) || w->failed) goto leave;
  }
  json_t *in = json_pack("{s:s,s:I,s:s,s:s,s:s,s:I,s:O}", "ev", "intent",
                         "seq", (json_int_t)seq, "pk", p->pk, "kind",
                         kind_names[kind], "op", op, "from",
                         (json_int_t)p->version, "expect",
                         expect ? expect : json_null());
  if (in && arg) json_object_set(in, kind == K_INSERT ? "body" : "patch", arg);
  if (!pktext || (arg && !argtext) || jput(fd, in)) {
    wfail(w, "cannot journal the intent of %s: %s", op, strerror(errno));
    goto leave;
  }

  rc = call(w, kind, pktext, argtext, from, op, token, &res, &busy);
  held = busy_by_hold(rc, &res);
  /* Answered while the hold surely lived (the store's clock started it
   * after t_hold; a margin for the clocks' steps). */
  int hold_live = token && tu_now_s() < t_hold + HOLD_TTL_MS / 1000.0 - 0.5;

  int bad = 0;
  if (rc == UNICO_OK) {
    /* (an insert continues the versions of the key's deleted records:
     * a version is never seen twice for a key) */
    uint64_t want = kind == K_INSERT ? p->top + 1
                                     : p->version + (kind == K_UPDATE);
    if (kind == K_INSERT ? res.version < want : res.version != want) {
      wfail(w, "%s of %s (op %s) succeeded with version %" PRIu64
               ", expected %s%" PRIu64,
            kind_names[kind], p->pk, op, res.version,
            kind == K_INSERT ? "at least " : "", want);
      bad = 1;
    }
    if (res.version > p->top) p->top = res.version;
    json_decref(p->body);
    p->body = NULL;
    if (kind == K_DELETE) {
      p->present = 0;
      p->version = 0;
    } else {
      p->present = 1;
      p->version = res.version;
      p->body = json_incref(expect);
    }
  } else if (rc == UNICO_ECONFLICT || held) {
    /* Refused: the thread's belief stays. Only the shared values may
     * conflict or be held by another, never the thread's own key, never
     * with itself, and never the value of the hold the write presents. */
    if (kind == K_DELETE || (strcmp(res.constraint, C_EMAIL) &&
                             strcmp(res.constraint, C_PHONE))) {
      wfail(w, "%s of %s (op %s): unexpected %s on %s: %s", kind_names[kind],
            p->pk, op, held ? "hold" : "conflict", res.constraint,
            res.message);
      bad = 1;
    } else if (!held && res.owner && !strcmp(res.owner, pktext)) {
      wfail(w, "%s of %s (op %s): conflict with itself: %s", kind_names[kind],
            p->pk, op, res.message);
      bad = 1;
    } else if (hold_live && !strcmp(res.constraint, C_EMAIL)) {
      wfail(w, "%s of %s (op %s) presented a live hold on its email %s, "
               "yet was refused on it: %s",
            kind_names[kind], p->pk, op, wemail, res.message);
      bad = 1;
    }
  } else if (rc == UNICO_ELIMIT) {
    /* Refused by a full group: only a write that joins a group the record
     * is not in may be (a delete, a record staying in its group, or
     * leaving every group never is). */
    const char *now_team =
        p->body ? json_string_value(json_object_get(p->body, "team")) : NULL;
    const char *new_team = json_string_value(json_object_get(expect, "team"));
    if (strcmp(res.constraint, C_TEAM) || !new_team ||
        (now_team && !strcmp(now_team, new_team))) {
      wfail(w, "%s of %s (op %s, team %s -> %s): unexpected limit on %s: %s",
            kind_names[kind], p->pk, op, now_team ? now_team : "none",
            new_team ? new_team : "none", res.constraint, res.message);
      bad = 1;
    }
  } else {
    wfail(w, "%s of %s (op %s, body %s, believed version %" PRIu64
             "): rc %d (%s): %s",
          kind_names[kind], p->pk, op, argtext ? argtext : "-", p->version, rc,
          unico_errname(rc), res.message);
    bad = 1;
  }
  json_t *ack = json_pack("{s:s,s:I,s:s,s:i,s:s,s:I,s:b,s:O,s:i}", "ev", "ack",
                          "seq", (json_int_t)seq, "pk", p->pk, "rc", rc, "err",
                          unico_errname(rc), "version",
                          (json_int_t)p->version, "present", p->present,
                          "body", p->body ? p->body : json_null(), "busy",
                          busy);
  if (ack && held) json_object_set_new(ack, "held", json_true());
  if (jput(fd, ack)) {
    wfail(w, "cannot journal the ack of %s: %s", op, strerror(errno));
    goto leave;
  }
  /* Now and then repeat a success with the same op id: it must return the
   * first outcome and not apply again (verify sees a second application as
   * a version or body the journal does not have). Journaled as "replay". */
  if (!bad && rc == UNICO_OK && tu_rng_below(r, 32) == 0) {
    int b2 = 0;
    uint64_t first = res.version;
    int rc2 = call(w, kind, pktext, argtext, from, op, token, &res, &b2);
    if (rc2 != UNICO_OK || res.version != first) {
      wfail(w, "replay of %s %s (op %s) returned rc %d (%s) version %" PRIu64
               ", the first outcome was ok version %" PRIu64 ": %s",
            kind_names[kind], p->pk, op, rc2, unico_errname(rc2), res.version,
            first, res.message);
      bad = 1;
    }
    json_t *rp = json_pack("{s:s,s:I,s:s,s:i,s:I}", "ev", "replay", "seq",
                           (json_int_t)seq, "pk", p->pk, "rc", rc2, "version",
                           (json_int_t)res.version);
    if (jput(fd, rp)) {
      wfail(w, "cannot journal the replay of %s: %s", op, strerror(errno));
      goto leave;
    }
  }
  /* The hold after the write: a success took its value, so the hold is
   * gone (a release answering OK would free the record's own value);
   * otherwise it is given up, or (once in 8) left to expire. (After a
   * refusal the hold is still there unless it expired meanwhile, which
   * its short ttl makes likely enough that both answers are accepted
   * here; conformance's test_holds asserts that a refused write leaves
   * the hold, on every store.) */
  if (token && !bad) {
    int give_up = rc == UNICO_OK ? tu_rng_below(r, 2) == 0 : tu_rng_below(r, 8) != 0;
    if (give_up) {
      int hrc = release(w, token);
      if (rc == UNICO_OK ? hrc != UNICO_ENOTFOUND
                         : hrc != UNICO_OK && hrc != UNICO_ENOTFOUND) {
        wfail(w, "release of the hold of op %s after the write (rc %s): "
                 "rc %d (%s)",
              op, unico_errname(rc), hrc, unico_errname(hrc));
        bad = 1;
      }
      if (jhold(fd, seq, p->pk, "release", hrc)) bad = 1;
    }
  }
  ret = bad ? -1 : 0;
leave:
  free(token);
  unico_result_clear(&res);
  json_decref(arg);
  json_decref(expect);
  free(argtext);
  free(pktext);
  return ret;
}

static void *worker_main(void *vp) {
  worker *w = vp;
  char path[4096];
  pkstate ps[KPKS];
  tu_rng r = {w->seed};
  memset(ps, 0, sizeof ps);
  int fd = -1;
  if (fmt(path, sizeof path, "%s/journal-%s.log", w->dir, w->prefix))
    wfail(w, "journal path too long");
  else if ((fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                      0644)) < 0)
    wfail(w, "cannot open %s: %s", path, strerror(errno));
  /* Crash mode: a failure must not wait for the kill to be seen. */
  if (fd < 0) {
    if (w->nops < 0) _exit(2);
    return NULL;
  }
  for (int k = 0; k < KPKS; k++)
    fmt(ps[k].pk, sizeof ps[k].pk, "%s-k%d", w->prefix, k);
  for (unsigned long seq = 1; w->nops < 0 || (long)seq <= w->nops; seq++) {
    if (step(w, &r, fd, ps, seq)) {
      if (w->nops < 0) _exit(2);
      break;
    }
  }
  for (int k = 0; k < KPKS; k++) json_decref(ps[k].body);
  close(fd);
  return NULL;
}

/* A worker process: nthreads threads on one handle. Returns the exit code:
 * 0 when every thread ran its operations without a failure. */
static int worker_process(const char *dir, int round, int proc, int nthreads,
                          long ops_per_thread, uint64_t seed) {
  char url[4200];
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  worker ws[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  int code = 0, started = 0;
  if (store_url(url, sizeof url, dir)) return 2;
  int rc = unico_open(&u, url, NULL, &res);
  if (rc) {
    fprintf(stderr, "torture: FAIL worker %d: open %s: %s\n", proc, url,
            res.message);
    unico_result_clear(&res);
    return 2;
  }
  unico_result_clear(&res);
  for (int t = 0; t < nthreads; t++) {
    worker *w = &ws[t];
    memset(w, 0, sizeof *w);
    w->dir = dir;
    w->u = u;
    w->round = round;
    w->proc = proc;
    w->thr = t;
    w->nops = ops_per_thread;
    w->seed = mix_seed(seed, round, proc, t);
    if (round)
      fmt(w->prefix, sizeof w->prefix, "r%04d-p%d-t%d", round, proc, t);
    else
      fmt(w->prefix, sizeof w->prefix, "p%d-t%d", proc, t);
    if (pthread_create(&tids[t], NULL, worker_main, w)) {
      fprintf(stderr, "torture: FAIL worker %d: pthread_create\n", proc);
      code = 2;
      break;
    }
    started++;
  }
  for (int t = 0; t < started; t++) {
    pthread_join(tids[t], NULL);
    if (ws[t].failed) code = 1;
  }
  unico_close(u);
  return code;
}

/* ------------------------------------------------------------------ */
/* modes */

/* Remove what an earlier run left in dir (only the files this program
 * makes) and create it; then apply the schema to a fresh store. 0 or -1. */
static int fresh_dir(const char *dir) {
  char path[4096];
  if (mkdir(dir, 0777) && errno != EEXIST) {
    fprintf(stderr, "torture: cannot create %s: %s\n", dir, strerror(errno));
    return -1;
  }
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "torture: cannot open %s: %s\n", dir, strerror(errno));
    return -1;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!is_journal(de->d_name)) continue;
    if (fmt(path, sizeof path, "%s/%s", dir, de->d_name) || unlink(path)) {
      fprintf(stderr, "torture: cannot remove %s/%s\n", dir, de->d_name);
      closedir(d);
      return -1;
    }
  }
  closedir(d);
  /* the store's own files only: LMDB's, its lock, log-mode log files */
  if (fmt(path, sizeof path, "%s/store", dir)) return -1;
  d = opendir(path);
  while (d && (de = readdir(d))) {
    size_t l = strlen(de->d_name);
    int ours = !strcmp(de->d_name, "data.mdb") || !strcmp(de->d_name, "lock.mdb") ||
               !strcmp(de->d_name, "unico.lock") ||
               (!strncmp(de->d_name, "log-", 4) && l > 10 &&
                !strcmp(de->d_name + l - 6, ".unico"));
    if (!ours) continue;
    char file[4400];
    if (fmt(file, sizeof file, "%s/%s", path, de->d_name)) return -1;
    if (unlink(file) && errno != ENOENT) {
      fprintf(stderr, "torture: cannot remove %s: %s\n", file, strerror(errno));
      closedir(d);
      return -1;
    }
  }
  if (d) closedir(d);
  if (fmt(path, sizeof path, "%s/store", dir)) return -1;
  if (rmdir(path) && errno != ENOENT) {
    fprintf(stderr, "torture: cannot remove %s: %s\n", path, strerror(errno));
    return -1;
  }

  char url[4200];
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  if (store_url(url, sizeof url, dir)) return -1;
  int rc = unico_open(&u, url, NULL, &res);
  if (!rc) rc = unico_schema_apply(u, SCHEMA, &res);
  if (rc) fprintf(stderr, "torture: setting up %s: %s\n", url, res.message);
  unico_result_clear(&res);
  unico_close(u);
  return rc ? -1 : 0;
}

/* Fork one worker process into process group *pgid (the first one leads
 * it; *pgid 0 before). Returns the pid, or -1. */
static pid_t spawn(pid_t *pgid, const char *dir, int round, int proc,
                   int nthreads, long ops_per_thread, uint64_t seed) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "torture: fork: %s\n", strerror(errno));
    return -1;
  }
  if (pid == 0) {
    alarm(0);
    setpgid(0, *pgid);
    if (ops_per_thread > 0) alarm(WATCHDOG_S);
    exit(worker_process(dir, round, proc, nthreads, ops_per_thread, seed));
  }
  if (setpgid(pid, *pgid ? *pgid : pid) && errno != EACCES)
    fprintf(stderr, "torture: setpgid: %s\n", strerror(errno));
  if (!*pgid) *pgid = pid;
  wd_pgid = (sig_atomic_t)*pgid;
  return pid;
}

static double env_scale(void) {
  const char *s = getenv("UNICO_TORTURE_SCALE");
  char *end;
  if (!s || !*s) return 1.0;
  double d = strtod(s, &end);
  if (*end || !(d > 0) || d > 1000) {
    fprintf(stderr, "torture: ignoring UNICO_TORTURE_SCALE=%s\n", s);
    return 1.0;
  }
  return d;
}

static int mode_concurrency(const char *dir, int threads, int procs, long ops,
                            uint64_t seed) {
  pid_t pids[MAX_PROCS], pgid = 0;
  int bad = 0, n = 0;
  long per = (ops + (long)procs * threads - 1) / ((long)procs * threads);
  char url[4200];
  if (store_url(url, sizeof url, dir)) return 1;
  printf("torture concurrency: %d processes x %d threads, %ld ops each "
         "(%ld in total), seed %" PRIu64 ", store %s\n",
         procs, threads, per, per * procs * threads, seed, url);
  if (fresh_dir(dir)) return 1;
  watchdog(WATCHDOG_S);
  double t0 = tu_now_s();
  for (int p = 0; p < procs; p++) {
    pid_t pid = spawn(&pgid, dir, 0, p, threads, per, seed);
    if (pid < 0) {
      bad = 1;
      break;
    }
    pids[n++] = pid;
  }
  for (int i = 0; i < n; i++) {
    int st;
    while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st)) {
      printf("torture: FAIL worker process %d ended with %s %d\n", i,
             WIFEXITED(st) ? "exit code" : "signal",
             WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
      bad = 1;
    }
  }
  wd_pgid = 0;
  double el = tu_now_s() - t0;
  /* every hold's time up: verify then finds each value nobody holds free */
  tu_sleep_ms(HOLD_TTL_MS + 300);
  watchdog(WATCHDOG_S);
  long done = 0;
  long nv = verify(dir, 0, 1, NULL, &done);
  alarm(0);
  printf("torture concurrency: %ld operations answered in %.2f s: %.0f ops/s\n",
         done, el, el > 0 ? (double)done / el : 0.0);
  if (done < per * procs * threads && !bad) {
    printf("torture: FAIL only %ld of %ld operations were journaled\n", done,
           per * procs * threads);
    bad = 1;
  }
  printf("torture concurrency: %s\n", bad || nv ? "FAILED" : "passed");
  return bad || nv ? 1 : 0;
}

/* A write right after the kill: the write lock and the values a killed
 * writer may have been using must not be blocked (invariant 4). */
static int probe(unico *u, int round) {
  char pk[64], body[256], pkt[80];
  unico_result res = UNICO_RESULT_INIT;
  fmt(pk, sizeof pk, "probe-r%04d", round);
  fmt(pkt, sizeof pkt, "\"%s\"", pk);
  fmt(body, sizeof body,
      "{\"id\":\"%s\",\"email\":\"probe-%d@torture.invalid\",\"phone\":"
      "\"probe-%d\"}",
      pk, round, round);
  int rc = unico_insert(u, TABLE, body, NULL, &res);
  if (!rc) rc = unico_delete(u, TABLE, pkt, 1, NULL, &res);
  if (rc)
    printf("torture: FAIL probe write after round %d: rc %d (%s): %s\n", round,
           rc, unico_errname(rc), res.message);
  unico_result_clear(&res);
  return rc ? -1 : 0;
}

/* After a clean round: delete about two thirds of the live records, so the
 * values are contended by both new writers and old records. Journaled like
 * a worker (journal-rNNNN-zjanitor.log, after that round's files in name
 * order); each intent "adopt"s the state verify found. A pk whose last
 * intent had no ack and that is not deleted gets a "settle" line with the
 * state found, so later rounds hold it to exactly that state. 0 or -1. */
static int janitor(unico *u, const char *dir, int round, json_t *live,
                   tu_rng *r, long *deleted) {
  char path[4096];
  int ret = 0;
  *deleted = 0;
  if (fmt(path, sizeof path, "%s/journal-r%04d-zjanitor.log", dir, round))
    return -1;
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    printf("torture: FAIL cannot open %s: %s\n", path, strerror(errno));
    return -1;
  }
  unsigned long seq = 0;
  for (size_t i = 0; i < json_array_size(live) && !ret; i++) {
    json_t *e = json_array_get(live, i);
    const char *pk = json_string_value(json_object_get(e, "pk"));
    json_int_t ver = json_integer_value(json_object_get(e, "version"));
    int present = json_is_true(json_object_get(e, "present"));
    if (!present || tu_rng_below(r, 3) == 0) {
      if (json_is_true(json_object_get(e, "pending"))) {
        json_t *st = json_pack("{s:s,s:s,s:{s:b,s:I,s:O}}", "ev", "settle",
                               "pk", pk ? pk : "", "adopt", "present", present,
                               "version", ver, "body",
                               json_object_get(e, "body"));
        if (jput(fd, st)) {
          printf("torture: FAIL janitor cannot journal: %s\n", strerror(errno));
          ret = -1;
        }
      }
      continue;
    }
    char op[96];
    char *pkt = json_str_text(pk ? pk : "");
    unico_result res = UNICO_RESULT_INIT;
    seq++;
    fmt(op, sizeof op, "r%04d-janitor-%lu", round, seq);
    json_t *in = json_pack(
        "{s:s,s:I,s:s,s:s,s:s,s:I,s:n,s:{s:b,s:I,s:O}}", "ev", "intent", "seq",
        (json_int_t)seq, "pk", pk ? pk : "", "kind", "delete", "op", op,
        "from", ver, "expect", "adopt", "present", 1, "version", ver, "body",
        json_object_get(e, "body"));
    if (!pkt || jput(fd, in)) {
      printf("torture: FAIL janitor cannot journal: %s\n", strerror(errno));
      free(pkt);
      ret = -1;
      break;
    }
    int rc = unico_delete(u, TABLE, pkt, (uint64_t)ver, op, &res);
    if (rc)
      printf("torture: FAIL janitor delete %s v%" JSON_INTEGER_FORMAT
             ": rc %d (%s): %s\n",
             pk, ver, rc, unico_errname(rc), res.message);
    else
      (*deleted)++;
    json_t *ack = json_pack("{s:s,s:I,s:s,s:i,s:s,s:I,s:b,s:O,s:i}", "ev",
                            "ack", "seq", (json_int_t)seq, "pk", pk, "rc", rc,
                            "err", unico_errname(rc), "version",
                            rc ? ver : 0, "present", rc != 0, "body",
                            rc ? json_object_get(e, "body") : json_null(),
                            "busy", 0);
    if (jput(fd, ack)) ret = -1;
    if (rc) ret = -1;
    unico_result_clear(&res);
    free(pkt);
  }
  close(fd);
  return ret;
}

/* Whether the fresh store at url runs the claims protocol (its check
 * report counts claims in force apart). 1, 0, or -1 when it cannot say. */
static int runs_claims(const char *url) {
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  int rc = unico_open(&u, url, NULL, &res);
  if (!rc) rc = unico_check(u, &res);
  json_t *o = rc ? NULL : json_loads(res.json ? res.json : "", 0, NULL);
  int claims = o ? json_object_get(o, "claims_in_force") != NULL : -1;
  if (rc) printf("torture: FAIL check of the fresh store: %s\n", res.message);
  json_decref(o);
  unico_result_clear(&res);
  unico_close(u);
  return claims;
}

static int mode_crash(const char *dir, int kills, long kill_min,
                      long kill_max, uint64_t seed) {
  tu_rng r = {seed};
  char url[4200];
  if (store_url(url, sizeof url, dir)) return 1;
  printf("torture crash: %d kills after %ld-%ld ms, seed %" PRIu64
         " (rerun with --seed %" PRIu64 "), store %s\n",
         kills, kill_min, kill_max, seed, seed, url);
  if (fresh_dir(dir)) return 1;
  if ((g_claims_store = runs_claims(url)) < 0) return 1;
  if (g_claims_store) g_vopts.grace_ms = VERIFIER_GRACE_MS;
  double t0 = tu_now_s();
  for (int round = 1; round <= kills; round++) {
    pid_t pids[MAX_PROCS], pgid = 0;
    int threads[MAX_PROCS], n = 0, bad = 0;
    int procs = 2 + (int)tu_rng_below(&r, 3);
    long ms = kill_min + (long)tu_rng_below(&r, (unsigned)(kill_max - kill_min + 1));
    watchdog(WATCHDOG_S);
    for (int p = 0; p < procs; p++) {
      threads[p] = 2 + (int)tu_rng_below(&r, 3);
      pid_t pid = spawn(&pgid, dir, round, p, threads[p], -1,
                        mix_seed(seed, round, 0, 0));
      if (pid < 0) {
        bad = 1;
        break;
      }
      pids[n++] = pid;
    }
    tu_sleep_ms(ms);
    /* All at once: the group, then each (in case one had not joined). */
    if (pgid) kill(-pgid, SIGKILL);
    for (int i = 0; i < n; i++) kill(pids[i], SIGKILL);
    for (int i = 0; i < n; i++) {
      int st;
      while (waitpid(pids[i], &st, 0) < 0 && errno == EINTR) {
      }
      if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
        printf("torture: FAIL round %d: worker process %d ended with %s %d "
               "before the kill\n",
               round, i, WIFEXITED(st) ? "exit code" : "signal",
               WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        bad = 1;
      }
    }
    wd_pgid = 0;
    printf("round %d/%d: %d processes x", round, kills, procs);
    for (int i = 0; i < procs; i++) printf(" %d", threads[i]);
    printf(" threads, killed after %ld ms\n", ms);

    unico *u = NULL;
    unico_result res = UNICO_RESULT_INIT;
    /* (claims protocol: the killed writers' operations are fenced, see
     * VERIFIER_GRACE_MS) */
    if (g_claims_store) tu_sleep_ms(VERIFIER_GRACE_MS + 50);
    int rc = unico_open(&u, url, &g_vopts, &res);
    if (rc) printf("torture: FAIL open %s: %s\n", url, res.message);
    unico_result_clear(&res);
    if (rc || probe(u, round)) bad = 1;
    /* The claims protocol leaves what the killed writers had taken as
     * orphans and intents, which no reader counts: check (in verify),
     * with no repair run, settles them and must then count none. */
    unico_close(u);
    u = NULL;

    json_t *live = NULL;
    long done = 0;
    long nv = verify(dir, 1, 0, &live, &done);
    long deleted = 0;
    if (!bad && !nv) {
      rc = unico_open(&u, url, &g_vopts, &res);
      unico_result_clear(&res);
      if (rc || janitor(u, dir, round, live, &r, &deleted)) bad = 1;
      unico_close(u);
    }
    json_decref(live);
    alarm(0);
    if (bad || nv) {
      printf("torture crash: FAILED in round %d (seed %" PRIu64 ")\n", round,
             seed);
      return 1;
    }
    printf("  janitor deleted %ld records; %ld operations answered so far\n",
           deleted, done);
  }
  printf("torture crash: %d kills, every round verified clean, %.1f s: "
         "passed\n",
         kills, tu_now_s() - t0);
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: torture concurrency --dir DIR [--procs 4] [--threads 4] "
          "[--ops 20000] [--seed N]\n"
          "       torture crash --dir DIR [--kills 50] [--kill-ms 20:150] "
          "[--seed N]\n"
          "       torture verify --dir DIR [--inflight]\n"
          "       (concurrency and crash: [--retry-unknown]: repeat a write "
          "whose outcome is\n"
          "       unknown with the same op id, for stores with injected "
          "faults)\n"
          "       (every mode: [--store-base URL], e.g. "
          "dynamodb://127.0.0.1:8000/ : the store is\n"
          "       URL + a fresh table name instead of lmdb:DIR/store; DIR "
          "still holds the journals;\n"
          "       verify takes the whole URL the run printed)\n"
          "\n"
          "concurrency: --procs worker processes, each with --threads "
          "threads on its\n"
          "  own handle (4 x 4 = 16 threads by default), run at least --ops "
          "operations\n"
          "  in total, then verify. crash: each of --kills rounds forks 2-4 "
          "processes of\n"
          "  2-4 threads, SIGKILLs them after 20-150 ms (--kill-ms) and verifies\n"
          "  (claims protocol: unico_check, with no repair, must leave no orphan). "
          "verify: "
          "check the\n"
          "  journals and store in DIR (--inflight: accept writes in flight "
          "at a kill;\n"
          "  on by default when DIR holds crash-mode journals).\n"
          "UNICO_TORTURE_SCALE (default 1) multiplies the default --ops and "
          "--kills;\n"
          "  they never go below 20000 and 50.\n");
}

static int parse_long(const char *s, long lo, long hi, long *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = v;
  return 0;
}

/* Whether dir holds crash-mode journals ("journal-r..."). */
static int has_crash_journals(const char *dir) {
  DIR *d = opendir(dir);
  int found = 0;
  struct dirent *de;
  if (!d) return 0;
  while (!found && (de = readdir(d)))
    found = !strncmp(de->d_name, "journal-r", 9);
  closedir(d);
  return found;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : NULL, *dir = NULL;
  long threads = 4, procs = 4, ops = -1, kills = -1, inflight = 0;
  long kill_min = 20, kill_max = 150;
  uint64_t seed = 0;
  int have_seed = 0;
  if (!mode || !strcmp(mode, "--help") || !strcmp(mode, "-h")) {
    usage(mode ? stdout : stderr);
    return mode ? 0 : 1;
  }
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(a, "--inflight")) {
      inflight = 1;
      continue;
    }
    if (!strcmp(a, "--retry-unknown")) {
      g_retry_unknown = 1;
      continue;
    }
    if (!val) {
      bad = 1;
    } else if (!strcmp(a, "--dir")) {
      dir = val;
    } else if (!strcmp(a, "--store-base")) {
      g_store_base = val;
    } else if (!strcmp(a, "--threads")) {
      bad = parse_long(val, 1, MAX_THREADS, &threads);
    } else if (!strcmp(a, "--procs")) {
      bad = parse_long(val, 1, MAX_PROCS, &procs);
    } else if (!strcmp(a, "--ops")) {
      bad = parse_long(val, 1, 1000000000L, &ops);
    } else if (!strcmp(a, "--kills")) {
      bad = parse_long(val, 1, 1000000L, &kills);
    } else if (!strcmp(a, "--kill-ms")) {
      /* MIN:MAX, the range the kill delay is drawn from */
      char lo[32], *colon = strchr(val, ':');
      bad = !colon || (size_t)(colon - val) >= sizeof lo;
      if (!bad) {
        memcpy(lo, val, (size_t)(colon - val));
        lo[colon - val] = 0;
        bad = parse_long(lo, 1, 600000L, &kill_min) ||
              parse_long(colon + 1, kill_min, 600000L, &kill_max);
      }
    } else if (!strcmp(a, "--seed")) {
      char *end;
      errno = 0;
      seed = strtoull(val, &end, 10);
      bad = errno || end == val || *end;
      have_seed = 1;
    } else {
      bad = 1;
    }
    if (bad) {
      fprintf(stderr, "torture: bad argument %s%s%s\n", a, val ? " " : "",
              val ? val : "");
      usage(stderr);
      return 1;
    }
    i++;
  }
  if (!dir) {
    fprintf(stderr, "torture: --dir DIR is required\n");
    usage(stderr);
    return 1;
  }
  /* One fresh table name for the whole run, shared by the forked workers
   * and verify (a table name: [A-Za-z0-9_.-]). */
  if (strcmp(mode, "verify")) /* verify: --store-base is the run's whole URL */
    fmt(g_store_name, sizeof g_store_name, "unico_torture_%s_%ld_%ld", mode,
        (long)getpid(), (long)time(NULL));
  if (!have_seed) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    seed = ((uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec) ^
           ((uint64_t)getpid() << 32);
    seed %= 1000000000000ULL;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_alarm;
  sigaction(SIGALRM, &sa, NULL);
  setvbuf(stdout, NULL, _IOLBF, 0);

  double scale = env_scale();
  if (!strcmp(mode, "concurrency")) {
    if (ops < 0) {
      ops = (long)(MIN_OPS * scale);
      if (ops < MIN_OPS) ops = MIN_OPS;
    }
    return mode_concurrency(dir, (int)threads, (int)procs, ops, seed);
  }
  if (!strcmp(mode, "crash")) {
    if (kills < 0) {
      kills = (long)(MIN_KILLS * scale);
      if (kills < MIN_KILLS) kills = MIN_KILLS;
    }
    return mode_crash(dir, (int)kills, kill_min, kill_max, seed);
  }
  if (!strcmp(mode, "verify")) {
    int inf = inflight || has_crash_journals(dir);
    printf("torture verify: %s%s\n", dir,
           inf ? " (writes in flight at a kill accepted)" : "");
    return verify(dir, inf, 0, NULL, NULL) ? 1 : 0;
  }
  fprintf(stderr, "torture: unknown mode %s\n", mode);
  usage(stderr);
  return 1;
}
