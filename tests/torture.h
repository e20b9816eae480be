/* torture.h - what torture.c (the modes and the workload) and
 * torture_verify.c (the journals read back, the invariants checked) share:
 * the schema's names and sizes, the store the run uses, small utilities. */
#ifndef UNICO_TORTURE_H
#define UNICO_TORTURE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "unico.h"

#define TABLE "users"
#define C_EMAIL "users_email"
#define C_PHONE "users_phone_key"
#define C_TEAM "users_team"
#define NVALUES 50      /* emails and phones each come from this many */
/* Limit groups: NTEAMS teams of at most TEAM_LIMIT live records (the
 * LIMIT in SCHEMA). The writers try to keep far more records live than
 * the NTEAMS * TEAM_LIMIT places (every other record has a team), so
 * the groups stay full and each place freed is raced for: an overshoot
 * shows in the final state, where verify counts the members itself. */
#define NTEAMS 4
#define TEAM_LIMIT 3
/* Holds: now and then a writer reserves the email it is about to write
 * (for HOLD_TTL_MS, long enough that the write is answered inside it) and
 * presents the token; it also reserves values it never writes and leaves
 * them to expire (after at most ABANDON_TTL_MS), so that other writers
 * meet live holds, then expired ones. */
#define HOLD_TTL_MS 3000
#define ABANDON_TTL_MS 250
#define KPKS 8          /* primary keys owned by one worker thread */
#define MIN_OPS 20000   /* concurrency mode: the minimum */
#define MIN_KILLS 50    /* crash mode: the minimum */
#define MAX_THREADS 64  /* per process */
#define MAX_PROCS 64
#define BUSY_RETRIES 100
/* --retry-unknown: a write whose outcome is unknown (or whose store was
 * unavailable) is sent again with the same op id, as a client should;
 * unico answers a repeat with the first outcome. For runs with injected
 * store faults. */
#define UNKNOWN_RETRIES 50
#define MAX_PRINTED 100 /* violations printed in detail per verify */
#define WATCHDOG_S 600  /* one phase (a run, a round, a verify) at most */

enum { K_INSERT, K_UPDATE, K_DELETE };
extern const char *const kind_names[3];

/* How verify, the probe, repair and the janitor open the store (see
 * torture.c), and whether the store runs the claims protocol. */
extern unico_options g_vopts;
extern int g_claims_store;

/* snprintf that reports truncation: 0 when buf holds the whole text. */
int fmt(char *buf, size_t n, const char *f, ...)
    __attribute__((format(printf, 3, 4)));
/* The URL of the store the run uses. 0, or -1 when it does not fit. */
int store_url(char *buf, size_t n, const char *dir);
/* Whether a file name is a journal's, "journal-*.log". */
int is_journal(const char *name);
/* The JSON text of a string (a one-column text primary key); malloc'd. */
char *json_str_text(const char *s);
/* Whether a UNICO_EBUSY answer means a live hold reserves a value the
 * write takes (see torture.c). */
int busy_by_hold(int rc, const unico_result *res);

/* torture_verify.c: check the journals of dir against the store (see its
 * comment there). Returns the violation count, -1 when the store cannot
 * be opened. */
long verify(const char *dir, int allow_inflight, int settled,
            json_t **live_out, long *acked_out);

#endif
