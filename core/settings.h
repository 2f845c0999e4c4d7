/* settings.h: the one configuration table. Every setting of the daemon, the core and the backends is
 * a row (option name, environment variable, type, range, default, help) in a group that its owner
 * declares; the table parses the environment and argv into the owners' storage, prints --help,
 * writes the configuration reference (docs/configuration.md) and hands the values to /v1/info. */
#ifndef SEGOPS_SETTINGS_H
#define SEGOPS_SETTINGS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum {
  SEGOPS_SET_STRING,  /* text, stored in a char array of `size` bytes */
  SEGOPS_SET_BYTES,   /* int64_t (an int where size is sizeof(int)); k, M, G or T suffix: powers of 1024 */
  SEGOPS_SET_INT,     /* a whole number, stored and suffixed as BYTES */
  SEGOPS_SET_SECONDS, /* double: a decimal number of seconds */
  SEGOPS_SET_FLAG,    /* int 0 or 1: 1/0/true/false; a flag on the command line without a value sets it */
  SEGOPS_SET_LIST,    /* comma-separated values, parsed and printed by the row's hooks */
  SEGOPS_SET_ENUM,    /* one of `choices` ("a|b|c"): its index as an int, or its text when size > 0 */
} segops_setting_type;

enum {
  SEGOPS_SET_AUTO = 1,     /* BYTES / INT: "auto" is accepted and stored as -1 (the owner decides) */
  SEGOPS_SET_ENV_ONLY = 2, /* no command-line option (a secret would show in ps) */
  SEGOPS_SET_SECRET = 4,   /* the value is never printed or reported, only whether it is set */
  SEGOPS_SET_HOST_ONLY = 8, /* a path on this host: /v1/info tells it to same-host peers only */
};

/* One setting. Storage is at `offset` in the group's `base`. */
typedef struct segops_setting {
  const char *name; /* the option without "--", e.g. "max-body-bytes" */
  const char *env;  /* e.g. "SEGOPS_MAX_BODY_BYTES" */
  segops_setting_type type;
  size_t offset;         /* of the value in the group's base */
  size_t size;           /* STRING, ENUM as text: bytes of the char array; INT, BYTES: sizeof(int) for an int */
  int64_t lo, hi;        /* BYTES, INT: the range (hi 0: no upper bound); SECONDS: lo 1 means > 0 */
  const char *choices;   /* ENUM: "auto|cpu|cuda" */
  const char *def;       /* default, as text, applied through the same parser; NULL: none applied */
  const char *def_doc;   /* how the default reads in --help and docs when def is not enough, or NULL */
  const char *range_doc; /* the allowed values in words when the type's own do not say it, or NULL */
  const char *metavar;   /* --help's placeholder; NULL: from the type */
  const char *help;      /* one or two sentences: what it does and when to change it */
  int flags;             /* SEGOPS_SET_* */
  /* LIST, and rows whose value needs more than the type's check (a file to read, octal):
   * parse value into base (append: a later value of the same source, e.g. a repeated flag,
   * adds to the earlier one instead of replacing it); 0, or -1 with a message in err. */
  int (*parse)(void *base, const char *value, int append, char *err, size_t errlen);
  /* The value as text for --help's "now", /v1/info and logs, when the type's own printing does not
   * apply (LIST, custom rows); returns buf. */
  const char *(*format)(const void *base, char *buf, size_t len);
} segops_setting;

/* One owner's settings: a section of --help and of docs/configuration.md. */
typedef struct segops_settings_group {
  const char *title; /* "Limits", "CUDA backend" */
  const char *intro; /* a sentence under the title in the docs, or NULL */
  const segops_setting *rows;
  size_t n_rows;
  void *base; /* where the rows' values live (the owner's configuration struct) */
} segops_settings_group;

/* The groups the core declares: the host-memory pool and the validated-idx cache. The backends
 * declare theirs beside their code (segops_cpu_settings, segops_cuda_settings). */
extern segops_settings_group segops_hostbuf_settings;
extern segops_settings_group segops_idx_cache_settings;

enum { SEGOPS_SETTINGS_OK = 0, SEGOPS_SETTINGS_ERROR = -1 };

/* Resets every row of groups (a NULL-terminated list) to its default. 0, or -1 with err. */
int segops_settings_defaults(segops_settings_group *const *groups, char *err, size_t errlen);

/* Applies the environment (getenv of each row's variable; an empty variable counts as set). 0, or
 * -1 with a message naming the variable, the option, the value and what is allowed. */
int segops_settings_from_env(segops_settings_group *const *groups, char *err, size_t errlen);

/* Looks up an option by its name (len bytes of name, without "--"); NULL when unknown. *group
 * receives the group that owns it. */
const segops_setting *segops_settings_find(segops_settings_group *const *groups, const char *name, size_t len,
                                           segops_settings_group **group);

/* Applies one value to a row from the command line (or a test): the same parse as the environment.
 * append: a later flag of the same option adds to a LIST. 0, or -1 with err naming --name. */
int segops_settings_apply(segops_settings_group *g, const segops_setting *s, const char *value, int append, char *err,
                          size_t errlen);

/* Sets one option by name, as a test or an in-process client would ("cpu-isa", "baseline"). */
int segops_settings_set(segops_settings_group *const *groups, const char *name, const char *value, char *err,
                        size_t errlen);

/* The current value of a row as text (secret rows: "(set)" or ""); returns buf. */
const char *segops_settings_text(const segops_settings_group *g, const segops_setting *s, char *buf, size_t len);

/* The value of an INT/BYTES row as int64, a SECONDS row as double, a FLAG or index-ENUM as int. */
int64_t segops_settings_int(const segops_settings_group *g, const segops_setting *s);
double segops_settings_seconds(const segops_settings_group *g, const segops_setting *s);

/* The allowed values in words ("1 to 2147483647", "auto, cpu or cuda"); returns buf. */
const char *segops_settings_range(const segops_setting *s, char *buf, size_t len);

/* segopsd --help: every group's rows, with their variable and default. */
void segops_settings_print_help(segops_settings_group *const *groups, FILE *out);

/* The configuration reference in Markdown (docs/configuration.md), after `preamble`. */
void segops_settings_print_markdown(segops_settings_group *const *groups, const char *preamble, FILE *out);

#endif
