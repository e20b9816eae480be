/* parallel_commit.pml - a Promela model of the parallel-commit design
 * (docs/parallel-commit.md): an insert whose PENDING intent is its commit
 * once every claim it lists names it and its schema epoch is current.
 *
 * Same conventions as claims.pml. The store is a set of keys, each with a
 * value and a version that moves by one on every write and never goes
 * back (keys are never removed, so "absent" is "version 0"). Every store
 * call is ONE d_step on ONE key: a read, or a compare-and-set expecting
 * version n (n = 0: absent). Nothing spans two keys.
 *
 * Keys:
 *   R[p]  record of primary key p: absent, PENDING{op, attempt, epoch},
 *         LIVE{...} or ABORTED{...}
 *   K[i]  claims: absent, FREE or OWNED{owner pk, attempt}
 *           K[0]          value A, shared: every record lists it
 *           K[1+p]        value B_p, of primary key p
 *           K[1+NPK+p]    value C_p, of the constraint being built
 *         A record planned under epoch 0 lists A and B_p; under epoch 1
 *         it lists A, B_p and C_p.
 *   S     the schema: epoch (0; 1 once the build is done) and the
 *         "changing" marker.
 *
 * Writer w runs one insert, op id w + 1, and repeats it under the same op
 * id after a crash, a lost answer or a one-shot failure (ATTEMPTS runs in
 * all). The
 * builder (BUILD=1) adds the constraint on C while the writers run; a
 * reader (READER=1) resolves record 0 by rule 2 at any moment; a writer's
 * batch call may lose its answer and land later (LOSE, LATE). Knobs: see
 * "configuration" below.
 *
 * THE DESIGN AS WRITTEN IS BROKEN (model/README.md, "parallel_commit.pml").
 * By default this file models the design WITH THREE FIXES:
 *   FIX 1 (attempt ids)  every attempt has its own id (op id + attempt
 *        number); the intent and the claims carry it, and the commit
 *        predicate asks each claim to name (P, attempt), not (P, op). A
 *        claim naming an earlier attempt of the same op is resolved like
 *        any other owner's (through its record, rules 2 and 3), never
 *        "ours as it is".
 *   FIX 2 (rule 3)  a claim whose owner's record is a tombstone (ABORTED,
 *        or a record of another attempt) is taken over only after that
 *        record's version is moved (cas at the version read to the same
 *        bytes), as an absent one is created ABORTED.
 *   FIX 3 (undo)  an attempt whose intent call went unanswered fences its
 *        record before freeing its claims: its own intent, if it landed,
 *        is aborted at its version; an absent record is created ABORTED,
 *        a tombstone written back at its version (the late call can then
 *        never land). -DUNDO_READ only reads it, which is enough when a
 *        lost call cannot land after the next call on its key (LATE=1).
 * The design's own rules, for comparison:
 *   -DOP_NAMING     claims name (P, op) as the design has it; the repeat
 *                   of an op then needs two rules of its own, modelled
 *                   here: a claim found naming (P, op) is taken again at
 *                   its version (-DADOPT_OWN: "ours as it is", as
 *                   written), and the undo resolves whatever PENDING of
 *                   the op is at the record by rule 2 before freeing
 *                   anything (-DUNDO_OWN_ONLY: only this attempt's intent
 *                   is aborted, as written). Even with both it fails.
 *   -DTOMB_UNFENCED a tombstone owner is not fenced (as written).
 *   -DAS_WRITTEN    all of the above: the design as written.
 *
 * Broken on purpose, on top of the fixed design; each must be caught:
 *   NO_ONESHOT        a claim cas that did not apply because the claim was
 *                     FREE (fenced) is sent again at the version found, in
 *                     the same attempt;
 *   NO_FENCE          rule 2 aborts a record without fencing its missing
 *                     claims;
 *   BUILD_NO_RESOLVE  the build aborts every PENDING it finds, complete or
 *                     not;
 *   READ_PARALLEL     the writer's schema read is sent with the batch and
 *                     may be answered before the intent and claims land.
 * Not broken (expected to hold): FENCE_ONE, rule 2 fences only the first
 * missing claim it finds; BUMP_LIVE, the build also moves LIVE records'
 * versions (left out by default: nothing here updates a record).
 *
 * After every store write the invariants are asserted (CHECK):
 *   INV1  no two committed records share a value (all of them list A);
 *   INV2  a committed record is named by each claim it lists;
 *   INV3  a writer that answered "inserted": its record is committed, by
 *         its op, from then on;
 *   INV4  once the build has written the new epoch, every committed record
 *         is named by its C claim.
 * "Committed" is the design's predicate with the build marker ignored
 * (model/README.md says why): LIVE, or PENDING with every claim it lists
 * naming (p, attempt) and its epoch equal to the schema's. -DSTRICT_PRED reads
 * the predicate literally (no PENDING is committed while a build runs). */

/* ---- configuration ------------------------------------------------ */

#ifndef NW
#define NW 2          /* writers (1..3); writer w runs op id w + 1 */
#endif
#ifndef SAMEPK
#define SAMEPK 0      /* 1: the last writer inserts primary key 0 too,
                         under its own op id (a rival on the same key) */
#endif
#ifndef BUILD
#define BUILD 1       /* 1: a builder adds the constraint on C */
#endif
#ifndef ATTEMPTS
#define ATTEMPTS 3    /* runs of one op id: first try + retries/repeats */
#endif
#ifndef ATTEMPTS2
#define ATTEMPTS2 ATTEMPTS   /* runs of the second writer */
#endif
#ifndef ATTEMPTS3
#define ATTEMPTS3 ATTEMPTS   /* runs of the third writer, if any */
#endif
#ifndef CRASHES
#define CRASHES 1     /* 1: a writer may lose its state after any write
                         it made, and its caller repeats the op id */
#endif
#ifndef READER
#define READER 0      /* 1: a reader that resolves record 0 once, by
                         rule 2, as a get or a lookup would */
#endif
#ifndef LOSE
#define LOSE 0        /* batch calls of the first writer whose answer is
                         lost */
#endif
#ifndef LOSE2
#define LOSE2 LOSE    /* the same for the second writer */
#endif
#ifndef LOSE3
#define LOSE3 0       /* and the third */
#endif
#ifndef LATE
#define LATE 2
#endif
/* When may a batch call whose answer was lost take effect?
 * LATE 1: at any moment until the next call on the same key, which
 *         settles it (a Cassandra Paxos round on the partition).
 * LATE 2: at any later moment at all, or never.
 * (LATE 0, at the call or never, needs no extra code: the read-back that
 * follows finds it or not, as a plain success, failure or crash would.) */

#ifdef AS_WRITTEN
#define OP_NAMING
#define ADOPT_OWN
#define TOMB_UNFENCED
#define UNDO_OWN_ONLY
#endif

/* primary keys: writer w inserts pk w; with SAMEPK the last writer
 * inserts pk 0 */
#if SAMEPK
#define NPK (NW - 1)
#else
#define NPK NW
#endif
#define WPK(w) ((w) < NPK -> (w) : 0)

#define NK (1 + 2 * NPK)
#define CA     0
#define CB(p)  (1 + (p))
#define CC(p)  (1 + NPK + (p))

/* ---- store -------------------------------------------------------- */

#define NOBODY 255

#define R_ABSENT  0
#define R_PENDING 1
#define R_LIVE    2
#define R_ABORTED 3

#define K_ABSENT 0
#define K_FREE   1
#define K_OWNED  2

byte s_ep;            /* schema epoch */
bool s_mark;          /* a build is running */

byte r_st[NPK];
byte r_op[NPK];
byte r_aid[NPK];      /* attempt id of the intent that made it */
byte r_ep[NPK];
byte r_ver[NPK];

byte k_st[NK];
byte k_own[NK];
byte k_aid[NK];      /* attempt id of the owner's intent */
byte k_ver[NK];

/* ghost: writer w answered "inserted" */
bool acked[NW];

#if LOSE
/* batch calls whose answer was lost and that have not landed yet, by
 * writer: the key (RKEY(p) for record p, else 1 + claim index), the
 * version expected, and what the call writes */
#define RKEY(p) (100 + (p))
bool fl_on[NW];
byte fl_key[NW];
byte fl_exp[NW];
byte fl_pk[NW];
byte fl_op[NW];
byte fl_aid[NW];
byte fl_ep[NW];
#endif

/* ---- invariants --------------------------------------------------- */

#define NAMED(i, p, a) (k_st[i] == K_OWNED && k_own[i] == (p) && k_aid[i] == (a))
#define ALLNAMED(p) \
  (NAMED(CA, p, r_aid[p]) && NAMED(CB(p), p, r_aid[p]) && \
   (r_ep[p] == 0 || NAMED(CC(p), p, r_aid[p])))
#ifdef STRICT_PRED
#define COMMITTED(p) \
  (r_st[p] == R_LIVE || \
   (r_st[p] == R_PENDING && r_ep[p] == s_ep && !s_mark && ALLNAMED(p)))
#else
#define COMMITTED(p) \
  (r_st[p] == R_LIVE || \
   (r_st[p] == R_PENDING && r_ep[p] == s_ep && ALLNAMED(p)))
#endif

/* inv1..inv4 are always true: they only name the invariant in spin's
 * "assertion violated" message */
hidden byte inv1 = 1;
hidden byte inv2 = 1;
hidden byte inv3 = 1;
hidden byte inv4 = 1;

#define TWO(p, q) (!(COMMITTED(p) && COMMITTED(q)))
#define INV2P(p) (!COMMITTED(p) || ALLNAMED(p))
#define INV3P(w) (!acked[w] || (COMMITTED(WPK(w)) && r_op[WPK(w)] == (w) + 1))
#define INV4P(p) (s_ep == 0 || !COMMITTED(p) || NAMED(CC(p), p, r_aid[p]))
#define VERP(p)  (r_ver[p] < 200 && k_ver[CB(p)] < 200 && k_ver[CC(p)] < 200)

#if NPK == 1
#define INV1 1
#define INV2 INV2P(0)
#define INV4 INV4P(0)
#define VERS (VERP(0) && k_ver[CA] < 200)
#endif
#if NPK == 2
#define INV1 TWO(0, 1)
#define INV2 (INV2P(0) && INV2P(1))
#define INV4 (INV4P(0) && INV4P(1))
#define VERS (VERP(0) && VERP(1) && k_ver[CA] < 200)
#endif
#if NPK == 3
#define INV1 (TWO(0, 1) && TWO(0, 2) && TWO(1, 2))
#define INV2 (INV2P(0) && INV2P(1) && INV2P(2))
#define INV4 (INV4P(0) && INV4P(1) && INV4P(2))
#define VERS (VERP(0) && VERP(1) && VERP(2) && k_ver[CA] < 200)
#endif
#if NW == 1
#define INV3 INV3P(0)
#endif
#if NW == 2
#define INV3 (INV3P(0) && INV3P(1))
#endif
#if NW == 3
#define INV3 (INV3P(0) && INV3P(1) && INV3P(2))
#endif

/* after every store write */
#define CHECK assert(inv1 && INV1); assert(inv2 && INV2); \
              assert(inv3 && INV3); assert(inv4 && INV4); assert(VERS)

/* ---- lost calls: LATE 1 settles them at the next call on the key --- */

#if LOSE
#define FL_CLEAR(w) \
  fl_on[w] = 0; fl_key[w] = 0; fl_exp[w] = 0; fl_pk[w] = 0; fl_op[w] = 0; \
  fl_aid[w] = 0; fl_ep[w] = 0
#endif
#if LOSE && LATE == 1
#define DROP1(w, key) \
  if \
  :: fl_on[w] && fl_key[w] == (key) -> FL_CLEAR(w) \
  :: else -> skip \
  fi
#if NW == 1
#define SETTLE(key) DROP1(0, key)
#endif
#if NW == 2
#define SETTLE(key) DROP1(0, key); DROP1(1, key)
#endif
#if NW == 3
#define SETTLE(key) DROP1(0, key); DROP1(1, key); DROP1(2, key)
#endif
#define SETTLE_R(p) SETTLE(RKEY(p))
#define SETTLE_K(i) SETTLE(1 + (i))
#else
#define SETTLE_R(p) skip
#define SETTLE_K(i) skip
#endif

/* ---- store calls (each one key, one step) ------------------------- */

#define READ_REC(p) \
  d_step { \
    SETTLE_R(p); \
    y_st = r_st[p]; y_op = r_op[p]; y_aid = r_aid[p]; y_ep = r_ep[p]; \
    y_ver = r_ver[p] \
  }

#define READ_CLAIM(i) \
  d_step { \
    SETTLE_K(i); \
    z_st = k_st[i]; z_own = k_own[i]; z_aid = k_aid[i]; z_ver = k_ver[i] \
  }

/* cas(R[p], version v -> state s, same op and epoch) */
#define REC_SET(p, v, s) \
  d_step { \
    SETTLE_R(p); \
    if \
    :: r_ver[p] == (v) -> r_st[p] = s; r_ver[p]++; ok = 1; CHECK \
    :: else -> ok = 0 \
    fi \
  }

/* fence a record: cas(R[p], version v -> the same bytes), or create it
 * ABORTED if it is absent (v = 0) */
#define REC_FENCE(p, v) \
  d_step { \
    SETTLE_R(p); \
    if \
    :: r_ver[p] == (v) -> \
         if \
         :: r_st[p] == R_ABSENT -> r_st[p] = R_ABORTED; r_op[p] = 0; \
              r_aid[p] = 0; r_ep[p] = 0 \
         :: else -> skip \
         fi; \
         r_ver[p]++; ok = 1; CHECK \
    :: else -> ok = 0 \
    fi \
  }

/* fence a claim: cas(K[i], version v -> the same bytes), or create it
 * FREE if it is absent */
#define CLAIM_FENCE(i, v) \
  d_step { \
    SETTLE_K(i); \
    if \
    :: k_ver[i] == (v) -> \
         if \
         :: k_st[i] == K_ABSENT -> k_st[i] = K_FREE; k_own[i] = NOBODY; \
              k_aid[i] = 0 \
         :: else -> skip \
         fi; \
         k_ver[i]++; ok = 1; CHECK \
    :: else -> ok = 0 \
    fi \
  }

/* free a claim at the version h we wrote: cas(K[i], h -> FREE) */
#define CLAIM_FREE(i, h) \
  d_step { \
    SETTLE_K(i); \
    if \
    :: k_ver[i] == (h) -> k_st[i] = K_FREE; k_own[i] = NOBODY; k_aid[i] = 0; \
         k_ver[i]++; ok = 1; CHECK \
    :: else -> ok = 0 \
    fi \
  }

/* ---- a writer ----------------------------------------------------- */

/* a crash: local state lost, the caller repeats the op id (if it has
 * runs left). Placed right after each store write that applied. */
#if CRASHES
#define CRASH \
  if \
  :: atts < natt -> goto restart \
  :: skip \
  fi
#else
#define CRASH skip
#endif

/* resolution results */
#define RS_GONE   0   /* not PENDING any more: look again */
#define RS_BUSY   1   /* in flight (young) or a build running: give up */
#define RS_ABORT  2   /* aborted (by us, rule 2) */
#define RS_COMMIT 3   /* committed (flipped LIVE by us) */

/* batch items */
#define I_REC 1
#define I_A   2
#define I_B   4
#define I_C   8
#define I_S   16      /* READ_PARALLEL: the schema read, in the batch */

#define FORGET_Y y_st = 0; y_op = 0; y_aid = 0; y_ep = 0; y_ver = 0
#define FORGET_Z z_st = 0; z_own = 0; z_aid = 0; z_ver = 0

/* cas(claim i, version x -> OWNED{pk, op}); h := the version written.
 * A cas that does not apply marks the attempt bad (one shot), except:
 * ADOPT_OWN: a claim found naming (pk, op) counts as ours as it is;
 * NO_ONESHOT: a claim found FREE is sent again at its version. */
#ifdef ADOPT_OWN
#define ADOPT_ALT(i, x, bit) \
    :: k_ver[i] != (x) && NAMED(i, pk, aid) -> skip
#else
#define ADOPT_ALT(i, x, bit)
#endif
#ifdef NO_ONESHOT
#define AGAIN_ALT(i, x, bit) \
    :: k_ver[i] != (x) && k_st[i] == K_FREE && !(again & (bit)) -> \
         again = again | (bit); x = k_ver[i]; todo = todo | (bit)
#else
#define AGAIN_ALT(i, x, bit)
#endif
#define CLAIM(i, x, h, bit) \
  d_step { \
    SETTLE_K(i); \
    if \
    :: k_ver[i] == (x) -> \
         k_st[i] = K_OWNED; k_own[i] = pk; k_aid[i] = aid; k_ver[i]++; \
         h = k_ver[i]; ok = 1; CHECK \
    ADOPT_ALT(i, x, bit) \
    AGAIN_ALT(i, x, bit) \
    :: else -> bad = 1 \
    fi \
  }

/* a fresh attempt id for each attempt (OP_NAMING: the op id, as the
 * design has it) */
#ifdef OP_NAMING
#define NEW_AID aid = op
#else
#define NEW_AID aid = op * 16 + atts
#endif

proctype writer(byte me; byte pk; byte natt; byte nlose) {
  byte op;
  byte atts;          /* runs of this op id so far */
  byte lost;          /* batch answers lost so far */
  bool il;            /* this attempt's intent call went unanswered */
  byte ep;            /* epoch the attempt is planned under */
  byte er, ea, eb, ec;  /* versions the batch expects (0: absent) */
  byte hr, ha, hb, hc;  /* versions this attempt wrote (0: none) */
  byte todo;          /* batch items not sent yet */
  byte ad;            /* ADOPT_OWN: claims counted as ours unwritten */
  byte again;         /* NO_ONESHOT: claims sent a second time */
  bool bad;           /* a batch item did not apply */
  bool ok;
  byte se;            /* schema as read: epoch, marker */
  bool sm;
  byte aid;           /* attempt id (OP_NAMING: the op id) */
  byte y_st, y_op, y_aid, y_ep, y_ver;   /* a record as read */
  byte z_st, z_own, z_aid, z_ver;   /* a claim as read */
  byte pi, pz;        /* planning: claim (0 A, 1 B, 2 C), its version */
  byte q, mi, ci, rs, rt;          /* rule 2 on record q */
  bool miss;

  op = me + 1;
  if
  :: me >= NW -> q = pk; rt = 2; goto resolve   /* the reader */
  :: else -> skip
  fi;

restart:
  ep = 0; er = 0; ea = 0; eb = 0; ec = 0; hr = 0; ha = 0; hb = 0; hc = 0;
  todo = 0; ad = 0; again = 0; bad = 0; ok = 0; se = 0; sm = 0; il = 0;
  FORGET_Y; FORGET_Z; pi = 0; pz = 0; q = 0; mi = 0; ci = 0; rs = 0;
  rt = 0; miss = 0;
  atts++;
  NEW_AID;
  /* plan under the schema as known (waiting while a build runs); a first
   * run, or a repeat after a crash, expects every key absent */
end_plan:
  atomic { !s_mark -> ep = s_ep };

batch:
  /* round trip 1: the intent and every claim, in parallel (any order);
   * each is one cas; the writer may crash after any that applied */
  todo = I_REC | I_A | I_B | (ep == 1 -> I_C : 0);
  todo = todo & ~ad;
#ifdef READ_PARALLEL
  todo = todo | I_S;
#endif
  do
  :: todo & I_REC ->
       todo = todo & ~I_REC;
       d_step {
         SETTLE_R(pk);
         if
         :: r_ver[pk] == er ->
              r_st[pk] = R_PENDING; r_op[pk] = op; r_aid[pk] = aid;
              r_ep[pk] = ep;
              r_ver[pk]++; hr = r_ver[pk]; ok = 1; CHECK
         :: else -> bad = 1
         fi
       };
       if :: ok -> ok = 0; CRASH :: else fi
  :: todo & I_A ->
       todo = todo & ~I_A;
       CLAIM(CA, ea, ha, I_A);
       if :: ok -> ok = 0; CRASH :: else fi
  :: todo & I_B ->
       todo = todo & ~I_B;
       CLAIM(CB(pk), eb, hb, I_B);
       if :: ok -> ok = 0; CRASH :: else fi
  :: todo & I_C ->
       todo = todo & ~I_C;
       CLAIM(CC(pk), ec, hc, I_C);
       if :: ok -> ok = 0; CRASH :: else fi
#ifdef READ_PARALLEL
  :: todo & I_S ->
       todo = todo & ~I_S;
       d_step { se = s_ep; sm = s_mark }
#endif
#if LOSE
  /* the answer of one call is lost: read back, it is not there (yet), so
   * the attempt cannot count it; the call lands later (net), or never */
  :: todo & (I_REC | I_A | I_B | I_C) && lost < nlose && !fl_on[me] ->
       lost++;
       if
       :: todo & I_REC -> todo = todo & ~I_REC; il = 1;
            d_step { fl_key[me] = RKEY(pk); fl_exp[me] = er }
       :: todo & I_A -> todo = todo & ~I_A;
            d_step { fl_key[me] = 1 + CA; fl_exp[me] = ea }
       :: todo & I_B -> todo = todo & ~I_B;
            d_step { fl_key[me] = 1 + CB(pk); fl_exp[me] = eb }
       :: todo & I_C -> todo = todo & ~I_C;
            d_step { fl_key[me] = 1 + CC(pk); fl_exp[me] = ec }
       fi;
       d_step {
         fl_pk[me] = pk; fl_op[me] = op; fl_aid[me] = aid; fl_ep[me] = ep;
         fl_on[me] = 1
       };
       bad = 1
#endif
  :: todo == 0 -> break
  od;
  again = 0; er = 0; ea = 0; eb = 0; ec = 0;
  if
  :: bad -> goto undo
  :: else -> skip
  fi;

  /* round trip 2: read the schema */
#ifndef READ_PARALLEL
  d_step { se = s_ep; sm = s_mark };
#endif
  if
  :: se == ep && !sm -> goto ack
  :: else -> skip
  fi;
  se = 0; sm = 0;
  /* epoch moved or a build running: wait for it, then read our record */
end_wait:
  !s_mark;
look: skip;
  READ_REC(pk);
  if
  :: y_st == R_LIVE && y_op == op -> goto acked_found   /* the build did it */
  :: y_st == R_PENDING && y_aid == aid ->
       REC_SET(pk, y_ver, R_ABORTED);                /* ours: abort it */
       if
       :: ok -> ok = 0; CRASH; goto replan
       :: else -> goto look
       fi
  :: else -> goto replan                              /* ABORTED */
  fi;

ack: skip;
  /* the insert has happened: answer the caller */
  d_step { acked[me] = 1; CHECK };
  /* then the flip, sent without waiting; it may be lost (a late one is
   * the same as a slow writer: it is a cas at the intent's version) */
  if
  :: REC_SET(pk, hr, R_LIVE)
  :: skip
  fi;
#if CRASHES
  /* the answer may not reach the caller, who repeats the op id (the
   * repeat must find the insert done, never undo it) */
  CRASH;
#endif
  goto done;

acked_found: skip;
  d_step { acked[me] = 1; CHECK };
#if CRASHES
  CRASH;
#endif
  goto done;

undo:
  /* one shot: the attempt is over. Abort the intent, free the claims
   * this attempt took, each at the version it wrote. */
#ifndef OP_NAMING
  /* the fixed design: claims name the attempt, so they complete no other
   * attempt's intent; only this attempt's own intent matters. If its
   * call went unanswered (LOSE) it may land later: the record is fenced
   * (FIX 3; -DUNDO_READ: only read, which settles it under LATE=1) */
  if
  :: hr != 0 -> REC_SET(pk, hr, R_ABORTED); hr = 0;
       if
       :: ok -> ok = 0; CRASH; goto undo_claims
       :: else -> goto undo_look           /* moved: look */
       fi
  :: hr == 0 && il -> goto undo_look
  :: else -> goto undo_claims
  fi;
undo_look: skip;
  READ_REC(pk);
  if
  :: y_st == R_LIVE && y_op == op -> goto acked_found  /* it happened */
  :: y_st == R_PENDING && y_aid == aid ->              /* ours, landed */
       REC_SET(pk, y_ver, R_ABORTED);
       if
       :: ok -> ok = 0; CRASH
       :: else -> goto undo_look
       fi
#ifndef UNDO_READ
  :: il && (y_st == R_ABSENT || y_st == R_ABORTED) ->  /* ours may land */
       REC_FENCE(pk, y_ver);
       if
       :: ok -> ok = 0; CRASH
       :: else -> goto undo_look
       fi
#endif
  :: else -> skip
  fi;
undo_claims: skip;
  il = 0;
#else
#ifdef UNDO_OWN_ONLY
  /* as written: only an intent this attempt wrote is aborted */
  if
  :: hr != 0 -> REC_SET(pk, hr, R_ABORTED); hr = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
#else
  /* OP_NAMING, patched: the record first, whichever run of the op wrote
   * what is there (a PENDING of the op is resolved by rule 2) */
  if
  :: hr != 0 -> REC_SET(pk, hr, R_ABORTED); hr = 0;
       if
       :: ok -> ok = 0; CRASH; goto undo_claims
       :: else -> skip
       fi
  :: else -> skip
  fi;
undo_look: skip;
  READ_REC(pk);
  if
  :: y_st == R_LIVE && y_op == op -> goto acked_found  /* it happened */
  :: y_st == R_PENDING && y_op == op ->                /* an earlier run's */
       q = pk; rt = 3; goto resolve    /* rule 2: flip (done) or abort */
  :: y_st == R_ABSENT || y_st == R_ABORTED ->  /* an intent of ours, lost
                                                  by this run or an earlier
                                                  one, may still land */
       REC_FENCE(pk, y_ver);
       if
       :: ok -> ok = 0; CRASH
       :: else -> goto undo_look
       fi
  :: else -> skip
  fi;
undo_claims: skip;
#endif
#endif
  FORGET_Y;
  if
  :: ha != 0 -> CLAIM_FREE(CA, ha); ha = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
  if
  :: hb != 0 -> CLAIM_FREE(CB(pk), hb); hb = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
  if
  :: hc != 0 -> CLAIM_FREE(CC(pk), hc); hc = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;

replan:
  /* a new attempt: resolve what was found, fix what the batch expects */
  hr = 0; ha = 0; hb = 0; hc = 0; bad = 0; ad = 0; il = 0;
  er = 0; ea = 0; eb = 0; ec = 0; FORGET_Y; FORGET_Z;
  if
  :: atts >= natt -> goto done
  :: else -> atts++; NEW_AID
  fi;
end_replan:
  atomic { !s_mark -> ep = s_ep };

plan_rec: skip;
  READ_REC(pk);
  if
  :: y_st == R_LIVE && y_op == op -> goto acked_found  /* ours is in */
  :: y_st == R_LIVE -> goto done                       /* pk taken */
  :: y_st == R_PENDING -> q = pk; rt = 0; goto resolve /* rule 2 */
  :: else -> er = y_ver                                /* absent, ABORTED */
  fi;
  FORGET_Y;
  pi = 0;
plan_claim:
  ci = (pi == 0 -> CA : (pi == 1 -> CB(pk) : CC(pk)));
  READ_CLAIM(ci);
  if
  :: z_st != K_OWNED -> goto plan_take                 /* absent, FREE */
#ifdef OP_NAMING
  :: z_st == K_OWNED && z_own == pk && z_aid == aid ->
#ifdef ADOPT_OWN
       /* as written: "ours as it is", not written again */
       ad = ad | (pi == 0 -> I_A : (pi == 1 -> I_B : I_C));
       goto plan_next
#else
       goto plan_take       /* patched: taken again at the version found */
#endif
#endif
  :: else -> skip
  fi;
  /* owned by another attempt (maybe of our own op): read its record */
  q = z_own; pz = z_ver;
  READ_REC(q);
  if
  :: y_st == R_LIVE && y_aid == z_aid -> goto done      /* in force */
  :: y_st == R_LIVE && q == pk ->                       /* our own key */
       if
       :: y_op == op -> goto acked_found                /* ours is in */
       :: else -> goto done                             /* pk taken */
       fi
  :: y_st == R_PENDING -> rt = 1; goto resolve         /* rule 2 */
  :: else -> skip
  fi;
  /* rule 3: the owner is not committed (a tombstone, absent, or a record
   * of another op) */
#ifdef TOMB_UNFENCED
  if
  :: y_st == R_ABSENT ->
       REC_FENCE(q, 0);         /* absent-and-created-ABORTED */
       if
       :: ok -> ok = 0; CRASH
       :: else -> q = 0; pz = 0; FORGET_Y; goto plan_claim
       fi
  :: else -> skip               /* as written: taken over as it is */
  fi;
#else
  REC_FENCE(q, y_ver);          /* FIX 2: move the owner's version */
  if
  :: ok -> ok = 0;
       if
       :: q == pk -> er = y_ver + 1   /* our own key's tombstone: the
                                         intent goes over it as fenced */
       :: else -> skip
       fi;
       CRASH
  :: else -> q = 0; pz = 0; FORGET_Y; goto plan_claim
  fi;
#endif
  z_ver = pz;
plan_take:
  if
  :: pi == 0 -> ea = z_ver
  :: pi == 1 -> eb = z_ver
  :: pi == 2 -> ec = z_ver
  fi;
plan_next:
  q = 0; pz = 0; FORGET_Y; FORGET_Z;
  if
  :: pi == 0 || (pi == 1 && ep == 1) -> pi++; goto plan_claim
  :: else -> pi = 0; goto batch
  fi;

  /* ---- rule 2: resolve the PENDING record q ----
   * "Young: wait, then look again" is not modelled apart: it is the same
   * as a resolver that is slow to start; "young" here gives up (busy). */
resolve: skip;
  READ_REC(q);
  if
  :: y_st != R_PENDING -> rs = RS_GONE; goto resolved
  :: else -> skip
  fi;
  d_step { se = s_ep; sm = s_mark };
  if
  :: sm ->                                   /* a build: it decides */
       rs = RS_BUSY; goto resolved
  :: !sm && se != y_ep ->                    /* epoch moved: abort */
       se = 0;
       REC_SET(q, y_ver, R_ABORTED);
       if
       :: ok -> ok = 0; rs = RS_ABORT; CRASH; goto resolved
       :: else -> goto resolve
       fi
  :: else -> se = 0
  fi;
  /* same epoch, no build: read every claim q lists */
  miss = 0; mi = 0;
  do
  :: (mi == 2 && y_ep == 0) || mi == 3 -> break
  :: else ->
       ci = (mi == 0 -> CA : (mi == 1 -> CB(q) : CC(q)));
       READ_CLAIM(ci);
       if
       :: z_st == K_OWNED && z_own == q && z_aid == y_aid -> skip
       :: else ->
            /* young or past the grace period: decided at the first
             * missing claim; once past, every missing one is fenced */
            if
            :: !miss ->
                 if
                 :: rs = RS_BUSY; goto resolved   /* young: busy */
                 :: skip                          /* past grace */
                 fi
            :: else -> skip
            fi;
#ifdef FENCE_ONE
            if
            :: miss -> goto fenced
            :: else -> skip
            fi;
#endif
#ifndef NO_FENCE
            CLAIM_FENCE(ci, z_ver);
            if
            :: ok -> ok = 0; CRASH
            :: else -> goto resolve          /* it moved: judge again */
            fi;
#endif
#ifdef FENCE_ONE
fenced:
#endif
            miss = 1
       fi;
       FORGET_Z;
       mi++
  od;
  mi = 0; ci = 0;
  if
  :: !miss ->                               /* all named: committed */
       REC_SET(q, y_ver, R_LIVE);
       if
       :: ok -> ok = 0; rs = RS_COMMIT; CRASH; goto resolved
       :: else -> goto resolve
       fi
  :: miss ->                                /* fenced: abort */
       miss = 0;
       REC_SET(q, y_ver, R_ABORTED);
       if
       :: ok -> ok = 0; rs = RS_ABORT; CRASH; goto resolved
       :: else -> goto resolve
       fi
  fi;

resolved:
  mi = 0; ci = 0; miss = 0; se = 0; sm = 0; FORGET_Z;
  if
  :: rt == 0 ->                             /* our own record */
       if
       :: rs == RS_COMMIT && y_op == op -> rs = 0; goto acked_found
       :: rs == RS_COMMIT || rs == RS_BUSY -> goto done
       :: else -> rs = 0; q = 0; goto plan_rec
       fi
  :: rt == 1 ->                             /* the owner of claim pi */
       rt = 0;
       if
       :: rs == RS_COMMIT && q == pk && y_op == op ->
            rs = 0; goto acked_found                     /* our op is in */
       :: rs == RS_COMMIT || rs == RS_BUSY -> goto done  /* conflict, busy */
       :: rs == RS_ABORT -> rs = 0; z_ver = pz; goto plan_take  /* rule 3 */
       :: rs == RS_GONE -> q = 0; pz = 0; FORGET_Y; goto plan_claim
       fi
  :: rt == 2 -> skip                        /* the reader: done */
#if defined(OP_NAMING) && !defined(UNDO_OWN_ONLY)
  :: rt == 3 ->                             /* the undo: our op's intent */
       rt = 0;
       if
       :: rs == RS_COMMIT -> rs = 0; goto acked_found  /* it happened */
       :: rs == RS_ABORT -> rs = 0; q = 0; goto undo_claims
       :: rs == RS_BUSY -> goto done
       :: rs == RS_GONE -> q = 0; goto undo_look
       fi
#endif
  fi;

done:
  /* clear everything: finished writers differ only in what they left */
  op = 0; aid = 0; atts = 0; lost = 0; il = 0; ep = 0;
  er = 0; ea = 0; eb = 0; ec = 0; hr = 0; ha = 0; hb = 0; hc = 0;
  todo = 0; ad = 0; again = 0; bad = 0; ok = 0; se = 0; sm = 0;
  FORGET_Y; FORGET_Z; pi = 0; pz = 0; q = 0; mi = 0; ci = 0; rs = 0;
  rt = 0; miss = 0
}

/* ---- the network: lost batch calls that land late ----------------- */

#if LOSE
#define LAND(w) \
  atomic { \
    fl_on[w] -> \
      if \
      :: fl_key[w] >= 100 -> \
           if \
           :: r_ver[fl_pk[w]] == fl_exp[w] -> \
                r_st[fl_pk[w]] = R_PENDING; r_op[fl_pk[w]] = fl_op[w]; \
                r_aid[fl_pk[w]] = fl_aid[w]; \
                r_ep[fl_pk[w]] = fl_ep[w]; r_ver[fl_pk[w]]++; CHECK \
           :: else -> skip \
           fi \
      :: fl_key[w] < 100 -> \
           if \
           :: k_ver[fl_key[w] - 1] == fl_exp[w] -> \
                k_st[fl_key[w] - 1] = K_OWNED; \
                k_own[fl_key[w] - 1] = fl_pk[w]; \
                k_aid[fl_key[w] - 1] = fl_aid[w]; \
                k_ver[fl_key[w] - 1]++; CHECK \
           :: else -> skip \
           fi \
      fi; \
      FL_CLEAR(w) \
  }
/* a call that never lands */
#define DROP(w) d_step { fl_on[w] -> FL_CLEAR(w) }

proctype net() {
end:
  do
  :: LAND(0)
  :: DROP(0)
#if NW > 1
  :: LAND(1)
  :: DROP(1)
#endif
#if NW > 2
  :: LAND(2)
  :: DROP(2)
#endif
  od
}
#endif

/* ---- the builder -------------------------------------------------- */

proctype builder() {
  byte p, mi, ci;
  bool miss, ok;
  byte y_st, y_op, y_aid, y_ep, y_ver;
  byte z_st, z_own, z_aid, z_ver;

  /* 1. mark the schema */
  d_step { s_mark = 1; CHECK };

  /* 2. scan: resolve every PENDING of the old epoch as rule 2 would,
   * marker ignored, in-flight writers not waited for */
  p = 0;
  do
  :: p == NPK -> break
  :: p < NPK ->
b_look: skip;
       READ_REC(p);
       if
       :: y_st == R_PENDING && y_ep == 0 ->
#ifdef BUILD_NO_RESOLVE
            REC_SET(p, y_ver, R_ABORTED);
            if :: ok -> ok = 0 :: else -> goto b_look fi
#else
            miss = 0; mi = 0;
            do
            :: mi == 2 -> break
            :: mi < 2 ->
                 ci = (mi == 0 -> CA : CB(p));
                 READ_CLAIM(ci);
                 if
                 :: z_st == K_OWNED && z_own == p && z_aid == y_aid -> skip
                 :: else ->
                      CLAIM_FENCE(ci, z_ver);
                      if
                      :: ok -> ok = 0; miss = 1
                      :: else -> mi = 0; ci = 0; miss = 0; FORGET_Z;
                           goto b_look
                      fi
                 fi;
                 FORGET_Z;
                 mi++
            od;
            mi = 0; ci = 0;
            if
            :: !miss -> REC_SET(p, y_ver, R_LIVE)
            :: miss -> miss = 0; REC_SET(p, y_ver, R_ABORTED)
            fi;
            if :: ok -> ok = 0 :: else -> goto b_look fi
#endif
#ifdef BUMP_LIVE
       :: y_st == R_LIVE ->
            REC_SET(p, y_ver, R_LIVE);          /* move its version */
            if :: ok -> ok = 0 :: else -> goto b_look fi
#endif
       :: else -> skip
       fi;
       FORGET_Y;
       p++
  od;

  /* 3. build claim C for every LIVE record */
  p = 0;
  do
  :: p == NPK -> break
  :: p < NPK ->
       READ_REC(p);
       if
       :: y_st == R_LIVE ->
            d_step {
              SETTLE_K(CC(p));
              assert(k_st[CC(p)] != K_OWNED);   /* nobody claims C yet */
              k_st[CC(p)] = K_OWNED; k_own[CC(p)] = p; k_aid[CC(p)] = y_aid;
              k_ver[CC(p)]++; CHECK
            }
       :: else -> skip
       fi;
       FORGET_Y;
       p++
  od;
  p = 0;

  /* 4. the new schema: epoch + 1, marker gone */
  d_step { s_ep = 1; s_mark = 0; CHECK }
}

init {
  byte i;
  atomic {
    for (i : 0 .. NK - 1) {
      k_own[i] = NOBODY
    }
    i = 0;
#if LOSE
    run net();
#endif
#if BUILD
    run builder();
#endif
    run writer(0, WPK(0), ATTEMPTS, LOSE);
#if NW > 1
    run writer(1, WPK(1), ATTEMPTS2, LOSE2);
#endif
#if NW > 2
    run writer(2, WPK(2), ATTEMPTS3, LOSE3);
#endif
#if READER
    run writer(NW, 0, 0, 0);     /* the reader (me = NW: not a writer) */
#endif
  }
}
