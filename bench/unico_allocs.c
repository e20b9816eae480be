/* unico_allocs.c - unico-allocs: heap allocations per operation, counted by an
 * allocator interposed in this program (malloc, calloc and realloc of
 * every thread, the store's own threads included), on the embedded store.
 *
 *   unico-allocs [--store URL] [--ops N] [--max N | --max KIND=N,...]
 *
 * Runs the bench's schema (three unique constraints, one casefolded),
 * warms up, then measures N operations of each kind in a steady state:
 * insert, get, lookup, update (a new email), refused insert (a taken
 * email), delete, and an insert and an update given as typed values
 * (unico_insert_values, unico_update_values). Prints allocations per
 * operation; with --max, exits 1
 * when a kind needs more than its ceiling (one for all, or per kind: a
 * ratchet, bench/README.md). Built
 * only without sanitizers, which interpose the allocator themselves. */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "unico.h"

extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t m);
extern void *__libc_realloc(void *p, size_t n);
extern void __libc_free(void *p);

static __thread long t_allocs;

void *malloc(size_t n) {
  t_allocs++;
  return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
  t_allocs++;
  return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
  t_allocs++;
  return __libc_realloc(p, n);
}
void free(void *p) { __libc_free(p); }

static const char SCHEMA[] =
    "CREATE TABLE users (id text PRIMARY KEY, email text, phone text, "
    "provider text, external_id text, name text, "
    "UNIQUE (email) NORMALIZE casefold, UNIQUE (phone), "
    "UNIQUE (provider, external_id));";

enum {
  K_INSERT, K_GET, K_LOOKUP, K_UPDATE, K_REFUSED, K_DELETE,
  K_TYPED_INSERT, K_TYPED_UPDATE, NKIND
};
static const char *const kind_name[NKIND] = {
    "insert", "get", "lookup", "update", "refused-insert", "delete",
    "typed-insert", "typed-update"};


/* One operation of kind k on record i (of generation g); 0 when it gave
 * the answer it must. */
static int op(unico *u, int k, int i, int g, unico_result *res) {
  char a[256], b[128];
  int rc, want = UNICO_OK;
  switch (k) {
  case K_INSERT:
    snprintf(a, sizeof a,
             "{\"id\":\"u%d-%d\",\"email\":\"User%d-%d@Example.org\","
             "\"phone\":\"+1%03d%07d\",\"provider\":\"google\","
             "\"external_id\":\"g%d-%d\",\"name\":\"User %d\"}",
             g, i, g, i, g, i, g, i, i);
    rc = unico_insert(u, "users", a, NULL, res);
    break;
  case K_GET:
    snprintf(a, sizeof a, "\"u%d-%d\"", g, i);
    rc = unico_get(u, "users", a, res);
    break;
  case K_LOOKUP:
    snprintf(a, sizeof a, "[\"user%d-%d@example.ORG\"]", g, i);
    rc = unico_lookup(u, "users", "users_email_key", a, res);
    break;
  case K_UPDATE:
    snprintf(a, sizeof a, "\"u%d-%d\"", g, i);
    snprintf(b, sizeof b, "{\"email\":\"moved%d-%d@example.org\"}", g, i);
    rc = unico_update(u, "users", a, b, 0, NULL, res);
    break;
  case K_REFUSED:
    snprintf(a, sizeof a,
             "{\"id\":\"x%d-%d\",\"email\":\"MOVED%d-%d@example.org\"}", g, i,
             g, i);
    rc = unico_insert(u, "users", a, NULL, res);
    want = UNICO_ECONFLICT;
    break;
  case K_DELETE:
    snprintf(a, sizeof a, "\"u%d-%d\"", g, i);
    rc = unico_delete(u, "users", a, 0, NULL, res);
    break;
  case K_TYPED_INSERT: {
    /* the insert's record as typed values (unico_insert_values) */
    char id[32], email[64], phone[32], ext[32], name[32];
    snprintf(id, sizeof id, "t%d-%d", g, i);
    snprintf(email, sizeof email, "Typed%d-%d@Example.org", g, i);
    snprintf(phone, sizeof phone, "+2%03d%07d", g, i);
    snprintf(ext, sizeof ext, "t%d-%d", g, i);
    snprintf(name, sizeof name, "User %d", i);
    unico_value v[] = {UNICO_VALUE_TEXT("id", id), UNICO_VALUE_TEXT("email", email),
                       UNICO_VALUE_TEXT("phone", phone), UNICO_VALUE_TEXT("provider", "google"),
                       UNICO_VALUE_TEXT("external_id", ext), UNICO_VALUE_TEXT("name", name)};
    rc = unico_insert_values(u, "users", v, 6, NULL, res);
    break;
  }
  default: {
    char id[32], email[64];
    snprintf(id, sizeof id, "t%d-%d", g, i);
    snprintf(email, sizeof email, "tmoved%d-%d@example.org", g, i);
    unico_value key[] = {UNICO_VALUE_TEXT("id", id)};
    unico_value patch[] = {UNICO_VALUE_TEXT("email", email)};
    rc = unico_update_values(u, "users", key, 1, patch, 1, NULL, res);
    break;
  }
  }
  if (rc != want) {
    fprintf(stderr, "unico-allocs: %s of record %d: %s (%s)\n", kind_name[k],
            i, unico_errname(rc), res->message);
    return -1;
  }
  return 0;
}

/* --max: "N" (every kind) or "KIND=N,KIND=N" into max[]; 0 or -1. */
static int parse_max(const char *arg, double *max) {
  char *end;
  double all = strtod(arg, &end);
  if (end != arg && !*end) {
    for (int k = 0; k < NKIND; k++) max[k] = all;
    return 0;
  }
  const char *p = arg;
  while (*p) {
    const char *eq = strchr(p, '=');
    if (!eq) return -1;
    int k = 0;
    while (k < NKIND && (strlen(kind_name[k]) != (size_t)(eq - p) ||
                         strncmp(kind_name[k], p, (size_t)(eq - p))))
      k++;
    if (k == NKIND) return -1;
    max[k] = strtod(eq + 1, &end);
    if (end == eq + 1 || (*end && *end != ',')) return -1;
    p = *end ? end + 1 : end;
  }
  return 0;
}

static int rm_one(const char *path, const struct stat *st, int flag,
                  struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

int main(int argc, char **argv) {
  const char *url = NULL;
  char dflt[256], dir[64] = "";
  long nops = 2000;
  double max[NKIND];
  for (int k = 0; k < NKIND; k++) max[k] = -1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--store") && i + 1 < argc) url = argv[++i];
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc) nops = atol(argv[++i]);
    else if (!strcmp(argv[i], "--max") && i + 1 < argc) {
      if (parse_max(argv[++i], max)) {
        fprintf(stderr, "unico-allocs: --max wants N or KIND=N,...: %s\n",
                argv[i]);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: unico-allocs [--store URL] [--ops N] "
                      "[--max N | --max KIND=N,...]\n");
      return 2;
    }
  }
  if (nops < 1) nops = 1;
  if (!url) {
    snprintf(dir, sizeof dir, "unico-allocs-%ld", (long)getpid());
    snprintf(dflt, sizeof dflt, "lmdb:%s?wal=on&sync=off", dir);
    url = dflt;
  }
  unico *u = NULL;
  unico_result res = UNICO_RESULT_INIT;
  if (unico_open(&u, url, NULL, &res) ||
      unico_schema_apply(u, SCHEMA, &res)) {
    fprintf(stderr, "unico-allocs: %s: %s\n", url, res.message);
    unico_result_clear(&res);
    unico_close(u);
    return 2;
  }
  int bad = 0;
  /* warm-up: one generation of every kind (caches, tables, buffers) */
  for (int k = 0; k < NKIND && !bad; k++)
    for (int i = 0; i < 200 && !bad; i++) bad = op(u, k, i, 0, &res);
  double per[NKIND] = {0};
  for (int k = 0; k < NKIND && !bad; k++) {
    long a0 = t_allocs;
    for (int i = 0; i < nops && !bad; i++) bad = op(u, k, i, 1, &res);
    per[k] = (double)(t_allocs - a0) / (double)nops;
  }
  unico_result_clear(&res);
  unico_close(u);
  if (*dir && nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS)) bad = 1;
  if (bad) return 2;
  printf("allocations per operation (%ld of each, %s):\n", nops, url);
  int over = 0;
  for (int k = 0; k < NKIND; k++) {
    int too_many = max[k] >= 0 && per[k] > max[k];
    printf("  %-15s %8.3f%s\n", kind_name[k], per[k],
           too_many ? "  (over --max)" : "");
    over |= too_many;
  }
  return over;
}
