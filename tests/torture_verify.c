/* torture_verify.c - torture's verify: the journals the writers left
 * (torture.c's top comment has their contract) read back and checked
 * against a freshly opened store, invariants 1, 2, 3 and 5 of DESIGN.md
 * section 4, plus the limit groups and the holds. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "torture.h"
#include "unico.h"

/* ------------------------------------------------------------------ */
/* verify */

/* What the journals say of one primary key. */
typedef struct vpk {
  char *pk;
  const char *file; /* journal that wrote it last (borrowed) */
  int present;
  uint64_t version;
  uint64_t top;    /* the highest version the key has had */
  json_t *body;    /* owned; NULL when absent */
  json_t *pending; /* owned: intent line with no ack yet, or NULL */
} vpk;

typedef struct vstats {
  int allow_inflight; /* crash mode: a last unacked intent may have applied */
  long violations, printed;
  int cat;          /* the check now running: 0 a, 1 b, 2 c (and journals) */
  long by_cat[3];   /* violations per check */
  long replays;
  long limits, held, holds[3], holds_ok[3]; /* holds: reserve/release/abandon */
  long groups[NTEAMS], in_groups;           /* live members per team */
  long files, lines, torn, intents, acks, acked_ok, conflicts, errors, busy;
  long by_kind[3];
  long live, emails, phones, lookups;
  long inflight_applied, inflight_not;
  long check_records, check_claims, check_outcomes;
  vpk *pks;
  size_t npks, cap;
  json_t *index; /* pk -> index into pks */
  /* [{pk, present, version, body, pending}] of the pks that are live or
   * whose last intent has no ack: their stored state, for the janitor. */
  json_t *live_list;
} vstats;

static void viol(vstats *v, const char *f, ...)
    __attribute__((format(printf, 2, 3)));
static void viol(vstats *v, const char *f, ...) {
  v->violations++;
  v->by_cat[v->cat]++;
  if (v->printed >= MAX_PRINTED) return;
  v->printed++;
  va_list ap;
  va_start(ap, f);
  fputs("torture: VIOLATION: ", stdout);
  vprintf(f, ap);
  fputc('\n', stdout);
  va_end(ap);
}

/* A compact text of j for messages ("-" for NULL), malloc'd: the caller
 * frees it. */
static char *jtext(const json_t *j) {
  char *s = j ? json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  return s ? s : strdup("-");
}

static vpk *vpk_get(vstats *v, const char *pk) {
  json_t *ix = json_object_get(v->index, pk);
  if (ix) return &v->pks[json_integer_value(ix)];
  if (v->npks == v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 256;
    vpk *n = realloc(v->pks, cap * sizeof *n);
    if (!n) return NULL;
    v->pks = n;
    v->cap = cap;
  }
  vpk *p = &v->pks[v->npks];
  memset(p, 0, sizeof *p);
  p->pk = strdup(pk);
  if (!p->pk ||
      json_object_set_new(v->index, pk, json_integer((json_int_t)v->npks))) {
    free(p->pk);
    return NULL;
  }
  v->npks++;
  return p;
}

static int kind_of(const char *s) {
  for (int k = 0; k < 3; k++)
    if (s && !strcmp(s, kind_names[k])) return k;
  return -1;
}

/* Two records' bodies hold the same values: a null column and one left
 * out are the same (a native table keeps no attribute for a null). */
static int body_eq(const json_t *a, const json_t *b) {
  const char *k;
  json_t *v;
  if (!json_is_object(a) || !json_is_object(b))
    return json_equal((json_t *)a, (json_t *)b);
  json_object_foreach((json_t *)a, k, v) {
    json_t *w = json_object_get(b, k);
    if (json_is_null(v) ? w && !json_is_null(w) : !json_equal(v, w)) return 0;
  }
  json_object_foreach((json_t *)b, k, v)
    if (!json_is_null(v) && !json_object_get(a, k)) return 0;
  return 1;
}

static int state_eq(int pa, uint64_t va, const json_t *ba, int pb, uint64_t vb,
                    const json_t *bb) {
  if (pa != pb) return 0;
  if (!pa) return 1;
  return va == vb && ba && bb && body_eq(ba, bb);
}

/* The state p has if its pending intent applies. */
static void pending_result(const vpk *p, int *present, uint64_t *version,
                           json_t **body) {
  int kind = kind_of(json_string_value(json_object_get(p->pending, "kind")));
  json_t *e = json_object_get(p->pending, "expect");
  *present = kind != K_DELETE;
  *version = kind == K_INSERT   ? p->top + 1
             : kind == K_UPDATE ? p->version + 1
                                : 0;
  *body = *present ? e : NULL;
}

static void set_state(vpk *p, int present, uint64_t version, json_t *body) {
  json_t *b = present && body ? json_incref(body) : NULL;
  if (p->version > p->top) p->top = p->version;
  if (present && version > p->top) p->top = version;
  json_decref(p->body);
  p->present = present;
  p->version = present ? version : 0;
  p->body = b;
}

/* The janitor saw state `adopt` in the store: it must be p's acked state or
 * its pending intent applied; it becomes p's state and settles the intent. */
static void v_adopt(vstats *v, vpk *p, json_t *adopt, const char *file,
                    long lineno) {
  int ap = json_is_true(json_object_get(adopt, "present"));
  uint64_t av = (uint64_t)json_integer_value(json_object_get(adopt, "version"));
  json_t *ab = json_object_get(adopt, "body");
  if (json_is_null(ab)) ab = NULL;
  int ok = state_eq(p->present, p->version, p->body, ap, av, ab);
  if (!ok && p->pending) {
    int pp;
    uint64_t pv;
    json_t *pb;
    pending_result(p, &pp, &pv, &pb);
    ok = state_eq(pp, pv, pb, ap, av, ab);
  }
  if (!ok)
    viol(v, "%s:%ld: pk %s adopted a state that no journaled event gives",
         file, lineno, p->pk);
  set_state(p, ap, av, ab);
  json_decref(p->pending);
  p->pending = NULL;
}

/* One journal line. */
static void v_line(vstats *v, const char *file, long lineno, json_t *o) {
  const char *ev = json_string_value(json_object_get(o, "ev"));
  const char *pk = json_string_value(json_object_get(o, "pk"));
  json_int_t seq = json_integer_value(json_object_get(o, "seq"));
  vpk *p = pk ? vpk_get(v, pk) : NULL;
  if (!ev || !p) {
    viol(v, "%s:%ld: malformed journal line", file, lineno);
    return;
  }
  if (p->file && strcmp(p->file, file) && !json_object_get(o, "adopt"))
    viol(v, "%s:%ld: pk %s also written by %s", file, lineno, pk, p->file);
  p->file = file;
  if (!strcmp(ev, "replay")) {
    v->replays++; /* its outcome was checked by the worker */
    return;
  }
  if (!strcmp(ev, "hold")) { /* the worker checked its outcome */
    static const char *const whats[] = {"reserve", "release", "abandon"};
    const char *what = json_string_value(json_object_get(o, "what"));
    for (int k = 0; k < 3; k++)
      if (what && !strcmp(what, whats[k])) {
        v->holds[k]++;
        v->holds_ok[k] += json_integer_value(json_object_get(o, "rc")) == 0;
      }
    return;
  }
  if (!strcmp(ev, "settle")) {
    json_t *adopt = json_object_get(o, "adopt");
    if (!adopt) viol(v, "%s:%ld: settle without a state", file, lineno);
    else v_adopt(v, p, adopt, file, lineno);
    return;
  }
  if (!strcmp(ev, "intent")) {
    v->intents++;
    int kind = kind_of(json_string_value(json_object_get(o, "kind")));
    json_t *adopt = json_object_get(o, "adopt");
    if (kind < 0) {
      viol(v, "%s:%ld: intent of unknown kind", file, lineno);
      return;
    }
    if (adopt) {
      v_adopt(v, p, adopt, file, lineno);
    } else if (p->pending) {
      viol(v, "%s:%ld: pk %s has a second intent before the ack of seq %" JSON_INTEGER_FORMAT,
           file, lineno, pk,
           json_integer_value(json_object_get(p->pending, "seq")));
    }
    uint64_t from = (uint64_t)json_integer_value(json_object_get(o, "from"));
    if ((kind == K_INSERT && p->present) ||
        (kind != K_INSERT && (!p->present || from != p->version)))
      viol(v, "%s:%ld: pk %s: %s from version %" PRIu64
              " but the journal says %s version %" PRIu64,
           file, lineno, pk, kind_names[kind], from,
           p->present ? "present at" : "absent,", p->version);
    json_decref(p->pending);
    p->pending = json_incref(o);
    return;
  }
  if (strcmp(ev, "ack")) {
    viol(v, "%s:%ld: unknown event %s", file, lineno, ev);
    return;
  }
  v->acks++;
  if (!p->pending ||
      json_integer_value(json_object_get(p->pending, "seq")) != seq) {
    viol(v, "%s:%ld: ack of pk %s seq %" JSON_INTEGER_FORMAT
            " without its intent",
         file, lineno, pk, seq);
    return;
  }
  int rc = (int)json_integer_value(json_object_get(o, "rc"));
  int kind = kind_of(json_string_value(json_object_get(p->pending, "kind")));
  v->busy += (long)json_integer_value(json_object_get(o, "busy"));
  int ap = json_is_true(json_object_get(o, "present"));
  json_t *ab = json_object_get(o, "body");
  if (json_is_null(ab)) ab = NULL;
  uint64_t av = (uint64_t)json_integer_value(json_object_get(o, "version"));
  if (rc == UNICO_OK) {
    int pp;
    uint64_t pv;
    json_t *pb;
    pending_result(p, &pp, &pv, &pb);
    /* The writer's belief after a success must be the intent applied. */
    if (!state_eq(pp, pv, pb, ap, av, ab))
      viol(v, "%s:%ld: pk %s seq %" JSON_INTEGER_FORMAT
              ": acked state differs from its intent (version %" PRIu64
              " vs %" PRIu64 ")",
           file, lineno, pk, seq, av, pv);
    set_state(p, ap, av, ab);
    v->acked_ok++;
    if (kind >= 0) v->by_kind[kind]++;
  } else if (rc == UNICO_ECONFLICT || rc == UNICO_ELIMIT ||
             (rc == UNICO_EBUSY && json_is_true(json_object_get(o, "held")))) {
    /* refused: by a unique value, a full group, or another's live hold */
    v->conflicts++;
    v->limits += rc == UNICO_ELIMIT;
    v->held += rc == UNICO_EBUSY;
    if (!state_eq(p->present, p->version, p->body, ap, av, ab))
      viol(v, "%s:%ld: pk %s seq %" JSON_INTEGER_FORMAT
              ": a refused write changed the writer's belief",
           file, lineno, pk, seq);
  } else {
    /* The worker already failed on this; its outcome is unknown, so it
     * stays pending (either outcome is accepted below). */
    v->errors++;
    viol(v, "%s:%ld: pk %s seq %" JSON_INTEGER_FORMAT
            ": the write failed with %s (%d)",
         file, lineno, pk, seq,
         json_string_value(json_object_get(o, "err")), rc);
    return;
  }
  json_decref(p->pending);
  p->pending = NULL;
}

static int name_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read every journal of dir in name order into v. 0, or -1 on an I/O error
 * (reported as a violation). */
static int v_journals(vstats *v, const char *dir, char ***names_out,
                      size_t *n_out) {
  DIR *d = opendir(dir);
  char **names = NULL;
  size_t n = 0, cap = 0;
  *names_out = NULL;
  *n_out = 0;
  if (!d) {
    viol(v, "cannot open %s: %s", dir, strerror(errno));
    return -1;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!is_journal(de->d_name)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 64;
      char **nn = realloc(names, cap * sizeof *nn);
      if (!nn) break;
      names = nn;
    }
    if (!(names[n] = strdup(de->d_name))) break;
    n++;
  }
  closedir(d);
  if (n) qsort(names, n, sizeof *names, name_cmp);
  *names_out = names;
  *n_out = n;
  for (size_t i = 0; i < n; i++) {
    char path[4096];
    if (fmt(path, sizeof path, "%s/%s", dir, names[i])) {
      viol(v, "path too long: %s/%s", dir, names[i]);
      return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
      viol(v, "cannot open %s: %s", path, strerror(errno));
      return -1;
    }
    char *buf = NULL;
    size_t len = 0, bcap = 0;
    for (;;) {
      if (bcap - len < 65536) {
        bcap = bcap ? bcap * 2 : 1 << 20;
        char *nb = realloc(buf, bcap);
        if (!nb) break;
        buf = nb;
      }
      size_t got = fread(buf + len, 1, bcap - len, f);
      len += got;
      if (got == 0) break;
    }
    int err = ferror(f) || !buf;
    fclose(f);
    if (err) {
      free(buf);
      viol(v, "cannot read %s", path);
      return -1;
    }
    v->files++;
    long lineno = 0;
    size_t off = 0;
    while (off < len) {
      char *nl = memchr(buf + off, '\n', len - off);
      lineno++;
      if (!nl) {
        /* A line cut by a kill during its write(2): the call it announced
         * (an intent) was never made, or (an ack) it had already ended,
         * which the pending intent covers. */
        if (!v->allow_inflight)
          viol(v, "%s:%ld: incomplete last line", names[i], lineno);
        v->torn++;
        break;
      }
      json_error_t je;
      json_t *o = json_loadb(buf + off, (size_t)(nl - (buf + off)), 0, &je);
      if (!o) {
        viol(v, "%s:%ld: not JSON: %s", names[i], lineno, je.text);
      } else {
        v->lines++;
        v_line(v, names[i], lineno, o);
        json_decref(o);
      }
      off = (size_t)(nl - buf) + 1;
    }
    free(buf);
  }
  return 0;
}

/* Lowercase ASCII copy (the workload's values are ASCII, so this is the
 * casefold), into buf. */
static void ascii_lower(const char *s, char *buf, size_t n) {
  size_t i = 0;
  for (; s[i] && i + 1 < n; i++) buf[i] = (char)tolower((unsigned char)s[i]);
  buf[i] = 0;
}

/* unico_lookup of one value; *owner_out gets the owner's pk (malloc'd) or
 * NULL on UNICO_ENOTFOUND. Returns the rc. */
static int lookup(unico *u, const char *con, const char *value,
                  char **owner_out, unico_result *res) {
  json_t *a = json_pack("[s]", value);
  char *vt = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  *owner_out = NULL;
  if (!vt) return UNICO_ENOMEM;
  int rc = unico_lookup(u, TABLE, con, vt, res);
  free(vt);
  if (rc == UNICO_OK) {
    json_t *o = json_loads(res->json ? res->json : "", 0, NULL);
    const char *pk = json_string_value(json_object_get(o, "pk"));
    *owner_out = strdup(pk ? pk : "(no pk in lookup output)");
    json_decref(o);
    if (!*owner_out) rc = UNICO_ENOMEM;
  }
  return rc;
}

/* Check one value: the lookup must name `holder` (NULL: nobody holds it). */
static void check_lookup(vstats *v, unico *u, const char *con,
                         const char *value, const char *holder) {
  unico_result res = UNICO_RESULT_INIT;
  char *owner = NULL;
  int rc = lookup(u, con, value, &owner, &res);
  v->lookups++;
  if (holder && rc != UNICO_OK)
    viol(v, "lookup %s [\"%s\"]: rc %d (%s: %s), but live record %s holds it",
         con, value, rc, unico_errname(rc), res.message, holder);
  else if (holder && strcmp(owner, holder))
    viol(v, "lookup %s [\"%s\"] returned %s, but live record %s holds it", con,
         value, owner, holder);
  else if (!holder && rc == UNICO_OK)
    viol(v, "lookup %s [\"%s\"] returned %s, but no live record holds it", con,
         value, owner);
  else if (!holder && rc != UNICO_ENOTFOUND)
    viol(v, "lookup %s [\"%s\"]: rc %d (%s: %s)", con, value, rc,
         unico_errname(rc), res.message);
  free(owner);
  unico_result_clear(&res);
}

/* Whether a probe's call is to be made again: its outcome is unknown or
 * the store unavailable (injected faults), or an operation in flight holds
 * the value (a store with faults may leave one for its grace period).
 * Every call is retried under its op id, so it applies at most once and a
 * repeat returns the first answer. */
static int probe_again(int rc, const unico_result *res, double until) {
  return (rc == UNICO_EUNKNOWN || rc == UNICO_EUNAVAILABLE ||
          (rc == UNICO_EBUSY && !busy_by_hold(rc, res))) &&
         tu_now_s() < until;
}

/* Reserve the value of con under op id op, then release it: it must be
 * free (nobody's hold in force, no record holding it). A release repeated
 * after an unknown answer may find its hold already gone. Returns the rc
 * of the first call that failed, with its message in res. */
static int reserve_free(unico *u, const char *con, const char *value,
                        const char *op, double until, unico_result *res) {
  json_t *a = json_pack("[s]", value);
  char *vt = a ? json_dumps(a, JSON_COMPACT) : NULL, *t = NULL;
  json_decref(a);
  int rc = UNICO_ENOMEM;
  while (vt) {
    rc = unico_reserve(u, TABLE, con, vt, 60000, op, res);
    if (!probe_again(rc, res, until)) break;
    tu_sleep_ms(20);
  }
  free(vt);
  if (rc == UNICO_OK) {
    json_t *o = json_loads(res->json ? res->json : "", 0, NULL);
    const char *tok = json_string_value(json_object_get(o, "token"));
    t = tok ? strdup(tok) : NULL;
    json_decref(o);
    rc = t ? UNICO_OK : UNICO_ECORRUPT;
  }
  for (int i = 0; t; i++) {
    rc = unico_release_hold(u, t, res);
    if (rc == UNICO_ENOTFOUND && i > 0) rc = UNICO_OK;
    if (!probe_again(rc, res, until)) break;
    tu_sleep_ms(20);
  }
  free(t);
  return rc;
}

/* Insert probe record free-N taking the email em and the phone ph (NULL:
 * not that one), which no live record holds and no hold may reserve any
 * more; each must first be reserved and released (the hold path), then
 * the insert must succeed. Then it is deleted. Each step is retried on
 * its own (probe_again). Violations go to v. */
static void free_probe(vstats *v, unico *u, int n, const char *em,
                       const char *ph) {
  char pk[32], op[96];
  unico_result res = UNICO_RESULT_INIT;
  static unsigned probes; /* (op ids unique across verify runs) */
  long nonce = (long)(tu_now_s() * 1000) + (long)probes++;
  fmt(pk, sizeof pk, "free-%d", n);
  json_t *b = json_pack("{s:s}", "id", pk);
  if (b && em) json_object_set_new(b, "email", json_string(em));
  if (b && ph) json_object_set_new(b, "phone", json_string(ph));
  char *bt = b ? json_dumps(b, JSON_COMPACT) : NULL, *pkt = json_str_text(pk);
  json_decref(b);
  int rc = bt && pkt ? UNICO_OK : UNICO_ENOMEM;
  double until = tu_now_s() + 15;
  fmt(op, sizeof op, "probe-%s-%ld-email", pk, nonce);
  if (rc == UNICO_OK && em) rc = reserve_free(u, C_EMAIL, em, op, until, &res);
  fmt(op, sizeof op, "probe-%s-%ld-phone", pk, nonce);
  if (rc == UNICO_OK && ph) rc = reserve_free(u, C_PHONE, ph, op, until, &res);
  fmt(op, sizeof op, "probe-%s-%ld-insert", pk, nonce);
  while (rc == UNICO_OK) {
    rc = unico_insert(u, TABLE, bt, op, &res);
    if (!probe_again(rc, &res, until)) break;
    tu_sleep_ms(20);
    rc = UNICO_OK;
  }
  fmt(op, sizeof op, "probe-%s-%ld-delete", pk, nonce);
  while (rc == UNICO_OK) {
    rc = unico_delete(u, TABLE, pkt, 0, op, &res);
    if (!probe_again(rc, &res, until)) break;
    tu_sleep_ms(20);
    rc = UNICO_OK;
  }
  if (rc)
    viol(v, "free value probe %s (email %s, phone %s): no live record holds "
            "them and every hold has ended, but rc %d (%s): %s",
         pk, em ? em : "-", ph ? ph : "-", rc, unico_errname(rc), res.message);
  unico_result_clear(&res);
  free(bt);
  free(pkt);
}

/* Read the journals of dir and the store at dir/store (opened fresh) and
 * check invariants 1, 2, 3 and 5 (see the top of this file); settled: the
 * writers ended and every hold's time is up, so also (f) every value
 * nobody holds is free and no hold is left in force. allow_inflight:
 * the workers were killed, so each pk's last intent may lack its ack. When
 * live_out is not NULL it receives [{pk, present, version, body, pending}]
 * (the stored state) of the pks that are live or have an unacked intent. Prints a summary line per check; returns the violation count
 * (-1 when the store cannot be opened). *acked_out (may be NULL) receives
 * the number of acked operations. */
long verify(const char *dir, int allow_inflight, int settled,
                   json_t **live_out, long *acked_out) {
  vstats v;
  char url[4200];
  char **names = NULL;
  size_t nnames = 0;
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  json_t *emails = json_object(), *phones = json_object();
  memset(&v, 0, sizeof v);
  v.allow_inflight = allow_inflight;
  v.cat = 2;
  v.index = json_object();
  v.live_list = json_array();
  if (live_out) *live_out = NULL;
  if (acked_out) *acked_out = 0;
  if (!v.index || !v.live_list || !emails || !phones) {
    viol(&v, "out of memory");
    goto leave;
  }
  if (v_journals(&v, dir, &names, &nnames)) goto leave;

  if (store_url(url, sizeof url, dir)) {
    viol(&v, "store path too long");
    goto leave;
  }
  int rc = unico_open(&u, url, &g_vopts, &res);
  if (rc) {
    viol(&v, "cannot open %s: %s", url, res.message);
    goto leave;
  }

  /* (c) every pk's stored state is its last acked state, or (crash mode)
   * its unacked last intent applied exactly. */
  for (size_t i = 0; i < v.npks; i++) {
    vpk *p = &v.pks[i];
    char *pkt = json_str_text(p->pk);
    int gp = 0;
    uint64_t gv = 0;
    json_t *gb = NULL, *got = NULL;
    rc = pkt ? unico_get(u, TABLE, pkt, &res) : UNICO_ENOMEM;
    free(pkt);
    if (rc == UNICO_OK) {
      got = json_loads(res.json ? res.json : "", 0, NULL);
      gp = 1;
      gv = (uint64_t)json_integer_value(json_object_get(got, "version"));
      gb = json_object_get(got, "record");
      if (!gb) viol(&v, "get %s: no record in %s", p->pk, res.json);
    } else if (rc != UNICO_ENOTFOUND) {
      viol(&v, "get %s: rc %d (%s): %s", p->pk, rc, unico_errname(rc),
           res.message);
      unico_result_clear(&res);
      continue;
    }
    unico_result_clear(&res);
    if (p->pending && !allow_inflight)
      viol(&v, "pk %s: intent seq %" JSON_INTEGER_FORMAT " has no ack",
           p->pk, json_integer_value(json_object_get(p->pending, "seq")));
    if (state_eq(p->present, p->version, p->body, gp, gv, gb)) {
      if (p->pending) v.inflight_not++;
    } else {
      int pp = 0;
      uint64_t pv = 0;
      json_t *pb = NULL;
      if (p->pending) pending_result(p, &pp, &pv, &pb);
      if (p->pending && state_eq(pp, pv, pb, gp, gv, gb)) {
        v.inflight_applied++;
      } else {
        char *want = jtext(p->body), *have = jtext(gb);
        char *inf = p->pending ? jtext(p->pending) : NULL;
        viol(&v,
             "pk %s (%s): last acked state %s v%" PRIu64 " %s, but the store "
             "has %s v%" PRIu64 " %s%s%s",
             p->pk, p->file ? p->file : "?",
             p->present ? "present" : "absent", p->version, want,
             gp ? "present" : "absent", gv, have,
             inf ? "; unacked intent " : "", inf ? inf : "");
        free(want);
        free(have);
        free(inf);
      }
    }
    if ((gp && gb) || p->pending)
      json_array_append_new(
          v.live_list,
          json_pack("{s:s,s:b,s:I,s:O,s:b}", "pk", p->pk, "present", gp && gb,
                    "version", (json_int_t)gv, "body",
                    gp && gb ? gb : json_null(), "pending", p->pending != NULL));
    if (gp && gb) {
      v.live++;
      v.cat = 1;
      /* (b) independently of the library: no two live records share a
       * casefolded email or a phone. */
      const char *em = json_string_value(json_object_get(gb, "email"));
      const char *ph = json_string_value(json_object_get(gb, "phone"));
      if (em) {
        char low[128];
        ascii_lower(em, low, sizeof low);
        json_t *prev = json_object_get(emails, low);
        if (prev)
          viol(&v, "live records %s and %s both hold email %s",
               json_string_value(prev), p->pk, low);
        else
          json_object_set_new(emails, low, json_string(p->pk));
        v.emails++;
      }
      if (ph) {
        json_t *prev = json_object_get(phones, ph);
        if (prev)
          viol(&v, "live records %s and %s both hold phone %s",
               json_string_value(prev), p->pk, ph);
        else
          json_object_set_new(phones, ph, json_string(p->pk));
        v.phones++;
      }
      /* (e) the record's limit group, counted here from what the store
       * holds, not from the library's counters */
      const char *tm = json_string_value(json_object_get(gb, "team"));
      if (tm) {
        static const char *const teams[NTEAMS] = {"red", "green", "blue",
                                                  "gold"};
        int t = 0;
        while (t < NTEAMS && strcmp(teams[t], tm)) t++;
        if (t == NTEAMS)
          viol(&v, "live record %s has team %s, which no writer wrote", p->pk,
               tm);
        else if (++v.groups[t] == TEAM_LIMIT + 1)
          viol(&v, "team %s has more than its limit of %d live records "
                   "(the %d-th is %s)",
               tm, TEAM_LIMIT, TEAM_LIMIT + 1, p->pk);
        v.in_groups++;
      }
      v.cat = 2;
    }
    json_decref(got);
  }

  /* (b) through the library: each live value's lookup names its holder
   * (with the stored spelling and a case-swapped one), and each value of the
   * workload's space is held by whom the lookup says, or by nobody. */
  v.cat = 1;
  for (size_t i = 0; i < json_array_size(v.live_list); i++) {
    json_t *e = json_array_get(v.live_list, i);
    const char *pk = json_string_value(json_object_get(e, "pk"));
    json_t *b = json_object_get(e, "body");
    if (!json_is_true(json_object_get(e, "present"))) continue;
    const char *em = json_string_value(json_object_get(b, "email"));
    const char *ph = json_string_value(json_object_get(b, "phone"));
    if (em) {
      char low[128];
      ascii_lower(em, low, sizeof low);
      const char *holder = json_string_value(json_object_get(emails, low));
      check_lookup(&v, u, C_EMAIL, em, holder ? holder : pk);
    }
    if (ph) {
      const char *holder = json_string_value(json_object_get(phones, ph));
      check_lookup(&v, u, C_PHONE, ph, holder ? holder : pk);
    }
  }
  for (int n = 0; n < NVALUES; n++) {
    char val[64];
    fmt(val, sizeof val, "user%d@example.com", n);
    const char *holder = json_string_value(json_object_get(emails, val));
    check_lookup(&v, u, C_EMAIL, val, holder);
    fmt(val, sizeof val, "USER%d@EXAMPLE.COM", n);
    check_lookup(&v, u, C_EMAIL, val, holder);
    fmt(val, sizeof val, "+1555000%02d", n);
    check_lookup(&v, u, C_PHONE, val, json_string_value(json_object_get(phones, val)));
  }

  /* (f) settled: every writer ended and every hold's time is up, so each
   * value no live record holds is free: an insert taking it succeeds (a
   * hold that outlives its time, or a claim or group place a refused or
   * released write left behind, would refuse it). The probe records are
   * deleted again. */
  if (settled) {
    v.cat = 1;
    for (int n = 0; n < NVALUES; n++) {
      char em[64], ph[64];
      fmt(em, sizeof em, "user%d@example.com", n);
      fmt(ph, sizeof ph, "+1555000%02d", n);
      int efree = !json_object_get(emails, em), pfree = !json_object_get(phones, ph);
      if (efree || pfree) free_probe(&v, u, n, efree ? em : NULL, pfree ? ph : NULL);
    }
  }

  /* (a) the library's own audit, which must also count exactly the live
   * records and the claims their values need: nothing refused left a
   * claim or a record behind (d). */
  v.cat = 0;
  /* (check settles what it meets, so it writes: under injected faults an
   * unknown or unavailable answer is asked again, as for the probes) */
  double check_until = tu_now_s() + 60;
  do {
    unico_result_clear(&res);
    rc = unico_check(u, &res);
  } while (probe_again(rc, &res, check_until));
  {
    json_t *rep = json_loads(res.json ? res.json : "", 0, NULL);
    if (json_integer_value(json_object_get(rep, "settled")))
      printf("  check settled %" JSON_INTEGER_FORMAT
             " leftovers of writers that died\n",
             json_integer_value(json_object_get(rep, "settled")));
    v.check_records = (long)json_integer_value(json_object_get(rep, "records"));
    v.check_claims = (long)json_integer_value(json_object_get(rep, "claims"));
    /* (claims protocol: a failed or crashed write may leave an orphan
     * claim, or one still in flight, which the validity rule disregards
     * and the next writer or repair reclaims: compare the claims in force) */
    if (json_object_get(rep, "claims_in_force"))
      v.check_claims =
          (long)json_integer_value(json_object_get(rep, "claims_in_force"));
    v.check_outcomes = (long)json_integer_value(json_object_get(rep, "outcomes"));
    long live_holds =
        (long)(json_integer_value(json_object_get(rep, "holds")) -
               json_integer_value(json_object_get(rep, "expired_holds")));
    if (rc != UNICO_OK || !json_is_true(json_object_get(rep, "ok")))
      viol(&v, "unico_check: rc %d (%s): %s; report %s", rc, unico_errname(rc),
           res.message, res.json ? res.json : "(none)");
    else if (v.check_records != v.live)
      viol(&v, "unico_check counts %ld live records, the journals' pks %ld",
           v.check_records, v.live);
    else if (v.check_claims != v.emails + v.phones)
      viol(&v, "unico_check counts %ld claims; the live records hold %ld "
               "values",
           v.check_claims, v.emails + v.phones);
    else if (g_claims_store && allow_inflight &&
             (json_integer_value(json_object_get(rep, "orphans")) ||
              json_integer_value(json_object_get(rep, "in_flight"))))
      viol(&v, "unico_check (which settles what the killed writers left, "
               "with no repair run) still counts orphans or operations in "
               "flight; report %s",
           res.json);
    else if (settled && live_holds)
      viol(&v, "unico_check counts %ld holds still in force after every "
               "hold's time was up; report %s",
           live_holds, res.json);
    json_decref(rep);
  }
  unico_result_clear(&res);

  static const char *const verdict[] = {"ok", "FAILED"};
  printf("  a) unico_check (inv. 1, 5): %s, records %ld, claims %ld, outcomes "
         "%ld\n",
         verdict[v.by_cat[0] > 0], v.check_records, v.check_claims,
         v.check_outcomes);
  printf("  b) unique values and lookups (inv. 1, 5): %s, live %ld, emails "
         "%ld, phones %ld, lookups %ld\n",
         verdict[v.by_cat[1] > 0], v.live, v.emails, v.phones, v.lookups);
  printf("  c) durability (inv. 3): %s, pks %ld, journals %ld, lines %ld (torn %ld), "
         "acked ok %ld (insert %ld, update %ld, delete %ld), in flight at "
         "kill: applied %ld, not applied %ld\n",
         verdict[v.by_cat[2] > 0], (long)v.npks, v.files, v.lines, v.torn, v.acked_ok,
         v.by_kind[K_INSERT], v.by_kind[K_UPDATE], v.by_kind[K_DELETE],
         v.inflight_applied, v.inflight_not);
  printf("  d) refused writes left nothing (inv. 3): %s, refusals %ld (full "
         "group %ld, held %ld), busy retries %ld, errors %ld, op-id replays "
         "%ld (per pk: c, per value and record: a%s)\n",
         verdict[v.by_cat[0] + v.by_cat[2] > 0], v.conflicts, v.limits,
         v.held, v.busy, v.errors, v.replays, settled ? ", f" : "");
  printf("  e) limit groups (inv. 2): %s, live members per team (limit %d):",
         verdict[v.by_cat[1] > 0], TEAM_LIMIT);
  for (int t = 0; t < NTEAMS; t++) printf(" %ld", v.groups[t]);
  printf("; holds reserved %ld/%ld for a write, %ld/%ld left to expire, "
         "released %ld/%ld\n",
         v.holds_ok[0], v.holds[0], v.holds_ok[2], v.holds[2], v.holds_ok[1],
         v.holds[1]);
  /* A run that never met a full group or a hold proved nothing about
   * them (settled: a whole concurrency run, not a crash round). */
  if (settled && (!v.limits || !v.holds_ok[0] || !v.holds_ok[2]))
    viol(&v, "the workload never met a full group (%ld) or never held a "
             "value (%ld, %ld): nothing was raced",
         v.limits, v.holds_ok[0], v.holds_ok[2]);
leave:
  if (v.violations > v.printed)
    printf("torture: ... and %ld more violations\n", v.violations - v.printed);
  printf("  verify: %s (%ld violation%s)\n", v.violations ? "FAILED" : "ok",
         v.violations, v.violations == 1 ? "" : "s");
  fflush(stdout);
  unico_result_clear(&res);
  unico_close(u);
  if (acked_out) *acked_out = v.acked_ok + v.conflicts;
  if (live_out)
    *live_out = v.live_list;
  else
    json_decref(v.live_list);
  for (size_t i = 0; i < v.npks; i++) {
    free(v.pks[i].pk);
    json_decref(v.pks[i].body);
    json_decref(v.pks[i].pending);
  }
  free(v.pks);
  json_decref(v.index);
  json_decref(emails);
  json_decref(phones);
  for (size_t i = 0; i < nnames; i++) free(names[i]);
  free(names);
  return v.violations;
}
