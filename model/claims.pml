/* claims.pml - a Promela model of the claims protocol (executor 2,
 * src/exec/claims.c; docs/protocol.md), reduced to one UNIQUE value.
 *
 * The store holds one claim key K (the value every writer wants) and one
 * record key per primary key. Each key has a version that moves by one on
 * every change and never goes back (keys are never removed). Every store
 * call below touches ONE key and is one d_step/atomic block: a read, or a
 * compare-and-set. Nothing spans two keys.
 *
 * Writers (proctype writer) run the steps of uexec_claims_apply for an
 * insert of a record that lists K, and optionally a delete of it. The
 * scheduler may:
 *   - stop a writer for good at any point (a crash: for safety this is
 *     the same as never scheduling it again);
 *   - throw away a writer's local state after any store write and have
 *     its caller repeat the operation under the same op id (CRASHES);
 *   - lose the answer of a commit; when the lost call takes effect is
 *     set by LATE (below); the "net" process lands late ones;
 *   - treat any PENDING claim or intent of someone else as young (wait,
 *     or give up "busy") or as past the grace period (fence it). No clock
 *     is modelled, so every pause is possible.
 *
 * After every store write the invariants are asserted:
 *   INV1  no two records are LIVE while both list K;
 *   INV2  a LIVE record listing K is named by claim K (PENDING or
 *         COMMITTED, owner = its primary key).  (-DNO_INV2 drops it.)
 *
 * Broken on purpose (spin -DNAME -a), each caught by spin:
 *   NO_FENCE      an orphan claim is taken over without fencing its op;
 *   NO_REWRITE    no second write of the claims after an intent that
 *                 was found, taken over or adopted;
 *   BLIND_COMMIT  the commit does not check the record version.
 * Also here, NOT caught (see model/README.md for why):
 *   ADOPT_OWN     a repeat adopts its own claim without moving it;
 *   NO_SELF_FENCE an unknown commit read back as "not in" is undone at
 *                 once, without the self-fence.
 * FREE_BLIND: a release frees K without the version it read (caught in
 * SCEN 5, where another insert takes K over after the update).
 * FREE_ANY_READ: a delete frees K as read with its commit whoever took it
 * (no check that its record names K's op): caught in SCEN 3, where an
 * insert of the same primary key takes K over between the delete's commit
 * and its read.
 * And ADOPT_OWN_INTENT: a repeat adopts its own PENDING intent at its
 * version instead of moving it (what claims.c did before this model found
 * the case): caught with LATE=2. */

/* ---- configuration ------------------------------------------------ */

#ifndef SCEN
#define SCEN 2
#endif
/* SCEN 1: w0 inserts pk 0; w1 inserts pk 1.
 * SCEN 2: w0 inserts pk 0 then deletes it; w1 inserts pk 1.
 * SCEN 3: SCEN 2 plus w2 inserting pk 0 again (same primary key as w0,
 *         its own op id): a re-insert over w0's tombstone, or a refusal.
 * SCEN 4: three writers, three primary keys, inserts only.
 * SCEN 5: w0 inserts pk 0 then updates it, giving K up (the record stays
 *         live, listing no K); w1 inserts pk 1, taking K once it is free
 *         or an orphan. */
#if SCEN == 5
#define TGT R_LIVE0     /* the second op is an update that releases K */
#else
#define TGT R_DELETED   /* ... a delete */
#endif
#if SCEN == 1 || SCEN == 2 || SCEN == 5
#define NW 2
#define NPK 2
#else
#if SCEN == 3
#define NW 3
#define NPK 2
#else
#define NW 3
#define NPK 3
#endif
#endif

#ifndef ATTEMPTS
#define ATTEMPTS 2   /* runs of one op id: first try + repeats */
#endif
#ifndef LOSSES
#define LOSSES 1     /* commit answers a writer may lose */
#endif
/* the third writer, if any, has budgets of its own (smaller by default:
 * with everything on for three writers the state space is too big) */
#ifndef ATTEMPTS3
#define ATTEMPTS3 1
#endif
#ifndef LOSSES3
#define LOSSES3 0
#endif
#ifndef CRASHES
#define CRASHES 1    /* 0: no crash-and-repeat (repeats after a refusal
                        or an unknown answer stay) */
#endif
#ifndef LATE
#define LATE 1
#endif
/* When may a commit whose answer was lost take effect?
 * LATE 0: at the call or never (the simulated store, LMDB).
 * LATE 1: at any moment until the next call on the same key, which
 *         settles it (a Paxos round of Cassandra completes or supersedes
 *         an unfinished proposal on the partition).
 * LATE 2: at any later moment at all (the weakest reading of "it may or
 *         may not have applied"). */

/* ---- store -------------------------------------------------------- */

#define NOBODY 255

/* claim states (0: the key is absent) */
#define C_ABSENT    0
#define C_FREE      1
#define C_PENDING   2
#define C_COMMITTED 3
/* record states (0: the key is absent) */
#define R_ABSENT  0
#define R_PENDING 1
#define R_LIVE    2
#define R_DELETED 3
#define R_ABORTED 4
#define R_LIVE0   5   /* live, its K given up by an update (SCEN 5) */

/* claim K */
byte c_st = C_ABSENT;
byte c_own = NOBODY;   /* owner primary key */
byte c_op;             /* op id */
byte c_ver;            /* 0 while absent */

/* record keys, by primary key; a LIVE record here always lists K
 * (the modelled writes are inserts of K and deletes) */
byte r_st[NPK];
byte r_op[NPK];
byte r_ver[NPK];

/* commits whose answer was lost and that have not landed yet, by writer */
bool fl_on[NW];
byte fl_pk[NW];
byte fl_exp[NW];
byte fl_st[NW];
byte fl_op[NW];

#define HOLDS(p) (r_st[p] == R_LIVE)
#define NAMED(p) (c_own == (p) && (c_st == C_PENDING || c_st == C_COMMITTED))

#if NPK == 2
#define INV1 (!(HOLDS(0) && HOLDS(1)))
#define INV2 ((!HOLDS(0) || NAMED(0)) && (!HOLDS(1) || NAMED(1)))
#else
#define INV1 (!(HOLDS(0) && HOLDS(1)) && !(HOLDS(0) && HOLDS(2)) && \
              !(HOLDS(1) && HOLDS(2)))
#define INV2 ((!HOLDS(0) || NAMED(0)) && (!HOLDS(1) || NAMED(1)) && \
              (!HOLDS(2) || NAMED(2)))
#endif

/* after every store write; versions must stay well inside a byte */
#ifdef NO_INV2
#define CHECK assert(INV1); assert(c_ver < 200)
#else
#define CHECK assert(INV1); assert(INV2); assert(c_ver < 200)
#endif

/* ---- the network: lost commits that land late --------------------- */

/* LATE 1: a call on record key p first settles a lost commit on p: it
 * has landed (net did it before) or it never will */
#define DROP1(w, p) \
  if \
  :: fl_on[w] && fl_pk[w] == (p) -> \
       fl_on[w] = 0; fl_pk[w] = 0; fl_exp[w] = 0; fl_st[w] = 0; fl_op[w] = 0 \
  :: else -> skip \
  fi
#if LATE == 1
#if NW > 2
#define SETTLE(p) DROP1(0, p); DROP1(1, p); DROP1(2, p)
#else
#define SETTLE(p) DROP1(0, p); DROP1(1, p)
#endif
#else
#define SETTLE(p) skip
#endif

/* land the lost commit of writer w, if it is still on its way */
#define LAND(w) \
  atomic { \
    fl_on[w] -> \
      if \
      :: r_ver[fl_pk[w]] == fl_exp[w] -> \
           r_st[fl_pk[w]] = fl_st[w]; \
           r_op[fl_pk[w]] = fl_op[w]; \
           r_ver[fl_pk[w]]++; \
           CHECK \
      :: else -> skip \
      fi; \
      fl_on[w] = 0; \
      fl_pk[w] = 0; fl_exp[w] = 0; fl_st[w] = 0; fl_op[w] = 0 \
  }

proctype net() {
end:
  do
  :: LAND(0)
  :: LAND(1)
#if NW > 2
  :: LAND(2)
#endif
  od
}

/* ---- a writer ----------------------------------------------------- */

/* why a write was refused */
#define W_NONE   0
#define W_RACE   1   /* fenced / a claim taken meanwhile: start again */
#define W_RECORD 2   /* insert: the primary key is live */
#define W_CLAIM  3   /* K is in force: a conflict */
#define W_BUSY   4   /* K in flight for too long */

/* A crash, and a repeat by the caller under the same op id: local state
 * is lost and the op starts over (if it has runs left). Only placed right
 * after a store write that may have applied: a restart after a read or a
 * refused write reaches the same states as one before it. */
#if CRASHES
#define CRASH \
  if \
  :: atts < natt -> goto restart \
  :: skip \
  fi
#else
#define CRASH skip
#endif

/* locals no longer needed go back to 0 (fewer distinct states) */
#define FORGET_K k_st = 0; k_own = 0; k_op = 0; k_ver = 0
#define FORGET_X x_st = 0; x_op = 0; x_ver = 0

/* read claim K into k_* */
#define READ_CLAIM \
  d_step { k_st = c_st; k_own = c_own; k_op = c_op; k_ver = c_ver }

/* read record p into x_* */
#define READ_REC(p) \
  d_step { SETTLE(p); x_st = r_st[p]; x_op = r_op[p]; x_ver = r_ver[p] }

/* cas(K, absent -> PENDING{pk, op}); on refusal k_* = what is there */
#define CLAIM_ABSENT \
  d_step { \
    if \
    :: c_st == C_ABSENT -> \
         c_st = C_PENDING; c_own = pk; c_op = op; c_ver++; \
         held = c_ver; ok = 1; CHECK \
    :: else -> \
         ok = 0; k_st = c_st; k_own = c_own; k_op = c_op; k_ver = c_ver \
    fi \
  }

/* cas(K, version v -> PENDING{pk, op}) */
#define CLAIM_AT(v) \
  d_step { \
    if \
    :: c_ver == (v) -> \
         c_st = C_PENDING; c_own = pk; c_op = op; c_ver++; \
         held = c_ver; ok = 1; CHECK \
    :: else -> \
         ok = 0; k_st = c_st; k_own = c_own; k_op = c_op; k_ver = c_ver \
    fi \
  }

/* cas(record pk, absent -> PENDING{op}) */
#define INTENT_ABSENT \
  d_step { \
    SETTLE(pk); \
    if \
    :: r_st[pk] == R_ABSENT -> \
         r_st[pk] = R_PENDING; r_op[pk] = op; r_ver[pk]++; \
         intent = r_ver[pk]; ok = 1; CHECK \
    :: else -> \
         ok = 0; x_st = r_st[pk]; x_op = r_op[pk]; x_ver = r_ver[pk] \
    fi \
  }

/* cas(record pk, version v -> PENDING{op}) */
#define INTENT_AT(v) \
  d_step { \
    SETTLE(pk); \
    if \
    :: r_ver[pk] == (v) -> \
         r_st[pk] = R_PENDING; r_op[pk] = op; r_ver[pk]++; \
         intent = r_ver[pk]; ok = 1; CHECK \
    :: else -> \
         ok = 0; x_st = r_st[pk]; x_op = r_op[pk]; x_ver = r_ver[pk] \
    fi \
  }

/* cas(record p, version v -> the same record): moves its version only */
#define BUMP(p, v) \
  d_step { \
    SETTLE(p); \
    if \
    :: r_ver[p] == (v) -> r_ver[p]++; ok = 1; CHECK \
    :: else -> ok = 0 \
    fi \
  }

/* The commit, cas(record pk, version v -> state s by op). Its answer
 * may be lost (res = 2, unknown): the call then stays on its way and
 * "net" may land it at any later moment (right away: it applied; never:
 * it did not). Otherwise res = 1 (applied) or 0 (refused). */
#define COMMIT(v, s) \
  atomic { \
    SETTLE(pk); \
    if \
    :: losses < nloss && LATE == 0 -> \
         losses++; res = 2; \
         if \
         :: r_ver[pk] == (v) -> \
              r_st[pk] = s; r_op[pk] = op; r_ver[pk]++; CHECK \
         :: skip \
         fi \
    :: losses < nloss && LATE > 0 && !fl_on[me] -> \
         losses++; res = 2; \
         fl_on[me] = 1; fl_pk[me] = pk; fl_exp[me] = v; fl_st[me] = s; \
         fl_op[me] = op \
    :: r_ver[pk] == (v) -> \
         r_st[pk] = s; r_op[pk] = op; r_ver[pk]++; res = 1; CHECK \
    :: r_ver[pk] != (v) -> res = 0 \
    fi \
  }

#ifdef BLIND_COMMIT
/* broken: the commit does not check the record version */
#undef COMMIT
#define COMMIT(v, s) \
  d_step { SETTLE(pk); r_st[pk] = s; r_op[pk] = op; r_ver[pk]++; res = 1; CHECK }
#endif

/* pk: primary key written; ins, del: op ids of the insert and of the
 * delete (0: no delete) */
proctype writer(byte me; byte pk; byte ins; byte del; byte natt; byte nloss) {
  byte op;            /* op id of the op being run */
  byte atts;          /* runs of this op id so far */
  byte losses;        /* commit answers lost */
  byte held;          /* version of K we hold it at (0: not held) */
  byte intent;        /* version of our PENDING intent (0: none) */
  bool fresh;         /* the intent was created by the batch */
  bool applied;       /* a repeat found its own insert live */
  bool ok;            /* result of the last cas (consumed at once) */
  byte why;
  byte res;           /* commit: 0 refused, 1 applied, 2 unknown */
  bool iok, cok;      /* batch results: intent, claim */
  byte k_st, k_own, k_op, k_ver;    /* claim K as last seen */
  byte x_st, x_op, x_ver;           /* a record as last seen */
  byte o;             /* owner pk of a claim being resolved */
  byte w;             /* delete: version of the record read */
  byte rop;           /* delete: op id of the record read (its maker) */
  bool kread;         /* delete: K read with the commit (k_* hold it) */

  op = ins;

restart:
  held = 0; intent = 0; fresh = 0; applied = 0; why = W_NONE;
  ok = 0; res = 0; iok = 0; cok = 0; o = 0; w = 0; rop = 0; kread = 0;
  FORGET_K; FORGET_X;
  atts++;
  if
  :: op == ins -> skip
  :: else -> goto delete
  fi;

  /* ================= insert ================= */

  /* step 1: one batch, the intent and the claim, applied in either order;
   * a refused op returns what it found (x_* or k_*) */
  if
  :: INTENT_ABSENT; iok = ok; fresh = ok; ok = 0;
     if :: iok -> CRASH :: else fi;
     CLAIM_ABSENT; cok = ok; ok = 0;
     if :: cok -> CRASH :: else fi
  :: CLAIM_ABSENT; cok = ok; ok = 0;
     if :: cok -> CRASH :: else fi;
     INTENT_ABSENT; iok = ok; fresh = ok; ok = 0;
     if :: iok -> CRASH :: else fi
  fi;

  /* resolve the intent, if the batch did not create it */
  if
  :: iok -> iok = 0; goto intent_done
  :: else -> skip
  fi;
intent_loop:
  if
  :: x_st == R_ABSENT ->
       INTENT_ABSENT;
       if
       :: ok -> ok = 0; CRASH; goto intent_done
       :: else -> goto intent_loop
       fi
  :: x_st == R_LIVE && x_op == op ->
       applied = 1; goto intent_done        /* a repeat: ours is in */
  :: x_st == R_LIVE && x_op != op ->
       why = W_RECORD; goto undo            /* the key is taken */
  :: x_st == R_LIVE0 ->
       why = W_RECORD; goto undo            /* (live, without K) */
  :: x_st == R_PENDING && x_op == op ->
#ifdef ADOPT_OWN_INTENT
       intent = x_ver; goto intent_done     /* the old way: ours, from an
                                               earlier run, adopted at its
                                               version */
#else
       goto intent_over    /* ours, from an earlier run: taken over, its
                              version moved (claims.c resolve_intent) */
#endif
  :: x_st == R_PENDING && x_op != op ->
       if
       :: why = W_BUSY; goto undo           /* young: busy */
       :: READ_REC(pk); goto intent_loop    /* young: wait, look again */
       :: goto intent_over                  /* past grace: take over */
       fi
  :: x_st == R_DELETED || x_st == R_ABORTED ->
       goto intent_over
  fi;
intent_over:
  skip;
  /* a tombstone or a stale intent: take it over at the version read
   * (moving the version of a stale intent fences its op) */
  INTENT_AT(x_ver);
  if
  :: ok -> ok = 0; CRASH; goto intent_done
  :: else -> goto intent_loop
  fi;
intent_done:
  FORGET_X;

  /* resolve the claim (claims.c goes on with it even after "applied") */
  if
  :: cok -> cok = 0; goto claim_done
  :: else -> skip
  fi;
claim_loop:
  if
  :: k_st == C_ABSENT ->
       CLAIM_ABSENT;
       if
       :: ok -> ok = 0; CRASH; goto claim_done
       :: else -> goto claim_loop
       fi
  :: k_st == C_FREE -> goto claim_take
  :: k_st != C_ABSENT && k_st != C_FREE && k_own == pk && k_op == op ->
#ifdef ADOPT_OWN
       /* broken: adopt our claim of an earlier run as it stands */
       held = k_ver; goto claim_done
#else
       goto claim_take   /* ours, from an earlier run: take it again */
#endif
  :: k_st != C_ABSENT && k_st != C_FREE && !(k_own == pk && k_op == op) ->
       o = k_own;
       READ_REC(o);
       if
       :: x_st == R_LIVE -> why = W_CLAIM; goto undo   /* in force */
       :: else -> skip
       fi;
       if
       :: k_st == C_PENDING ->
            if
            :: why = W_BUSY; goto undo                 /* young: busy */
            :: o = 0; FORGET_X; READ_CLAIM; goto claim_loop   /* wait */
            :: skip                                    /* past grace */
            fi
       :: else -> skip       /* COMMITTED, not in force: an orphan */
       fi;
#ifdef NO_FENCE
       /* broken: take the orphan over without fencing its op */
       o = 0; FORGET_X; goto claim_take;
#endif
       /* fence: move record o's version, or create it ABORTED */
       if
       :: x_st == R_ABSENT ->
            d_step {
              SETTLE(o);
              if
              :: r_st[o] == R_ABSENT ->
                   r_st[o] = R_ABORTED; r_op[o] = op; r_ver[o]++; ok = 1;
                   CHECK
              :: else -> ok = 0
              fi
            }
       :: else -> BUMP(o, x_ver)
       fi;
       o = 0; FORGET_X;
       if
       :: ok -> ok = 0; CRASH; goto claim_take
       :: else -> READ_CLAIM; goto claim_loop       /* moved: again */
       fi
  fi;
claim_take:
  skip;
  CLAIM_AT(k_ver);
  if
  :: ok -> ok = 0; FORGET_K; CRASH; goto claim_done
  :: else -> goto claim_loop
  fi;
claim_done:
  FORGET_K;
  if
  :: applied -> applied = 0; goto finish
  :: else -> skip
  fi;

  /* an intent not created by the batch got its version after the claim
   * was written: write the claim again, after it */
#ifndef NO_REWRITE
  if
  :: !fresh ->
       CLAIM_AT(held);
       FORGET_K;
       if
       :: ok -> ok = 0; CRASH
       :: else -> held = 0; why = W_RACE; goto undo
       fi
  :: else -> skip
  fi;
#endif
  fresh = 0;

  /* step 3: commit */
  COMMIT(intent, R_LIVE);
  if
  :: res == 1 -> res = 0; CRASH; goto finish
  :: res == 0 -> why = W_RACE; goto undo
  :: res == 2 -> res = 0; CRASH
  fi;
  /* unknown: read back, and fence our own commit while it can still
   * apply */
  READ_REC(pk);
  if
  :: x_st == R_LIVE && x_op == op -> FORGET_X; goto finish
  :: else -> skip
  fi;
#ifndef NO_SELF_FENCE
  if
  :: x_ver == intent ->
       FORGET_X;
       BUMP(pk, intent);
       if
       :: ok -> ok = 0; CRASH; why = W_RACE; goto undo  /* cannot apply */
       :: else -> skip
       fi
  :: else -> FORGET_X
  fi;
#else
  /* broken: take "not in yet" for "never will be" */
  FORGET_X; why = W_RACE; goto undo;
#endif
  /* still unknown: nothing is undone; the caller repeats the op id */
  goto repeat;

undo:
  /* free K at exactly the version we wrote; abort our intent */
  o = 0; FORGET_K; FORGET_X;
  if
  :: held != 0 ->
       d_step {
         if
         :: c_ver == held ->
              c_st = C_FREE; c_own = NOBODY; c_op = op; c_ver++; CHECK;
              ok = 1
         :: else -> ok = 0
         fi
       };
       held = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
  if
  :: intent != 0 ->
       d_step {
         SETTLE(pk);
         if
         :: r_ver[pk] == intent ->
              r_st[pk] = R_ABORTED; r_op[pk] = op; r_ver[pk]++; CHECK;
              ok = 1
         :: else -> ok = 0
         fi
       };
       intent = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
  if
  :: why == W_RACE -> goto repeat        /* write.c starts again */
  :: else -> goto done                   /* conflict, busy: reported */
  fi;

finish:
  /* step 4: K becomes COMMITTED (at the version we hold it at) */
  intent = 0;
  if
  :: held != 0 ->
       d_step {
         if
         :: c_ver == held ->
              c_st = C_COMMITTED; c_own = pk; c_op = op; c_ver++; CHECK;
              ok = 1
         :: else -> ok = 0
         fi
       };
       held = 0;
       if :: ok -> ok = 0; CRASH :: else fi
  :: else -> skip
  fi;
  if
  :: del != 0 -> op = del; atts = 0; goto restart
  :: else -> goto done
  fi;

repeat:
  if
  :: atts < natt -> goto restart
  :: else -> goto done
  fi;

  /* ================= delete ================= */
delete:
  skip;
  /* plan: read the record. A repeat of a delete that applied finds it
   * DELETED by its op id, and write.c answers from it: nothing to do. */
  READ_REC(pk);
  if
  :: x_st != R_LIVE -> goto done
  :: else -> w = x_ver; rop = x_op; FORGET_X
  fi;
  /* (TGT: a delete's tombstone, or an update's record without K; an
   * update reads K in its first batch, before its commit, a delete with
   * its commit) */
  /* The commit and the read of K go out in one round trip (claims.c,
   * commit_batch): K is read before the commit or after it, with any
   * other writer's steps in between (docs/protocol.md, "Updates and
   * deletes"). */
  kread = 0;
  if
  :: READ_CLAIM; kread = 1
  :: TGT == R_DELETED -> skip
  fi;
  COMMIT(w, TGT);
  if
  :: !kread -> READ_CLAIM; kread = 1
  :: else -> skip
  fi;
  if
  :: res == 1 -> res = 0; CRASH;
     /* applied by this call: K as read is freed at once when it names pk
      * as committed owner and was taken by the op the deleted record
      * names (an insert of pk again since names its own op) */
#ifdef FREE_ANY_READ
     if :: k_st == C_COMMITTED && k_own == pk -> goto free_as_read
#else
     if :: k_st == C_COMMITTED && k_own == pk &&
           (TGT == R_LIVE0 || k_op == rop) -> goto free_as_read
#endif
        :: k_st == C_COMMITTED && k_own == pk -> goto release
        :: else -> goto done
     fi
  :: res == 0 -> goto repeat          /* moved: read again */
  :: res == 2 -> res = 0; CRASH
  fi;
  READ_REC(pk);
  if
  :: x_st == TGT && x_op == op -> FORGET_X; goto release
  :: else -> skip
  fi;
  if
  :: x_ver == w ->
       FORGET_X;
       BUMP(pk, w);
       if
       :: ok -> ok = 0; CRASH; goto repeat   /* cannot apply: again */
       :: else -> goto repeat                /* unknown: repeat */
       fi
  :: else -> FORGET_X; goto repeat          /* unknown: repeat */
  fi;

release:
  /* the delete's finish (after a commit read back, or a claim another op
   * took): K becomes FREE if it is still COMMITTED to pk and the record,
   * read after K, does not hold it */
  w = 0;
  READ_CLAIM;
  if
  :: k_st == C_COMMITTED && k_own == pk -> skip
  :: else -> goto done
  fi;
  READ_REC(pk);
  if
  :: x_st == R_LIVE -> goto done
  :: else -> FORGET_X
  fi;
free_as_read:
  skip;
  d_step {
    if
#ifdef FREE_BLIND
    :: true ->   /* broken: freed whatever K now is */
#else
    :: c_ver == k_ver ->
#endif
         c_st = C_FREE; c_own = NOBODY; c_op = op; c_ver++; CHECK
    :: else -> skip
    fi
  };

done:
  /* clear everything, so that finished writers differ only in what they
   * left in the store */
  op = 0; atts = 0; losses = 0; held = 0; intent = 0; fresh = 0;
  applied = 0; ok = 0; why = 0; res = 0; iok = 0; cok = 0; o = 0; w = 0;
  rop = 0; kread = 0;
  FORGET_K; FORGET_X
}

init {
  atomic {
    run net();
#if SCEN == 1
    run writer(0, 0, 1, 0, ATTEMPTS, LOSSES);
    run writer(1, 1, 3, 0, ATTEMPTS, LOSSES);
#endif
#if SCEN == 2
    run writer(0, 0, 1, 2, ATTEMPTS, LOSSES);
    run writer(1, 1, 3, 0, ATTEMPTS, LOSSES);
#endif
#if SCEN == 3
    run writer(0, 0, 1, 2, ATTEMPTS, LOSSES);
    run writer(1, 1, 3, 0, ATTEMPTS, LOSSES);
    run writer(2, 0, 5, 0, ATTEMPTS3, LOSSES3);
#endif
#if SCEN == 5
    run writer(0, 0, 1, 2, ATTEMPTS, LOSSES);
    run writer(1, 1, 3, 0, ATTEMPTS, LOSSES);
#endif
#if SCEN == 4
    run writer(0, 0, 1, 0, ATTEMPTS, LOSSES);
    run writer(1, 1, 3, 0, ATTEMPTS, LOSSES);
    run writer(2, 2, 5, 0, ATTEMPTS3, LOSSES3);
#endif
  }
}
