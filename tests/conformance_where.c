/* conformance_where.c - partial constraints (UNIQUE and LIMIT with a
 * WHERE) on every store: a record outside the predicate holds no value
 * and no place in a group; an update that enters or leaves it takes or
 * frees them in the same write; racing clients never overfill a partial
 * limit; a WHERE added, changed or dropped on a filled table is built
 * from the records with the duplicate report. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#include "conformance.h"

#define W_USERS                                                                \
  "CREATE TABLE users (id text PRIMARY KEY, email text, deleted_at timestamp,\n" \
  "  status text,\n"                                                           \
  "  CONSTRAINT users_email UNIQUE (email) NORMALIZE casefold\n"               \
  "    WHERE deleted_at IS NULL);\n"
#define W_SEATS                                                                \
  "CREATE TABLE seats (event text, seat text, tier text, state text,\n"        \
  "  PRIMARY KEY (event, seat),\n"                                             \
  "  CONSTRAINT seats_tier LIMIT 3 PER (event, tier)\n"                        \
  "    WHERE state IN ('held', 'paid'));\n"

#define UPD(table, pk, patch)                                                  \
  EXPECT(UNICO_OK, unico_update(f->u, (table), (pk), (patch), 0, NULL, &f->r))

/* Soft delete frees the email: a new signup takes it; the undelete of the
 * first record is then refused naming the new owner, and leaves it as it
 * was; once the value is free again the undelete takes it back. */
void test_where_soft_delete(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(f->u, W_USERS, &f->r));
  INS("users", "{\"id\":\"u1\",\"email\":\"Ann@x.org\"}");
  INS_CONFLICT("users", "{\"id\":\"u2\",\"email\":\"ann@X.org\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"ann@x.org\"]", "\"u1\"");
  EXPECT_OWNER("users", "users_email", "[\"ANN@x.org\"]", "\"u1\"");
  /* the soft delete */
  UPD("users", "\"u1\"", "{\"deleted_at\":\"2024-05-01T12:00:00Z\"}");
  EXPECT_FREE("users", "users_email", "[\"ann@x.org\"]");
  INS("users", "{\"id\":\"u2\",\"email\":\"ann@X.org\"}");
  EXPECT_OWNER("users", "users_email", "[\"ann@x.org\"]", "\"u2\"");
  /* a record outside the predicate changes its value freely: no claim */
  UPD("users", "\"u1\"", "{\"email\":\"ANN@x.org\",\"status\":\"gone\"}");
  INS("users", "{\"id\":\"u3\",\"email\":\"ann@x.org\",\"deleted_at\":0}");
  /* the undelete with a taken email: refused, nothing changed */
  uint64_t v1 = VERSION_OF("users", "\"u1\"");
  EXPECT(UNICO_ECONFLICT, unico_update(f->u, "users", "\"u1\"",
                                       "{\"deleted_at\":null}", 0, NULL, &f->r));
  EXPECT_CONFLICT(&f->r, "users_email", "[\"ann@x.org\"]", "\"u2\"");
  EXPECT(UNICO_OK, unico_get(f->u, "users", "\"u1\"", &f->r));
  EXPECT_U64(f->r.version, v1);
  json_t *del = json_at(f->r.json, "record.deleted_at");
  EXPECT_TRUE(json_is_string(del));
  json_decref(del);
  EXPECT_OWNER("users", "users_email", "[\"ann@x.org\"]", "\"u2\"");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "1");
  /* the owner deleted for good: the undelete takes the value back */
  EXPECT(UNICO_OK, unico_delete(f->u, "users", "\"u2\"", 0, NULL, &f->r));
  UPD("users", "\"u1\"", "{\"deleted_at\":null}");
  EXPECT_OWNER("users", "users_email", "[\"ann@x.org\"]", "\"u1\"");
  INS_CONFLICT("users", "{\"id\":\"u4\",\"email\":\"Ann@x.org\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"ann@x.org\"]", "\"u1\"");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "1");
}

/* A partial limit counts the records inside its predicate only; an update
 * entering it takes a place (refused when full, the record unchanged),
 * one leaving it frees its place. */
void test_where_limit_enter_leave(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(f->u, W_SEATS, &f->r));
  INS("seats", "{\"event\":\"e\",\"seat\":\"1\",\"tier\":\"a\",\"state\":\"held\"}");
  INS("seats", "{\"event\":\"e\",\"seat\":\"2\",\"tier\":\"a\",\"state\":\"paid\"}");
  INS("seats", "{\"event\":\"e\",\"seat\":\"3\",\"tier\":\"a\",\"state\":\"held\"}");
  EXPECT(UNICO_ELIMIT,
         unico_insert(f->u, "seats",
                      "{\"event\":\"e\",\"seat\":\"4\",\"tier\":\"a\",\"state\":\"held\"}",
                      NULL, &f->r));
  EXPECT_STR(f->r.constraint, "seats_tier");
  EXPECT_JSON(f->r.value, "[\"e\",\"a\"]");
  /* outside the predicate: no place taken, any number fit */
  for (int i = 4; i < 8; i++) {
    char j[128];
    snprintf(j, sizeof j,
             "{\"event\":\"e\",\"seat\":\"%d\",\"tier\":\"a\",\"state\":\"%s\"}",
             i, i % 2 ? "pending" : "cancelled");
    INS("seats", j);
  }
  INS("seats", "{\"event\":\"e\",\"seat\":\"8\",\"tier\":\"a\"}");
  /* entering a full group: refused, the record as it was */
  EXPECT(UNICO_ELIMIT, unico_update(f->u, "seats", "[\"e\",\"5\"]",
                                    "{\"state\":\"paid\"}", 0, NULL, &f->r));
  EXPECT_STR(f->r.constraint, "seats_tier");
  EXPECT(UNICO_OK, unico_get(f->u, "seats", "[\"e\",\"5\"]", &f->r));
  EXPECT_FIELD(f->r.json, "record.state", "\"pending\"");
  EXPECT_FIELD(f->r.json, "version", "1");
  /* moving inside the predicate (held -> paid) keeps the place */
  UPD("seats", "[\"e\",\"1\"]", "{\"state\":\"paid\"}");
  /* leaving frees a place, which the entering update then takes */
  UPD("seats", "[\"e\",\"3\"]", "{\"state\":\"cancelled\"}");
  UPD("seats", "[\"e\",\"5\"]", "{\"state\":\"paid\"}");
  EXPECT(UNICO_ELIMIT, unico_update(f->u, "seats", "[\"e\",\"8\"]",
                                    "{\"state\":\"held\"}", 0, NULL, &f->r));
  /* leaving by a null state, and by a delete */
  UPD("seats", "[\"e\",\"2\"]", "{\"state\":null}");
  UPD("seats", "[\"e\",\"8\"]", "{\"state\":\"held\"}");
  EXPECT(UNICO_OK, unico_delete(f->u, "seats", "[\"e\",\"1\"]", 0, NULL, &f->r));
  UPD("seats", "[\"e\",\"7\"]", "{\"state\":\"held\"}");
  EXPECT(UNICO_ELIMIT, unico_update(f->u, "seats", "[\"e\",\"3\"]",
                                    "{\"state\":\"held\"}", 0, NULL, &f->r));
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "limit_groups", "1");
}

/* ------------------------------------------------------------ the race */

#define RACERS 8

typedef struct race {
  fx *f;
  int update; /* 1: each racer moves its pending seat into the predicate;
                 0: each inserts a held seat */
  atomic_int go;
  int rc[RACERS];
} race;

static void racer(void *ctx, int i) {
  race *r = ctx;
  unico_result res = UNICO_RESULT_INIT;
  char pk[64], j[160];
  snprintf(pk, sizeof pk, "[\"e\",\"r%d\"]", i);
  snprintf(j, sizeof j,
           "{\"event\":\"e\",\"seat\":\"r%d\",\"tier\":\"a\",\"state\":\"held\"}",
           i);
  while (!atomic_load(&r->go)) sched_yield();
  r->rc[i] = r->update ? unico_update(r->f->u, "seats", pk,
                                      "{\"state\":\"paid\"}", 0, NULL, &res)
                       : unico_insert(r->f->u, "seats", j, NULL, &res);
  unico_result_clear(&res);
}

typedef struct racer_arg {
  race *r;
  int i;
} racer_arg;

static void *racer_thread(void *arg) {
  racer_arg *a = arg;
  racer(a->r, a->i);
  return NULL;
}

/* RACERS clients at once: on the simulated store under its scheduler,
 * elsewhere on threads released together. */
static void run_race(fx *f, race *r) {
  atomic_store(&r->go, f->sim ? 1 : 0);
  if (f->sim) {
    EXPECT_TRUE(usim_run(f->sim, RACERS, racer, r) == 0);
    return;
  }
  pthread_t th[RACERS];
  racer_arg args[RACERS];
  for (int i = 0; i < RACERS; i++) {
    args[i].r = r;
    args[i].i = i;
    EXPECT_TRUE(pthread_create(&th[i], NULL, racer_thread, &args[i]) == 0);
  }
  atomic_store(&r->go, 1);
  for (int i = 0; i < RACERS; i++) pthread_join(th[i], NULL);
}

/* The outcome of a race: exactly 3 of RACERS admitted, every other one
 * told the group is full; the group then holds exactly the 3. */
static void expect_three(fx *f, const race *r) {
  int ok = 0, full = 0;
  for (int i = 0; i < RACERS; i++) {
    if (r->rc[i] == UNICO_OK) ok++;
    else if (r->rc[i] == UNICO_ELIMIT) full++;
    else fail_msg("racer %d: %s", i, unico_errname(r->rc[i]));
  }
  EXPECT_U64((uint64_t)ok, 3);
  EXPECT_U64((uint64_t)full, RACERS - 3);
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "limit_groups", "1");
}

/* 8 racing clients for a partial limit of 3 admit exactly 3, by insert,
 * then by updates entering the predicate. */
void test_where_limit_race(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, unico_schema_apply(f->u, W_SEATS, &f->r));
  INS("seats", "{\"event\":\"e\",\"seat\":\"x\",\"tier\":\"a\",\"state\":\"pending\"}");
  race *r = calloc(1, sizeof *r);
  r->f = f;
  run_race(f, r);
  expect_three(f, r);
  /* again, entering by update: the group emptied, RACERS pending seats */
  for (int i = 0; i < RACERS; i++) {
    char pk[64];
    snprintf(pk, sizeof pk, "[\"e\",\"r%d\"]", i);
    if (r->rc[i] == UNICO_OK)
      EXPECT(UNICO_OK, unico_delete(f->u, "seats", pk, 0, NULL, &f->r));
    char j[160];
    snprintf(j, sizeof j,
             "{\"event\":\"e\",\"seat\":\"r%d\",\"tier\":\"a\",\"state\":\"pending\"}",
             i);
    INS("seats", j);
  }
  r->update = 1;
  run_race(f, r);
  expect_three(f, r);
  free(r);
}

/* ------------------------------------------------------------ builds */

#define B_BASE                                                                 \
  "CREATE TABLE users (id text PRIMARY KEY, email text, deleted_at timestamp,\n" \
  "  status text%s);\n"

static int apply_with(fx *f, const char *con) {
  char ddl[1024];
  snprintf(ddl, sizeof ddl, B_BASE, con);
  return unico_schema_apply(f->u, ddl, &f->r);
}

/* A WHERE added, changed and dropped on a filled table: each built from
 * the records, refused with the duplicate report when two records inside
 * the new predicate share a value. */
void test_where_build_filled(void **state) {
  fx *f = *state;
  EXPECT(UNICO_OK, apply_with(f, ""));
  INS("users", "{\"id\":\"u1\",\"email\":\"a@x\",\"deleted_at\":5,"
               "\"status\":\"new\"}");
  INS("users", "{\"id\":\"u2\",\"email\":\"A@x\"}");
  INS("users", "{\"id\":\"u3\",\"email\":\"b@x\",\"status\":\"old\","
               "\"deleted_at\":7}");
  INS("users", "{\"id\":\"u4\",\"email\":\"b@x\",\"status\":\"old\","
               "\"deleted_at\":8}");
  /* without a WHERE: a@x and b@x are held twice */
  EXPECT(UNICO_ESCHEMA,
         apply_with(f, ",\n CONSTRAINT users_email UNIQUE (email) NORMALIZE "
                       "casefold"));
  EXPECT_FIELD(f->r.json, "duplicates_total", "2");
  /* among the live ones: fine, built */
  EXPECT(UNICO_OK,
         apply_with(f, ",\n CONSTRAINT users_email UNIQUE (email) NORMALIZE "
                       "casefold WHERE deleted_at IS NULL"));
  EXPECT_OWNER("users", "users_email", "[\"a@x\"]", "\"u2\"");
  EXPECT_FREE("users", "users_email", "[\"b@x\"]");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "1");
  /* changed to the deleted ones: b@x is held twice there */
  EXPECT(UNICO_ESCHEMA,
         apply_with(f, ",\n CONSTRAINT users_email UNIQUE (email) NORMALIZE "
                       "casefold WHERE deleted_at IS NOT NULL"));
  EXPECT_FIELD(f->r.json, "duplicates_total", "1");
  json_t *d = json_at(f->r.json, "duplicates");
  char *d0 = json_dumps(json_array_get(d, 0), JSON_COMPACT);
  EXPECT_JSON(d0, "{\"constraint\":\"users_email\",\"value\":[\"b@x\"],"
                  "\"count\":2,\"records\":[\"u3\",\"u4\"]}");
  free(d0);
  json_decref(d);
  EXPECT_OWNER("users", "users_email", "[\"a@x\"]", "\"u2\"");
  /* the deleted ones not old: rebuilt, the claims move */
  EXPECT(UNICO_OK,
         apply_with(f, ",\n CONSTRAINT users_email UNIQUE (email) NORMALIZE "
                       "casefold WHERE deleted_at IS NOT NULL AND status <> "
                       "'old'"));
  EXPECT_OWNER("users", "users_email", "[\"a@x\"]", "\"u1\"");
  EXPECT_FREE("users", "users_email", "[\"b@x\"]");
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "1");
  INS("users", "{\"id\":\"u5\",\"email\":\"a@x\"}"); /* live: outside */
  INS_CONFLICT("users", "{\"id\":\"u6\",\"email\":\"A@X\",\"deleted_at\":1,"
                        "\"status\":\"new\"}");
  EXPECT_CONFLICT(&f->r, "users_email", "[\"a@x\"]", "\"u1\"");
  /* a second handle reads the stored schema and judges by its WHERE */
  EXPECT_R(UNICO_OK, &f->rb, unico_open(&f->b, f->url, NULL, &f->rb));
  EXPECT_R(UNICO_ECONFLICT, &f->rb,
           unico_insert(f->b, "users",
                        "{\"id\":\"u6\",\"email\":\"a@x\",\"deleted_at\":1,"
                        "\"status\":\"new\"}",
                        NULL, &f->rb));
  EXPECT_CONFLICT(&f->rb, "users_email", "[\"a@x\"]", "\"u1\"");
  EXPECT_R(UNICO_OK, &f->rb,
           unico_insert(f->b, "users",
                        "{\"id\":\"u7\",\"email\":\"a@x\",\"deleted_at\":1,"
                        "\"status\":\"old\"}",
                        NULL, &f->rb));
  /* a NULL status is not <> 'old' (nor = it): two such records keep
   * out of the predicate, one value between them */
  INS("users", "{\"id\":\"u8\",\"email\":\"c@x\",\"deleted_at\":3}");
  INS("users", "{\"id\":\"u9\",\"email\":\"C@x\",\"deleted_at\":4}");
  EXPECT_FREE("users", "users_email", "[\"c@x\"]");
  /* dropped: every record holds its value, duplicates refuse it */
  EXPECT(UNICO_ESCHEMA,
         apply_with(f, ",\n CONSTRAINT users_email UNIQUE (email) NORMALIZE "
                       "casefold"));
  EXPECT_CHECK_OK();
  EXPECT_FIELD(f->r.json, "claims", "1");
}
