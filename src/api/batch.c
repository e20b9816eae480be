/* batch.c - several record writes, all or nothing (unico_batch): each op
 * read and planned as a single write would be, the plans applied by the
 * executor in one store transaction (exec/batch.c), a refusal answered as
 * the single write of that op would be answered, naming the op. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "api/rcache.h"
#include "keys/keyspace.h"
#include "records/record.h"
#include "util/err.h"

#define BATCH_ATTEMPTS 200

/* One op of a batch, as planned in one round. */
typedef struct bop {
  const utable *t;
  ubuf pk, rkey;
  ustored_record old;
  int have_old;
  json_t *body;   /* the new record (insert, update) */
  char *out;      /* {"pk":..,"version":N} */
  uplan plan;
} bop;

/* One round: every op planned against what the store holds. */
typedef struct bround {
  unico *u;
  const unico_batch_op *ops;
  size_t n;
  const char *op_id;    /* the caller's, or generated */
  const char *given;    /* the caller's, or NULL */
  uint64_t fp;
  usch *sc;
  bop *v;
  uplan *plans;         /* (the executor takes an array of plans) */
  ubuf okey, oval, oidx;
  char *output;
  uexec_batch_refused why;
  uapi_takeovers *tk;   /* expired holds in the way (kept across rounds) */
} bround;

static const char *const op_words[] = {"", "insert", "update", "delete"};

static int plan_kind(int kind) {
  return kind == UNICO_WRITE_INSERT ? UPLAN_INSERT
         : kind == UNICO_WRITE_UPDATE ? UPLAN_UPDATE
                                      : UPLAN_DELETE;
}

/* The error of op i: its message starts with "op I: ", and res->json
 * names the op. Returns rc. */
static int name_op(const unico_batch_op *op, size_t i, int rc,
                   unico_result *res) {
  if (!res || !rc) return rc;
  char msg[sizeof res->message + 32];
  snprintf(msg, sizeof msg, "op %zu: %s", i, res->message);
  snprintf(res->message, sizeof res->message, "%.*s",
           (int)sizeof res->message - 1, msg);
  json_t *j = json_pack("{s:I,s:s,s:s}", "index", (json_int_t)i, "op",
                        op_words[op->kind], "table",
                        op->table ? op->table : "");
  free(res->json);
  res->json = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  return rc;
}

/* What identifies the batch under an op id: every op's kind, table,
 * canonical record or patch, key and expected version. */
static uint64_t batch_fp(const unico_batch_op *ops, size_t n) {
  uint64_t h = USTORED_HASH_INIT;
  for (size_t i = 0; i < n; i++) {
    const char *parts[2] = {ops[i].json, ops[i].pk_json};
    h = ustored_hash(h, &ops[i].kind, sizeof ops[i].kind);
    h = ustored_hash(h, ops[i].table, strlen(ops[i].table) + 1);
    for (int k = 0; k < 2; k++) {
      json_t *j = parts[k] ? json_loads(parts[k], JSON_DECODE_ANY, NULL) : NULL;
      char *c = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS |
                                      JSON_ENCODE_ANY)
                  : NULL;
      const char *s = c ? c : parts[k] ? parts[k] : "";
      h = ustored_hash(h, s, strlen(s) + 1);
      free(c);
      json_decref(j);
    }
    h = ustored_hash(h, &ops[i].if_version, sizeof ops[i].if_version);
  }
  return h;
}

static void bop_free(bop *b) {
  ubuf_free(&b->pk);
  ubuf_free(&b->rkey);
  if (b->have_old) ustored_record_free(&b->old);
  json_decref(b->body);
  free(b->out);
  memset(b, 0, sizeof *b);
}

/* Insert: the new record and, where the key holds a tombstone, what the
 * insert continues. Update, delete: the record as it is, checked. */
static int read_op(bround *r, const unico_batch_op *op, bop *b,
                   uint64_t *sver, unico_result *res) {
  ubuf v = UBUF_INIT;
  int inflight = 0, rc;
  ukey_record(&b->rkey, b->t->name, b->pk.p, b->pk.len);
  rc = uexec_read_record(r->u->x, b->rkey.p, b->rkey.len, &v, sver, NULL,
                         UEXEC_SETTLE_READ, &inflight, res);
  if (!rc && ustored_record_decode(v.p, v.len, &b->old))
    rc = uerr(res, UNICO_ECORRUPT, NULL, "a stored record is corrupt");
  else if (!rc)
    b->have_old = 1;
  ubuf_free(&v);
  if (rc && rc != UNICO_ENOTFOUND) return rc;
  int live = b->have_old && b->old.state == UREC_LIVE;
  if (op->kind == UNICO_WRITE_INSERT)
    return live ? uapi_report_conflict(r->sc->s, b->t, -1, b->pk.p,
                                       b->pk.len, b->pk.p, b->pk.len, res)
                : UNICO_OK;
  if (!live) return uapi_not_found(b->t, op->pk_json, res);
  /* (UNICO_IF_VERSION_0: version 0, a native table's bare row's) */
  uint64_t want = op->if_version == UNICO_IF_VERSION_0 ? 0 : op->if_version;
  if (op->if_version && b->old.version != want) {
    if (res) res->version = b->old.version;
    return uerr(res, UNICO_EVERSION, NULL,
                "record %.200s of table %s is at version %" PRIu64
                ", not %" PRIu64,
                op->pk_json, b->t->name, b->old.version, want);
  }
  return UNICO_OK;
}

/* The new body (insert: the record; update: the record patched). */
static int body_of(const unico_batch_op *op, bop *b, unico_result *res) {
  json_t *in = NULL;
  if (op->kind == UNICO_WRITE_DELETE) return UNICO_OK;
  int rc = urec_parse_object(op->json, op->kind == UNICO_WRITE_INSERT
                                           ? "record" : "update",
                             &in, res);
  if (rc) return rc;
  if (op->kind == UNICO_WRITE_INSERT) {
    b->body = in;
    rc = urec_validate(b->t, in, res);
    return rc ? rc : urec_pk(b->t, in, &b->pk, res);
  }
  json_t *ob = json_loads(b->old.body, 0, NULL);
  rc = ob ? urec_patch_owned(b->t, ob, in, &b->body, res)
          : uerr(res, UNICO_ECORRUPT, NULL, "a stored record body is corrupt");
  json_decref(in);
  return rc;
}

/* {"pk":..,"version":N} of op b at the version it writes. */
static int output_of(bop *b, uint64_t version, unico_result *res) {
  json_t *src = b->body ? json_incref(b->body) : json_loads(b->old.body, 0, NULL);
  json_t *pk = src ? urec_pk_json(b->t, src) : NULL;
  json_t *o = pk ? json_pack("{s:o,s:I}", "pk", pk, "version",
                             (json_int_t)version)
                 : NULL;
  b->out = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  json_decref(src);
  return b->out ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
}

/* Read and plan op i alone (no outcome: the batch keeps one). */
static int plan_op(bround *r, size_t i, unico_result *res) {
  const unico_batch_op *op = &r->ops[i];
  bop *b = &r->v[i];
  uint64_t sver = 0;
  b->t = uapi_find_table(r->sc, op->table, res);
  if (!b->t) return UNICO_EINVAL;
  int rc = op->kind == UNICO_WRITE_INSERT
               ? body_of(op, b, res)
               : urec_pk_parse(b->t, op->pk_json, &b->pk, res);
  if (!rc) rc = read_op(r, op, b, &sver, res);
  if (!rc && op->kind != UNICO_WRITE_INSERT) rc = body_of(op, b, res);
  if (rc) return rc;
  ustored_record tomb; /* (an insert over a tombstone: its version alone) */
  memset(&tomb, 0, sizeof tomb);
  tomb.state = UREC_DELETED;
  tomb.version = b->have_old ? b->old.version : 0;
  int over = op->kind == UNICO_WRITE_INSERT && b->have_old;
  uint64_t version = op->kind == UNICO_WRITE_INSERT ? tomb.version + 1
                     : b->old.version + (op->kind == UNICO_WRITE_UPDATE);
  rc = output_of(b, version, res);
  uplan_write_req pw = {.kind = plan_kind(op->kind),
                        .table = b->t,
                        .pk = &b->pk,
                        .body = b->body,
                        .old = over ? &tomb : b->have_old ? &b->old : NULL,
                        .old_sver = over || b->have_old ? sver : 0,
                        .schema_ver = r->sc->store_ver,
                        .op_id = r->op_id,
                        .now_ms = uexec_now(r->u->x)};
  if (!rc) rc = uplan_write(&r->plans[i], &pw, res);
  if (!rc) rc = uapi_check_key_sizes(r->u, b->t, &r->plans[i], res);
  if (!rc) rc = uapi_takeovers_apply(r->tk, &r->plans[i], res);
  return rc;
}

/* A batch writes each record once: *dup is the earlier op of the same
 * record as op i, or SIZE_MAX. */
static size_t same_record(const bround *r, size_t i) {
  for (size_t k = 0; k < i; k++)
    if (r->v[k].rkey.len == r->v[i].rkey.len &&
        !memcmp(r->v[k].rkey.p, r->v[i].rkey.p, r->v[i].rkey.len))
      return k;
  return SIZE_MAX;
}

/* Every op planned; the answer and (op id) the outcome kept with it. */
static int plan_all(bround *r, unico_result *res) {
  size_t len = 16;
  for (size_t i = 0; i < r->n; i++) {
    int rc = plan_op(r, i, res);
    size_t dup = rc ? SIZE_MAX : same_record(r, i);
    if (dup != SIZE_MAX)
      rc = uerr(res, UNICO_EINVAL, NULL,
                "it writes the record of table %s that op %zu writes; a "
                "batch writes each record at most once",
                r->v[i].t->name, dup);
    if (rc) return name_op(&r->ops[i], i, rc, res);
    len += strlen(r->v[i].out) + 1;
  }
  r->output = malloc(len);
  if (!r->output) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  strcpy(r->output, "{\"results\":[");
  for (size_t i = 0; i < r->n; i++) {
    if (i) strcat(r->output, ",");
    strcat(r->output, r->v[i].out);
  }
  strcat(r->output, "]}");
  if (!r->given) return UNICO_OK;
  int64_t now = uexec_now(r->u->x);
  ukey_outcome(&r->okey, r->op_id);
  ukey_outcome_index(&r->oidx, now, r->op_id);
  ustored_outcome_encode(&r->oval, "batch", r->ops[0].table, r->fp, UNICO_OK,
                         r->output, now);
  if (!ubuf_ok(&r->okey) || !ubuf_ok(&r->oidx) || !ubuf_ok(&r->oval))
    return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  return UNICO_OK;
}

/* Not applied: the answer the single write of the op refused would get,
 * naming the op; or plan again (*retry). */
static int explain(bround *r, int *retry, unico_result *res) {
  const uexec_batch_refused *why = &r->why;
  size_t i = why->op < r->n ? why->op : 0;
  const bop *b = &r->v[i];
  const uplan *p = &r->plans[i];
  const uclaim *c = why->r.claim < p->take.n ? &p->take.v[why->r.claim] : NULL;
  int rc;
  switch (why->r.why) {
  case UREFUSED_SCHEMA:
    rc = uapi_sch_reload(r->u, res);
    *retry = !rc;
    return rc;
  case UREFUSED_ANSWERED: /* a repeat: its first answer (the executor's) */
    if (res) {
      free(res->json);
      res->json = why->r.answer;
      r->why.r.answer = NULL;
    }
    return UNICO_OK;
  case UREFUSED_OUTCOME: /* (the executor answers a repeat: not reached) */
  case UREFUSED_RACE:    /* a limit group moved since it was read */
  case UREFUSED_RECORD:  /* a record moved: read again */
    *retry = 1;
    return UNICO_OK;
  case UREFUSED_TWICE:
    /* (the other op's record: of its own table, where a NAMESPACE is
     * shared by two tables of the batch) */
    rc = uapi_report_conflict_in(b->t, c ? c->con : -1,
                                 c ? c->key + c->voff : b->pk.p,
                                 c ? c->klen - c->voff : b->pk.len,
                                 r->v[why->twice].t, r->v[why->twice].pk.p,
                                 r->v[why->twice].pk.len, res);
    return name_op(&r->ops[i], i, rc, res);
  case UREFUSED_LIMIT:
    rc = c ? uapi_report_limit(b->t, c, why->r.count, res) : UNICO_ELIMIT;
    return name_op(&r->ops[i], i, rc, res);
  case UREFUSED_GONE: /* a hold taken over went away: take the value free */
    if (c) uapi_takeovers_drop(r->tk, c);
    *retry = 1;
    return UNICO_OK;
  case UREFUSED_CLAIM:
    if (c && why->r.owner.state == UCLAIM_HELD &&
        why->r.owner.expires_ms <= uexec_now(r->u->x)) {
      /* an expired hold is free: take it over at the version read */
      rc = uapi_takeovers_add(r->tk, c, why->r.cur_version,
                              why->r.owner.token_hash, res);
      *retry = !rc;
      return rc;
    }
    if (c && why->r.owner.state != UCLAIM_HELD) {
      /* judged by its owner, as the single write judges it */
      rc = uapi_claim_owner_gone(r->u, r->sc->s, b->t, c, &why->r.owner,
                                 why->r.cur_version, r->sc->store_ver, res);
      *retry = rc == 1;
      if (rc) return rc == 1 ? UNICO_OK : name_op(&r->ops[i], i, rc, res);
    }
    if (c && why->r.owner.state == UCLAIM_HELD)
      rc = uapi_report_held(b->t, c, why->r.owner.expires_ms, res);
    else if (c)
      rc = uapi_report_conflict(r->sc->s, b->t, c->con, c->key + c->voff,
                                c->klen - c->voff, why->r.owner.owner,
                                why->r.owner.owner_len, res);
    else
      break;
    return name_op(&r->ops[i], i, rc, res);
  }
  return uerr(res, UNICO_ECORRUPT, NULL,
              "internal error: the batch was refused for no stated reason "
              "(%d); nothing was written",
              why->r.why);
}

static void round_free(bround *r) {
  for (size_t i = 0; r->v && i < r->n; i++) {
    if (r->v[i].rkey.len) /* (the batch wrote it, or it moved) */
      urcache_del(r->u->rc, r->v[i].rkey.p, r->v[i].rkey.len);
    bop_free(&r->v[i]);
    uplan_free(&r->plans[i]);
  }
  uexec_batch_refused_free(&r->why);
  memset(&r->why, 0, sizeof r->why);
  ubuf_free(&r->okey);
  ubuf_free(&r->oval);
  ubuf_free(&r->oidx);
  free(r->output);
  r->output = NULL;
  uapi_sch_put(r->sc);
  r->sc = NULL;
}

/* Apply, the executor answering a repeat of the caller's op id first:
 * before a refusal of its own, and before prc, the error planning gave
 * (look: that error's result, kept when the batch is no repeat). */
static int apply(bround *r, int prc, unico_result *look, unico_result *res) {
  uexec_batch b = {r->plans, prc ? 0 : r->n, &r->okey, &r->oval, &r->oidx,
                   {r->given, UPLAN_BATCH, r->ops[0].table, r->fp}, prc != 0};
  int rc = uexec_apply_batch(r->u->x, &b, &r->why, res);
  if (prc && rc == UEXEC_NOT_APPLIED && r->why.r.why == UREFUSED_RECORD) {
    rc = prc; /* no repeat: planning's answer */
    if (res) {
      unico_result_clear(res);
      *res = *look;
      memset(look, 0, sizeof *look);
    }
  }
  return rc;
}

/* One round: planned and applied, or answered before. */
static int round_run(bround *r, int *retry, unico_result *res) {
  unico_result look = UNICO_RESULT_INIT;
  r->sc = uapi_sch_get(r->u);
  int prc = plan_all(r, res);
  if (prc && !r->given) return prc;
  if (prc && res) { /* (planning's answer, kept aside) */
    look = *res;
    memset(res, 0, sizeof *res);
  }
  int rc = apply(r, prc, &look, res);
  unico_result_clear(&look);
  if (rc == UNICO_OK && res) {
    free(res->json);
    res->json = r->output;
    r->output = NULL;
  }
  if (rc == UEXEC_NOT_APPLIED) rc = explain(r, retry, res);
  return rc;
}

/* The claims protocol has no transaction over several keys: one record
 * only (docs/protocol.md, "Batches"), written as the single write. */
static int batch_of_one(unico *u, const unico_batch_op *op, const char *op_id,
                        unico_result *res) {
  uapi_req rq = {plan_kind(op->kind), op->table, op->json, op->pk_json,
                 op->if_version, op_id, NULL, 0};
  int rc = uapi_write(u, &rq, res);
  /* (an op id used for another request is the batch's, not its op's: as
   * a batch of several answers it) */
  if (rc && rc != UNICO_EOPID) return name_op(op, 0, rc, res);
  if (rc) return rc;
  if (!res) return rc;
  size_t n = strlen(res->json) + 16;
  char *s = malloc(n);
  if (!s) return uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  snprintf(s, n, "{\"results\":[%s]}", res->json);
  free(res->json);
  res->json = s;
  return rc;
}

/* Every op well formed: a kind, a table, what its kind needs. */
static int check_ops(const unico_batch_op *ops, size_t n, unico_result *res) {
  if (n == 0)
    return uerr(res, UNICO_EINVAL, NULL, "a batch has at least one op");
  if (n > UNICO_BATCH_MAX)
    return uerr(res, UNICO_EINVAL, NULL,
                "a batch has at most %d ops; this one has %zu", UNICO_BATCH_MAX,
                n);
  if (!ops) return uerr(res, UNICO_EINVAL, NULL, "a batch needs its ops");
  for (size_t i = 0; i < n; i++) {
    const unico_batch_op *op = &ops[i];
    const char *miss = op->kind < UNICO_WRITE_INSERT ||
                               op->kind > UNICO_WRITE_DELETE
                           ? "a kind (insert, update or delete)"
                       : !op->table ? "a table"
                       : op->kind != UNICO_WRITE_DELETE && !op->json
                           ? (op->kind == UNICO_WRITE_INSERT ? "a record"
                                                             : "a patch")
                       : op->kind != UNICO_WRITE_INSERT && !op->pk_json
                           ? "a key"
                           : NULL;
    if (miss)
      return uerr(res, UNICO_EINVAL, NULL, "op %zu of the batch has no %s", i,
                  miss);
  }
  return UNICO_OK;
}

int uapi_batch(unico *u, const unico_batch_op *ops, size_t n,
               const char *op_id, unico_result *res) {
  char gen[64];
  int rc = check_ops(ops, n, res);
  if (!rc && op_id) rc = uapi_check_op_id(op_id, res);
  if (rc) return rc;
  if (uexec_traits(u->x) & UEXEC_T_KEY_BY_KEY) {
    if (n == 1) return batch_of_one(u, ops, op_id, res);
    return uerr(res, UNICO_EINVAL, NULL,
                "a batch of %zu records needs a store with transactions; on "
                "%s (claims protocol) a batch writes one record "
                "(docs/protocol.md, \"Batches\")",
                n, uexec_store_name(u->x));
  }
  snprintf(gen, sizeof gen, "%s-%" PRIu64, u->opprefix,
           (uint64_t)atomic_fetch_add(&u->opseq, 1));
  bround r = {.u = u, .ops = ops, .n = n, .op_id = op_id ? op_id : gen,
              .given = op_id};
  r.fp = op_id ? batch_fp(ops, n) : 0;
  r.v = calloc(n, sizeof *r.v);
  r.plans = calloc(n, sizeof *r.plans);
  r.tk = uapi_takeovers_new();
  if (!r.v || !r.plans || !r.tk) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  for (int attempt = 0; !rc && attempt < BATCH_ATTEMPTS; attempt++) {
    int retry = 0;
    if (res) {
      free(res->json);
      res->json = NULL;
    }
    rc = round_run(&r, &retry, res);
    round_free(&r);
    if (!retry) break;
    rc = attempt + 1 < BATCH_ATTEMPTS ? UNICO_OK
         : uerr(res, UNICO_EBUSY, NULL,
                "the batch's records kept changing under %d attempts; try "
                "again", BATCH_ATTEMPTS);
    if (attempt > 20) uexec_sleep(u->x, 1);
  }
  free(r.v);
  free(r.plans);
  uapi_takeovers_free(r.tk);
  return rc;
}

/* ------------------------------------------------------------------ */
/* The JSON form: an array of {"op":..,"table":..,...}. */

/* The member of o named name, checked: NULL when absent. */
static int member_text(json_t *o, const char *name, int want_object,
                       char **out, size_t i, unico_result *res) {
  json_t *m = json_object_get(o, name);
  *out = NULL;
  if (!m) return UNICO_OK;
  if (want_object && !json_is_object(m))
    return uerr(res, UNICO_EINVAL, NULL,
                "batch op %zu: \"%s\" must be a JSON object", i, name);
  if (!want_object && (json_is_object(m) || json_is_null(m)))
    return uerr(res, UNICO_EINVAL, NULL,
                "batch op %zu: \"key\" must be the primary key: a value, "
                "or an array of one value per key column",
                i);
  *out = json_dumps(m, JSON_COMPACT | JSON_ENCODE_ANY);
  return *out ? UNICO_OK : uerr(res, UNICO_ENOMEM, NULL, "out of memory");
}

/* Which members an op of each kind has (besides op and table). */
static const char *const kind_members[4][3] = {
    {NULL}, {"record"}, {"key", "patch", "if_version"}, {"key", "if_version"}};

static int check_members(json_t *o, int kind, size_t i, unico_result *res) {
  const char *name;
  json_t *v;
  json_object_foreach(o, name, v) {
    int ok = !strcmp(name, "op") || !strcmp(name, "table");
    for (int k = 0; !ok && k < 3 && kind_members[kind][k]; k++)
      ok = !strcmp(name, kind_members[kind][k]);
    if (!ok)
      return uerr(res, UNICO_EINVAL, NULL,
                  "batch op %zu: unknown member \"%.100s\" for op %s (it "
                  "takes op, table%s%s%s%s%s%s)",
                  i, name, op_words[kind], ", ", kind_members[kind][0],
                  kind_members[kind][1] ? ", " : "",
                  kind_members[kind][1] ? kind_members[kind][1] : "",
                  kind_members[kind][2] ? ", " : "",
                  kind_members[kind][2] ? kind_members[kind][2] : "");
  }
  static const int needed[4] = {0, 1, 2, 1}; /* (if_version is optional) */
  for (int k = 0; k < needed[kind]; k++)
    if (!json_object_get(o, kind_members[kind][k]))
      return uerr(res, UNICO_EINVAL, NULL,
                  "batch op %zu: op %s needs \"%s\"", i, op_words[kind],
                  kind_members[kind][k]);
  return UNICO_OK;
}

/* Op i of the array: kind, table, texts (freed by the caller). */
static int parse_op(json_t *o, size_t i, unico_batch_op *op, char **texts,
                    unico_result *res) {
  if (!json_is_object(o))
    return uerr(res, UNICO_EINVAL, NULL, "batch op %zu is not a JSON object",
                i);
  const char *w = json_string_value(json_object_get(o, "op"));
  op->kind = 0;
  for (int k = 1; w && k <= 3; k++)
    if (!strcmp(w, op_words[k])) op->kind = k;
  if (!op->kind)
    return uerr(res, UNICO_EINVAL, NULL,
                "batch op %zu: \"op\" must be \"insert\", \"update\" or "
                "\"delete\"",
                i);
  op->table = json_string_value(json_object_get(o, "table"));
  if (!op->table || !*op->table)
    return uerr(res, UNICO_EINVAL, NULL,
                "batch op %zu: \"table\" must be a table's name", i);
  int rc = check_members(o, op->kind, i, res);
  json_t *iv = json_object_get(o, "if_version");
  if (!rc && iv && (!json_is_integer(iv) || json_integer_value(iv) < 0))
    rc = uerr(res, UNICO_EINVAL, NULL,
              "batch op %zu: \"if_version\" must be a version (an integer, "
              "0 for any)",
              i);
  op->if_version = iv ? (uint64_t)json_integer_value(iv) : 0;
  if (!rc)
    rc = member_text(o, op->kind == UNICO_WRITE_INSERT ? "record" : "patch", 1,
                     &texts[0], i, res);
  if (!rc) rc = member_text(o, "key", 0, &texts[1], i, res);
  op->json = texts[0];
  op->pk_json = texts[1];
  return rc;
}

int uapi_batch_json(unico *u, const char *json, const char *op_id,
                    unico_result *res) {
  json_error_t e;
  json_t *a = json ? json_loads(json, 0, &e) : NULL;
  unico_batch_op *ops = NULL;
  char **texts = NULL;
  size_t n = json_array_size(a);
  int rc = UNICO_OK;
  if (!a)
    rc = uerr(res, UNICO_EINVAL, NULL,
              "the batch is not valid JSON: %s (line %d, column %d)",
              json ? e.text : "no text", json ? e.line : 0,
              json ? e.column : 0);
  else if (!json_is_array(a))
    rc = uerr(res, UNICO_EINVAL, NULL,
              "a batch is a JSON array of ops, [{\"op\":\"insert\","
              "\"table\":..,\"record\":{..}}, ...]");
  else if (n == 0 || n > UNICO_BATCH_MAX)
    rc = check_ops(NULL, n, res);
  if (!rc) {
    ops = calloc(n, sizeof *ops);
    texts = calloc(2 * n, sizeof *texts);
    if (!ops || !texts) rc = uerr(res, UNICO_ENOMEM, NULL, "out of memory");
  }
  for (size_t i = 0; !rc && i < n; i++)
    rc = parse_op(json_array_get(a, i), i, &ops[i], &texts[2 * i], res);
  if (!rc) rc = uapi_batch(u, ops, n, op_id, res);
  for (size_t i = 0; texts && i < 2 * n; i++) free(texts[i]);
  free(texts);
  free(ops);
  json_decref(a);
  return rc;
}
