/* fuzz_ddl.c - libFuzzer target for the DDL parser (src/schema/schema.c,
 * uschema_parse): any text is either a schema or an error that says where
 * (a line and column inside the text, a message), never a crash.
 *
 * A schema that parses must be well formed: every table has a name, at
 * least one column and a primary key whose positions are valid and agree
 * with the columns' pk_pos; every constraint has columns of its table (and a
 * limit of at least 1 when it is a LIMIT); names are found by the lookup
 * functions; and parsing the same text again gives tables with the same
 * fingerprints (uplan_table_fingerprint). The text is cut at its first NUL
 * byte, as a C string is.
 *
 * Linked with tests/fuzz/replay.c instead of libFuzzer it replays the
 * corpus: a test in every build. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/plan.h"
#include "schema/predicate.h"
#include "schema/schema.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(c)                                                          \
  do {                                                                    \
    if (!(c)) {                                                           \
      fprintf(stderr, "fuzz_ddl: %s:%d: check failed: %s\n", __FILE__,    \
              __LINE__, #c);                                              \
      abort();                                                            \
    }                                                                     \
  } while (0)

/* A WHERE: terms on columns of t, each operator with its literals (IS
 * [NOT] NULL none, = and <> one, IN one or more), strings NUL-terminated. */
static void check_where(const utable *t, const upred *w) {
  if (!w) return;
  CHECK(w->n >= 1 && w->n <= UPRED_MAX_TERMS);
  for (size_t i = 0; i < w->n; i++) {
    const upred_term *x = &w->t[i];
    CHECK(x->col >= 0 && (size_t)x->col < t->ncols);
    CHECK(x->op >= UPRED_IS_NULL && x->op <= UPRED_IN);
    if (x->op == UPRED_IS_NULL || x->op == UPRED_NOT_NULL) CHECK(x->nlit == 0);
    else if (x->op == UPRED_IN) CHECK(x->nlit >= 1 && x->nlit <= UPRED_MAX_LITS);
    else CHECK(x->nlit == 1);
    for (size_t j = 0; j < x->nlit; j++)
      if (x->lit[j].kind == UPRED_L_STR)
        CHECK(x->lit[j].s && strlen(x->lit[j].s) == x->lit[j].n);
  }
}

static void check_table(const uschema *s, const utable *t) {
  CHECK(t->name && t->name[0]);
  CHECK(uschema_table(s, t->name) == t);
  CHECK(t->ncols >= 1 && t->cols);
  CHECK(t->npk >= 1 && t->npk <= t->ncols && t->pk);
  for (size_t i = 0; i < t->ncols; i++) {
    const ucolumn *c = &t->cols[i];
    CHECK(c->name && c->name[0]);
    CHECK(utable_column(t, c->name) == (int)i);
    CHECK(c->type >= UCOL_TEXT && c->type <= UCOL_DOUBLE);
    CHECK(ucol_type_name(c->type) != NULL);
    CHECK(c->pk_pos >= -1 && c->pk_pos < (int)t->npk);
    if (c->pk_pos >= 0) CHECK(t->pk[c->pk_pos] == (int)i);
  }
  for (size_t k = 0; k < t->npk; k++) {
    CHECK(t->pk[k] >= 0 && (size_t)t->pk[k] < t->ncols);
    CHECK(t->cols[t->pk[k]].pk_pos == (int)k);
  }
  for (size_t i = 0; i < t->ncons; i++) {
    const uconstraint *c = &t->cons[i];
    CHECK(c->name && c->name[0]);
    CHECK(utable_constraint(t, c->name) == (int)i);
    CHECK(c->kind == UCON_UNIQUE || c->kind == UCON_LIMIT);
    CHECK(c->ncols >= 1 && c->cols);
    for (size_t j = 0; j < c->ncols; j++)
      CHECK(c->cols[j] >= 0 && (size_t)c->cols[j] < t->ncols);
    if (c->kind == UCON_LIMIT) CHECK(c->limit >= 1);
    CHECK(c->norm == UNORM_EXACT || c->norm == UNORM_CASEFOLD);
    check_where(t, c->where);
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = 0;
  uschema *s = NULL;
  uparse_error err;
  memset(&err, 0x55, sizeof err); /* a message must be written, not left */
  if (uschema_parse(text, &s, &err)) {
    CHECK(s == NULL);
    CHECK(memchr(err.msg, 0, sizeof err.msg) != NULL);
    CHECK(err.msg[0] != 0);
    /* where: a line of the text (one past its last line at most) */
    size_t lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    CHECK(err.line >= 1 && (size_t)err.line <= lines + 1);
    CHECK(err.col >= 1);
    free(text);
    return 0;
  }
  CHECK(s != NULL);
  for (size_t i = 0; i < s->ntables; i++) check_table(s, &s->tables[i]);
  uschema *again = NULL;
  CHECK(uschema_parse(text, &again, NULL) == 0 && again);
  CHECK(again->ntables == s->ntables);
  for (size_t i = 0; i < s->ntables; i++)
    CHECK(uplan_table_fingerprint(&s->tables[i]) ==
          uplan_table_fingerprint(&again->tables[i]));
  uschema_free(again);
  uschema_free(s);
  free(text);
  return 0;
}
