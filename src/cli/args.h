/* Table-driven flag parsing for the subcommands. A flag table names each
 * flag, its value type, its range and where the value goes; the parser
 * turns any mistake into one line naming the flag and what was expected,
 * and the CLI exits with status 2, as usage errors do by convention. */
#ifndef PT_CLI_ARGS_H
#define PT_CLI_ARGS_H

#include <stdint.h>

typedef enum { ARG_FLAG, ARG_INT, ARG_I64, ARG_U64, ARG_FLOAT, ARG_STR, ARG_CHOICE, ARG_STRS } pt_arg_type;

/* ARG_STRS: a flag that may be given more than once, each value kept in
 * order (pointers into argv). */
#define PT_ARG_STRS_MAX 16
typedef struct {
  const char *v[PT_ARG_STRS_MAX];
  int n;
} pt_arg_strs;

typedef struct {
  const char *name;    /* "--batch-size" */
  pt_arg_type type;
  void *dst;           /* int*, int64_t*, uint64_t*, float*, const char**, pt_arg_strs* */
  double lo, hi;       /* numeric range, inclusive */
  const char *choices; /* ARG_CHOICE: "sgd|adam|adamw|adadelta" */
  const char *meta;    /* "N", "X", "FILE" for help */
  const char *help;
} pt_arg;

#define PT_USAGE_ERROR 2

/* Parses argv[from..argc). Positional arguments go to positional[] (up to
 * max_pos). Returns 0, or PT_USAGE_ERROR after printing "ptrain CMD: ..." to
 * stderr. *help is set when --help was given. */
int pt_args_parse(const char *cmd, const pt_arg *table, int n, int argc, char **argv, int from, int *help,
                  const char **positional, int max_pos, int *npos);
/* The one of names that word is likely a slip for ("--epoch" for
 * "--epochs", "trian" for "train"), or NULL when none is close. */
const char *pt_args_suggest(const char *word, const char *const *names, int n);
void pt_args_print_help(const char *usage, const char *about, const pt_arg *table, int n);
/* The option lines alone, for a help text with more than one table. */
void pt_args_print_options(const pt_arg *table, int n);

#endif
