/* import.h - `unico import TABLE FILE|-`: load a JSONL file into a table,
 * one all-or-nothing insert per record, and report every record that was
 * not imported (docs/cli.md, "import"). A client of the public API only. */
#ifndef UNICO_CLI_IMPORT_H
#define UNICO_CLI_IMPORT_H

#include <stddef.h>

#include "unico.h"

#define UCLI_IMPORT_THREADS 16  /* concurrent inserts: they share syncs */
#define UCLI_IMPORT_BATCH 4096  /* records read and deduplicated at once */
#define UCLI_IMPORT_MAX_THREADS 256
#define UCLI_IMPORT_MAX_BATCH 1000000

typedef enum ucli_progress {
  UCLI_PROGRESS_AUTO = 0, /* a bar on a terminal, else plain lines */
  UCLI_PROGRESS_BAR,
  UCLI_PROGRESS_LINES,
  UCLI_PROGRESS_NONE
} ucli_progress;

typedef struct ucli_import_opts {
  int abort_on_refusal;     /* --on-conflict abort (0: skip) */
  const char *report_path;  /* --report FILE; NULL or "-": standard output */
  int threads;              /* --threads N; 0: UCLI_IMPORT_THREADS */
  size_t batch;             /* --batch N; 0: UCLI_IMPORT_BATCH */
  ucli_progress progress;   /* --progress */
} ucli_import_opts;

#define UCLI_IMPORT_OPTS_INIT {0, NULL, 0, 0, UCLI_PROGRESS_AUTO}

/* 1 when name ("--threads", ...) is an option of import, else 0. */
int ucli_import_is_option(const char *name);

/* Set the option name (one ucli_import_is_option accepts) from its value.
 * 0 on success; otherwise a usage error has been printed and its exit
 * code is returned. */
int ucli_import_set_option(ucli_import_opts *o, const char *name,
                           const char *val);

/* Run the import of path ("-": standard input) into table on the open
 * handle u. Prints the report (JSONL) and the summary (last line of stdout)
 * and progress on stderr as o says; returns the process exit code: 0 when
 * every record was inserted, otherwise the rule in docs/cli.md. Errors
 * found before any record is read (unreadable file, report file that
 * cannot be created or that is the input file, unknown table) print an
 * error object and return before anything is written. The report file is
 * emptied and written only once the input has been read to its end. */
int ucli_import(unico *u, const char *table, const char *path,
                const ucli_import_opts *o);

#endif
