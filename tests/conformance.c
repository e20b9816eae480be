/* conformance.c - the conformance suite: what every store must do, through
 * the public API only (include/unico.h). Each test opens a fresh store at
 *   $UNICO_TEST_STORE_BASE (default "lmdb:") + $UNICO_TEST_DIR + "/" + test
 *   + $UNICO_TEST_STORE_QUERY (default none; "?wal=on" for log mode)
 * so other stores run the very same cases by changing the base. Every case
 * asserts exact return codes and the structured fields of unico_result, and
 * parses JSON output with jansson; teardown runs unico_check on the store.
 * This file holds the fixture, the assertions and main; the cases are in
 * conformance_records.c, conformance_schema.c and conformance_calls.c, and
 * conformance.h is what they share. */
#include "conformance.h"

/* ------------------------------------------------------------ schemas */

const char *const SCHEMA = T_USERS T_LINKS T_TYPED T_VOTES;

/* ------------------------------------------------------------ fixture */

const char *store_base(void) {
  const char *b = getenv("UNICO_TEST_STORE_BASE");
  return b && *b ? b : "lmdb:";
}

int is_lmdb(void) { return strncmp(store_base(), "lmdb:", 5) == 0; }
int is_sim(void) { return strncmp(store_base(), "sim:", 4) == 0; }
int is_dynamodb(void) {
  return strncmp(store_base(), "dynamodb", 8) == 0;
}

int is_cassandra(void) {
  return !strncmp(store_base(), "cassandra://", 12) ||
         !strncmp(store_base(), "cassandras://", 13);
}
int is_native(void) { return is_dynamodb() || is_cassandra(); }

int setup(void **state) {
  const char *name = *state;
  fx *f = calloc(1, sizeof *f);
  if (!f)
    return -1;
  /* LMDB cases live under UNICO_TEST_DIR, else one scratch directory of
   * this run (testutil.h) */
  static char scratch[TU_PATH_MAX];
  const char *root = getenv("UNICO_TEST_DIR");
  if ((!root || !*root) && is_lmdb()) {
    if (!*scratch && tu_scratch("conformance", scratch, sizeof scratch)) {
      free(f);
      return -1;
    }
    root = scratch;
  }
  if (root && *root)
    tu_mkdir_p(root);
  if (is_lmdb()) {
    snprintf(f->dir, sizeof f->dir, "%s/%s", root, name);
  } else if (!strncmp(store_base(), "cassandra://", 12) ||
             !strncmp(store_base(), "cassandras://", 13)) {
    /* a table name (the base ends in "table="): at most 48 of A-Za-z0-9_ */
    static unsigned seq;
    snprintf(f->dir, sizeof f->dir, "c%ld_%ld_%u", (long)getpid(),
             (long)time(NULL) % 1000000, seq++);
  } else {
    /* Remote stores keep old data: a fresh namespace per run, named as a
     * table name may be (DynamoDB: at most 255 of A-Za-z0-9_.-). */
    snprintf(f->dir, sizeof f->dir, "unico_%s_%ld_%ld", name, (long)getpid(),
             (long)time(NULL));
    f->dir[255] = 0;
    for (char *p = f->dir; *p; p++)
      if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
            (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
        *p = '_';
  }
  if (is_lmdb())
    tu_rmtree(f->dir);
  /* The simulated store lives in this process: one simulation per case,
   * without faults (the simulation test, test_sim, injects them). */
  if (is_sim() && usim_new(&f->sim, f->dir, 1, NULL)) {
    free(f);
    return -1;
  }
  const char *q = getenv("UNICO_TEST_STORE_QUERY"); /* e.g. "?wal=on" */
  if (!strncmp(store_base(), "dynamodb", 8))
    /* the case's native tables apart from every other case's */
    snprintf(f->url, sizeof f->url, "%s%s?table_prefix=%.150s.", store_base(),
             f->dir, f->dir);
  else if (is_cassandra())
    /* (the base ends in "table="; native tables of the case apart) */
    snprintf(f->url, sizeof f->url, "%s%s&table_prefix=%.60s_%.200s", store_base(),
             f->dir, f->dir, q ? q : "");
  else
    snprintf(f->url, sizeof f->url, "%s%s%s", store_base(), f->dir,
             q ? q : "");
  int rc = unico_open(&f->u, f->url, NULL, &f->r);
  if (rc) {
    fprintf(stderr, "setup: cannot open %s: %d %s: %s\n", f->url, rc,
            unico_strerror(rc), f->r.message);
    unico_result_clear(&f->r);
    usim_free(f->sim);
    free(f);
    return -1;
  }
  *state = f;
  return 0;
}

int teardown(void **state) {
  fx *f = *state;
  int bad = 0;
  if (!f)
    return 0;
  unico_close(f->b); /* before the check: also when an assertion failed */
  unico_result_clear(&f->rb);
  if (f->u) {
    /* After every test the store must still satisfy its invariants. */
    unico_result r = UNICO_RESULT_INIT;
    int rc = unico_check(f->u, &r);
    json_t *j = r.json ? json_loads(r.json, 0, NULL) : NULL;
    if (rc != UNICO_OK || !j || !json_is_true(json_object_get(j, "ok"))) {
      fprintf(stderr, "teardown: unico_check: rc %d (%s): %s\n  report: %s\n",
              rc, unico_strerror(rc), r.message, r.json ? r.json : "(none)");
      bad = 1;
    }
    json_decref(j);
    unico_result_clear(&r);
  }
  unico_close(f->u);
  unico_result_clear(&f->r);
  if (is_lmdb())
    tu_rmtree(f->dir);
  usim_free(f->sim);
  free(f);
  return bad ? -1 : 0;
}

/* ------------------------------------------------------------ assertions */

void expect_rc(const char *file, int line, const char *expr, int want,
               int got, const unico_result *res) {
  if (got == want && (!res || res->rc == got))
    return;
  if (got != want)
    print_error("%s:%d: %s\n  returned %d (%s), expected %d (%s)\n"
                "  message: %s\n",
                file, line, expr, got, unico_strerror(got), want,
                unico_strerror(want), res ? res->message : "(no result)");
  else
    print_error("%s:%d: %s\n  returned %d (%s) but res.rc is %d\n", file, line,
                expr, got, unico_strerror(got), res->rc);
  _fail(file, line);
}

void expect_true(const char *file, int line, const char *expr, int ok) {
  if (ok)
    return;
  print_error("%s:%d: expected %s\n", file, line, expr);
  _fail(file, line);
}

void expect_str(const char *file, int line, const char *what,
                const char *got, const char *want) {
  if (got && want && !strcmp(got, want))
    return;
  if (!got && !want)
    return;
  print_error("%s:%d: %s is \"%s\", expected \"%s\"\n", file, line, what,
              got ? got : "(NULL)", want ? want : "(NULL)");
  _fail(file, line);
}

void expect_contains(const char *file, int line, const char *what,
                     const char *got, const char *sub) {
  if (got && strstr(got, sub))
    return;
  print_error("%s:%d: %s is \"%s\", expected it to contain \"%s\"\n", file,
              line, what, got ? got : "(NULL)", sub);
  _fail(file, line);
}

void expect_u64(const char *file, int line, const char *what,
                uint64_t got, uint64_t want) {
  if (got == want)
    return;
  print_error("%s:%d: %s is %" PRIu64 ", expected %" PRIu64 "\n", file, line,
              what, got, want);
  _fail(file, line);
}

/* got (JSON text) must equal want (JSON text) as JSON values. */
void expect_json(const char *file, int line, const char *what,
                 const char *got, const char *want) {
  json_error_t e;
  json_t *g = got ? json_loads(got, JSON_DECODE_ANY, &e) : NULL;
  json_t *w = json_loads(want, JSON_DECODE_ANY, &e);
  if (!w) {
    print_error("%s:%d: bad expected JSON in the test: %s\n", file, line, want);
    _fail(file, line);
  }
  int ok = g && json_equal(g, w);
  json_decref(g);
  json_decref(w);
  if (ok)
    return;
  print_error("%s:%d: %s is %s\n  expected %s\n", file, line, what,
              got ? got : "(NULL)", want);
  _fail(file, line);
}

/* The member at a dotted path of a JSON object text (new reference). */
json_t *json_at(const char *text, const char *path) {
  json_t *root = text ? json_loads(text, 0, NULL) : NULL;
  json_t *v = root;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *save = NULL, *k = strtok_r(buf, ".", &save); v && k;
       k = strtok_r(NULL, ".", &save))
    v = json_object_get(v, k);
  if (v)
    json_incref(v);
  json_decref(root);
  return v;
}

/* Field path of JSON object text got equals want (JSON text), or is absent
 * when want is NULL. */
void expect_field(const char *file, int line, const char *got,
                  const char *path, const char *want) {
  json_t *v = json_at(got, path);
  json_t *w = want ? json_loads(want, JSON_DECODE_ANY, NULL) : NULL;
  int ok = want ? (v && w && json_equal(v, w)) : v == NULL;
  char *vs = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
  json_decref(v);
  json_decref(w);
  if (!ok) {
    print_error("%s:%d: field \"%s\" of %s\n  is %s, expected %s\n", file, line,
                path, got ? got : "(NULL)", vs ? vs : "(absent)",
                want ? want : "(absent)");
    free(vs);
    _fail(file, line);
  }
  free(vs);
}

/* A conflict: constraint, normalized value and owner. */
void expect_conflict(const char *file, int line, const unico_result *r,
                     const char *constraint, const char *value,
                     const char *owner) {
  expect_str(file, line, "res.constraint", r->constraint, constraint);
  expect_json(file, line, "res.value", r->value, value);
  expect_json(file, line, "res.owner", r->owner, owner);
  if (!r->message[0]) {
    print_error("%s:%d: a conflict without a message\n", file, line);
    _fail(file, line);
  }
  if (r->json) {
    print_error("%s:%d: a failed call left output %s\n", file, line, r->json);
    _fail(file, line);
  }
}

/* A DDL error message names where it failed: "L:C" or "line L, column C". */
void expect_location(const char *file, int line, const char *msg, int l,
                     int c) {
  char a[64], b[64];
  snprintf(a, sizeof a, "%d:%d", l, c);
  snprintf(b, sizeof b, "line %d, column %d", l, c);
  if (strstr(msg, a) || strstr(msg, b))
    return;
  print_error("%s:%d: message \"%s\" does not name line %d, column %d\n", file,
              line, msg, l, c);
  _fail(file, line);
}

/* ------------------------------------------------------------ main */

#define T(fn) cmocka_unit_test_prestate_setup_teardown(fn, setup, teardown, #fn)

int main(int argc, char **argv) {
  ucm_init(argc, argv);
  const struct CMUnitTest tests[] = {
      T(test_roundtrip),
      T(test_not_found),
      T(test_if_version),
      T(test_pk_conflict),
      T(test_unique_conflict),
      T(test_long_constraint_names),
      T(test_casefold),
      T(test_exact_keeps_case),
      T(test_nulls_never_claim),
      T(test_composite_no_collision),
      T(test_constraints_do_not_collide),
      T(test_update_moves_value),
      T(test_update_conflict_leaves_record),
      T(test_update_null_frees),
      T(test_delete_frees_all),
      T(test_refused_insert_leaves_nothing),
      T(test_patch_rules),
      T(test_json_validation),
      T(test_uuid_case_insensitive),
      T(test_timestamp_equality),
      T(test_timestamp_pk_owner),
      T(test_composite_pk),
      T(test_int_pk),
      T(test_op_id_insert),
      T(test_op_id_update_delete),
      T(test_op_id_refused_retry),
      T(test_outcome_retention),
      T(test_schema_apply_show),
      T(test_schema_changes_filled),
      T(test_limit_poll), T(test_holds), T(test_hold_op_id),
      T(test_holds_in_one_write), T(test_op_id_taken_before_answer),
      T(test_schema_build_filled),
      T(test_schema_retype_empty),
      T(test_schema_build_filled), T(test_namespace),
      T(test_namespace_build),
      T(test_schema_syntax_error),
      T(test_unknown_table),
      T(test_two_handles),
      T(test_two_handles_schema_changes),
      T(test_check),
      T(test_args_json),
      T(test_null_args),
      T(test_codes),
      T(test_where_soft_delete), T(test_where_limit_enter_leave),
      T(test_where_limit_race), T(test_where_build_filled),
      T(test_batch_swap),
      T(test_batch_refused_leaves_nothing),
      T(test_batch_op_id),
      T(test_batch_limits),
      T(test_batch_json),
      T(test_batch_limit_group),
      T(test_batch_namespace), T(test_batch_holds),
  };
  return ucm_done(ucm_run_group("conformance", tests, NULL, NULL));
}
