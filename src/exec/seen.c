/* seen.c - has this op id been seen, and what was its outcome: the one
 * place that reads a request's first answer back, from the outcome key or
 * (claims protocol, where the outcome is kept after the commit) from the
 * history of the record key it wrote. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec/internal.h"
#include "keys/keyspace.h"
#include "util/err.h"

/* The answer an outcome (encoded at p, n) gives a repeat of q: UNICO_OK
 * with *answer, UNICO_EOPID when the op id was used for a different
 * request, or UNICO_ENOTFOUND when it is a marker (claims protocol: a
 * write in flight or one that died before its outcome; no answer here).
 * x NULL: a history's outcome, never a marker to judge. */
static int outcome_answer(uexec *x, const uint8_t *p, size_t n,
                          const uexec_req *q, char **answer,
                          unico_result *res) {
  ustored_outcome o;
  int rc = UNICO_OK, verdict = UEXEC_MARK_IN_FORCE;
  if (ustored_outcome_decode(p, n, &o))
    return uerr(res, UNICO_ECORRUPT, NULL,
                "the outcome of operation %s is corrupt", q->op_id);
  int same = !strcmp(o.kind, uplan_kind_name(q->kind)) &&
             !strcmp(o.table, q->table) && o.fingerprint == q->fp;
  int mark = ustored_outcome_is_mark(&o);
  if (mark && x && !same)
    rc = uexec_mark_judge(x, q->op_id, &o, &verdict, res);
  if (rc) {
    /* (an error judging it) */
  } else if (mark && (same || verdict != UEXEC_MARK_IN_FORCE)) {
    /* a marker: this request's (in flight, or it died: the record key's
     * history says which), or another's whose write may still commit or
     * died and left it (the executor takes it over, fenced): no answer */
    rc = UNICO_ENOTFOUND;
  } else if (!same) {
    rc = uerr(res, UNICO_EOPID, NULL,
              "operation id \"%s\" was already used for a different request "
              "(%s on table %s)",
              q->op_id, o.kind, o.table);
  } else {
    *answer = strdup(o.output);
    if (!*answer) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  ustored_outcome_free(&o);
  return rc;
}

/* The outcome key of q's op id. */
static int from_outcome(uexec *x, const uexec_req *q, char **answer,
                        unico_result *res) {
  ubuf k = UBUF_INIT, v = UBUF_INIT;
  ukey_outcome(&k, q->op_id);
  int rc = uexec_read(x, &k, &v, NULL, res);
  if (!rc) rc = outcome_answer(x, v.p, v.len, q, answer, res);
  ubuf_free(&k);
  ubuf_free(&v);
  return rc;
}

/* The history of the record key (rec as read, or read at rkey): the
 * history follows the key through later updates, deletes and inserts, and
 * holds an op's outcome for the retention period. */
static int from_history(uexec *x, const uexec_req *q,
                        const ustored_record *rec, const ubuf *rkey,
                        char **answer, unico_result *res) {
  ubuf v = UBUF_INIT;
  ustored_record r;
  int rc = UNICO_OK;
  memset(&r, 0, sizeof r);
  if (!rec) {
    rc = uexec_read(x, rkey, &v, NULL, res);
    if (rc) goto leave;
    if (ustored_record_decode(v.p, v.len, &r)) {
      rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
      goto leave;
    }
    rec = &r;
  }
  long i = ustored_hist_find(&rec->hist, q->op_id);
  int64_t cutoff = uexec_now(x) - (int64_t)uexec_retention(x);
  if (i < 0 || rec->hist.v[i].at_ms < cutoff)
    rc = UNICO_ENOTFOUND;
  else
    rc = outcome_answer(NULL, rec->hist.v[i].oval, rec->hist.v[i].olen, q,
                        answer, res);
leave:
  ustored_record_free(&r);
  ubuf_free(&v);
  return rc;
}

/* The outcome key of p's request: as the caller read it with the record
 * (p->req_oval, in the same round trip), else read now. */
static int plan_outcome(uexec *x, const uplan *p, const uexec_req *q,
                        char **answer, unico_result *res) {
  *answer = NULL;
  if (p->req_oval && p->req_orc == UNICO_ENOTFOUND) return UNICO_ENOTFOUND;
  if (p->req_oval && p->req_orc == UNICO_OK)
    return outcome_answer(x, p->req_oval->p, p->req_oval->len, q, answer,
                          res);
  return from_outcome(x, q, answer, res);
}

int uexec_seen(uexec *x, const uexec_req *q, int where,
               const ustored_record *rec, const ubuf *rkey, char **answer,
               unico_result *res) {
  int rc = UNICO_ENOTFOUND;
  *answer = NULL;
  if (!q->op_id) return rc;
  if ((where & UEXEC_SEEN_IF_NAMED) &&
      !(rec && ((rec->op_id && !strcmp(rec->op_id, q->op_id)) ||
                ustored_hist_find(&rec->hist, q->op_id) >= 0)))
    return rc;
  if (where & UEXEC_SEEN_OUTCOME) rc = from_outcome(x, q, answer, res);
  if (rc == UNICO_ENOTFOUND && (where & UEXEC_SEEN_HISTORY) &&
      (rec || rkey) && (uexec_traits(x) & UEXEC_T_OUTCOME_APART))
    rc = from_history(x, q, rec, rkey, answer, res);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The repeats of uexec_apply and uexec_apply_batch: the one place that
 * decides, for a write, where its first answer may be and when to look. */

/* A repeat answered: why says so, with its first answer. */
static int answered(uexec_refused *why, char *answer) {
  why->why = UREFUSED_ANSWERED;
  free(why->answer);
  why->answer = answer;
  return UEXEC_NOT_APPLIED;
}

/* The request p makes under the caller's op id. */
static uexec_req req_of(const uplan *p) {
  uexec_req q = {p->req_op, p->kind, p->req_table, p->req_fp};
  return q;
}

int uexec_repeat_first(uexec *x, const uplan *p, uexec_refused *why,
                       unico_result *res) {
  uexec_req q = req_of(p);
  char *answer = NULL;
  int rc = UNICO_ENOTFOUND;
  int apart = (uexec_traits(x) & UEXEC_T_OUTCOME_APART) != 0;
  if (!q.op_id) return rc;
  if (p->refused) {
    /* a refusal a repeat could explain: the record gone, or moved on
     * (its history, as read, or read again) */
    rc = plan_outcome(x, p, &q, &answer, res);
    if (rc == UNICO_ENOTFOUND)
      rc = uexec_seen(x, &q, UEXEC_SEEN_HISTORY, p->rold, &p->rkey, &answer,
                      res);
  } else if (p->kind != UPLAN_INSERT) {
    /* Kept after the commit, the outcome key is read first (no condition
     * of the commit would find it); with the commit, only when the record
     * as read names the op id. Then the record's history, where it names
     * the op id. An insert's repeat shows in its refusal. */
    if (apart) rc = plan_outcome(x, p, &q, &answer, res);
    if (rc == UNICO_ENOTFOUND)
      rc = uexec_seen(x, &q,
                      (apart ? UEXEC_SEEN_HISTORY : UEXEC_SEEN_OUTCOME) |
                          UEXEC_SEEN_IF_NAMED,
                      p->rold, &p->rkey, &answer, res);
  }
  return rc ? rc : answered(why, answer);
}

int uexec_repeat_after(uexec *x, const uplan *p, uexec_refused *why,
                       unico_result *res) {
  uexec_req q = req_of(p);
  char *answer = NULL;
  int apart = (uexec_traits(x) & UEXEC_T_OUTCOME_APART) != 0, where = 0;
  if (!q.op_id) return UEXEC_NOT_APPLIED;
  switch (why->why) {
  case UREFUSED_SCHEMA:
  case UREFUSED_RACE:
    return UEXEC_NOT_APPLIED;
  case UREFUSED_OUTCOME: /* this request's outcome, kept meanwhile */
    where = UEXEC_SEEN_OUTCOME;
    break;
  case UREFUSED_REPEAT: /* an insert whose op id committed to the key */
    where = UEXEC_SEEN_HISTORY;
    break;
  default:
    /* An insert's refusal a repeat could explain, where the outcome is
     * kept apart (a repeat's own claims refuse it). A full group too where
     * the outcome is kept in the commit: the group is found full from its
     * counter, and a repeat's own place may be what fills it. */
    if (apart ? p->kind == UPLAN_INSERT : why->why == UREFUSED_LIMIT)
      where = UEXEC_SEEN_OUTCOME;
  }
  if (!where) return UEXEC_NOT_APPLIED;
  int rc = uexec_seen(x, &q, where, NULL, &p->rkey, &answer, res);
  if (rc == UNICO_ENOTFOUND) {
    /* (an outcome or a history that moved on meanwhile: look again) */
    if (why->why == UREFUSED_OUTCOME || why->why == UREFUSED_REPEAT)
      why->why = UREFUSED_RACE;
    return UEXEC_NOT_APPLIED;
  }
  return rc ? rc : answered(why, answer);
}

int uexec_repeat_batch(uexec *x, const uexec_batch *b, uexec_refused *why,
                       unico_result *res) {
  char *answer = NULL;
  if (!b->req.op_id) return UNICO_ENOTFOUND;
  int rc = uexec_seen(x, &b->req, UEXEC_SEEN_OUTCOME, NULL, NULL, &answer,
                      res);
  return rc ? rc : answered(why, answer);
}
