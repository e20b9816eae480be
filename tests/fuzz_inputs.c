/* fuzz_inputs.c - bad input gets a clear error and loses nothing: tens of
 * thousands of mutated records, patches, primary keys, lookup values and DDL
 * texts go through the public API; every call must end in a documented code
 * with a message, and afterwards the store must pass unico_check with every
 * acknowledged record intact. Deterministic (seeded); ASan/UBSan watch for
 * crashes and leaks. Usage: fuzz_inputs DIR [ITERATIONS] [SEED] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unico.h"

static unsigned long long rng;
static unsigned long long rnd(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

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
    failures++;
  }
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
  char url[1024], cmd[1100];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", argv[1]);
  if (system(cmd) != 0) return 2;
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
    switch (rnd() % 7) {
    case 6: {
      char pk[32];
      snprintf(pk, sizeof pk, "\"u%d\"", (int)(rnd() % 200));
      rc = unico_delete(u, "users", rnd() % 4 ? pk : in, rnd() % 3,
                        rnd() % 2 ? opid : NULL, &r);
      expect(rc, &r, "delete", in);
      break;
    }
    case 0:
    case 1:
      rc = unico_insert(u, "users", in, rnd() % 2 ? opid : NULL, &r);
      counts[rc == UNICO_OK ? 0 : rc == UNICO_EINVAL ? 1 : rc == UNICO_ECONFLICT ? 2 : 3]++;
      if (getenv("FUZZ_DEBUG") && rc && rc != UNICO_EINVAL && rc != UNICO_ECONFLICT)
        fprintf(stderr, "other: %s\n", r.message);
      expect(rc, &r, "insert", in);
      break;
    case 2:
      rc = unico_update(u, "users", rnd() % 2 ? "\"u1\"" : "\"u2\"", in, rnd() % 3,
                        rnd() % 2 ? opid : NULL, &r);
      expect(rc, &r, "update", in);
      break;
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
  /* Everything acknowledged is consistent. */
  int rc = unico_check(u, &r);
  if (rc) {
    fprintf(stderr, "check: %s %s\n", r.message, r.json ? r.json : "");
    failures++;
  }
  printf("fuzz_inputs: %ld calls; inserts: %ld ok, %ld invalid, %ld conflict, "
         "%ld other; %s\n",
         iters, counts[0], counts[1], counts[2], counts[3], r.json ? r.json : "");
  /* The mutations must exercise both sides, or the test proves little. */
  if (iters >= 1000 && (counts[0] < iters / 200 || counts[1] < iters / 200 ||
                        counts[2] < iters / 200)) {
    fprintf(stderr, "the inputs did not cover accepted, invalid and conflicting "
                    "inserts enough\n");
    failures++;
  }
  unico_result_clear(&r);
  unico_close(u);
  printf("%d passed, %d failed\n", failures ? 0 : 1, failures ? 1 : 0);
  return failures != 0;
}
