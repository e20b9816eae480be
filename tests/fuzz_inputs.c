/* fuzz_inputs.c - bad input gets a clear error and loses nothing: tens of
 * thousands of mutated records, patches, primary keys, lookup values and DDL
 * texts, and batches of them (unico_batch_json: well-formed arrays of
 * mutated records and patches, and mutated batch texts) go through the
 * public API; every call must end in a documented code
 * with a message, and afterwards the store must pass unico_check with every
 * acknowledged record intact: each write answered UNICO_OK is remembered
 * (the record as read back at once, or its absence after a delete), and at
 * the end every remembered record is read again and must have the same
 * version and body. A refused batch changed none of the acknowledged
 * records it names; an accepted one is remembered op by op. Deterministic (seeded); ASan/UBSan watch for crashes
 * and leaks. Usage: fuzz_inputs DIR [ITERATIONS] [SEED] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "unico.h"
#include "testutil.h"

static uint64_t rng;
static unsigned long long rnd(void) { return tu_xorshift64(&rng); }

/* Valid records come first and several times, so that a good share of the
 * calls succeed and the store has real state to protect. */
static const char *SEEDS[] = {
    "{\"id\":\"u#\",\"email\":\"e@@x.org\",\"phone\":\"@\"}",
    "{\"id\":\"u#\",\"email\":\"E@@X.ORG\",\"age\":@,\"ts\":@}",
    "{\"id\":\"u#\",\"email\":\"Alice@@Example.com\",\"phone\":\"1@\",\"age\":30,"
    "\"ok\":true,\"uid\":\"0e0b7c6a-1f47-4d0b-9f6b-0a1b2c3d4e5f\","
    "\"ts\":\"2024-05-01T12:00:00Z\",\"score\":1.5}",
    "{\"id\":\"u#\",\"email\":null,\"phone\":\"\\u00e9\\u0301@\"}",
    "{\"id\":\"u#\",\"age\":-2147483648,\"ts\":1714564800250}",
    "{\"email\":\"ALICE@@example.COM\"}", "{\"phone\":null,\"age\":@}",
    "[1,2,3]", "\"u1\"", "[\"u1\",2]", "{}", "null", "{\"email\":\"x\"}",
};

static const char *TOKENS[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "\\u0000", "\\ud800", "null",
    "true", "1e999", "-0", "2147483648", "99999999999999999999", "\"id\"",
    "\"email\"", "\"age\"", "\"ts\"", "\"uid\"", "\xff", "\xc3", "\x00",
    "\"2024-02-30T00:00:00Z\"", "\"ALICE@example.com\"", " ", "1.5"};

/* A mutated copy of a seed: each '@' becomes a small random number (so ids
 * and values repeat and collide; '#' a larger one, for ids), then 0 to 3 edits: delete a span, insert a
 * token, flip a byte, truncate. */
static char *mutate(void) {
  const char *seed = SEEDS[rnd() % (sizeof SEEDS / sizeof SEEDS[0])];
  size_t cap = strlen(seed) * 4 + 256, n = 0;
  char *s = malloc(cap);
  for (const char *p = seed; *p; p++) {
    if (*p == '@') n += (size_t)sprintf(s + n, "%d", (int)(rnd() % 40));
    else if (*p == '#') n += (size_t)sprintf(s + n, "%d", (int)(rnd() % 200));
    else s[n++] = *p;
  }
  s[n] = 0;
  int edits = (int)(rnd() % 4);
  for (int e = 0; e < edits; e++) {
    size_t at = n ? rnd() % (n + 1) : 0;
    switch (rnd() % 4) {
    case 0: /* delete a span */
      if (n) {
        size_t len = 1 + rnd() % 6;
        if (at + len > n) len = n - at;
        memmove(s + at, s + at + len, n - at - len + 1);
        n -= len;
      }
      break;
    case 1: { /* insert a token */
      const char *t = TOKENS[rnd() % (sizeof TOKENS / sizeof TOKENS[0])];
      size_t tl = strlen(t);
      if (n + tl + 1 >= cap) break;
      memmove(s + at + tl, s + at, n - at + 1);
      memcpy(s + at, t, tl);
      n += tl;
      break;
    }
    case 2: /* flip a byte (never to NUL: C strings) */
      if (n && at < n) {
        char c = (char)(rnd() & 0xff);
        s[at] = c ? c : 'x';
      }
      break;
    default: /* truncate */
      s[at] = 0;
      n = at;
      break;
    }
  }
  return s;
}

static int allowed(int rc) {
  return rc == UNICO_OK || rc == UNICO_EINVAL || rc == UNICO_ENOTFOUND ||
         rc == UNICO_ECONFLICT || rc == UNICO_EVERSION || rc == UNICO_EOPID ||
         rc == UNICO_ESCHEMA;
}

static int failures;

static void expect(int rc, const unico_result *r, const char *what,
                   const char *input) {
  if (!allowed(rc) || (rc && !r->message[0]) || (!rc && r->message[0])) {
    fprintf(stderr, "%s: unexpected rc %d (%s) message \"%s\" for input: %s\n",
            what, rc, unico_strerror(rc), r->message, input);
    /* a few are enough to show a defect; going on could take hours when
     * each is a write that retried until it gave up (busy) */
    if (++failures >= 3) {
      fprintf(stderr, "fuzz_inputs: stopping after %d unexpected answers\n",
              failures);
      exit(1);
    }
  }
}

/* What was acknowledged, per primary key (the "pk" of a UNICO_OK answer):
 * the record as unico_get returned it right after the write, or NULL when
 * the write was a delete. A write is fresh when it had no op id or an op
 * id no write was answered UNICO_OK under yet: then it certainly ran, and
 * the read must show exactly its effect (the version it answered; a
 * delete: no record). A repeat of an applied op id returns the first
 * outcome without running: then the record must be as it was. */
typedef struct acked {
  char *pk;
  char *record; /* unico_get's res->json, or NULL: deleted */
} acked;

static acked *acks;
static size_t nacks, cap_acks;
static int op_applied[50]; /* op-N answered UNICO_OK at least once */

static acked *ack_slot(const char *pk) {
  for (size_t i = 0; i < nacks; i++)
    if (!strcmp(acks[i].pk, pk)) return &acks[i];
  if (nacks == cap_acks) {
    cap_acks = cap_acks ? cap_acks * 2 : 256;
    acks = realloc(acks, cap_acks * sizeof *acks);
    if (!acks) abort();
  }
  acks[nacks] = (acked){strdup(pk), NULL};
  return &acks[nacks++];
}

/* The primary key of a write's output {"pk":PK,"version":N}, malloc'd, or
 * NULL when the output is not of that shape. */
static char *answer_pk(const char *json) {
  const char *head = "{\"pk\":";
  if (!json || strncmp(json, head, strlen(head))) return NULL;
  const char *start = json + strlen(head), *end = NULL;
  for (const char *p = start; (p = strstr(p, ",\"version\":")); p++) end = p;
  if (!end || end == start) return NULL;
  size_t n = (size_t)(end - start);
  char *pk = malloc(n + 1);
  memcpy(pk, start, n);
  pk[n] = 0;
  return pk;
}

/* A fresh insert stores its record as given; a fresh update the record
 * it found (prev: unico_get's output before it) with the patch's columns
 * set (null clears one). got: unico_get's output after the write. */
static void body_matches(const char *what, const char *prev, const char *input,
                         const char *got) {
  json_t *want = NULL, *in = json_loads(input, JSON_ALLOW_NUL, NULL);
  json_t *g = json_loads(got, 0, NULL), *have = json_object_get(g, "record");
  if (!strcmp(what, "insert")) {
    want = json_incref(in);
  } else if (prev) {
    json_t *p = json_loads(prev, 0, NULL);
    want = json_deep_copy(json_object_get(p, "record"));
    json_decref(p);
    const char *k;
    json_t *v;
    json_object_foreach(in, k, v) { /* null clears a column */
      if (json_is_null(v)) json_object_del(want, k);
      else json_object_set(want, k, v);
    }
  }
  if (!want || !have || !json_equal(want, have)) {
    char *w = want ? json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    char *h = have ? json_dumps(have, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    fprintf(stderr, "%s stored %s; expected %s (input: %s)\n", what,
            h ? h : "nothing", w ? w : "(no record before it)", input);
    free(w);
    free(h);
    failures++;
  }
  json_decref(want);
  json_decref(in);
  json_decref(g);
}

/* After a write answered UNICO_OK under op_id (NULL: none): read its
 * record back and remember it. */
static void acknowledged(unico *u, const char *what, int is_delete,
                         const char *op_id, const unico_result *w,
                         const char *input) {
  int slot = op_id ? atoi(op_id + 3) : -1;
  int fresh = slot < 0 || !op_applied[slot];
  if (slot >= 0) op_applied[slot] = 1;
  char *pk = answer_pk(w->json);
  if (!pk) {
    fprintf(stderr, "%s: answer without a pk: %s for input: %s\n", what,
            w->json ? w->json : "(null)", input);
    failures++;
    return;
  }
  unico_result g = UNICO_RESULT_INIT;
  int rc = unico_get(u, "users", pk, &g);
  int bad;
  if (!fresh) { /* a repeat changes nothing: the record is as it was */
    const char *before = ack_slot(pk)->record;
    bad = before ? rc != UNICO_OK || strcmp(before, g.json) : rc != UNICO_ENOTFOUND;
  } else if (is_delete) {
    bad = rc != UNICO_ENOTFOUND;
  } else {
    bad = rc != UNICO_OK || g.version != w->version;
  }
  if (bad) {
    fprintf(stderr, "%s%s of %s answered version %llu; read back: %s %s\n",
            fresh ? "" : "repeated ", what, pk,
            (unsigned long long)w->version, unico_errname(rc),
            rc ? g.message : g.json);
    failures++;
  }
  acked *a = ack_slot(pk);
  if (fresh && !is_delete && !bad) body_matches(what, a->record, input, g.json);
  free(a->record);
  a->record = rc == UNICO_OK ? strdup(g.json) : NULL;
  unico_result_clear(&g);
  free(pk);
}

/* At the end: every acknowledged record is still there, unchanged (same
 * version and body), and every acknowledged delete is still absent. */
static void verify_acknowledged(unico *u) {
  long live = 0, gone = 0, bad = 0;
  unico_result g = UNICO_RESULT_INIT;
  for (size_t i = 0; i < nacks; i++) {
    int rc = unico_get(u, "users", acks[i].pk, &g);
    const char *want = acks[i].record;
    if (want ? rc != UNICO_OK || strcmp(g.json, want) : rc != UNICO_ENOTFOUND) {
      if (bad++ < 10)
        fprintf(stderr, "record %s: acknowledged %s, now %s %s\n", acks[i].pk,
                want ? want : "deleted", unico_errname(rc),
                rc ? g.message : g.json);
    }
    if (want) live++;
    else gone++;
    unico_result_clear(&g);
    free(acks[i].pk);
    free(acks[i].record);
  }
  free(acks);
  printf("fuzz_inputs: %ld acknowledged records and %ld acknowledged deletes "
         "read back, %ld differ\n", live, gone, bad);
  failures += bad != 0;
  /* the model must have had something to protect */
  if (live < 20 || gone < 5) {
    fprintf(stderr, "too few acknowledged writes to verify\n");
    failures++;
  }
}

/* A batch's text: an array of 1 to 3 ops whose records and patches are
 * mutated seeds (most often), or a whole batch mutated. malloc'd. */
static char *batch_text(void) {
  size_t cap = 4096, n = 1;
  char *b = malloc(cap);
  strcpy(b, "[");
  int nops = 1 + (int)(rnd() % 3 == 0) + (int)(rnd() % 3 == 0);
  for (int i = 0; i < nops; i++) {
    char *in = mutate();
    if (rnd() % 4) { /* (a well-formed record or patch, values colliding) */
      snprintf(in, 48, "{\"id\":\"u%d\",\"email\":\"e%d@x.org\"}",
               (int)(rnd() % 200), (int)(rnd() % 40));
      if (rnd() % 2) snprintf(in, 48, "{\"phone\":\"%d\"}", (int)(rnd() % 40));
    }
    const char *sep = i ? "," : "";
    int w;
    switch (rnd() % 3) {
    case 0:
      w = snprintf(b + n, cap - n,
                   "%s{\"op\":\"insert\",\"table\":\"users\",\"record\":%s}",
                   sep, in);
      break;
    case 1:
      w = snprintf(b + n, cap - n,
                   "%s{\"op\":\"update\",\"table\":\"users\",\"key\":"
                   "\"u%d\",\"patch\":%s%s}",
                   sep, (int)(rnd() % 3), in,
                   rnd() % 4 ? "" : ",\"if_version\":1");
      break;
    default:
      w = snprintf(b + n, cap - n,
                   "%s{\"op\":\"delete\",\"table\":\"users\",\"key\":"
                   "\"u%d\"}",
                   sep, (int)(rnd() % 200));
    }
    free(in);
    if (w > 0 && (size_t)w < cap - n) n += (size_t)w;
  }
  if (n + 2 < cap) strcpy(b + n, "]");
  if (rnd() % 4 == 0) { /* the whole text cut or spliced */
    size_t l = strlen(b), at = l ? rnd() % l : 0;
    if (rnd() % 2) b[at] = 0;
    else b[at] = "[]{},:\"x0"[rnd() % 10];
  }
  return b;
}

/* The primary key JSON of op o of a batch (its "key", or its record's
 * "id"), malloc'd, or NULL. */
static char *batch_op_pk(json_t *o) {
  json_t *k = json_object_get(o, "key");
  if (!k) k = json_object_get(json_object_get(o, "record"), "id");
  return k ? json_dumps(k, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
}

/* A batch: accepted, each op's record read back and remembered (a fresh
 * write's version as answered); refused, every record it names that was
 * acknowledged is as it was (nothing written). */
static int batch_call(unico *u, const char *opid) {
  char *text = batch_text();
  unico_result r = UNICO_RESULT_INIT, g = UNICO_RESULT_INIT;
  int slot = opid ? atoi(opid + 3) : -1;
  int fresh = slot < 0 || !op_applied[slot];
  int rc = unico_batch_json(u, text, opid, &r);
  expect(rc, &r, "batch", text);
  json_t *ops = json_loads(text, 0, NULL);
  json_t *ans = rc ? NULL : json_loads(r.json, 0, NULL);
  json_t *res = json_object_get(ans, "results");
  if (!rc && slot >= 0) op_applied[slot] = 1;
  for (size_t i = 0; json_is_array(ops) && i < json_array_size(ops); i++) {
    json_t *o = json_array_get(ops, i);
    char *pk = batch_op_pk(o);
    if (!pk) continue;
    int got = unico_get(u, "users", pk, &g);
    acked *a = NULL;
    for (size_t k = 0; k < nacks && !a; k++)
      if (!strcmp(acks[k].pk, pk)) a = &acks[k];
    int is_del = !strcmp(json_string_value(json_object_get(o, "op")) ?
                         json_string_value(json_object_get(o, "op")) : "", "delete");
    json_t *ri = json_array_get(res, i);
    uint64_t ver = (uint64_t)json_integer_value(json_object_get(ri, "version"));
    int bad = 0;
    if (rc || !fresh) { /* refused, or a repeat: nothing changed */
      if (a) bad = a->record ? got != UNICO_OK || strcmp(a->record, g.json)
                             : got != UNICO_ENOTFOUND;
    } else {
      bad = is_del ? got != UNICO_ENOTFOUND : got != UNICO_OK || g.version != ver;
      if (!a) a = ack_slot(pk);
      free(a->record);
      a->record = got == UNICO_OK ? strdup(g.json) : NULL;
    }
    if (bad) {
      fprintf(stderr, "batch %s (%s) op %zu: record %s now %s %s\n", text,
              unico_errname(rc), i, pk, unico_errname(got),
              got ? g.message : g.json);
      failures++;
    }
    unico_result_clear(&g);
    free(pk);
  }
  json_decref(ans);
  json_decref(ops);
  unico_result_clear(&r);
  free(text);
  return rc;
}

static const char *DDL =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, age int,"
    " ok boolean, uid uuid, ts timestamp, score double,"
    " CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold,"
    " UNIQUE (phone), UNIQUE (uid), UNIQUE (age, ts));";

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: fuzz_inputs DIR [ITERATIONS] [SEED]\n");
    return 2;
  }
  long iters = argc > 2 ? atol(argv[2]) : 20000;
  rng = argc > 3 ? strtoull(argv[3], NULL, 10) : 0x2545F4914F6CDD1DULL;
  if (!rng) rng = 1;
  char url[1024];
  if (tu_rmtree(argv[1]) != 0) return 2;
  snprintf(url, sizeof url, "lmdb:%s?sync=off", argv[1]);
  unico *u;
  unico_result r = UNICO_RESULT_INIT;
  if (unico_open(&u, url, NULL, &r) || unico_schema_apply(u, DDL, &r)) {
    fprintf(stderr, "setup: %s\n", r.message);
    return 1;
  }
  long counts[8] = {0};
  for (long i = 0; i < iters; i++) {
    char *in = mutate();
    char opid[32];
    snprintf(opid, sizeof opid, "op-%ld", (long)(rnd() % 50));
    int rc;
    switch (rnd() % 8) {
    case 7:
      counts[batch_call(u, rnd() % 2 ? opid : NULL) ? 5 : 4]++;
      break;
    case 6: {
      char pk[32];
      snprintf(pk, sizeof pk, "\"u%d\"", (int)(rnd() % 200));
      const char *op = rnd() % 2 ? opid : NULL;
      rc = unico_delete(u, "users", rnd() % 4 ? pk : in, rnd() % 3, op, &r);
      expect(rc, &r, "delete", in);
      if (rc == UNICO_OK) acknowledged(u, "delete", 1, op, &r, in);
      break;
    }
    case 0:
    case 1:
    {
      const char *op = rnd() % 2 ? opid : NULL;
      rc = unico_insert(u, "users", in, op, &r);
      counts[rc == UNICO_OK ? 0 : rc == UNICO_EINVAL ? 1 : rc == UNICO_ECONFLICT ? 2 : 3]++;
      if (getenv("FUZZ_DEBUG") && rc && rc != UNICO_EINVAL && rc != UNICO_ECONFLICT)
        fprintf(stderr, "other: %s\n", r.message);
      expect(rc, &r, "insert", in);
      if (rc == UNICO_OK) acknowledged(u, "insert", 0, op, &r, in);
      break;
    }
    case 2:
    {
      const char *pk = rnd() % 2 ? "\"u1\"" : "\"u2\"";
      uint64_t ifv = rnd() % 3;
      const char *op = rnd() % 2 ? opid : NULL;
      rc = unico_update(u, "users", pk, in, ifv, op, &r);
      expect(rc, &r, "update", in);
      if (rc == UNICO_OK) acknowledged(u, "update", 0, op, &r, in);
      break;
    }
    case 3:
      rc = unico_get(u, "users", in, &r);
      expect(rc, &r, "get", in);
      break;
    case 4:
      rc = unico_lookup(u, "users", rnd() % 2 ? "users_email" : "users_age_ts_key",
                        in, &r);
      expect(rc, &r, "lookup", in);
      break;
    default: {
      /* A mutated DDL must be refused cleanly or be a valid schema change
       * that the store accepts or refuses with UNICO_ESCHEMA. */
      size_t dl = strlen(DDL);
      char *d = malloc(dl + 64);
      memcpy(d, DDL, dl + 1);
      size_t at = rnd() % dl;
      d[at] = (char)(" ,;()\"x-/*"[rnd() % 10]);
      rc = unico_schema_apply(u, d, &r);
      expect(rc, &r, "schema apply", d);
      if (rc == UNICO_OK) { /* put the real schema back */
        rc = unico_schema_apply(u, DDL, &r);
        if (rc) {
          /* the mutation may have dropped something on a filled table, which
           * would have been refused; anything applied must be revertible */
          fprintf(stderr, "could not restore the schema: %s\n", r.message);
          failures++;
        }
      }
      free(d);
    }
    }
    free(in);
  }
  /* Everything acknowledged is intact, and the store consistent. */
  verify_acknowledged(u);
  int rc = unico_check(u, &r);
  if (rc) {
    fprintf(stderr, "check: %s %s\n", r.message, r.json ? r.json : "");
    failures++;
  }
  printf("fuzz_inputs: %ld calls; inserts: %ld ok, %ld invalid, %ld conflict, "
         "%ld other; batches: %ld ok, %ld refused; %s\n",
         iters, counts[0], counts[1], counts[2], counts[3], counts[4],
         counts[5], r.json ? r.json : "");
  /* The mutations must exercise both sides, or the test proves little. */
  if (iters >= 1000 && (counts[0] < iters / 200 || counts[1] < iters / 200 ||
                        counts[2] < iters / 200 || counts[4] < iters / 400 ||
                        counts[5] < iters / 400)) {
    fprintf(stderr, "the inputs did not cover accepted, invalid and conflicting "
                    "inserts, accepted and refused batches enough\n");
    failures++;
  }
  unico_result_clear(&r);
  unico_close(u);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures != 0;
}
