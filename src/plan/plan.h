/* plan.h - what a record change means for the store: the claims a record
 * holds under its table, which to take and which to release, the record
 * to write and the outcome to keep (their stored forms: codec/stored.h). */
#ifndef UNICO_PLAN_H
#define UNICO_PLAN_H

#include <jansson.h>
#include <stdint.h>

#include "schema/schema.h"
#include "unico.h"
#include "codec/stored.h"
#include "util/buf.h"

/* The claims and groups a record body holds under table t's unique and
 * limit constraints (a NULL component: none for that constraint). */
int uplan_claims(const utable *t, json_t *body, uclaims *out,
                 unico_result *res);

/* Find where the value starts in a claim or group key and which constraint
 * of t it belongs to (-1 if none). Returns -1 when the key is neither. */
int uplan_claim_split(const utable *t, const uint8_t *key, size_t klen,
                      size_t *voff, int *con, char *table, size_t tlen);

/* ------------------------------------------------------------------ */
/* A planned write: everything one insert, update or delete must change,
 * with the conditions that make it correct. An executor applies it all or
 * nothing, or reports which condition failed. */

enum { UPLAN_INSERT = 0, UPLAN_UPDATE = 1, UPLAN_DELETE = 2 };
/* Not a record write: the kind a hold's outcome is kept under, and a
 * batch's (several writes, one outcome). */
enum { UPLAN_RESERVE = 3, UPLAN_BATCH = 4 };

typedef struct uplan {
  int kind;
  ubuf skey;           /* the schema key ... */
  uint64_t schema_ver; /* ... must still be at this store version (0: absent) */
  ubuf rkey;           /* the record key */
  uint64_t rver;       /* update/delete: the record's store version as read
                          (insert: the tombstone's it replaces, or 0) */
  int rbare;           /* update/delete of a record read at store version 0:
                          a native table's row another client wrote, which
                          must still be there, at version 0 (rver 0 alone
                          means "absent") */
  uint64_t version;    /* the record version rval carries */
  ubuf rval;           /* insert/update: the new stored record */
  const char *rprev;   /* update: the body it was planned from (not owned:
                          the caller's old record, alive while p is
                          applied); NULL otherwise */
  uclaims take;        /* claims to take: each must be absent */
  ubuf claim_val;      /* the stored claim written under every taken key */
  ubuf claim_val_ns;   /* ... but a NAMESPACE's (ukey_claim_shared): the
                          same naming its owner as (table, pk...); empty
                          when the plan takes none */
  uclaims release;     /* claims to give up, groups to leave */
  uclaims drop;        /* keys deleted without condition (hold indexes) */
  ubuf okey;           /* outcome key, empty when the caller gave no op id */
  ubuf oval;           /* the outcome */
  ubuf oidx;           /* its age-index key */
  uint64_t table_fp;   /* insert, claims protocol: uplan_table_fingerprint
                          of the table it was planned under (0: unknown,
                          and then no parallel commit) */
  /* The request under the caller's op id, whose repeats the executor
   * answers with the first outcome (exec.h, uexec_apply): */
  const char *req_op;    /* the caller's op id (not owned; NULL: none) */
  const char *req_table; /* its table (not owned) */
  uint64_t req_fp;       /* its fingerprint */
  const ustored_record *rold; /* update, delete: the record as read
                          (not owned, alive while p is applied), or NULL */
  int refused;           /* uplan_refused: the caller's read refuses the
                            write already; nothing is to be written */
  const ubuf *req_oval;  /* the outcome key of req_op as read in the same
                            round trip as rold (not owned; NULL: not read
                            so, the executor reads it), with req_orc: */
  int req_orc;           /* UNICO_OK (req_oval holds it), UNICO_ENOTFOUND,
                            or -1 (could not be read so: read it) */
} uplan;

void uplan_init(uplan *p);
const char *uplan_kind_name(int kind); /* "insert", "update", "delete" */
void uplan_free(uplan *p); /* accepts NULL; leaves p re-initialised */

/* What a write is planned from. */
typedef struct uplan_write_req {
  int kind;                   /* UPLAN_INSERT, _UPDATE, _DELETE */
  const utable *table;
  const ubuf *pk;             /* the primary key tuple */
  json_t *body;               /* the new record (NULL for a delete) */
  const struct urec_flat *flat; /* or (insert) the record as its compact
                                 text, bound to table (records/flat.h) */
  const ustored_record *old;  /* the record as read (insert: the tombstone
                                 it replaces, or NULL) */
  uint64_t old_sver;          /* old's store version */
  uint64_t schema_ver;        /* the schema key's, the plan's condition */
  const char *op_id;          /* stored in the record and the claims */
  const char *outcome;        /* the output to keep under op_id (NULL:
                                 none), with the request's fingerprint fp */
  uint64_t fp;
  int64_t now_ms;             /* stamps claims and the outcome */
  int native;                 /* records are rows other writers change: a
                                 claim old lists counts as held only when
                                 old's body needs it too */
} uplan_write_req;

/* Plan the write w into p (freed first). */
int uplan_write(uplan *p, const uplan_write_req *w, unico_result *res);

/* Plan, into p (freed first), an update or delete of w that the caller's
 * read refuses already: the record w->pk absent (w->old NULL) or not at
 * the version the request asks (w->old, as read). It writes nothing; the
 * executor answers it as a repeat when the caller's op id caller_op
 * (NULL: none) ran it before, and refuses it otherwise (exec.h,
 * uexec_apply). Of w it reads kind, table, pk, old and fp. */
int uplan_refused(uplan *p, const uplan_write_req *w, const char *caller_op,
                  unico_result *res);

/* A 64-bit hash of everything in t that decides which records fit it and
 * which keys they claim: its name, columns (name, type, key position), key
 * order and constraints (name, kind, columns, normalization, limit). Two
 * parses of the same definition agree; any change to one of these changes
 * it (up to hash collisions). An insert's INTENT carries it
 * (docs/parallel-commit.md). */
uint64_t uplan_table_fingerprint(const utable *t);

#endif
