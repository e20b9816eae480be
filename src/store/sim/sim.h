/* sim.h - the simulated store: an in-memory key-value store with per-key
 * versions and compare-and-set, no transactions (so the claims protocol
 * runs on it), driven by a deterministic scheduler.
 *
 * A simulation runs N logical clients, each on its own thread, but only
 * one thread ever runs at a time: every store call is a scheduling point
 * where a seeded PRNG picks which waiting client goes next. So a seed
 * fixes the whole interleaving, every injected fault and the virtual
 * clock, and a failing seed replays exactly.
 *
 * Faults (per mille of calls, decided by the same PRNG):
 *   unknown  the call applies, then returns UNICO_EUNKNOWN;
 *   fail     the call does not apply and returns UNICO_EUNAVAILABLE;
 *   crash    the client dies at this call (which applied or not, at
 *            random): from then on each of its calls returns
 *            UNICO_EUNAVAILABLE at once without applying, sleeps return
 *            at once, and usim_crashed() is 1 in that thread;
 *   pause    the client stops for pause_ms of virtual time before the
 *            call while the others run (a GC pause, a stalled process);
 *   reorder  cas_many applies its ops one by one in a random order, with
 *            other clients free to run between them.
 *
 * A simulation made with `txn` set also has transactions: txn() applies
 * its ops all or nothing at one scheduling point (with that point's
 * fault), so the atomic executor runs on it under the same seeded
 * schedule as the claims protocol does without it.
 *
 * Outside usim_run (from any thread that is not a simulated client) calls
 * apply at once, without faults or scheduling; the clock is then the wall
 * clock plus every virtual advance so far, so tests that sleep for real
 * still see time pass. */
#ifndef UNICO_SIM_H
#define UNICO_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

typedef struct usim usim;

/* "sim:NAME": a new handle on the simulation registered under NAME
 * (usim_new), UNICO_EUNAVAILABLE when there is none. */
int ustore_sim_open(ustore **out, const char *loc,
                    const struct ustore_opts *opts, ustore_err *e);
/* The caps of a store opened with these options, into *caps
 * (ustore_url_caps()); UNICO_EINVAL when an option's value is bad. */
int ustore_sim_caps(const struct ustore_opts *opts, unsigned *caps,
                    ustore_err *e);

typedef struct usim_faults {
  unsigned unknown_pm; /* applied, then UNICO_EUNKNOWN */
  unsigned fail_pm;    /* not applied, UNICO_EUNAVAILABLE */
  unsigned crash_pm;   /* the client dies at this call */
  unsigned pause_pm;   /* the client pauses pause_ms before this call */
  int64_t pause_ms;
  int reorder;         /* cas_many in a random order, interleaved */
  int64_t step_ms;     /* the clock moves 0..step_ms per scheduled call
                          (0: 1) */
  int late_posts;      /* writes posted without waiting (post_many) land
                          only after the handle's next call has, as a
                          pipelined write may on a real store: a caller
                          answered before them, and its next request
                          overtakes them (issue 32) */
  int txn;             /* the store has transactions (USTORE_CAP_TXN, so
                          unico runs its atomic executor on it); read by
                          usim_new only */
  /* A test's probe, or NULL: called after each op of a cas_many has been
   * applied (in the caller's thread, no lock held), so that a test can act
   * between the ops of one batch, e.g. between a delete's commit and the
   * reads sent with it (test_sim test_delete_frees_only_its_claim) */
  void (*after_op)(void *ctx, const ustore_op *op, int rc);
  void *after_ctx;
  int rows;            /* the store says USTORE_CAP_ROWS: its records are
                          taken for rows of the users' own tables, which
                          other writers change (test_diff's other writer
                          does, through a handle of its own); read by
                          usim_new only */
} usim_faults;

typedef struct usim_stats {
  uint64_t calls;    /* store calls made by simulated clients */
  uint64_t steps;    /* scheduling decisions */
  uint64_t unknown, failed, crashes, pauses, reordered;
  uint64_t writes;   /* mutations applied (all callers) */
} usim_stats;

/* A new simulation, registered under name (so ustore_open("sim:NAME")
 * opens a handle on it; the name must not be registered already). faults
 * may be NULL (none). */
int usim_new(usim **out, const char *name, uint64_t seed,
             const usim_faults *faults);
/* Unregister and free everything. Every store handle on it must be closed
 * first. Accepts NULL. */
void usim_free(usim *s);

/* Run fn(ctx, i) for i in 0..n-1, each on its own thread, interleaved by
 * the scheduler; returns when every client has returned. Faults apply to
 * calls made inside the run only. Returns 0, or -1 if threads could not be
 * started. */
int usim_run(usim *s, int n, void (*fn)(void *ctx, int client), void *ctx);

/* In a simulated client: 1 once it has crashed (its work is lost; it
 * should return). 0 elsewhere. */
int usim_crashed(void);
/* In a simulated client: its index, or -1 elsewhere. */
int usim_client(void);

void usim_set_faults(usim *s, const usim_faults *faults); /* outside runs */
int64_t usim_now(usim *s);
/* Move the virtual clock forward (outside runs). */
void usim_advance(usim *s, int64_t ms);
void usim_stats_get(usim *s, usim_stats *out);
/* A hash of every scheduling decision and fault so far: two runs with the
 * same seed and the same client code give the same value. */
uint64_t usim_trace(usim *s);

/* Called after every mutation that applied (world stopped: the caller is
 * the only thread running), with the client that made it (-1: outside a
 * run). The observer may read the state with usim_scan only. */
typedef void (*usim_observer)(void *ctx, usim *s, int client);
void usim_observe(usim *s, usim_observer fn, void *ctx);

/* Every key with the prefix, in key order, without faults or scheduling
 * (for observers and checkers). cb as in store.h; returns what a stopping
 * cb returned, else 0. */
int usim_scan(usim *s, const void *prefix, size_t plen, ustore_scan_cb cb,
              void *ctx);
/* One key without faults or scheduling: UNICO_OK or UNICO_ENOTFOUND. */
int usim_get(usim *s, const void *key, size_t klen, ubuf *val,
             uint64_t *version);

#endif
